//! The named ways a partition's replication can stop. Each says what happened
//! to which offsets and what the operator can do; none is ever skipped
//! silently.

use std::any::Any;

use eosmirror_state::SourcePartition;

use super::layout::Lane;
use super::limits::BufferBudget;
use crate::topics::identity::TopicId;

/// Why a worker stopped for good (the process then exits non-zero).
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("{source_partition}: source records at offsets {first}..{end_exclusive} were deleted (retention or DeleteRecords) before they were copied; nothing was skipped. To accept the loss and continue from offset {end_exclusive}, restart with --on.source.gap=skip (the gap is then logged and counted in eosmirror_source_gap_offsets_total)")]
    SourceGap {
        source_partition: SourcePartition,
        first: i64,
        end_exclusive: i64,
    },
    #[error("{source_partition}: the source partition ends at offset {source_end} but {next_source_offset} records were already copied: the source topic was deleted and recreated (or lost data). eosmirror will not guess. To copy it again from its first record, delete the target topic, then restart with --start.over '{topic}'", topic = source_partition.topic)]
    SourceRewound {
        source_partition: SourcePartition,
        source_end: i64,
        next_source_offset: i64,
    },
    #[error("{source_partition}: the local state says source offsets up to {cached_next} were copied, but {target_says}: the target lost committed data (unclean leader election, topic recreated) or the internal topic {position_topic} was reset. Nothing was re-copied. Inspect the target; if the reset was deliberate, delete the state dir to start from what the target records")]
    TargetLostData {
        source_partition: SourcePartition,
        cached_next: i64,
        /// What the target records instead, as a clause.
        target_says: String,
        position_topic: String,
    },
    #[error("{source_partition}: the target partition ends at offset {target_end}, but the copies committed into it reach offset {next_target_offset} (its position on {position_topic}): the target lost committed copies (an unclean leader election, a broker's disk restored from a backup). Nothing was copied after them. The copy is no longer exact (`eosmirror verify` names the partition). To copy the topic again, delete the target topic and restart with --start.over '{topic}'", topic = source_partition.topic)]
    TargetTruncated {
        source_partition: SourcePartition,
        target_end: i64,
        next_target_offset: i64,
        position_topic: String,
    },
    #[error("{source_partition}: the target partition already holds committed records, but {position_topic} has no position for it: another tool copied into it, --source.alias changed, or its position was deleted. Copying now would duplicate them. Use the alias of the earlier run, empty the target topic, or pass --target.allow.nonempty to append after the existing records")]
    TargetNotEmpty {
        source_partition: SourcePartition,
        position_topic: String,
    },
    #[error("{source_partition}: the target rejected the copy of source offset {source_offset}: {reason}. Fix the target topic's configuration (e.g. max.message.bytes, message.timestamp.*) and restart; the record was not skipped")]
    TargetRejected {
        source_partition: SourcePartition,
        source_offset: i64,
        reason: String,
    },
    #[error("{source_partition}: the record at source offset {source_offset} has a value of {value_bytes} bytes, more than a lane's producer queue holds ({queue_bytes} bytes: a quarter of --max.memory.bytes split over --lanes {lanes}), so it can never be sent. Restart with --max.memory.bytes of at least {}MiB; the record was not skipped", BufferBudget::memory_mib_for_value(*value_bytes, *lanes as usize))]
    RecordTooLarge {
        source_partition: SourcePartition,
        source_offset: i64,
        value_bytes: usize,
        queue_bytes: usize,
        lanes: u32,
    },
    #[error("{source_partition}: the target topic does not keep source order (copy of offset {source_offset} landed before an earlier record's copy); another producer writes to the target partition. Stop it: exactly-once needs eosmirror to be the only writer")]
    OrderViolated {
        source_partition: SourcePartition,
        source_offset: i64,
    },
    #[error("{source_partition}: the {side} topic was deleted and created again (topic id {recorded} in the positions the target records for the topic, {current} now). Its offsets start over, so eosmirror stopped rather than mix the two topics' records or skip the new one's. Choose: leave it out (--exclude), or copy the new topic from its first record into an empty target topic: delete the target topic if it holds the old copy, then restart with --start.over '{topic}' (its old positions and offset history are then superseded)", topic = source_partition.topic)]
    TopicRecreated {
        source_partition: SourcePartition,
        /// "source" or "target".
        side: &'static str,
        recorded: TopicId,
        /// The topic's id now.
        current: String,
    },
    #[error("{source_partition}: the source cluster has id {current:?}, but the positions on the target were recorded for the source cluster {recorded:?}: --consumer.config points at another cluster than the one this --source.alias copied. Point it back at that cluster, or copy the new one under a new --source.alias")]
    SourceClusterChanged {
        source_partition: SourcePartition,
        recorded: String,
        current: String,
    },
    #[error("{lane}: {message}")]
    LaneFatal { lane: Lane, message: String },
}

impl WorkerError {
    /// A lane's panic as the error that ends the run: nothing of the lane's
    /// open transaction is committed, and the next start fences it.
    pub fn panicked(lane: Lane, panic: &(dyn Any + Send)) -> Self {
        let message = panic
            .downcast_ref::<&str>()
            .map(|m| m.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        WorkerError::LaneFatal {
            lane,
            message: format!(
                "panicked: {message}. Its open transaction is not committed; a restart resumes from the positions committed on the target"
            ),
        }
    }

    /// The partition this error stops, when it is a fault of that partition
    /// alone (the lane copies the others on); `None` when it stops the run
    /// (another source cluster, a broken client). A lane taken over by
    /// another instance ends without an error.
    pub fn stopped_partition(&self) -> Option<&SourcePartition> {
        match self {
            WorkerError::SourceGap {
                source_partition, ..
            }
            | WorkerError::SourceRewound {
                source_partition, ..
            }
            | WorkerError::TargetLostData {
                source_partition, ..
            }
            | WorkerError::TargetTruncated {
                source_partition, ..
            }
            | WorkerError::TargetNotEmpty {
                source_partition, ..
            }
            | WorkerError::TargetRejected {
                source_partition, ..
            }
            | WorkerError::RecordTooLarge {
                source_partition, ..
            }
            | WorkerError::OrderViolated {
                source_partition, ..
            }
            | WorkerError::TopicRecreated {
                source_partition, ..
            } => Some(source_partition),
            WorkerError::SourceClusterChanged { .. } | WorkerError::LaneFatal { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// The gap error tells the operator how to accept the loss; the flag it
    /// names, with the value it suggests, must be one `eosmirror run`
    /// accepts.
    #[test]
    fn a_panic_names_its_lane_and_message() {
        let lane = Lane(3);
        for payload in [
            Box::new("index out of bounds") as Box<dyn Any + Send>,
            Box::new("index out of bounds".to_string()),
        ] {
            let message = WorkerError::panicked(lane, payload.as_ref()).to_string();
            assert!(
                message.starts_with(&format!("{lane}: panicked: index out of bounds.")),
                "{message}"
            );
        }
        let message = WorkerError::panicked(lane, &42).to_string();
        assert!(message.contains("panicked: no message"), "{message}");
    }

    #[test]
    fn a_record_too_large_for_the_queue_names_the_memory_to_use() {
        let message = WorkerError::RecordTooLarge {
            source_partition: SourcePartition::new("t", 0),
            source_offset: 7,
            value_bytes: 3 << 20,
            queue_bytes: 2 << 20,
            lanes: 2,
        }
        .to_string();
        assert!(
            message.starts_with("t-0: the record at source offset 7 has a value of 3145728 bytes"),
            "{message}"
        );
        assert!(
            message.contains("--max.memory.bytes of at least 24MiB"),
            "{message}"
        );
    }

    #[test]
    fn source_gap_hint_names_a_flag_run_accepts() {
        let message = WorkerError::SourceGap {
            source_partition: SourcePartition::new("t", 0),
            first: 1,
            end_exclusive: 2,
        }
        .to_string();
        // The suggested flag: `--flag=value` or `--flag value`.
        let words: Vec<&str> = message
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '-' && c != '='))
            .collect();
        let at = words
            .iter()
            .position(|w| w.starts_with("--"))
            .unwrap_or_else(|| panic!("no flag named in {message:?}"));
        let hint = words[at];
        let (flag, value) = hint
            .split_once('=')
            .unwrap_or((hint, words.get(at + 1).copied().unwrap_or_default()));
        let cli = crate::cli::Cli::command();
        let run = cli.find_subcommand("run").expect("a run command");
        let arg = run
            .get_arguments()
            .find(|a| a.get_long() == flag.strip_prefix("--"))
            .unwrap_or_else(|| panic!("the gap error suggests {hint:?} but `run` has no {flag}"));
        assert!(
            arg.get_possible_values()
                .iter()
                .any(|v| v.matches(value, false)),
            "the gap error suggests {hint:?} but {flag} does not accept {value:?}"
        );
        assert_eq!(value, "skip", "{message}");
    }
}

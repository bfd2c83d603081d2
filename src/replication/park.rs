//! Parking an idle lane: after `--park.idle.ms` with nothing to copy, a
//! lane closes its source consumer and its transactional producer, and
//! waits for records without any client of its own.
//!
//! Why: librdkafka hands every partition of a topic a client knows to the
//! leader's broker thread, assigned or not, and that thread walks all of
//! them at every wake-up (each fetch answer, and at least once a second).
//! An idle instance copying one topic of 5,000 partitions in 4 lanes spent
//! 2.1% of a core on these walks alone: lanes × the topics' partitions.
//!
//! While parked, one client per process ([`SourceEnds`]) asks the source
//! for the committed ends of each parked lane's partitions (its
//! `read_committed` ListOffsets, in questions of
//! [`PARTITIONS_PER_QUESTION`]) every [`WATCH_INTERVAL`]. The lane starts a
//! new session as soon as one end differs from the position its consumer
//! had reached, when its partitions change, on stop, or when the source
//! leaves its questions unanswered for [`ERRORS_BEFORE_WAKING`].
//!
//! Exactly-once does not depend on parking: a parked lane holds no
//! transaction and copies nothing, and its next session starts like any
//! other (ownership confirmed by the group, `init_transactions`, positions
//! re-read from the target). Liveness does, and holds because the lane
//! compares with its consumer's own position, which librdkafka moves past
//! transaction markers and aborted records: every record committed after
//! the lane's last poll lies at or past that position, so it moves the end.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eosmirror_state::SourcePartition;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::BaseConsumer;

use super::watermarks::{self, WatermarksError};

/// How often a parked lane asks the source for its partitions' ends: the
/// longest a record waits before its lane wakes, besides session start.
/// Asking costs CPU in proportion to the partitions asked about (1 s: 1.4%
/// of a core for 5,000 partitions; 2 s: 0.86%).
pub const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// Partitions per ListOffsets question. librdkafka's `offsets_for_times`
/// matches each answer to its question by a linear search
/// (`rd_kafka_topic_partition_list_update`), so a question about n
/// partitions costs n²: 1,250 once a second took 1.1% of a core per lane.
/// Small questions cost their round trips instead; with 100, every 2 s, an
/// idle instance of 5,000 partitions in 4 lanes took 0.83–0.86% in all.
pub const PARTITIONS_PER_QUESTION: usize = 100;

/// Longest one question may take: a question is not interrupted, so this
/// bounds how long a shutdown or a hand-over waits for a parked lane when
/// the source does not answer.
pub const QUESTION_TIMEOUT: Duration = Duration::from_secs(5);

/// How long asking the source may fail before the lane starts a session
/// anyway, which reports what is wrong (a parked lane logs nothing).
pub const ERRORS_BEFORE_WAKING: Duration = Duration::from_secs(30);

/// How often a parked lane looks whether it must stop or its partitions
/// changed: it delays a shutdown or a hand-over by at most this much.
const INTERRUPT_CHECK: Duration = Duration::from_millis(200);

/// The positions a lane's consumer had reached when it parked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parked {
    pub partitions: Vec<SourcePartition>,
    /// Per partition: the next offset the consumer would have delivered.
    pub positions: Vec<i64>,
}

impl Parked {
    /// The first partition whose committed end (`None`: not in the
    /// answer) is not where the lane's consumer stood: records arrived, or
    /// the partition was truncated or recreated, which a session checks.
    pub fn moved(&self, ends: &[Option<i64>]) -> Option<usize> {
        self.positions
            .iter()
            .zip(ends)
            .position(|(&position, end)| end.is_some_and(|end| end != position))
    }
}

/// The source client every parked lane of the process shares to ask for
/// committed ends: one client knowing the copied topics instead of one
/// per lane. Created at the first park.
pub struct SourceEnds {
    config: ClientConfig,
    client: Mutex<Option<Arc<BaseConsumer>>>,
}

impl std::fmt::Debug for SourceEnds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SourceEnds")
    }
}

/// Why the source's ends could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceEndsError {
    #[error("creating the client that watches parked lanes' partitions: {0}")]
    Client(rdkafka::error::KafkaError),
    #[error(transparent)]
    Watermarks(#[from] WatermarksError),
}

impl SourceEnds {
    /// `source` is the lanes' consumer configuration, so the ends are read
    /// at the same isolation level, with the same credentials.
    pub fn new(source: ClientConfig) -> SourceEnds {
        SourceEnds {
            config: source,
            client: Mutex::new(None),
        }
    }

    /// The committed end of each partition of `parked`, in its order.
    pub fn ends(
        &self,
        parked: &Parked,
        timeout: Duration,
    ) -> Result<Vec<Option<i64>>, SourceEndsError> {
        let client = self.client()?;
        let mut ends = Vec::with_capacity(parked.partitions.len());
        for question in parked.partitions.chunks(PARTITIONS_PER_QUESTION) {
            let answer = watermarks::high_watermarks(&client, question, timeout)?;
            ends.extend(question.iter().map(|p| answer.get(p).copied().flatten()));
        }
        Ok(ends)
    }

    fn client(&self) -> Result<Arc<BaseConsumer>, SourceEndsError> {
        let mut client = self.client.lock().expect("source ends client poisoned");
        if let Some(client) = &*client {
            return Ok(Arc::clone(client));
        }
        let created = Arc::new(self.config.create().map_err(SourceEndsError::Client)?);
        *client = Some(Arc::clone(&created));
        Ok(created)
    }
}

/// Why a parked lane woke.
#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    /// The source partition's end moved from where the lane parked.
    Moved(SourcePartition),
    /// Asking the source kept failing for [`Watch::patience`].
    Unanswered(String),
    /// Stop, a change of the lane's partitions, or a lost lane: the caller's
    /// `interrupted` said so.
    Interrupted,
}

/// How often a parked lane asks, and how long it bears failures.
#[derive(Debug, Clone, Copy)]
pub struct Watch {
    pub interval: Duration,
    pub patience: Duration,
}

impl Default for Watch {
    fn default() -> Watch {
        Watch {
            interval: WATCH_INTERVAL,
            patience: ERRORS_BEFORE_WAKING,
        }
    }
}

/// Waits, parked, until the source's ends move from `parked`'s positions
/// or `interrupted` (checked every [`INTERRUPT_CHECK`]) is true.
pub fn wait(
    parked: &Parked,
    watch: Watch,
    ends: impl Fn(&Parked) -> Result<Vec<Option<i64>>, SourceEndsError>,
    interrupted: impl Fn() -> bool,
) -> Wake {
    let mut failing_since: Option<Instant> = None;
    loop {
        let next_ask = Instant::now() + watch.interval;
        loop {
            if interrupted() {
                return Wake::Interrupted;
            }
            let left = next_ask.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(INTERRUPT_CHECK));
        }
        match ends(parked) {
            Ok(ends) => {
                failing_since = None;
                if let Some(i) = parked.moved(&ends) {
                    return Wake::Moved(parked.partitions[i].clone());
                }
            }
            Err(e) => {
                let since = *failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= watch.patience {
                    return Wake::Unanswered(e.to_string());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    const FAST: Watch = Watch {
        interval: Duration::from_millis(5),
        patience: Duration::from_millis(50),
    };

    fn unanswered() -> SourceEndsError {
        SourceEndsError::Watermarks(WatermarksError::Missing(SourcePartition::new("t", 0)))
    }

    fn parked(positions: &[i64]) -> Parked {
        Parked {
            partitions: (0..positions.len() as i32)
                .map(|p| SourcePartition::new("t", p))
                .collect(),
            positions: positions.to_vec(),
        }
    }

    #[test]
    fn a_partition_moved_when_its_end_is_not_where_the_consumer_stood() {
        let lane = parked(&[10, 20, 30]);
        assert_eq!(lane.moved(&[Some(10), Some(20), Some(30)]), None);
        assert_eq!(lane.moved(&[Some(10), Some(21), Some(30)]), Some(1));
        // Truncated or recreated: a session finds out which.
        assert_eq!(lane.moved(&[Some(10), Some(20), Some(3)]), Some(2));
        // No answer for a partition proves nothing.
        assert_eq!(lane.moved(&[None, None, None]), None);
    }

    /// Waits on `lane` with the n-th question (from 1) answered by
    /// `answer`; returns why it woke and how many questions it asked.
    fn wait_answered(
        lane: &Parked,
        answer: impl Fn(usize) -> Result<Vec<Option<i64>>, SourceEndsError>,
    ) -> (Wake, usize) {
        let asked = Cell::new(0);
        let wake = wait(
            lane,
            FAST,
            |_| {
                asked.set(asked.get() + 1);
                answer(asked.get())
            },
            || false,
        );
        (wake, asked.get())
    }

    #[test]
    fn a_parked_lane_wakes_on_the_first_record() {
        let (wake, asked) = wait_answered(&parked(&[5, 7]), |n| {
            Ok(match n {
                1 => vec![Some(5), Some(7)],
                _ => vec![Some(5), Some(8)],
            })
        });
        assert_eq!(wake, Wake::Moved(SourcePartition::new("t", 1)));
        assert_eq!(asked, 2, "asked once per interval until the end moved");
    }

    #[test]
    fn an_interrupted_lane_wakes_without_asking() {
        let lane = parked(&[5]);
        let wake = wait(&lane, FAST, |_| panic!("asked the source"), || true);
        assert_eq!(wake, Wake::Interrupted);
    }

    #[test]
    fn short_failures_keep_the_lane_parked() {
        let (wake, asked) = wait_answered(&parked(&[5]), |n| match n {
            1 | 2 => Err(unanswered()),
            _ => Ok(vec![Some(6)]),
        });
        assert_eq!(wake, Wake::Moved(SourcePartition::new("t", 0)));
        assert_eq!(asked, 3);
    }

    #[test]
    fn lasting_failures_wake_the_lane_to_report_them() {
        let (wake, _) = wait_answered(&parked(&[5]), |_| Err(unanswered()));
        assert!(
            matches!(&wake, Wake::Unanswered(detail) if detail.contains("t-0")),
            "{wake:?}"
        );
    }
}

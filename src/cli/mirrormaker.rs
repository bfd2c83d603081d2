//! MirrorMaker 1 flags that have no direct eosmirror option. Accepted so that
//! existing command lines parse; each is either harmless (noted) or rejected
//! with what eosmirror does instead.

use clap::Args;

use crate::replication::layout::MAX_LANES;

/// Flags kept for MirrorMaker compatibility; hidden from `--help`.
#[derive(Debug, Args, Default)]
pub struct MirrorMakerFlags {
    /// MirrorMaker's consumer thread count, taken as `--lanes` (one source
    /// consumer and one transactional producer per lane) unless `--lanes`
    /// is given.
    #[arg(long = "num.streams", hide = true, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_LANES)))]
    pub num_streams: Option<u32>,

    /// Always true in eosmirror: a record the target refuses stops the partition.
    #[arg(long = "abort.on.send.failure", hide = true)]
    pub abort_on_send_failure: Option<bool>,

    /// Accepted and ignored: every client eosmirror uses is the "new" one.
    #[arg(long = "new.consumer", hide = true)]
    pub new_consumer: bool,

    /// Refused: eosmirror copies records unchanged.
    #[arg(long = "message.handler", hide = true)]
    pub message_handler: Option<String>,

    /// Refused with `--message.handler`.
    #[arg(long = "message.handler.args", hide = true)]
    pub message_handler_args: Option<String>,

    /// Refused: eosmirror assigns source partitions itself.
    #[arg(long = "consumer.rebalance.listener", hide = true)]
    pub rebalance_listener: Option<String>,

    /// Refused with `--consumer.rebalance.listener`.
    #[arg(long = "rebalance.listener.args", hide = true)]
    pub rebalance_listener_args: Option<String>,

    /// Refused: exactly-once needs one transactional producer per lane.
    #[arg(long = "num.producers", hide = true)]
    pub num_producers: Option<u32>,
}

/// A MirrorMaker flag eosmirror cannot honour.
#[derive(Debug, thiserror::Error)]
#[error("{flag} is not supported: {instead}")]
pub struct UnsupportedFlag {
    /// The flag as MirrorMaker spells it.
    pub flag: &'static str,
    /// What to do instead, for the error message.
    pub instead: &'static str,
}

impl MirrorMakerFlags {
    /// Rejects flags with no meaning here; returns notes for accepted ones
    /// that are ignored or translated, to be logged. `lanes` is `--lanes`,
    /// which wins over `--num.streams`.
    pub fn check(&self, lanes: Option<u32>) -> Result<Vec<String>, UnsupportedFlag> {
        let reject = |flag, instead| Err(UnsupportedFlag { flag, instead });
        if self.message_handler.is_some() || self.message_handler_args.is_some() {
            return reject(
                "--message.handler",
                "eosmirror copies records unchanged (an exact copy is the point); transform records in a consumer of the target instead",
            );
        }
        if self.rebalance_listener.is_some() || self.rebalance_listener_args.is_some() {
            return reject(
                "--consumer.rebalance.listener",
                "eosmirror assigns source partitions itself and has no rebalance hooks; remove the flag",
            );
        }
        if self.num_producers.is_some() {
            return reject(
                "--num.producers",
                "eosmirror runs one transactional producer per lane (--lanes; required for exactly-once); remove the flag",
            );
        }
        if self.abort_on_send_failure == Some(false) {
            return reject(
                "--abort.on.send.failure=false",
                "eosmirror never drops a record the target refuses; it stops that partition and names the record. Remove the flag",
            );
        }
        let mut notes = Vec::new();
        if let (Some(n), Some(lanes)) = (self.num_streams, lanes) {
            notes.push(format!(
                "--num.streams {n} ignored: --lanes {lanes} is given"
            ));
        }
        if let (Some(n), None) = (self.num_streams, lanes) {
            notes.push(format!(
                "--num.streams {n} taken as --lanes {n}: one source consumer and one transactional producer per lane. Unlike MirrorMaker's per-process streams, the lane count is the whole deployment's (every instance of this --source.alias shares the lanes) and is fixed at its first start"
            ));
        }
        if self.new_consumer {
            notes.push(
                "--new.consumer ignored: eosmirror always uses the Kafka consumer protocol"
                    .to_string(),
            );
        }
        Ok(notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handlers_are_rejected_with_the_alternative() {
        let flags = MirrorMakerFlags {
            message_handler: Some("com.example.Handler".into()),
            ..Default::default()
        };
        let err = flags.check(None).unwrap_err().to_string();
        assert!(
            err.contains("--message.handler") && err.contains("unchanged"),
            "{err}"
        );
    }

    #[test]
    fn harmless_flags_are_noted() {
        let flags = MirrorMakerFlags {
            num_streams: Some(4),
            abort_on_send_failure: Some(true),
            ..Default::default()
        };
        let notes = flags.check(None).unwrap();
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("--num.streams 4 taken as --lanes 4")
                && notes[0].contains("the whole deployment's"),
            "{}",
            notes[0]
        );
        let notes = flags.check(Some(2)).unwrap();
        assert_eq!(notes, ["--num.streams 4 ignored: --lanes 2 is given"]);
    }

    #[test]
    fn dropping_records_is_refused() {
        let flags = MirrorMakerFlags {
            abort_on_send_failure: Some(false),
            ..Default::default()
        };
        assert!(flags.check(None).is_err());
    }
}

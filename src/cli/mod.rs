//! Command line. `run` accepts MirrorMaker 1's flags so that existing
//! MirrorMaker invocations and properties files carry over.

pub mod common;
pub mod groups_args;
pub mod mirrormaker;
pub mod plan_args;
pub mod run_args;
pub mod status_args;
pub mod verify_args;

use clap::{Parser, Subcommand};

/// Exactly-once Kafka-to-Kafka replication.
#[derive(Debug, Parser)]
#[command(name = "eosmirror", version, about, long_about = None)]
pub struct Cli {
    /// Log filter (tracing `EnvFilter` syntax, e.g. `info`, `eosmirror=debug`).
    #[arg(long, global = true, env = "EOSMIRROR_LOG", default_value = "info")]
    pub log: String,

    /// Log line format on standard error: `text` for people, `json` (one
    /// object per line, fields kept apart) for log shippers.
    #[arg(
        long = "log.format",
        global = true,
        env = "EOSMIRROR_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,

    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// `--log.format`.
// clap would print variant doc comments in `--help` as a list; the values
// are named in the option's help instead.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// eosmirror's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replicate topics from the source cluster to the target cluster, exactly once.
    Run(Box<run_args::RunArgs>),
    /// Check that the target is an exact copy of the source. Exit code 0:
    /// exact; 1: differences found; 2: could not verify.
    Verify(Box<verify_args::VerifyArgs>),
    /// Translate a consumer group's source offsets into target offsets, and
    /// with --apply commit them to the same group on the target.
    Translate(Box<groups_args::TranslateArgs>),
    /// Move producers' and consumers' data to the target: wait until the copy
    /// is complete, verify its tail, sync groups, report. Exit 0 only if all holds.
    Cutover(Box<groups_args::CutoverArgs>),
    /// The source is gone: apply the last recorded group offsets' translations
    /// to the target and report the recovery point.
    Failover(Box<groups_args::FailoverArgs>),
    /// Preflight for `run` with its connection, topic and deployment flags
    /// (not the running ones: state dir, metrics, intervals, group sync);
    /// writes nothing. One line per
    /// finding; exit 0: nothing blocks `run`; 1: something would; 2: could
    /// not tell (a cluster unreachable).
    Plan(Box<plan_args::PlanArgs>),
    /// Per partition: replicated position, lag, last commit, owner, stopped
    /// state, read from the clusters (the running process is not needed).
    /// Exit code 0: healthy; 1: lagging or stopped partitions; 2: cannot tell.
    Status(Box<status_args::StatusArgs>),
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::Cli;

    /// A count of records to verify of 0 would verify nothing and still
    /// report an exact copy.
    #[test]
    fn a_verification_of_no_record_is_refused() {
        let files = [
            "--consumer.config",
            "c",
            "--producer.config",
            "p",
            "--include",
            "t",
        ];
        for (command, flag) in [("verify", "--last"), ("cutover", "--verify.last")] {
            let mut args = vec!["eosmirror", command];
            args.extend_from_slice(&files);
            if command == "cutover" {
                args.extend_from_slice(&["--groups", "g"]);
            }
            for (value, accepted) in [("0", false), ("1", true)] {
                let mut with = args.clone();
                with.extend_from_slice(&[flag, value]);
                let parsed = Cli::try_parse_from(&with);
                assert_eq!(parsed.is_ok(), accepted, "{with:?}: {:?}", parsed.err());
            }
        }
    }
}

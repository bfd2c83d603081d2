//! Options of the group commands: `translate`, `cutover`, `failover`.

use std::path::PathBuf;

use clap::Args;

use super::common::{ConnectionArgs, ReportFormat, TopicArgs};

/// `eosmirror translate`.
#[derive(Debug, Args)]
pub struct TranslateArgs {
    /// The two clusters and how to reach them.
    #[command(flatten)]
    pub connection: ConnectionArgs,

    /// Report format on standard output.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,

    /// The consumer group whose source offsets are translated.
    #[arg(long)]
    pub group: String,

    /// Only topics matching this regex (whole name; default: every
    /// replicated topic the group has offsets for).
    #[arg(long, value_name = "REGEX")]
    pub topic: Option<String>,

    /// Commit the translated offsets to the same group on the target (only
    /// if it has no active members there).
    #[arg(long)]
    pub apply: bool,

    /// With --apply: also move target offsets backwards.
    #[arg(long = "allow-rewind", requires = "apply")]
    pub allow_rewind: bool,
}

/// `eosmirror failover`: needs only the target (the source is gone).
#[derive(Debug, Args)]
pub struct FailoverArgs {
    /// Java client properties for the target cluster.
    #[arg(
        long = "producer.config",
        env = "EOSMIRROR_PRODUCER_CONFIG",
        value_name = "FILE"
    )]
    pub producer_config: PathBuf,

    /// The `--source.alias` of the mirror (names its internal topics).
    #[arg(
        long = "source.alias",
        env = "EOSMIRROR_SOURCE_ALIAS",
        default_value = "source"
    )]
    pub source_alias: String,

    /// Report format on standard output.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,

    /// Groups whose recorded offsets are applied: a Java-style regex matching
    /// whole names; ',' separates alternatives; '*' means all.
    #[arg(long, value_name = "REGEX")]
    pub groups: String,

    /// Also move target offsets backwards.
    #[arg(long = "allow-rewind")]
    pub allow_rewind: bool,
}

/// `eosmirror cutover`.
#[derive(Debug, Args)]
pub struct CutoverArgs {
    /// The two clusters and how to reach them.
    #[command(flatten)]
    pub connection: ConnectionArgs,

    /// Report format on standard output.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,

    /// Which source topics.
    #[command(flatten)]
    pub topics: TopicArgs,

    /// Consumer groups to move to the target: a Java-style regex matching
    /// whole names; ',' separates alternatives; '*' means all.
    #[arg(long, value_name = "REGEX")]
    pub groups: String,

    /// How long to wait for replication to reach the source's end (ms).
    #[arg(long = "timeout.ms", default_value_t = 300_000)]
    pub timeout_ms: u64,

    /// Records per partition verified at the end of the copy.
    #[arg(long = "verify.last", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub verify_last: u64,

    /// Verify the whole copy instead of its tail.
    #[arg(long)]
    pub full: bool,

    /// Also move target offsets backwards.
    #[arg(long = "allow-rewind")]
    pub allow_rewind: bool,
}

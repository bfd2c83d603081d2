//! Options of `eosmirror verify`. Connection and topic options are the same
//! as `run`'s, so the command line of a running mirror can be reused.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Java client properties for the source cluster (the file `run` uses).
    #[arg(
        long = "consumer.config",
        env = "EOSMIRROR_CONSUMER_CONFIG",
        value_name = "FILE"
    )]
    pub consumer_config: PathBuf,

    /// Java client properties for the target cluster (the file `run` uses).
    #[arg(
        long = "producer.config",
        env = "EOSMIRROR_PRODUCER_CONFIG",
        value_name = "FILE"
    )]
    pub producer_config: PathBuf,

    /// Topics to verify (same syntax as `run --include`).
    #[arg(
        long,
        visible_alias = "whitelist",
        env = "EOSMIRROR_INCLUDE",
        value_name = "REGEX"
    )]
    pub include: String,

    /// Topics not to verify.
    #[arg(
        long,
        visible_alias = "blacklist",
        env = "EOSMIRROR_EXCLUDE",
        value_name = "REGEX"
    )]
    pub exclude: Option<String>,

    /// The `--source.alias` of the mirror whose copy is verified (names the
    /// progress topic holding the offset mapping).
    #[arg(
        long = "source.alias",
        env = "EOSMIRROR_SOURCE_ALIAS",
        default_value = "source"
    )]
    pub source_alias: String,

    /// Only records with a timestamp at or after this time: milliseconds
    /// since the epoch or RFC 3339 (`2026-11-30T08:00:00Z`).
    #[arg(long, value_name = "TIME", conflicts_with = "last")]
    pub since: Option<String>,

    /// Only the last N records of each partition.
    #[arg(long, value_name = "N")]
    pub last: Option<u64>,

    /// How records are paired: `mapped` through eosmirror's exact offset
    /// mapping; `sequence` by order, for copies made by other tools
    /// (MirrorMaker 1 or 2).
    #[arg(long, value_enum, default_value = "mapped")]
    pub mode: PairingMode,

    /// Sequence mode: prefix of target topic names (MirrorMaker 2's default
    /// replication policy writes `<source alias>.<topic>`, e.g. `source.`).
    #[arg(long = "target.prefix", default_value = "", value_name = "PREFIX")]
    pub target_prefix: String,

    /// Sequence mode: where to start in a partition, as
    /// `source:TOPIC:PARTITION=OFFSET` or `target:TOPIC:PARTITION=OFFSET`
    /// (repeatable). Unlisted partitions start at their first record.
    #[arg(long = "start", value_name = "SIDE:TOPIC:PARTITION=OFFSET")]
    pub starts: Vec<String>,

    /// Report format on standard output.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,

    /// Partitions read at the same time.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallelism: u16,

    /// Bound on prefetched record bytes across all readers.
    #[arg(long = "max.memory.bytes", env = "EOSMIRROR_MAX_MEMORY_BYTES", default_value_t = 64 << 20)]
    pub max_memory_bytes: usize,

    /// Longest a read may make no progress before verify gives up (ms), e.g.
    /// waiting for an open transaction to end.
    #[arg(long = "stall.timeout.ms", default_value_t = 120_000)]
    pub stall_timeout_ms: u64,
}

/// See [`VerifyArgs::mode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PairingMode {
    Mapped,
    Sequence,
}

/// See [`VerifyArgs::format`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
}

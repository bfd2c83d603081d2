//! Options of `eosmirror verify`. Connection and topic options are the same
//! as `run`'s, so the command line of a running mirror can be reused.

use clap::{Args, ValueEnum};

pub use super::common::ReportFormat;
use super::common::{ConnectionArgs, TopicArgs};
use crate::units::parse_bytes;

/// `eosmirror verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The two clusters and how to reach them.
    #[command(flatten)]
    pub connection: ConnectionArgs,

    /// Which source topics.
    #[command(flatten)]
    pub topics: TopicArgs,

    /// Only records with a timestamp at or after this time: milliseconds
    /// since the epoch or RFC 3339 (`2026-11-30T08:00:00Z`).
    #[arg(long, value_name = "TIME", conflicts_with = "last")]
    pub since: Option<String>,

    /// Only the last N records of each partition.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
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

    /// Bound on prefetched record bytes across all readers. Its variable is
    /// not `run`'s: a container's setting for `run` must not move verify's.
    #[arg(
        long = "max.memory.bytes",
        env = "EOSMIRROR_VERIFY_MAX_MEMORY_BYTES",
        value_name = "BYTES",
        default_value = "64MiB",
        value_parser = super::common::parse_size
    )]
    pub max_memory_bytes: usize,

    /// Bound on the offset mappings held at once (mapped mode). A whole
    /// history's mapping takes 50-100 bytes per partition per commit;
    /// past the bound, verify checks the partitions lane by lane in batches
    /// that fit, reading the progress topic once per batch, and a partition
    /// whose mapping alone does not fit is unverifiable (check a part of it
    /// with --since or --last).
    #[arg(
        long = "max.mapping.bytes",
        env = "EOSMIRROR_VERIFY_MAX_MAPPING_BYTES",
        value_name = "BYTES",
        default_value = "1GiB",
        value_parser = super::common::parse_size
    )]
    pub max_mapping_bytes: usize,

    /// Most bytes (key+value+headers) read per second from each cluster, all
    /// partitions together, e.g. 20MB or 512KiB (K, M, G = powers of 1000;
    /// Ki, Mi, Gi = of 1024): verify reads production clusters, often during
    /// a cutover window. Default: unlimited.
    #[arg(
        long = "throttle.bytes.per.sec",
        visible_alias = "throttle",
        value_name = "BYTES",
        value_parser = parse_bytes
    )]
    pub throttle_bytes_per_sec: Option<u64>,

    /// Longest a read may make no progress before verify gives up (ms), e.g.
    /// waiting for an open transaction to end.
    #[arg(long = "stall.timeout.ms", default_value_t = 120_000)]
    pub stall_timeout_ms: u64,
}

/// See [`VerifyArgs::mode`].
// clap would print variant doc comments in `--help` as a list; the values
// are named in the option's help instead.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PairingMode {
    Mapped,
    Sequence,
}

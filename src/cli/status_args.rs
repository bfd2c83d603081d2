//! Options of `eosmirror status`.

use clap::Args;

use super::common::{ConnectionArgs, ReportFormat};

/// `eosmirror status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The two clusters and how to reach them.
    #[command(flatten)]
    pub connection: ConnectionArgs,

    /// Also list source partitions of matching topics that have no
    /// position yet (same syntax as `run --include`). Without it, status
    /// lists every partition the target has a position for.
    #[arg(long, visible_alias = "whitelist", value_name = "REGEX")]
    pub include: Option<String>,

    /// Leave out topics matching this regex.
    #[arg(long, visible_alias = "blacklist", value_name = "REGEX")]
    pub exclude: Option<String>,

    /// `run`'s `--transactional.id.prefix`: with the alias it names the
    /// fleet's group, which tells who owns each lane.
    #[arg(long = "transactional.id.prefix", default_value = "eosmirror")]
    pub transactional_id_prefix: String,

    /// Report format on standard output.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,

    /// Print the status again every N seconds until interrupted (the
    /// screen is cleared first on a terminal).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub watch: Option<u64>,

    /// A partition lags (exit code 1) when more committed source records
    /// than this are not replicated.
    #[arg(long = "max.lag.records", default_value_t = 10_000)]
    pub max_lag_records: i64,

    /// A partition lags (exit code 1) when its oldest record not yet
    /// replicated is older than this (ms, by the record's timestamp).
    #[arg(long = "max.lag.ms", default_value_t = 60_000)]
    pub max_lag_ms: i64,

    /// Status records (published by running instances every 5 s) older
    /// than this are shown as stale and not counted.
    #[arg(long = "status.max.age.ms", default_value_t = 30_000)]
    pub status_max_age_ms: i64,

    /// Longest a read of a cluster may make no progress (ms).
    #[arg(long = "timeout.ms", default_value_t = 30_000)]
    pub timeout_ms: u64,
}

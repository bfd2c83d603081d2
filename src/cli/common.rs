//! Options shared by the commands: how to reach both clusters, which
//! mirror, which topics, how to print a report.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::pattern::PatternError;
use crate::topics::filter::TopicFilter;

/// The two clusters and the mirror between them: the same files and alias
/// for every command, so `run`'s command line carries over.
#[derive(Debug, Args, Clone)]
pub struct ConnectionArgs {
    /// Java client properties for the source cluster (MirrorMaker's file works as is).
    #[arg(
        long = "consumer.config",
        env = "EOSMIRROR_CONSUMER_CONFIG",
        value_name = "FILE"
    )]
    pub consumer_config: PathBuf,

    /// Java client properties for the target cluster (MirrorMaker's file works as is).
    #[arg(
        long = "producer.config",
        env = "EOSMIRROR_PRODUCER_CONFIG",
        value_name = "FILE"
    )]
    pub producer_config: PathBuf,

    /// Name of the source cluster; names eosmirror's internal topics and
    /// transactional ids. Give each source cluster replicated into one target
    /// its own alias; the other commands take the alias `run` used.
    #[arg(
        long = "source.alias",
        env = "EOSMIRROR_SOURCE_ALIAS",
        default_value = "source"
    )]
    pub source_alias: String,
}

/// MirrorMaker's topic selection.
#[derive(Debug, Args, Clone)]
pub struct TopicArgs {
    /// Topics: a Java-style regex matching whole names; ',' separates
    /// alternatives; '*' means all. Internal topics (`__*`) never match.
    #[arg(
        long,
        visible_alias = "whitelist",
        env = "EOSMIRROR_INCLUDE",
        value_name = "REGEX"
    )]
    pub include: String,

    /// Topics to leave out, even if --include matches them.
    #[arg(
        long,
        visible_alias = "blacklist",
        env = "EOSMIRROR_EXCLUDE",
        value_name = "REGEX"
    )]
    pub exclude: Option<String>,
}

impl TopicArgs {
    /// The include and exclude patterns as one filter (MirrorMaker's rules).
    pub fn filter(&self) -> Result<TopicFilter, PatternError> {
        TopicFilter::new(&self.include, self.exclude.as_deref())
    }
}

/// How a command prints its report on standard output.
// clap would print variant doc comments in `--help` as a list; the values
// are named in the option's help instead.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
}

/// Parses a byte size for a `*.bytes` option: a number with an optional
/// unit, as the throttle takes them (`33554432`, `32MiB`, `64MB`).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let bytes = crate::units::parse_bytes(text)?;
    usize::try_from(bytes).map_err(|_| format!("{text:?} is too large for this machine"))
}

/// Shortest `--park.idle.ms`: a park closes a lane's clients and a wake
/// starts a new session (1–4 s), so parking between sparse records would
/// cost more than it saves.
const MIN_PARK_IDLE_MS: u64 = 1_000;

/// Parses `--park.idle.ms`: 0 (never park) or at least [`MIN_PARK_IDLE_MS`].
pub fn parse_park_idle(text: &str) -> Result<u64, String> {
    parse_off_or_at_least(text, MIN_PARK_IDLE_MS, |ms| {
        format!(
            "{ms} ms is too short: each park closes a lane's clients and each wake starts \
             a new session (1-4 s); use at least {MIN_PARK_IDLE_MS}, or 0 to never park"
        )
    })
}

/// Shortest `--statistics.interval.ms`: each librdkafka statistics report
/// costs the client a JSON document of every partition it serves.
pub const MIN_STATISTICS_INTERVAL_MS: u64 = 15_000;

/// Parses `--statistics.interval.ms`: 0 (off) or at least
/// [`MIN_STATISTICS_INTERVAL_MS`].
pub fn parse_statistics_interval(text: &str) -> Result<u64, String> {
    parse_off_or_at_least(text, MIN_STATISTICS_INTERVAL_MS, |ms| {
        format!(
            "{ms} ms is too often: each report lists every partition of a client \
             (megabytes at thousands of partitions); use at least {MIN_STATISTICS_INTERVAL_MS}, or 0 for none"
        )
    })
}

/// Parses milliseconds that are 0 (the feature off) or at least `min`;
/// `too_small` says why a smaller value is refused.
fn parse_off_or_at_least(
    text: &str,
    min: u64,
    too_small: impl Fn(u64) -> String,
) -> Result<u64, String> {
    let ms: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of milliseconds"))?;
    if ms != 0 && ms < min {
        return Err(too_small(ms));
    }
    Ok(ms)
}

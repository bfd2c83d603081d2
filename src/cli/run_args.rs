//! Options of `eosmirror run`. Every option can also be set through the
//! environment variable named in its help.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::common::{ConnectionArgs, TopicArgs};

use super::common::{parse_park_idle, parse_size, parse_statistics_interval};
use crate::units::{parse_bytes, parse_count};

/// `eosmirror run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The two clusters and how to reach them.
    #[command(flatten)]
    pub connection: ConnectionArgs,

    /// Which source topics.
    #[command(flatten)]
    pub topics: TopicArgs,

    /// Which deployment on the target: transactional ids and lane count.
    #[command(flatten)]
    pub deployment: DeploymentArgs,

    /// How target topics are created and extended.
    #[command(flatten)]
    pub target_topics: TargetTopicArgs,

    /// Bounds on the source read rate.
    #[command(flatten)]
    pub throttle: ThrottleArgs,

    /// Local cache of positions and offset translations. Safe to delete: it is
    /// rebuilt from the target.
    #[arg(
        long = "state.dir",
        env = "EOSMIRROR_STATE_DIR",
        default_value = "eosmirror-state"
    )]
    pub state_dir: PathBuf,

    /// Longest a transaction collects records before committing (ms).
    /// MirrorMaker's --offset.commit.interval.ms maps here.
    #[arg(
        long = "commit.interval.ms",
        visible_alias = "offset.commit.interval.ms",
        env = "EOSMIRROR_COMMIT_INTERVAL_MS",
        default_value_t = 200
    )]
    pub commit_interval_ms: u64,

    /// Most records per transaction (of a lane). MirrorMaker's --queue.size maps here.
    // With a backlog this, not the commit interval, ends a transaction: a
    // lane reads faster than the target acknowledges, and each transaction
    // also waits for a few round trips (topic ids, group fence, commit).
    // 60,000 spreads those over more records than 20,000 did (16M × 200 B
    // over 1,000 partitions: 568k against 497k records/s, 6.8 against 8.8
    // CPU-seconds per GB; tests/bench/RESULTS.md, "December 4, late").
    #[arg(
        long = "batch.max.records",
        visible_alias = "queue.size",
        env = "EOSMIRROR_BATCH_MAX_RECORDS",
        default_value_t = 60_000
    )]
    pub batch_max_records: usize,

    /// Most key+value+header bytes per transaction (of a lane).
    #[arg(
        long = "batch.max.bytes",
        env = "EOSMIRROR_BATCH_MAX_BYTES",
        value_name = "BYTES",
        default_value = "32MiB",
        value_parser = parse_size
    )]
    pub batch_max_bytes: usize,

    /// Bound on buffered record bytes across all partitions (consumer
    /// prefetch plus producer queues), split evenly between lanes.
    #[arg(
        long = "max.memory.bytes",
        env = "EOSMIRROR_MAX_MEMORY_BYTES",
        value_name = "BYTES",
        default_value = "256MiB",
        value_parser = parse_size
    )]
    pub max_memory_bytes: usize,

    /// Transaction timeout (ms): how long the target keeps a stalled
    /// instance's transaction open before aborting it.
    #[arg(
        long = "transaction.timeout.ms",
        env = "EOSMIRROR_TRANSACTION_TIMEOUT_MS",
        default_value_t = 60_000,
        value_parser = clap::value_parser!(u64).range(1_000..)
    )]
    pub transaction_timeout_ms: u64,

    /// How long a lane may find nothing to copy before it parks (ms): it
    /// closes its source consumer and target producer, and one client per
    /// process asks the source every 2 s whether records arrived, so an
    /// idle instance costs next to nothing whatever its partition count.
    /// The first record after a park waits for the lane's new session
    /// (up to 2 s, plus the session's start). At least 1000; 0 never parks.
    #[arg(
        long = "park.idle.ms",
        env = "EOSMIRROR_PARK_IDLE_MS",
        default_value_t = 60_000,
        value_parser = parse_park_idle
    )]
    pub park_idle_ms: u64,

    /// How often new topics and partitions are looked for (ms). At least
    /// 1000: each refresh asks both clusters for all their metadata.
    #[arg(
        long = "refresh.interval.ms",
        env = "EOSMIRROR_REFRESH_INTERVAL_MS",
        default_value_t = 30_000,
        value_parser = clap::value_parser!(u64).range(1_000..)
    )]
    pub refresh_interval_ms: u64,

    /// Source records deleted before they were copied: `fail` stops with the
    /// lost offsets named; `skip` continues and counts them.
    #[arg(
        long = "on.source.gap",
        env = "EOSMIRROR_ON_SOURCE_GAP",
        value_enum,
        default_value = "fail"
    )]
    pub on_source_gap: OnSourceGap,

    /// Copy into target partitions that already hold records eosmirror has
    /// no position for, appending after them (otherwise that is an error,
    /// because it usually means a changed --source.alias or another tool's copy).
    #[arg(
        long = "target.allow.nonempty",
        env = "EOSMIRROR_TARGET_ALLOW_NONEMPTY"
    )]
    pub target_allow_nonempty: bool,

    /// Topics (a pattern like --include) to copy again from the source's
    /// first record when the source or the target topic was deleted and
    /// recreated since their positions were recorded. The target topic must
    /// be empty (delete it if it holds the old copy); the old positions and
    /// offset history of the topic are superseded. Without it a recreated
    /// topic's partitions stop (the others are copied on). No environment
    /// variable: a one-off, which in the environment would apply to every
    /// restart.
    #[arg(long = "start.over", value_name = "TOPICS")]
    pub start_over: Option<String>,

    /// Serve Prometheus metrics at http://ADDRESS/metrics, and the
    /// liveness and readiness probes at /healthz and /readyz.
    #[arg(
        long = "metrics.address",
        env = "EOSMIRROR_METRICS_ADDRESS",
        value_name = "ADDRESS"
    )]
    pub metrics_address: Option<SocketAddr>,

    /// How often the lanes' Kafka clients report librdkafka statistics
    /// (round trips, request queues, connection errors, transaction state)
    /// to /metrics (ms; at least 15000, each report covers every partition;
    /// 0 = off). Only with --metrics.address.
    #[arg(
        long = "statistics.interval.ms",
        env = "EOSMIRROR_STATISTICS_INTERVAL_MS",
        default_value_t = 30_000,
        value_parser = parse_statistics_interval
    )]
    pub statistics_interval_ms: u64,

    /// How often a backfill (more than 10,000 records to copy) logs one
    /// progress line: copied of total, records/s, ETA (ms).
    #[arg(
        long = "log.progress.ms",
        env = "EOSMIRROR_LOG_PROGRESS_MS",
        default_value_t = 30_000,
        value_parser = clap::value_parser!(u64).range(100..)
    )]
    pub log_progress_ms: u64,

    /// How long a lane may go without progress before `/healthz` reports the
    /// process not live (ms). Must exceed --transaction.timeout.ms + 10 s,
    /// the longest one blocking Kafka call may take.
    #[arg(
        long = "health.stall.ms",
        env = "EOSMIRROR_HEALTH_STALL_MS",
        default_value_t = 180_000
    )]
    pub health_stall_ms: u64,

    /// How long the fleet's group waits for a silent instance (killed,
    /// frozen, cut off) before its lanes move to the other instances (ms).
    /// Within the target's group.min/max.session.timeout.ms (6 s to 30 min
    /// by default).
    #[arg(
        long = "fleet.session.timeout.ms",
        env = "EOSMIRROR_FLEET_SESSION_TIMEOUT_MS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(1_000..=1_800_000)
    )]
    pub fleet_session_timeout_ms: u64,

    /// How long shutdown waits for lanes to commit and stop (ms).
    #[arg(
        long = "shutdown.timeout.ms",
        env = "EOSMIRROR_SHUTDOWN_TIMEOUT_MS",
        default_value_t = 30_000
    )]
    pub shutdown_timeout_ms: u64,

    /// Consumer groups whose source offsets are recorded on the target and
    /// committed, translated exactly, to the same groups on the target
    /// wherever those have no active members: a Java-style regex matching
    /// whole names; ',' separates alternatives; '*' means all.
    #[arg(
        long = "groups.sync",
        env = "EOSMIRROR_GROUPS_SYNC",
        value_name = "REGEX"
    )]
    pub groups_sync: Option<String>,

    /// Time between group sync rounds (ms).
    #[arg(
        long = "groups.sync.interval.ms",
        env = "EOSMIRROR_GROUPS_SYNC_INTERVAL_MS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(100..)
    )]
    pub groups_sync_interval_ms: u64,

    /// The same in seconds: the name of earlier versions, kept so their
    /// command lines still work.
    #[arg(
        long = "groups.sync.interval.secs",
        env = "EOSMIRROR_GROUPS_SYNC_INTERVAL_SECS",
        value_parser = clap::value_parser!(u64).range(1..),
        conflicts_with = "groups_sync_interval_ms",
        hide = true
    )]
    pub groups_sync_interval_secs: Option<u64>,

    /// MirrorMaker's flags, translated or refused.
    #[command(flatten)]
    pub mirrormaker: super::mirrormaker::MirrorMakerFlags,
}

/// `--on.source.gap`: the command line's names for the data path's
/// `GapPolicy`, so the data path derives no clap type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnSourceGap {
    /// Stop with an error naming the lost offsets (default).
    Fail,
    /// Continue after the gap; log it and count it in metrics.
    Skip,
}

/// Which deployment on the target: its transactional ids and lane count.
/// Shared by `run` and `plan`, so a plan checks exactly what the run uses.
#[derive(Debug, Args, Clone)]
pub struct DeploymentArgs {
    /// Prefix of the transactional ids (`<prefix>.<alias>.lane-<k>`).
    /// Instances sharing it fence each other, which is what makes a stalled
    /// instance harmless.
    #[arg(
        long = "transactional.id.prefix",
        env = "EOSMIRROR_TRANSACTIONAL_ID_PREFIX",
        default_value = "eosmirror"
    )]
    pub transactional_id_prefix: String,

    /// Lanes of the deployment (default 4): each lane is one source consumer
    /// and one transactional producer copying its share of the partitions,
    /// so threads, connections and target transactions depend on the lane
    /// count, not on the partition count. Fixed for a --source.alias once it
    /// ran (its internal topics have one partition per lane). MirrorMaker's
    /// --num.streams maps here.
    #[arg(long = "lanes", env = "EOSMIRROR_LANES", value_name = "N")]
    pub lanes: Option<u32>,
}

/// How `run` creates and extends target topics. Shared by `run` and `plan`.
#[derive(Debug, Args, Clone)]
pub struct TargetTopicArgs {
    /// Add partitions to target topics that have fewer than their source
    /// (otherwise that is an error).
    #[arg(
        long = "target.add.partitions",
        env = "EOSMIRROR_TARGET_ADD_PARTITIONS"
    )]
    pub target_add_partitions: bool,

    /// Replication factor of topics eosmirror creates on the target; -1 takes
    /// the target broker's default.
    #[arg(long = "target.replication.factor", env = "EOSMIRROR_TARGET_REPLICATION_FACTOR", default_value_t = -1, allow_negative_numbers = true)]
    pub target_replication_factor: i32,

    /// Retention of the offset-translation history topic (ms). Must exceed
    /// the largest consumer-group lag you want translated exactly.
    #[arg(long = "progress.retention.ms", env = "EOSMIRROR_PROGRESS_RETENTION_MS", default_value_t = 7 * 24 * 3600 * 1000)]
    pub progress_retention_ms: u64,
}

/// `--throttle.*`. Shared by `run` and `plan` (which estimates the copy's
/// duration at these limits).
#[derive(Debug, Args, Clone)]
pub struct ThrottleArgs {
    /// Most source bytes (key+value+headers) read per second, all partitions
    /// together: e.g. 5000000, 5MB, 512KiB (K, M, G = powers of 1000; Ki, Mi,
    /// Gi = of 1024). Default: unlimited.
    #[arg(
        long = "throttle.bytes.per.sec",
        visible_alias = "throttle",
        env = "EOSMIRROR_THROTTLE_BYTES_PER_SEC",
        value_name = "BYTES",
        value_parser = parse_bytes,
        conflicts_with = "throttle_file"
    )]
    pub throttle_bytes_per_sec: Option<u64>,

    /// Most source records read per second, all partitions together.
    /// Default: unlimited.
    #[arg(
        long = "throttle.records.per.sec",
        env = "EOSMIRROR_THROTTLE_RECORDS_PER_SEC",
        value_name = "RECORDS",
        value_parser = parse_count,
        conflicts_with = "throttle_file"
    )]
    pub throttle_records_per_sec: Option<u64>,

    /// Throttle limits in a properties file (`bytes.per.sec=5MB`,
    /// `records.per.sec=2000`; a missing key = no limit), re-read on SIGHUP
    /// to change them without a restart. Instead of the --throttle.* limits.
    #[arg(
        long = "throttle.file",
        env = "EOSMIRROR_THROTTLE_FILE",
        value_name = "FILE"
    )]
    pub throttle_file: Option<PathBuf>,
}

impl RunArgs {
    /// The time between group sync rounds, from whichever name was given.
    pub fn groups_sync_interval(&self) -> Duration {
        match self.groups_sync_interval_secs {
            Some(secs) => Duration::from_secs(secs),
            None => Duration::from_millis(self.groups_sync_interval_ms),
        }
    }

    /// How long a lane idles before it parks; `None` never.
    pub fn park_after(&self) -> Option<Duration> {
        (self.park_idle_ms > 0).then(|| Duration::from_millis(self.park_idle_ms))
    }

    /// How often lane clients report statistics: never when nothing serves
    /// /metrics, so their cost is paid only where someone can read them.
    pub fn statistics_interval(&self) -> Option<Duration> {
        match (self.metrics_address, self.statistics_interval_ms) {
            (Some(_), ms) if ms > 0 => Some(Duration::from_millis(ms)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    fn run_args(extra: &[&str]) -> Result<super::RunArgs, clap::Error> {
        let mut args = vec![
            "eosmirror",
            "run",
            "--consumer.config",
            "c",
            "--producer.config",
            "p",
            "--include",
            "t",
        ];
        args.extend_from_slice(extra);
        match Cli::try_parse_from(args)?.command {
            Command::Run(run) => Ok(*run),
            _ => unreachable!("parsed a run command"),
        }
    }

    #[test]
    fn num_streams_is_a_lane_count() {
        assert_eq!(
            run_args(&["--num.streams", "8"])
                .unwrap()
                .mirrormaker
                .num_streams,
            Some(8)
        );
        for refused in ["0", "257"] {
            let error = run_args(&["--num.streams", refused])
                .unwrap_err()
                .to_string();
            assert!(error.contains("--num.streams"), "{error}");
        }
    }

    #[test]
    fn byte_sizes_take_units() {
        let run = run_args(&["--max.memory.bytes", "256MiB", "--batch.max.bytes", "5MB"]).unwrap();
        assert_eq!(run.max_memory_bytes, 256 << 20);
        assert_eq!(run.batch_max_bytes, 5_000_000);
        let defaults = run_args(&[]).unwrap();
        assert_eq!(defaults.max_memory_bytes, 256 << 20);
        assert_eq!(defaults.batch_max_bytes, 32 << 20);
        let error = run_args(&["--max.memory.bytes", "12 parsecs"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown unit"), "{error}");
    }

    #[test]
    fn statistics_are_reported_only_to_a_metrics_endpoint_and_not_too_often() {
        let interval = |extra: &[&str]| run_args(extra).unwrap().statistics_interval();
        assert_eq!(interval(&[]), None, "no --metrics.address");
        let served = ["--metrics.address", "127.0.0.1:9100"];
        assert_eq!(interval(&served), Some(std::time::Duration::from_secs(30)));
        let every_15s = [&served[..], &["--statistics.interval.ms", "15000"]].concat();
        assert_eq!(
            interval(&every_15s),
            Some(std::time::Duration::from_secs(15))
        );
        let off = [&served[..], &["--statistics.interval.ms", "0"]].concat();
        assert_eq!(interval(&off), None);
        let error = run_args(&["--statistics.interval.ms", "1000"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("at least 15000, or 0 for none"), "{error}");
    }

    #[test]
    fn lanes_park_after_a_minute_unless_told_never_or_not_too_soon() {
        let park = |extra: &[&str]| run_args(extra).unwrap().park_after();
        assert_eq!(park(&[]), Some(std::time::Duration::from_secs(60)));
        assert_eq!(
            park(&["--park.idle.ms", "1000"]),
            Some(std::time::Duration::from_secs(1))
        );
        assert_eq!(park(&["--park.idle.ms", "0"]), None);
        let error = run_args(&["--park.idle.ms", "200"])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("at least 1000, or 0 to never park"),
            "{error}"
        );
    }

    /// 0 made a tight loop of metadata requests against both clusters (a
    /// refresh), or a transaction the target aborts at once.
    #[test]
    fn intervals_that_would_spin_or_abort_everything_are_refused() {
        for flag in ["--refresh.interval.ms", "--transaction.timeout.ms"] {
            let error = run_args(&[flag, "0"]).unwrap_err().to_string();
            assert!(error.contains("0 is not in 1000.."), "{flag}: {error}");
            assert!(run_args(&[flag, "1000"]).is_ok(), "{flag}");
        }
    }

    #[test]
    fn the_group_sync_interval_takes_ms_or_the_old_seconds() {
        let interval = |extra: &[&str]| run_args(extra).unwrap().groups_sync_interval();
        assert_eq!(interval(&[]), std::time::Duration::from_secs(10));
        assert_eq!(
            interval(&["--groups.sync.interval.ms", "2500"]).as_millis(),
            2500
        );
        assert_eq!(interval(&["--groups.sync.interval.secs", "3"]).as_secs(), 3);
        let both = [
            "--groups.sync.interval.ms",
            "2500",
            "--groups.sync.interval.secs",
            "3",
        ];
        assert!(run_args(&both).is_err());
    }
}

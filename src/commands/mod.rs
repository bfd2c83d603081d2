//! The commands, one file each: each takes its command line (`crate::cli`),
//! turns it into the plain options of the engines it drives, and calls
//! them. Engines never see a clap type, and no command calls another
//! command: `cutover` builds verify's options itself.

pub mod cutover;
pub mod failover;
pub mod plan;
pub mod run;
pub mod status;
pub mod translate;
pub mod verify;

use anyhow::bail;

use crate::cli::common::{ConnectionArgs, TopicArgs};
use crate::cli::mirrormaker::MirrorMakerFlags;
use crate::cli::run_args::{DeploymentArgs, RunArgs, ThrottleArgs};
use crate::clusters::Endpoints;
use crate::replication::layout::{Layout, DEFAULT_LANES};
use crate::replication::throttle::{ThrottleFileError, ThrottleLimits};

/// The clusters and mirror named by the connection options every command
/// but `failover` shares with `run`.
fn endpoints(args: &ConnectionArgs) -> Endpoints {
    Endpoints {
        source_config: args.consumer_config.clone(),
        target_config: args.producer_config.clone(),
        source_alias: args.source_alias.clone(),
    }
}

/// The `--groups` option as given, for messages that quote it.
fn groups_given(pattern: &str) -> String {
    format!("--groups {pattern:?}")
}

/// The topic options as given, for messages that quote them.
fn topics_given(args: &TopicArgs) -> String {
    format!(
        "--include {:?}{}",
        args.include,
        args.exclude
            .as_ref()
            .map(|e| format!(" --exclude {e:?}"))
            .unwrap_or_default()
    )
}

/// The lane layout `run` and `plan` use: `--lanes`, else MirrorMaker's
/// `--num.streams`, else the default.
fn layout(deployment: &DeploymentArgs, mirrormaker: &MirrorMakerFlags) -> anyhow::Result<Layout> {
    Ok(Layout::new(
        deployment
            .lanes
            .or(mirrormaker.num_streams)
            .unwrap_or(DEFAULT_LANES),
    )?)
}

/// What `run` refuses in its own flags before it connects anywhere
/// (`plan` reports it as a problem): MirrorMaker flags eosmirror cannot
/// honour, and timeouts that contradict each other. Logs what it makes of
/// the MirrorMaker flags it takes.
fn refuse_flags(args: &RunArgs) -> anyhow::Result<()> {
    for note in args.mirrormaker.check(args.deployment.lanes)? {
        tracing::info!("{note}");
    }
    let longest_call = args.transaction_timeout_ms + 10_000;
    if args.health_stall_ms <= longest_call {
        bail!(
            "--health.stall.ms {} is not longer than the longest blocking Kafka call ({longest_call} ms: --transaction.timeout.ms + 10 s); /healthz would call a waiting lane stuck. Use at least {}",
            args.health_stall_ms,
            longest_call + 60_000
        );
    }
    // A lane's transaction is open while its batch collects, one commit
    // interval; the rest of the transaction timeout is for the flush and
    // the commit.
    let longest_interval = args.transaction_timeout_ms / 2;
    if args.commit_interval_ms > longest_interval {
        bail!(
            "--commit.interval.ms {} (MirrorMaker's --offset.commit.interval.ms is taken as it) is how long a lane's transaction collects records, and --transaction.timeout.ms {} would abort it before its commit. Use at most {longest_interval} (half the transaction timeout; the default is 200), or raise --transaction.timeout.ms (the target's transaction.max.timeout.ms caps it)",
            args.commit_interval_ms,
            args.transaction_timeout_ms,
        );
    }
    Ok(())
}

/// The throttle limits `run` and `plan` use: from the `--throttle.*` flags,
/// or read from `--throttle.file`.
fn throttle_limits(args: &ThrottleArgs) -> Result<ThrottleLimits, ThrottleFileError> {
    match &args.throttle_file {
        Some(file) => ThrottleLimits::load(file),
        None => Ok(ThrottleLimits {
            bytes_per_sec: args.throttle_bytes_per_sec,
            records_per_sec: args.throttle_records_per_sec,
        }),
    }
}

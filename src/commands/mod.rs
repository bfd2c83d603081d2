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

use crate::cli::common::{ConnectionArgs, TopicArgs};
use crate::cli::mirrormaker::MirrorMakerFlags;
use crate::cli::run_args::{DeploymentArgs, ThrottleArgs};
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
/// `--num.streams`, else the default. Refuses MirrorMaker flags eosmirror
/// cannot honour and logs what it makes of the others.
fn layout(deployment: &DeploymentArgs, mirrormaker: &MirrorMakerFlags) -> anyhow::Result<Layout> {
    for note in mirrormaker.check(deployment.lanes)? {
        tracing::info!("{note}");
    }
    Ok(Layout::new(
        deployment
            .lanes
            .or(mirrormaker.num_streams)
            .unwrap_or(DEFAULT_LANES),
    )?)
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

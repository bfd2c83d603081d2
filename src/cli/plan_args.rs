//! Options of `eosmirror plan`: `run`'s own flags for the clusters, topics,
//! deployment, target topics and throttle (the same clap groups), so the
//! command line of tomorrow's run is checked as it will be given.

use clap::Args;

pub use super::common::ReportFormat;
use super::common::{ConnectionArgs, TopicArgs};
use super::mirrormaker::MirrorMakerFlags;
use super::run_args::{DeploymentArgs, LaneClientArgs, TargetTopicArgs, ThrottleArgs};

/// `eosmirror plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
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

    /// Memory bound and transaction timeout of the lanes' clients.
    #[command(flatten)]
    pub lane_clients: LaneClientArgs,

    /// MirrorMaker's flags, translated or refused as `run` does.
    #[command(flatten)]
    pub mirrormaker: MirrorMakerFlags,

    /// Newest committed records read per source partition to estimate the
    /// average record size (0: no sampling, no byte estimate).
    #[arg(long = "sample.records", default_value_t = 5, value_name = "N")]
    pub sample_records: u64,

    /// Report format on standard output.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
}

//! Options of `eosmirror plan`: `run`'s own flags for the clusters, topics,
//! deployment, target topics and throttle (the same clap groups), so the
//! command line of tomorrow's run is checked as it will be given.

use clap::Args;

pub use super::common::ReportFormat;
use super::common::{ConnectionArgs, TopicArgs};
use super::run_args::{DeploymentArgs, TargetTopicArgs, ThrottleArgs};

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub connection: ConnectionArgs,

    #[command(flatten)]
    pub topics: TopicArgs,

    #[command(flatten)]
    pub deployment: DeploymentArgs,

    #[command(flatten)]
    pub target_topics: TargetTopicArgs,

    #[command(flatten)]
    pub throttle: ThrottleArgs,

    /// Newest committed records read per source partition to estimate the
    /// average record size (0: no sampling, no byte estimate).
    #[arg(long = "sample.records", default_value_t = 5, value_name = "N")]
    pub sample_records: u64,

    /// Report format on standard output.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
}

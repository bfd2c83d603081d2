//! `eosmirror plan`: `run`'s flags turned into plan's options, exactly as
//! `run` reads them, so a plan checks what the run will use.

use std::time::Duration;

use crate::cli::plan_args::PlanArgs;
use crate::plan::{plan, PlanOptions, PlanReport};

/// The plan's verdict, whose exit code the binary returns.
pub use crate::plan::Verdict;

/// Runs `eosmirror plan`. Blocking (call from a blocking thread inside a
/// tokio runtime: see [`plan`]).
pub fn run(args: &PlanArgs) -> anyhow::Result<PlanReport> {
    let layout = super::layout(&args.deployment, &args.mirrormaker)?;
    let topics = args.topics.filter()?;
    let throttle = super::throttle_limits(&args.throttle)?;
    plan(&PlanOptions {
        endpoints: super::endpoints(&args.connection),
        layout,
        topics,
        throttle,
        transactional_id_prefix: args.deployment.transactional_id_prefix.clone(),
        replication_factor: args.target_topics.target_replication_factor,
        add_partitions: args.target_topics.target_add_partitions,
        progress_retention: Duration::from_millis(args.target_topics.progress_retention_ms),
        sample_records: args.sample_records,
        transaction_timeout: Duration::from_millis(args.lane_clients.transaction_timeout_ms),
        max_memory_bytes: args.lane_clients.max_memory_bytes,
    })
}

//! `eosmirror plan`: `run`'s flags turned into plan's options, exactly as
//! `run` reads them, so a plan checks what the run will use.

use std::time::Duration;

use crate::cli::plan_args::PlanArgs;
use crate::error_chain::one_line;
use crate::plan::{plan, PlanOptions, PlanReport};

/// The plan's verdict, whose exit code the binary returns.
pub use crate::plan::Verdict;

/// Runs `eosmirror plan`. Blocking (call from a blocking thread inside a
/// tokio runtime: see [`plan`]).
pub fn run(args: &PlanArgs) -> anyhow::Result<PlanReport> {
    let run = &args.run;
    let flags_refused = super::refuse_flags(run).err().map(|e| one_line(&e));
    let layout = super::layout(&run.deployment, &run.mirrormaker);
    let topics = run.topics.filter();
    let throttle = super::throttle_limits(&run.throttle);
    let (layout, topics, throttle) = match (layout, topics, throttle) {
        (Ok(layout), Ok(topics), Ok(throttle)) => (layout, topics, throttle),
        (layout, topics, throttle) => {
            let unusable = [
                layout.err().map(|e| one_line(&e)),
                topics.err().map(|e| e.to_string()),
                throttle.err().map(|e| e.to_string()),
            ];
            return Ok(PlanReport::flags_unusable(
                flags_refused
                    .into_iter()
                    .chain(unusable.into_iter().flatten()),
            ));
        }
    };
    plan(&PlanOptions {
        endpoints: super::endpoints(&run.connection),
        flags_refused,
        layout,
        topics,
        throttle,
        transactional_id_prefix: run.deployment.transactional_id_prefix.clone(),
        replication_factor: run.target_topics.target_replication_factor,
        add_partitions: run.target_topics.target_add_partitions,
        progress_retention: Duration::from_millis(run.target_topics.progress_retention_ms),
        sample_records: args.sample_records,
        transaction_timeout: Duration::from_millis(run.transaction_timeout_ms),
        max_memory_bytes: run.max_memory_bytes,
    })
}

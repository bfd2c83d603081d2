//! `eosmirror failover`: its command line turned into the failover
//! runbook's options.

use crate::cli::groups_args::FailoverArgs;
use crate::pattern::NamePattern;
use crate::runbook::failover::{failover, FailoverOptions, FailoverReport};

/// Runs `eosmirror failover`. Blocking; never contacts the source.
pub fn run(args: &FailoverArgs) -> anyhow::Result<FailoverReport> {
    failover(&FailoverOptions {
        target_config: args.producer_config.clone(),
        source_alias: args.source_alias.clone(),
        groups: NamePattern::groups("--groups", &args.groups)?,
        groups_given: super::groups_given(&args.groups),
        allow_rewind: args.allow_rewind,
    })
}

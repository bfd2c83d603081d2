//! `eosmirror cutover`: its command line turned into the cutover runbook's
//! options.

use std::time::Duration;

use crate::cli::groups_args::CutoverArgs;
use crate::pattern::NamePattern;
use crate::runbook::cutover::{cutover, CutoverOptions, CutoverReport};
use crate::verify::range::Range;

/// Runs `eosmirror cutover`. Blocking.
pub fn run(args: &CutoverArgs) -> anyhow::Result<CutoverReport> {
    cutover(&options(args)?)
}

/// The runbook's options from its command line; a pattern that does not
/// compile is an error.
fn options(args: &CutoverArgs) -> anyhow::Result<CutoverOptions> {
    Ok(CutoverOptions {
        endpoints: super::endpoints(&args.connection),
        topics: args.topics.filter()?,
        topics_given: super::topics_given(&args.topics),
        groups: NamePattern::groups("--groups", &args.groups)?,
        groups_given: super::groups_given(&args.groups),
        groups_named: NamePattern::spelled_out_groups(&args.groups),
        timeout: Duration::from_millis(args.timeout_ms),
        verify_range: match args.full {
            true => Range::All,
            false => Range::Last(args.verify_last),
        },
        allow_rewind: args.allow_rewind,
    })
}

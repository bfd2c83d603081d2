//! Options of `eosmirror plan`: every flag of `run` (the same clap groups),
//! so tomorrow's command line is checked as it will be given, plus the
//! plan's own sampling and report format.

use clap::Args;

pub use super::common::ReportFormat;
use super::run_args::RunArgs;

/// `eosmirror plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// `run`'s flags, as the run will get them. Those that matter only
    /// while running (`--state.dir`, `--metrics.address`, ...) are
    /// accepted and not used.
    #[command(flatten)]
    pub run: RunArgs,

    /// Newest committed records read per source partition to estimate the
    /// average record size (0: no sampling, no byte estimate).
    #[arg(long = "sample.records", default_value_t = 5, value_name = "N")]
    pub sample_records: u64,

    /// Report format on standard output.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
}

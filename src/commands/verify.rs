//! `eosmirror verify`: its command line turned into verify's options.

use std::time::Duration;

use anyhow::bail;

use crate::cli::verify_args::{PairingMode, VerifyArgs};
use crate::verify::range::{self, Range};
use crate::verify::report::Report;
use crate::verify::{verify, Pairing, VerifyOptions};

/// Verify's verdict, whose exit code the binary returns.
pub use crate::verify::report::Verdict;

/// Runs `eosmirror verify`. Blocking.
pub fn run(args: &VerifyArgs) -> anyhow::Result<Report> {
    verify(&options(args)?)
}

/// Verify's options from its command line; an option that does not parse,
/// or a sequence-only one given in mapped mode, is an error.
fn options(args: &VerifyArgs) -> anyhow::Result<VerifyOptions> {
    let topics = args.topics.filter()?;
    let range = match (&args.since, args.last) {
        (Some(t), _) => Range::Since(range::parse_time(t)?),
        (None, Some(n)) => Range::Last(n),
        (None, None) => Range::All,
    };
    let starts = range::parse_starts(&args.starts)?;
    let pairing = match args.mode {
        PairingMode::Mapped => {
            if !starts.is_empty() || !args.target_prefix.is_empty() {
                bail!("--start and --target.prefix apply to --mode sequence only; mapped mode finds both from eosmirror's offset mapping");
            }
            Pairing::Mapped
        }
        PairingMode::Sequence => Pairing::Sequence {
            target_prefix: args.target_prefix.clone(),
            starts,
        },
    };
    Ok(VerifyOptions {
        endpoints: super::endpoints(&args.connection),
        topics,
        topics_given: super::topics_given(&args.topics),
        range,
        pairing,
        parallelism: usize::from(args.parallelism),
        max_memory_bytes: args.max_memory_bytes,
        max_mapping_bytes: args.max_mapping_bytes,
        throttle_bytes_per_sec: args.throttle_bytes_per_sec,
        stall_timeout: Duration::from_millis(args.stall_timeout_ms),
    })
}

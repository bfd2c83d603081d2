//! `eosmirror status`: its command line turned into status's options, and
//! the report printed once or, with `--watch`, again and again.

use std::io::IsTerminal;
use std::time::Duration;

use crate::cli::common::ReportFormat;
use crate::cli::status_args::StatusArgs;
use crate::error_chain::one_line;
use crate::status::{gather, StatusOptions, Thresholds, CANNOT_TELL};
use crate::topics::filter::TopicFilter;

/// Runs `eosmirror status` (with `--watch`, until interrupted); the exit
/// code of the last report. Blocking.
pub fn run(args: &StatusArgs) -> u8 {
    loop {
        let code = match options(args).and_then(|options| gather(&options)) {
            Ok(report) => {
                if args.watch.is_some() && std::io::stdout().is_terminal() {
                    print!("\x1b[2J\x1b[H");
                }
                match args.format {
                    ReportFormat::Text => print!("{}", report.to_text()),
                    ReportFormat::Json => println!(
                        "{}",
                        serde_json::to_string_pretty(&report).expect("reports always serialize")
                    ),
                }
                report.exit_code
            }
            Err(e) => {
                let reason = one_line(&e);
                if args.format == ReportFormat::Json {
                    println!(
                        "{}",
                        serde_json::json!({"verdict": "cannot_tell", "exit_code": CANNOT_TELL, "reason": reason})
                    );
                }
                eprintln!("eosmirror: status: cannot tell: {reason}");
                CANNOT_TELL
            }
        };
        let Some(every) = args.watch else {
            return code;
        };
        std::thread::sleep(Duration::from_secs(every));
    }
}

/// Status's options from its command line; a pattern that does not
/// compile is an error (the report's "cannot tell").
fn options(args: &StatusArgs) -> anyhow::Result<StatusOptions> {
    let include = args
        .include
        .as_deref()
        .map(|include| TopicFilter::new(include, args.exclude.as_deref()))
        .transpose()?;
    let exclude = args
        .exclude
        .as_deref()
        .map(|e| TopicFilter::pattern("--exclude", e))
        .transpose()?;
    Ok(StatusOptions {
        endpoints: super::endpoints(&args.connection),
        include,
        exclude,
        transactional_id_prefix: args.transactional_id_prefix.clone(),
        thresholds: Thresholds {
            max_lag_records: args.max_lag_records,
            max_lag_ms: args.max_lag_ms,
            status_max_age_ms: args.status_max_age_ms,
        },
        timeout: Duration::from_millis(args.timeout_ms),
    })
}

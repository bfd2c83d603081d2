//! The `eosmirror` binary: parse the command line, set up logging, run, and
//! turn errors into a message and an exit code.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use eosmirror::cli::common::ReportFormat;
use eosmirror::cli::{Cli, Command, LogFormat};
use eosmirror::commands;
use eosmirror::one_line;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    // Arms the crash points named in FAILPOINTS for the whole run (test
    // builds only; see src/failpoints.rs).
    #[cfg(feature = "failpoints")]
    let _crash_points = fail::FailScenario::setup();
    let cli = Cli::parse();
    let filter = match EnvFilter::try_new(&cli.log) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("eosmirror: invalid --log filter {:?}: {e}", cli.log);
            return ExitCode::from(2);
        }
    };
    let json = cli.log_format == LogFormat::Json;
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match json {
        true => logs.json().init(),
        false => logs.with_ansi(std::io::stderr().is_terminal()).init(),
    }

    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("eosmirror: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = execute(cli.command, &runtime, json);
    // Dropping a runtime waits for every blocking task without end; one
    // stuck in a librdkafka call that never returns (a stalled run ends
    // because of one) must not keep the process from exiting.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_GRACE);
    code
}

/// How long the exit waits for blocking tasks still running.
const RUNTIME_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Runs the command; its exit code.
fn execute(command: Command, runtime: &tokio::runtime::Runtime, json: bool) -> ExitCode {
    match command {
        Command::Run(args) => match runtime.block_on(commands::run::run(*args)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(json, &e),
        },
        Command::Verify(args) => {
            let format = args.format;
            match blocking(runtime, move || commands::verify::run(&args)) {
                Ok(report) => {
                    print(format, &report, || report.to_text());
                    ExitCode::from(report.verdict.exit_code())
                }
                Err(e) => {
                    say(
                        json,
                        format!("eosmirror: could not verify: {}", one_line(&e)),
                    );
                    ExitCode::from(commands::verify::Verdict::CouldNotVerify.exit_code())
                }
            }
        }
        Command::Translate(args) => {
            let format = args.format;
            match blocking(runtime, move || commands::translate::run(&args)) {
                Ok(report) => {
                    print(format, &report, || report.to_text());
                    // A partition without a translation (the report says
                    // why) fails a script that would go on to --apply.
                    if report.target_offsets().is_some() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(e) => fail(json, &e),
            }
        }
        Command::Cutover(args) => {
            let format = args.format;
            match blocking(runtime, move || commands::cutover::run(&args)) {
                Ok(report) => {
                    print(format, &report, || report.to_text());
                    if report.complete() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(e) => fail(json, &e),
            }
        }
        Command::Plan(args) => {
            let format = args.format;
            match blocking(runtime, move || commands::plan::run(&args)) {
                Ok(report) => {
                    print(format, &report, || report.to_text());
                    ExitCode::from(report.verdict.exit_code())
                }
                Err(e) => {
                    say(
                        json,
                        format!("eosmirror: plan: could not tell: {}", one_line(&e)),
                    );
                    ExitCode::from(commands::plan::Verdict::Unknown.exit_code())
                }
            }
        }
        Command::Status(args) => {
            match blocking(runtime, move || Ok(commands::status::run(&args))) {
                Ok(code) => ExitCode::from(code),
                Err(e) => fail(json, &e),
            }
        }
        Command::Failover(args) => {
            let format = args.format;
            match blocking(runtime, move || commands::failover::run(&args)) {
                Ok(report) => {
                    print(format, &report, || report.to_text());
                    if report.complete() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(e) => fail(json, &e),
            }
        }
    }
}

/// Runs a blocking command off the async runtime's worker threads.
fn blocking<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    command: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    runtime.block_on(async {
        tokio::task::spawn_blocking(command)
            .await
            .map_err(|e| anyhow::anyhow!("command panicked: {e}"))?
    })
}

/// Prints a report in the chosen format on standard output.
fn print<R: serde::Serialize>(format: ReportFormat, report: &R, text: impl FnOnce() -> String) {
    match format {
        ReportFormat::Text => print!("{}", text()),
        ReportFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(report).expect("reports always serialize")
        ),
    }
}

fn fail(json: bool, e: &anyhow::Error) -> ExitCode {
    say(json, format!("eosmirror: error: {}", one_line(e)));
    ExitCode::FAILURE
}

/// The line that ends a failed command: plain on stderr, or with
/// `--log.format json` a log event like every other line, so a log shipper
/// never meets a line that is not JSON.
fn say(json: bool, line: String) {
    match json {
        true => tracing::error!("{line}"),
        false => eprintln!("{line}"),
    }
}

//! The `eosmirror` binary: parse the command line, set up logging, run, and
//! turn errors into a message and an exit code.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use eosmirror::cli::{Cli, Command};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = match EnvFilter::try_new(&cli.log) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("eosmirror: invalid --log filter {:?}: {e}", cli.log);
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();

    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("eosmirror: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => eosmirror::run::run(*args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("eosmirror: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

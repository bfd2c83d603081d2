//! Command line. `run` accepts MirrorMaker 1's flags so that existing
//! MirrorMaker invocations and properties files carry over.

pub mod mirrormaker;
pub mod run_args;

use clap::{Parser, Subcommand};

/// Exactly-once Kafka-to-Kafka replication.
#[derive(Debug, Parser)]
#[command(name = "eosmirror", version, about, long_about = None)]
pub struct Cli {
    /// Log filter (tracing `EnvFilter` syntax, e.g. `info`, `eosmirror=debug`).
    #[arg(long, global = true, env = "EOSMIRROR_LOG", default_value = "info")]
    pub log: String,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replicate topics from the source cluster to the target cluster, exactly once.
    Run(Box<run_args::RunArgs>),
}

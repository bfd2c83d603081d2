//! `eosmirror-chaos`: tools for proving eosmirror's exactly-once claim from
//! the outside. Today: `compare`, the independent copy checker.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use eosmirror_chaos::checker::{compare_topic, count_committed, wait_for_counts, Difference, Side};

#[derive(Debug, Parser)]
#[command(name = "eosmirror-chaos", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compare a topic on source and target, record by record
    /// (read_committed). Exit 0: exact copy; 1: differences; 2: could not check.
    Compare {
        /// Source bootstrap servers.
        #[arg(long, default_value = "127.0.0.1:19092")]
        source: String,
        /// Target bootstrap servers.
        #[arg(long, default_value = "127.0.0.1:29092")]
        target: String,
        /// Topics to compare.
        #[arg(long = "topic", required = true)]
        topics: Vec<String>,
        /// First wait up to this many seconds until the target holds as many
        /// committed records as the source, and report how long that took.
        #[arg(long = "wait-secs")]
        wait_secs: Option<u64>,
    },
}

fn main() -> ExitCode {
    let Command::Compare {
        source,
        target,
        topics,
        wait_secs,
    } = Cli::parse().command;
    let source = Side::new("source", &source);
    let target = Side::new("target", &target);
    let limit = Duration::from_secs(wait_secs.unwrap_or(120).max(120));
    let mut exact = true;
    for topic in &topics {
        if let Some(wait) = wait_secs {
            let result = count_committed(&source, topic, limit).and_then(|expected| {
                let total: u64 = expected.values().sum();
                wait_for_counts(&target, topic, &expected, Duration::from_secs(wait))
                    .map(|took| (total, took))
            });
            match result {
                Ok((total, took)) => println!(
                    "{topic}: target caught up with {total} committed source records after {:.1} s",
                    took.as_secs_f64()
                ),
                Err(e) => {
                    eprintln!("eosmirror-chaos: {topic}: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        let reports = match compare_topic(&source, &target, topic, limit) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("eosmirror-chaos: {topic}: {e}");
                return ExitCode::from(2);
            }
        };
        let (records, bytes) = reports.iter().fold((0, 0), |(r, b), p| {
            (r + p.source_records, b + p.source_bytes)
        });
        for p in &reports {
            if let Some(d) = &p.first_difference {
                exact = false;
                let what = match d {
                    Difference::Altered { index, source_offset, target_offset } => format!("record #{index} altered (source offset {source_offset}, target offset {target_offset})"),
                    Difference::Missing { index, source_offset } => format!("records missing from #{index} (source offset {source_offset})"),
                    Difference::Unexpected { index, target_offset } => format!("unexpected records from #{index} (target offset {target_offset})"),
                };
                println!(
                    "{topic}-{}: DIFFERENT: {what}; source {} records, target {}",
                    p.partition, p.source_records, p.target_records
                );
            }
        }
        if reports.iter().all(|p| p.first_difference.is_none()) {
            println!(
                "{topic}: exact copy: {records} records ({:.1} MB) in {} partitions, each once and in order",
                bytes as f64 / 1e6,
                reports.len()
            );
        }
    }
    if exact {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

//! `eosmirror-chaos`: tools for proving eosmirror's exactly-once claim from
//! the outside, sharing no code with it.
//!
//! - `compare`: record-by-record check of a copy (exit 0 exact, 1 different,
//!   2 could not check);
//! - `wait`: tail a topic until it holds N committed records, and say when
//!   (how benchmarks time any replicator the same way).

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use eosmirror_chaos::checker::{compare_topic, wait_for_records, Difference, Side, TopicPair};

#[derive(Debug, Parser)]
#[command(name = "eosmirror-chaos", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compare a topic on the source with its copy on the target, record by
    /// record (read_committed). Exit 0: exact copy; 1: differences; 2: could not check.
    Compare {
        /// Source bootstrap servers.
        #[arg(long, default_value = "127.0.0.1:19092")]
        source: String,
        /// Target bootstrap servers.
        #[arg(long, default_value = "127.0.0.1:29092")]
        target: String,
        /// Source topic.
        #[arg(long)]
        topic: String,
        /// Name of the copy on the target (default: the same name).
        #[arg(long = "target-topic")]
        target_topic: Option<String>,
    },
    /// Wait until a topic holds at least RECORDS committed records; print how
    /// long it took. Exit 2 on timeout.
    Wait {
        /// Bootstrap servers of the cluster to watch.
        #[arg(long, default_value = "127.0.0.1:29092")]
        bootstrap: String,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        records: u64,
        #[arg(long = "timeout-secs", default_value_t = 1800)]
        timeout_secs: u64,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Compare {
            source,
            target,
            topic,
            target_topic,
        } => compare(
            &source,
            &target,
            topic.clone(),
            target_topic.unwrap_or(topic),
        ),
        Command::Wait {
            bootstrap,
            topic,
            records,
            timeout_secs,
        } => {
            let side = Side::new("cluster", &bootstrap);
            match wait_for_records(&side, &topic, records, Duration::from_secs(timeout_secs)) {
                Ok(took) => {
                    println!(
                        "{topic}: {records} committed records after {:.2} s",
                        took.as_secs_f64()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("eosmirror-chaos: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

fn compare(source: &str, target: &str, source_topic: String, target_topic: String) -> ExitCode {
    let topics = TopicPair {
        source: source_topic,
        target: target_topic,
    };
    let reports = match compare_topic(
        &Side::new("source", source),
        &Side::new("target", target),
        &topics,
        Duration::from_secs(300),
    ) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("eosmirror-chaos: {}: {e}", topics.source);
            return ExitCode::from(2);
        }
    };
    let mut exact = true;
    for p in &reports {
        let Some(d) = &p.first_difference else {
            continue;
        };
        exact = false;
        let what = match d {
            Difference::Altered { index, source_offset, target_offset } => format!(
                "record #{index} altered (source offset {source_offset}, target offset {target_offset})"
            ),
            Difference::Missing { index, source_offset } => {
                format!("records missing from #{index} (source offset {source_offset})")
            }
            Difference::Unexpected { index, target_offset } => {
                format!("unexpected records from #{index} (target offset {target_offset})")
            }
        };
        println!(
            "{} -> {} partition {}: DIFFERENT: {what}; source {} records, target {}",
            topics.source, topics.target, p.partition, p.source_records, p.target_records
        );
    }
    if !exact {
        return ExitCode::from(1);
    }
    let (records, bytes) = reports.iter().fold((0, 0), |(r, b), p| {
        (r + p.source_records, b + p.source_bytes)
    });
    println!(
        "{} -> {}: exact copy: {records} records ({:.1} MB) in {} partitions, each once and in order",
        topics.source,
        topics.target,
        bytes as f64 / 1e6,
        reports.len()
    );
    ExitCode::SUCCESS
}

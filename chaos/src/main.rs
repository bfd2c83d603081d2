//! `eosmirror-chaos`: tools for proving eosmirror's exactly-once claim from
//! the outside, sharing no code with it.
//!
//! - `compare`: record-by-record check of a copy (exit 0 exact, 1 different,
//!   2 could not check);
//! - `wait`: tail a topic until it holds N committed records, and say when
//!   (how benchmarks time any replicator the same way);
//! - `run`: the chaos suite (scenarios of faults under a checkable workload,
//!   a report table and JSON; exit 1 on any anomaly or deviation).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};
use eosmirror_chaos::checker::{compare_topic, wait_for_records, Difference, Side, TopicPair};
use eosmirror_chaos::latency::{measure, LatencyProbe};
use eosmirror_chaos::run::clusters::{ClusterSpec, LocalBrokers};
use eosmirror_chaos::run::{self, report, scenario};

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
    /// long it took and the rate from 10% to 90% of them. Exit 2 on timeout.
    Wait {
        /// Bootstrap servers of the cluster to watch.
        #[arg(long, default_value = "127.0.0.1:29092")]
        bootstrap: String,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        records: u64,
        /// The broker answers the reader's fetch once this many bytes wait
        /// (or after 500 ms). A reader that fetched at every arrival cost
        /// the target broker it timed a third of its CPU at 5,000
        /// partitions, where each fetch walks every partition; 1 gives
        /// marks accurate to the arrival, for low rates and few partitions.
        #[arg(long = "fetch-min-bytes", default_value_t = 1_048_576)]
        fetch_min_bytes: u64,
        #[arg(long = "timeout-secs", default_value_t = 1800)]
        timeout_secs: u64,
    },
    /// Measure a running copy's end-to-end latency: write to the source at
    /// a fixed rate, read the copy on the target (read_committed), print
    /// quantiles. Exit 2 if records were not seen.
    Latency {
        /// Source bootstrap servers.
        #[arg(long, default_value = "127.0.0.1:19092")]
        source: String,
        /// Target bootstrap servers.
        #[arg(long, default_value = "127.0.0.1:29092")]
        target: String,
        /// Source topic (its copy must exist on the target).
        #[arg(long)]
        topic: String,
        /// Records per second.
        #[arg(long, default_value_t = 2000)]
        rate: u64,
        /// Value bytes per record.
        #[arg(long, default_value_t = 200)]
        size: usize,
        /// Seconds written before measuring.
        #[arg(long = "warmup-secs", default_value_t = 5)]
        warmup_secs: u64,
        /// Seconds measured.
        #[arg(long = "secs", default_value_t = 30)]
        secs: u64,
        /// The target reader's fetch.wait.max.ms (librdkafka's default: 500).
        #[arg(long = "reader-fetch-wait-ms", default_value_t = 500)]
        reader_fetch_wait_ms: u32,
    },
    /// Run chaos scenarios against eosmirror and print a report. Exit 0: every
    /// scenario passed (zero anomalies, expected outcomes); 1: a scenario
    /// failed; 2: the run could not start.
    Run(Box<RunArgs>),
}

/// `eosmirror-chaos run` flags.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Scenarios to run (repeat or comma-separate); `all` runs every one.
    /// `--list` shows them.
    #[arg(long = "scenario", value_delimiter = ',', default_value = "all")]
    scenarios: Vec<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Seed of the fault schedules (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Fault phase of each scenario, seconds.
    #[arg(long = "duration-secs", default_value_t = 60)]
    duration_secs: u64,
    /// Records per second the workload writes (both producers together).
    #[arg(long, default_value_t = 200)]
    rate: u32,
    /// Partitions of each scenario's topic.
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    /// The eosmirror binary to test.
    #[arg(long, default_value = "eosmirror")]
    eosmirror: PathBuf,
    /// Source bootstrap servers (direct: the workload and checker use them).
    #[arg(long = "source-bootstrap", default_value = "127.0.0.1:19092")]
    source_bootstrap: String,
    /// Target bootstrap servers (direct: the checker uses them).
    #[arg(long = "target-bootstrap", default_value = "127.0.0.1:29092")]
    target_bootstrap: String,
    /// Client property for every source client, `key=value` (librdkafka
    /// names; also written to eosmirror's consumer.config). Repeatable.
    #[arg(long = "source-property")]
    source_properties: Vec<String>,
    /// Client property for every target client (see --source-property).
    #[arg(long = "target-property")]
    target_properties: Vec<String>,
    /// A fault proxy on the source path: `LISTEN=BROKER`, one per broker
    /// listener; the broker must advertise LISTEN (a loopback address) on
    /// that listener. Default for the local clusters: 127.0.0.1:19095=127.0.0.1:19094.
    #[arg(long = "source-proxy")]
    source_proxies: Vec<String>,
    /// A fault proxy on the target path (see --source-proxy). Default for the
    /// local clusters: 127.0.0.1:29095=127.0.0.1:29094.
    #[arg(long = "target-proxy")]
    target_proxies: Vec<String>,
    /// The local cluster tool (broker kill and restart). Default:
    /// tests/kafka/cluster if it exists and the bootstraps are the local ones.
    #[arg(long = "cluster-tool")]
    cluster_tool: Option<PathBuf>,
    /// Skip the scenarios that kill brokers.
    #[arg(long = "no-broker-faults")]
    no_broker_faults: bool,
    /// In the combined scenario, keep this percentage of the broker kills
    /// drawn (the rest are redrawn among the other faults).
    #[arg(long = "broker-fault-percent", default_value_t = 100)]
    broker_fault_percent: u64,
    /// eosmirror's --transaction.timeout.ms (zombie and blackhole holds
    /// are drawn around it).
    #[arg(long = "transaction-timeout-ms", default_value_t = 10_000)]
    transaction_timeout_ms: u64,
    /// eosmirror's --commit.interval.ms.
    #[arg(long = "commit-interval-ms", default_value_t = 100)]
    commit_interval_ms: u64,
    /// eosmirror's --fleet.session.timeout.ms: how soon a killed
    /// instance's lanes move to its successor (the brokers' default
    /// group.min.session.timeout.ms is 6000).
    #[arg(long = "fleet-session-timeout-ms", default_value_t = 6_000)]
    fleet_session_timeout_ms: u64,
    /// Where logs, properties files and state dirs go.
    #[arg(long = "work-dir", default_value = "eosmirror-chaos")]
    work_dir: PathBuf,
    /// Where the JSON report goes (default: <work-dir>/report-<seed>.json).
    #[arg(long)]
    report: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long)]
    quiet: bool,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => chaos_run(*args),
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
        Command::Latency {
            source,
            target,
            topic,
            rate,
            size,
            warmup_secs,
            secs,
            reader_fetch_wait_ms,
        } => latency(&LatencyProbe {
            source,
            target,
            topic,
            rate,
            record_size: size,
            warmup: Duration::from_secs(warmup_secs),
            duration: Duration::from_secs(secs),
            reader_fetch_wait_ms,
        }),
        Command::Wait {
            bootstrap,
            topic,
            records,
            fetch_min_bytes,
            timeout_secs,
        } => {
            let side = Side::new("cluster", &bootstrap);
            let limit = Duration::from_secs(timeout_secs);
            match wait_for_records(&side, &topic, records, fetch_min_bytes, limit) {
                Ok(arrival) => {
                    println!(
                        "{topic}: {records} committed records after {:.2} s",
                        arrival.took.as_secs_f64()
                    );
                    println!(
                        "middle: {:.0} records/s from 10% to 90% of them ({:.2} s)",
                        arrival.middle_rate(records),
                        arrival.middle.as_secs_f64()
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

fn latency(probe: &LatencyProbe) -> ExitCode {
    let report = match measure(probe) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("eosmirror-chaos: latency: {e:#}");
            return ExitCode::from(2);
        }
    };
    println!(
        "latency: {} records of {} B at {:.0} records/s (reader fetch.wait.max.ms={}): \
         p50 {} ms, p90 {} ms, p99 {} ms, p99.9 {} ms, max {} ms; {} of {} seen",
        report.measured,
        probe.record_size,
        report.achieved_rate,
        probe.reader_fetch_wait_ms,
        report.quantile_ms(0.5),
        report.quantile_ms(0.9),
        report.quantile_ms(0.99),
        report.quantile_ms(0.999),
        report.quantile_ms(1.0),
        report.seen,
        report.measured,
    );
    if report.seen < report.measured {
        eprintln!("eosmirror-chaos: latency: not every measured record was seen on the target");
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
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

fn pairs(name: &str, flags: &[String]) -> Result<Vec<(SocketAddr, SocketAddr)>, String> {
    flags
        .iter()
        .map(|f| {
            let (l, u) = f
                .split_once('=')
                .ok_or_else(|| format!("--{name}-proxy {f}: expected LISTEN=BROKER"))?;
            let parse = |a: &str| {
                use std::net::ToSocketAddrs;
                a.to_socket_addrs()
                    .ok()
                    .and_then(|mut it| it.next())
                    .ok_or_else(|| format!("--{name}-proxy {f}: cannot resolve {a}"))
            };
            Ok((parse(l)?, parse(u)?))
        })
        .collect()
}

fn properties(name: &str, flags: &[String]) -> Result<Vec<(String, String)>, String> {
    flags
        .iter()
        .map(|f| {
            f.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("--{name}-property {f}: expected key=value"))
        })
        .collect()
}

fn chaos_run(a: RunArgs) -> ExitCode {
    if a.list {
        for s in scenario::SCENARIOS {
            println!(
                "{:<20} {}\n{:<20} expected: {}",
                s.name, s.about, "", s.expected
            );
        }
        return ExitCode::SUCCESS;
    }
    let seed = a.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 % 1_000_000_000_000)
            .unwrap_or(1)
    });
    let local = a.source_bootstrap == "127.0.0.1:19092" && a.target_bootstrap == "127.0.0.1:29092";
    let setup = || -> Result<run::Config, String> {
        let mut source_proxies = pairs("source", &a.source_proxies)?;
        let mut target_proxies = pairs("target", &a.target_proxies)?;
        if local && source_proxies.is_empty() && target_proxies.is_empty() {
            source_proxies = pairs("source", &["127.0.0.1:19095=127.0.0.1:19094".into()])?;
            target_proxies = pairs("target", &["127.0.0.1:29095=127.0.0.1:29094".into()])?;
        }
        let tool = a.cluster_tool.clone().or_else(|| {
            let default = PathBuf::from("tests/kafka/cluster");
            (local && default.exists()).then_some(default)
        });
        let brokers = match tool {
            Some(t) => Some(LocalBrokers::open(&t).map_err(|e| format!("{e:#}"))?),
            None => None,
        };
        Ok(run::Config {
            eosmirror: a.eosmirror.clone(),
            source: ClusterSpec {
                name: "source",
                bootstrap: a.source_bootstrap.clone(),
                properties: properties("source", &a.source_properties)?,
                proxies: source_proxies,
            },
            target: ClusterSpec {
                name: "target",
                bootstrap: a.target_bootstrap.clone(),
                properties: properties("target", &a.target_properties)?,
                proxies: target_proxies,
            },
            brokers,
            broker_faults: !a.no_broker_faults,
            broker_fault_percent: a.broker_fault_percent,
            seed,
            duration: Duration::from_secs(a.duration_secs),
            rate: a.rate,
            partitions: a.partitions,
            transaction_timeout_ms: a.transaction_timeout_ms,
            commit_interval_ms: a.commit_interval_ms,
            fleet_session_timeout_ms: a.fleet_session_timeout_ms,
            work_dir: a.work_dir.clone(),
            scenarios: a.scenarios.clone(),
            quiet: a.quiet,
        })
    };
    let cfg = match setup() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("eosmirror-chaos: {e}");
            return ExitCode::from(2);
        }
    };
    eprintln!("eosmirror-chaos: seed {seed} (replay with --seed {seed})");
    let report = match run::run(&cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("eosmirror-chaos: {e:#}");
            return ExitCode::from(2);
        }
    };
    print!("{}", report::table(&report));
    let path = a
        .report
        .unwrap_or_else(|| a.work_dir.join(format!("report-{seed}.json")));
    match serde_json::to_string_pretty(&report) {
        Ok(json) => {
            if let Err(e) = std::fs::write(&path, json) {
                eprintln!("eosmirror-chaos: writing {}: {e}", path.display());
            } else {
                println!("JSON report: {}", path.display());
            }
        }
        Err(e) => eprintln!("eosmirror-chaos: JSON report: {e}"),
    }
    if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

//! The chaos suite behind `eosmirror-chaos run`: a checkable workload on the
//! source, the real `eosmirror` binary copying it, faults injected on a
//! seeded schedule, and the independent [`crate::judge`] checker tailing
//! the target. Every scenario states its expected outcome; any anomaly or
//! deviation fails the run.

pub mod children;
pub mod clusters;
pub mod faults;
pub mod mirror;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod tail;
pub mod workload;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};

use clusters::{ClusterSpec, LocalBrokers};
use report::{RunReport, Status};

/// Everything a chaos run needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The `eosmirror` binary under test.
    pub eosmirror: PathBuf,
    /// Source cluster.
    pub source: ClusterSpec,
    /// Target cluster.
    pub target: ClusterSpec,
    /// Local broker control, when the clusters are the local ones.
    pub brokers: Option<LocalBrokers>,
    /// Whether scenarios may kill brokers.
    pub broker_faults: bool,
    /// In the combined scenario, the percentage of drawn broker kills that
    /// are kept (the rest are redrawn among the other faults): broker kills
    /// disturb everyone using the clusters, so long runs on shared clusters
    /// may want fewer.
    pub broker_fault_percent: u64,
    /// Decides every scenario's fault schedule.
    pub seed: u64,
    /// Length of each scenario's fault phase.
    pub duration: Duration,
    /// Records per second the workload writes.
    pub rate: u32,
    /// Partitions of each scenario's topic.
    pub partitions: i32,
    /// eosmirror's `--transaction.timeout.ms`.
    pub transaction_timeout_ms: u64,
    /// eosmirror's `--commit.interval.ms`.
    pub commit_interval_ms: u64,
    /// eosmirror's `--fleet.session.timeout.ms`.
    pub fleet_session_timeout_ms: u64,
    /// Where each scenario's logs and files go.
    pub work_dir: PathBuf,
    /// Scenario names to run (empty: all).
    pub scenarios: Vec<String>,
    /// No progress lines on stderr.
    pub quiet: bool,
}

/// Runs the selected scenarios one after another.
pub fn run(cfg: &Config) -> Result<RunReport> {
    let selected: Vec<&scenario::Scenario> =
        if cfg.scenarios.is_empty() || cfg.scenarios.iter().any(|s| s == "all") {
            scenario::SCENARIOS.iter().collect()
        } else {
            let mut v = Vec::new();
            for name in &cfg.scenarios {
                match scenario::find(name) {
                    Some(s) => v.push(s),
                    None => bail!(
                        "unknown scenario {name:?}; known: {}",
                        scenario::SCENARIOS
                            .iter()
                            .map(|s| s.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }
            }
            v
        };
    std::fs::create_dir_all(&cfg.work_dir)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    children::stop_on_signal(&rt)?;
    let mut reports = Vec::new();
    for sc in selected {
        if !cfg.quiet {
            eprintln!("== scenario {}: {}", sc.name, sc.about);
        }
        let r = scenario::run(cfg, &rt, sc);
        // Leave the clusters as we found them, whatever happened.
        if let Some(b) = &cfg.brokers {
            if !b.both_running() {
                let _ = b.up(
                    &cfg.work_dir.join("cluster-up-final.log"),
                    &[&cfg.source.bootstrap, &cfg.target.bootstrap],
                );
            }
        }
        reports.push(r);
    }
    let passed = reports.iter().all(|r| r.status != Status::Failed);
    Ok(RunReport {
        seed: cfg.seed,
        scenarios: reports,
        passed,
    })
}

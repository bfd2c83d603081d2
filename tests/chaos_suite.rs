//! The chaos suite, short: every scenario of `eosmirror-chaos run` for a few
//! seconds of faults each, against the real eosmirror binary and the test
//! bed's clusters. Each must end with zero anomalies, the workload's group
//! translated exactly, and its expected outcome observed (for the source
//! gap: eosmirror stopped naming the deleted offsets; for the zombie: the
//! thawed instance fenced).
//!
//! Scenarios run one at a time (they share the proxied ports and kill
//! brokers). The seed is printed; `EOSMIRROR_CHAOS_SEED=<seed>` replays a
//! schedule, `EOSMIRROR_CHAOS_SECS` lengthens the fault phase (default 12 s).
//! Against external clusters (EOSMIRROR_*_BOOTSTRAP) the scenarios that need
//! proxies or broker control are skipped, with the reason in the report.

mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use eosmirror_chaos::run::clusters::{ClusterSpec, LocalBrokers};
use eosmirror_chaos::run::report::{table, GroupCheck, Status};
use eosmirror_chaos::run::{self, Config};
use support::{bed, cluster_tool, Cluster};

/// One scenario at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn seed() -> u64 {
    std::env::var("EOSMIRROR_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                % 1_000_000_000_000
        })
}

fn spec(cluster: &Cluster) -> ClusterSpec {
    let addr = |port: u16| -> SocketAddr { format!("127.0.0.1:{port}").parse().unwrap() };
    ClusterSpec {
        name: cluster.name,
        bootstrap: cluster.bootstrap.clone(),
        properties: Vec::new(),
        proxies: cluster
            .proxied
            .map(|l| vec![(addr(l.advertised_port), addr(l.broker_port))])
            .unwrap_or_default(),
    }
}

/// Runs one scenario briefly and asserts it passed.
fn scenario(name: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let bed = bed();
    let seed = seed();
    let secs = std::env::var("EOSMIRROR_CHAOS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    println!("chaos {name}: seed {seed} (replay with EOSMIRROR_CHAOS_SEED={seed})");
    let brokers = bed
        .source
        .proxied
        .map(|_| LocalBrokers::open(&cluster_tool()).expect("local cluster tool"));
    let work = tempfile::tempdir().expect("temp dir");
    let cfg = Config {
        eosmirror: PathBuf::from(env!("CARGO_BIN_EXE_eosmirror")),
        source: spec(&bed.source),
        target: spec(&bed.target),
        brokers,
        broker_faults: true,
        broker_fault_percent: 100,
        seed,
        duration: Duration::from_secs(secs),
        rate: 150,
        partitions: 3,
        transaction_timeout_ms: 8000,
        commit_interval_ms: 100,
        // The test clusters allow short group sessions: a killed
        // instance's successor waits 3 s for its lanes.
        fleet_session_timeout_ms: 3000,
        work_dir: work.path().to_path_buf(),
        scenarios: vec![name.to_string()],
        quiet: false,
    };
    let report = run::run(&cfg).expect("chaos run");
    let text = table(&report);
    println!("{text}");
    let s = &report.scenarios[0];
    if s.status == Status::Skipped {
        // Only a scenario the bed cannot stage is skipped: external
        // clusters have no fault proxies and no brokers to kill. The local
        // bed stages every one, so a skip there is a scenario not run.
        let why = s.skip_reason.as_deref().unwrap_or("");
        assert!(
            bed.source.proxied.is_none(),
            "chaos scenario {name} was skipped on the local test bed: {why}"
        );
        eprintln!("{name} skipped: {why}");
        return;
    }
    if s.status != Status::Passed {
        // Keep the logs for the post-mortem.
        let kept = work.keep();
        panic!(
            "chaos scenario {name} failed (logs kept in {}):\n{text}",
            kept.display()
        );
    }
    assert_eq!(s.verdict.total.anomalies(), 0, "{text}");
    assert!(s.verdict.total.copied > 0, "nothing was copied:\n{text}");
    assert!(!s.faults.is_empty(), "no fault was injected:\n{text}");
    assert!(
        s.faults.iter().all(|f| f.recovery_ms.is_some()),
        "a fault was never recovered from:\n{text}"
    );
    // Every scenario checks the translated group but the one whose source
    // topic was recreated (the group's offsets are the deleted topic's): a
    // check not run is a check that did not pass.
    assert!(
        name == "source-topic-recreated" || matches!(s.group, GroupCheck::Passed(_)),
        "translated group offsets:\n{text}"
    );
    match name {
        "source-gap" => assert!(
            s.outcomes.iter().any(|o| o.contains("naming the gap")),
            "eosmirror did not stop naming the gap:\n{text}"
        ),
        "zombie" => assert!(
            s.outcomes.iter().any(|o| o.contains("zombie fenced")),
            "the zombie was not seen fenced:\n{text}"
        ),
        "lane-count-change" => assert!(
            s.outcomes.iter().any(|o| o.contains("was refused, naming")),
            "no instance with another lane count was seen refused:\n{text}"
        ),
        "source-topic-recreated" => assert!(
            s.outcomes
                .iter()
                .any(|o| o.contains("naming the recreated topic")),
            "eosmirror did not stop naming the recreated topic:\n{text}"
        ),
        "open-source-transaction-at-cutover" => assert!(
            s.outcomes.iter().any(|o| o.contains("and named it"))
                && s.outcomes.iter().any(|o| o.contains("cutover completed")),
            "cutover did not wait for the open transaction, then complete:\n{text}"
        ),
        _ => {}
    }
}

#[test]
fn chaos_kill() {
    scenario("kill");
}

#[test]
fn chaos_zombie() {
    scenario("zombie");
}

#[test]
fn chaos_fleet() {
    scenario("fleet");
}

#[test]
fn chaos_target_blackhole() {
    scenario("target-blackhole");
}

#[test]
fn chaos_target_reset() {
    scenario("target-reset");
}

#[test]
fn chaos_source_network() {
    scenario("source-network");
}

#[test]
fn chaos_slow_links() {
    scenario("slow-links");
}

#[test]
fn chaos_target_broker_kill() {
    scenario("target-broker-kill");
}

#[test]
fn chaos_source_broker_kill() {
    scenario("source-broker-kill");
}

#[test]
fn chaos_state_loss() {
    scenario("state-loss");
}

#[test]
fn chaos_source_gap() {
    scenario("source-gap");
}

#[test]
fn chaos_source_topic_recreated() {
    scenario("source-topic-recreated");
}

#[test]
fn chaos_open_source_transaction_at_cutover() {
    scenario("open-source-transaction-at-cutover");
}

#[test]
fn chaos_lane_count_change() {
    scenario("lane-count-change");
}

#[test]
fn chaos_combined() {
    scenario("combined");
}

/// Every scenario of the runner has a test above (a new scenario without a
/// CI run fails here).
#[test]
fn every_scenario_is_tested() {
    let source = include_str!("chaos_suite.rs");
    for s in eosmirror_chaos::run::scenario::SCENARIOS {
        assert!(
            source.contains(&format!("scenario(\"{}\")", s.name)),
            "scenario {} has no test in tests/chaos_suite.rs",
            s.name
        );
    }
}

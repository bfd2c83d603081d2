//! `eosmirror failover` with the source broker stopped (SIGSTOP: it holds
//! its connections and answers nothing, like a dead data center). Alone in
//! its test binary because it stops the shared source broker.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use support::mirror::{wait_for_copy, MirrorSetup};
use support::{bed, unique_name, Cluster, Isolation, TestRecord};

/// Stops the local source broker until dropped (also when the test fails).
/// Dropped, it thaws the broker and waits until it creates topics again, so
/// the next test binary finds a working source.
struct StoppedBroker {
    pid: i32,
    cluster: Cluster,
}

impl StoppedBroker {
    fn stop(cluster: &Cluster) -> Option<StoppedBroker> {
        if std::env::var("EOSMIRROR_SOURCE_BOOTSTRAP").is_ok() {
            return None;
        }
        let work = std::env::var("EOSMIRROR_KAFKA_WORK")
            .map(PathBuf::from)
            .unwrap_or_else(|_| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/kafka-local")
            });
        let pid: i32 = std::fs::read_to_string(work.join("source/broker.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SAFETY: signals a process this test bed started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        Some(StoppedBroker {
            pid,
            cluster: cluster.clone(),
        })
    }
}

impl Drop for StoppedBroker {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { libc::kill(self.pid, libc::SIGCONT) };
        if std::thread::panicking() {
            return; // a second panic would abort before the first is shown
        }
        let thawed = std::time::Instant::now();
        let probe = self.cluster.create_topic("failover-thawed", 1);
        eprintln!(
            "source broker created {probe} {:?} after it was thawed",
            thawed.elapsed()
        );
    }
}

fn record(partition: i32, i: usize) -> TestRecord {
    TestRecord::new(partition, &format!("k{i}"), &format!("v{i}"))
}

#[test]
fn failover_applies_recorded_offsets_and_reports_what_was_not_replicated() {
    let bed = bed();
    if std::env::var("EOSMIRROR_SOURCE_BOOTSTRAP").is_ok() {
        eprintln!("skipped: failover needs to stop the local source broker");
        return;
    }
    let topic = bed.source.create_topic("failover", 2);
    let first: Vec<_> = (0..100).map(|i| record(i as i32 % 2, i)).collect();
    bed.source.produce(&topic, &first);
    let group = unique_name("failover-group");
    bed.source
        .commit_group(&group, &[(&topic, 0, 20), (&topic, 1, 35)]);

    // Replicating slowly (2 records/s) with group sync every second, so that
    // the source is ahead when it dies.
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start(
        &topic,
        &["--groups.sync", &group, "--groups.sync.interval.secs", "1"],
    );
    wait_for_copy(
        &bed.source,
        &bed.target,
        &topic,
        Duration::from_secs(120),
        &mut mirror,
    );
    assert_eq!(mirror.stop(Duration::from_secs(30)), 0);
    let mut mirror = setup.start_env(
        &topic,
        &[
            "--groups.sync",
            &group,
            "--groups.sync.interval.secs",
            "1",
            "--throttle.records.per.sec",
            "2",
            // The instance is killed below, possibly with a transaction
            // open: the target aborts it after this long, so reading the
            // copy does not wait out the default minute.
            "--transaction.timeout.ms",
            "10000",
        ],
        // Each sync round's end is logged at debug.
        &[("EOSMIRROR_LOG", "info,eosmirror::groups=debug")],
    );
    let second: Vec<_> = (100..160).map(|i| record(i as i32 % 2, i)).collect();
    bed.source.produce(&topic, &second);
    let source = bed.source.read_all(&topic, Isolation::ReadCommitted);
    // A sync round that began after the produce records the new source
    // ends: the first round to end from here on may have begun before it,
    // the second did not.
    // Only the debug line at a round's end carries the count.
    mirror.wait_for_new_lines("group sync round groups=", 2, Duration::from_secs(60));

    let stopped = StoppedBroker::stop(&bed.source).expect("local source broker");
    std::thread::sleep(Duration::from_secs(2));
    mirror.kill();
    let copied = bed.target.read_all(&topic, Isolation::ReadCommitted);
    let (code, stdout, stderr) = setup.failover(&group);
    drop(stopped);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();

    for p in 0..2 {
        let produced = source.iter().filter(|r| r.partition == p).count() as i64;
        let on_target = copied.iter().filter(|r| r.partition == p).count() as i64;
        assert!(
            on_target < produced,
            "partition {p}: the test needs unreplicated records"
        );
        let rpo = report["rpo"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["topic"] == topic.as_str() && r["partition"] == p)
            .unwrap();
        assert_eq!(
            rpo["unreplicated_offsets"].as_i64(),
            Some(produced - on_target),
            "partition {p}: {rpo}"
        );
    }
    // A consumer of the group resumes on the target with nothing skipped:
    // it reads exactly the copies of the records it had not consumed.
    let offsets = bed.target.group_offsets(&group, &topic, 2);
    for (p, source_offset) in [(0, 20), (1, 35)] {
        let want: Vec<_> = source
            .iter()
            .filter(|r| r.partition == p && r.offset >= source_offset)
            .map(|r| r.value.clone())
            .collect();
        let got: Vec<_> = copied
            .iter()
            .filter(|r| r.partition == p && r.offset >= offsets[&p])
            .map(|r| r.value.clone())
            .collect();
        assert!(!got.is_empty());
        assert_eq!(
            got,
            want[..got.len()],
            "partition {p}: the target group resumes at the copy of source offset {source_offset}"
        );
    }
}

//! Exactly-once through a crash at each step of the transaction protocol.
//!
//! A random SIGKILL (tests/replication_crash/sigkill.rs) reaches "copies
//! flushed, not committed" or "committed, not cached" only by chance. Here
//! eosmirror, built with the `failpoints` feature (tests/run builds it so),
//! dies with SIGABRT the N-th time it reaches one named crash point
//! (src/failpoints.rs); N > 1, so some batches are committed before it.
//! The restart, without crash points, must end in an exact copy and
//! exact offset translations. The one step that happens inside librdkafka,
//! the commit's EndTxn request, is broken from outside instead: a fault
//! proxy drops its response, so the broker commits and eosmirror never
//! learns it.
//!
//! Each test has its own topic and alias: 3 partitions on 3 lanes, small
//! batches, source data with committed and aborted source transactions.
//! Copies are judged by reading both clusters, never through eosmirror's
//! own code; translations by the content of the copy a group resumes at.

mod support;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eosmirror::failpoints;
use rdkafka::consumer::{BaseConsumer, Consumer};
use support::mirror::{
    assert_exact_copy, copy_differences, count_committed, error_line, lane_restarts, tail, Mirror,
    MirrorSetup,
};
use support::proxy::Proxy;
use support::{bed, unique_name, Isolation, ReadRecord, TestRecord, TxnOutcome};

const PARTITIONS: i32 = 3;
/// How long an armed crash point may take to fire.
const CRASH_WITHIN: Duration = Duration::from_secs(90);
/// How long a restarted copy may take to catch up (2 shared cores).
const CATCH_UP: Duration = Duration::from_secs(180);

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// `count` records with unique values `<tag>-v<i>`, round-robin over the
/// partitions.
fn records(tag: &str, count: usize) -> Vec<TestRecord> {
    (0..count)
        .map(|i| {
            let mut r = TestRecord::new(
                i as i32 % PARTITIONS,
                &format!("{tag}-k{}", i % 31),
                &format!("{tag}-v{i}"),
            );
            r.headers = vec![("i".into(), Some(i.to_string().into_bytes()))];
            r
        })
        .collect()
}

/// Writes a block of source data: `plain` records, a committed and an
/// aborted source transaction, `plain` more. Every partition gets records,
/// aborted records and commit markers (see [`interesting_offsets`]).
fn write_block(topic: &str, tag: &str, plain: usize) {
    let source = &bed().source;
    source.produce(topic, &records(&format!("{tag}-plain"), plain));
    source.produce_transaction(
        topic,
        &records(&format!("{tag}-txn"), 150),
        TxnOutcome::Commit,
    );
    source.produce_transaction(
        topic,
        &records(&format!("{tag}-abort"), 150),
        TxnOutcome::Abort,
    );
    source.produce(topic, &records(&format!("{tag}-more"), plain));
}

/// One test's source topic, eosmirror files and arguments.
struct Case {
    topic: String,
    setup: MirrorSetup,
}

impl Case {
    /// A new source topic; eosmirror copies it to `target_bootstrap`.
    fn new(name: &str, target_bootstrap: &str) -> Case {
        Case {
            topic: bed().source.create_topic(name, PARTITIONS),
            setup: MirrorSetup::new(&bed().source.bootstrap, target_bootstrap),
        }
    }

    /// `eosmirror run` arguments: one partition per lane, batches of at most
    /// 100 records (so a few thousand records take many transactions), a
    /// short transaction timeout (a transaction a crash leaves open is
    /// aborted soon even without a restart), plus `extra`.
    fn args<'a>(&'a self, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![
            "--include",
            &self.topic,
            "--lanes",
            "3",
            "--batch.max.records",
            "100",
            "--commit.interval.ms",
            "100",
            "--refresh.interval.ms",
            "1000",
            "--transaction.timeout.ms",
            "10000",
        ];
        args.extend_from_slice(extra);
        args
    }

    /// Starts eosmirror; its log shows where each partition resumed.
    fn start(&self, extra: &[&str]) -> Mirror {
        self.setup
            .start_args_env(&self.args(extra), &[("EOSMIRROR_LOG", RESUME_LOG)])
    }

    /// Starts eosmirror armed to die at the `skip + 1`-th hit of `point`.
    fn start_crashing(&self, point: &str, skip: u32, extra: &[&str]) -> Mirror {
        let armed = format!("{point}={skip}*off->return");
        self.setup.start_args_env(
            &self.args(extra),
            &[("FAILPOINTS", &armed), ("EOSMIRROR_LOG", RESUME_LOG)],
        )
    }
}

/// Log filter that adds each partition's resume position to the usual info.
const RESUME_LOG: &str = "info,eosmirror::replication::lane=debug";

/// The source offsets each partition resumed at, by the `partition resumed`
/// debug lines in `output`.
fn resumed_at(output: &str) -> Vec<i64> {
    output
        .lines()
        .filter(|l| l.contains("partition resumed"))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|field| field.strip_prefix("next_source_offset="))
                .and_then(|v| v.parse().ok())
        })
        .collect()
}

/// Waits until `point` kills `mirror` and checks that it did: SIGABRT, and
/// the line naming the point. Fails if the point never fires.
fn assert_crashed_at(mirror: &mut Mirror, point: &str) {
    let deadline = Instant::now() + CRASH_WITHIN;
    while mirror.is_running() {
        assert!(
            Instant::now() < deadline,
            "crash point {point} never fired within {CRASH_WITHIN:?}; output tail:\n{}",
            tail(&mirror.output(), 30)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = mirror.wait_status(Duration::from_secs(1));
    let output = mirror.output();
    assert_eq!(
        status.signal(),
        Some(libc::SIGABRT),
        "eosmirror ended with {status}, not at crash point {point}; output tail:\n{}",
        tail(&output, 30)
    );
    assert!(
        output.contains(&format!("crash point {point} reached")),
        "eosmirror aborted, but not at crash point {point}; output tail:\n{}",
        tail(&output, 30)
    );
}

/// Asserts that the restarted `mirror` resumed some partition after
/// records the crashed instance had committed (not from scratch).
fn assert_resumed_after_commits(mirror: &Mirror) {
    let output = mirror.output();
    let resumed = resumed_at(&output);
    eprintln!("restart resumed partitions at source offsets {resumed:?}");
    assert!(
        resumed.iter().any(|&o| o > 0),
        "the restart found nothing committed before the crash (resumed at {resumed:?}); output tail:\n{}",
        tail(&output, 30)
    );
}

/// Waits until the target holds at least as many committed records as the
/// source in every partition: the copy is complete, or holds duplicates
/// (which [`assert_exact_copy`] then names).
fn wait_caught_up(case: &Case, mirror: &mut Mirror) {
    let bed = bed();
    mirror.wait_until(
        CATCH_UP,
        Duration::from_secs(1),
        || {
            let have = committed_on_target(&case.topic)?;
            let want = count_committed(&bed.source, &case.topic);
            want.iter()
                .all(|(p, n)| have.get(p).copied().unwrap_or(0) >= *n)
                .then_some(())
        },
        |output| {
            format!(
                "copy of {} incomplete after {CATCH_UP:?}: {:?}\neosmirror output tail:\n{}",
                case.topic,
                copy_differences(&bed.source, &bed.target, &case.topic),
                tail(output, 40)
            )
        },
    );
}

/// The target's committed records of `topic` per partition; `None` while
/// they cannot be read yet (eosmirror just created the topic, and its
/// partitions' leaders are not known yet).
fn committed_on_target(topic: &str) -> Option<BTreeMap<i32, usize>> {
    let target = &bed().target;
    let partitions = target.partition_count(topic)?;
    let consumer: BaseConsumer = target.client_config().create().ok()?;
    for p in 0..partitions {
        consumer
            .fetch_watermarks(topic, p, Duration::from_secs(10))
            .ok()?;
    }
    Some(count_committed(target, topic))
}

/// The first line in which `mirror` restarts a lane session for `reason`,
/// once it logs one; fails if `mirror` ends or `within` passes first.
fn wait_for_restart(mirror: &mut Mirror, reason: &str, within: Duration) -> String {
    let detail = format!("reason=\"{reason}\"");
    let deadline = Instant::now() + within;
    loop {
        let output = mirror.output();
        if let Some(line) = lane_restarts(&output, &detail).first() {
            return line.to_string();
        }
        assert!(
            Instant::now() < deadline && mirror.is_running(),
            "no lane session restarted for {reason} within {within:?}:\n{}",
            tail(&output, 30)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Stops eosmirror with SIGTERM; it must exit 0.
fn stop_cleanly(mirror: &mut Mirror) {
    let code = mirror.stop(Duration::from_secs(60));
    assert_eq!(
        code,
        0,
        "eosmirror did not stop cleanly:\n{}",
        mirror.output()
    );
}

/// Source offsets of every kind in the block written with `tag`: in
/// partition 0 a record in the middle, in 1 the first aborted record, in 2
/// the commit marker of the committed transaction.
fn interesting_offsets(topic: &str, tag: &str) -> BTreeMap<i32, i64> {
    let all = bed().source.read_all(topic, Isolation::ReadUncommitted);
    let of = |p: i32, prefix: &str| -> Vec<i64> {
        all.iter()
            .filter(|r| {
                r.partition == p
                    && r.value
                        .as_deref()
                        .is_some_and(|v| v.starts_with(prefix.as_bytes()))
            })
            .map(|r| r.offset)
            .collect()
    };
    let plain = of(0, &format!("{tag}-plain-v"));
    let aborted = of(1, &format!("{tag}-abort-v"));
    let committed = of(2, &format!("{tag}-txn-v"));
    // The marker directly follows a transaction's last record: nothing else
    // writes the topic meanwhile.
    BTreeMap::from([
        (0, plain[plain.len() / 2]),
        (1, aborted[0]),
        (2, committed.last().expect("a committed transaction") + 1),
    ])
}

/// Where a group committed at `offsets` on the source must resume on the
/// target: at the copy (found by its unique value) of the first committed
/// source record at or after each offset.
fn exact_translation(topic: &str, offsets: &BTreeMap<i32, i64>) -> BTreeMap<i32, i64> {
    let source = bed().source.read_all(topic, Isolation::ReadCommitted);
    let target = bed().target.read_all(topic, Isolation::ReadCommitted);
    let copy_of = |p: i32, o: i64| -> i64 {
        let next: &ReadRecord = source
            .iter()
            .find(|r| r.partition == p && r.offset >= o)
            .unwrap_or_else(|| panic!("no committed source record at or after {topic}-{p}@{o}"));
        target
            .iter()
            .find(|t| t.partition == p && t.value == next.value)
            .unwrap_or_else(|| panic!("source record {topic}-{p}@{} not copied", next.offset))
            .offset
    };
    offsets.iter().map(|(&p, &o)| (p, copy_of(p, o))).collect()
}

/// Commits `offsets` of `topic` for `group` on the source.
fn commit_source_group(group: &str, topic: &str, offsets: &BTreeMap<i32, i64>) {
    let list: Vec<(&str, i32, i64)> = offsets.iter().map(|(&p, &o)| (topic, p, o)).collect();
    bed().source.commit_group(group, &list);
}

/// Offset translation is exact: `verify` finds every copy where the
/// progress records say (mapped mode), and `translate --apply` puts a group
/// at exactly the copy of its next record, for offsets of every kind.
fn assert_exact_translation(case: &Case) {
    let (code, stdout, stderr) = case.setup.command("verify", &["--include", &case.topic]);
    assert_eq!(code, 0, "verify:\n{stdout}\n{stderr}");
    assert!(stdout.contains("verdict: EXACT"), "{stdout}");

    let group = unique_name("crash-point-group");
    let offsets = interesting_offsets(&case.topic, "a");
    commit_source_group(&group, &case.topic, &offsets);
    let (code, stdout, stderr) = case
        .setup
        .command("translate", &["--group", &group, "--apply"]);
    assert_eq!(code, 0, "translate:\n{stdout}\n{stderr}");
    assert_eq!(
        bed().target.group_offsets(&group, &case.topic, PARTITIONS),
        exact_translation(&case.topic, &offsets),
        "translated target offsets of source offsets {offsets:?}:\n{stdout}"
    );
}

// ---------------------------------------------------------------------------
// A crash at each step of a lane's transactions
// ---------------------------------------------------------------------------

/// Copies under a crash at the `skip + 1`-th hit of `point`, then restarts
/// without crash points and judges copy and translation. The source has a
/// backlog being copied when the crash comes, and gets more data while
/// eosmirror is down.
fn crash_and_recover(point: &str, skip: u32) {
    let case = Case::new("crash-point", &bed().target.bootstrap);
    write_block(&case.topic, "a", 600);
    let mut mirror = case.start_crashing(point, skip, &[]);
    assert_crashed_at(&mut mirror, point);
    restart_with_more_data(&case);
    assert_exact_translation(&case);
}

/// After a run that ended abnormally: more source data, a restart without
/// crash points that resumes after the committed batches, and an exact copy.
fn restart_with_more_data(case: &Case) {
    write_block(&case.topic, "b", 600);
    let mut mirror = case.start(&[]);
    wait_caught_up(case, &mut mirror);
    assert_resumed_after_commits(&mirror);
    stop_cleanly(&mut mirror);
    assert_exact_copy(&bed().source, &bed().target, &case.topic);
}

// Hits are counted over the 3 lanes, and each lane's batches are
// sequential: by its 4th hit a point has seen some lane's second batch, so
// the crash at the 5th comes after committed batches.

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the crash points: cargo test --features eosmirror/failpoints"
)]
fn crash_after_copies_are_sent() {
    crash_and_recover(failpoints::LANE_AFTER_SEND, 4);
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the crash points: cargo test --features eosmirror/failpoints"
)]
fn crash_after_copies_are_flushed_before_progress() {
    crash_and_recover(failpoints::LANE_AFTER_FLUSH, 4);
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the crash points: cargo test --features eosmirror/failpoints"
)]
fn crash_after_progress_records_are_sent() {
    crash_and_recover(failpoints::LANE_AFTER_PROGRESS, 4);
}

/// Each lane's claim is a commit too: 3 more hits.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the crash points: cargo test --features eosmirror/failpoints"
)]
fn crash_right_before_commit() {
    crash_and_recover(failpoints::TXN_BEFORE_COMMIT, 7);
}

#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the crash points: cargo test --features eosmirror/failpoints"
)]
fn crash_after_commit_before_the_cache_write() {
    crash_and_recover(failpoints::LANE_AFTER_COMMIT, 4);
}

/// A lane stuck in a call that never returns (librdkafka can wait without
/// end for a lost transaction coordinator, #5456; here the 8th commit
/// sleeps for ten minutes instead): the run ends by itself once the lane
/// made no progress for `--health.stall.ms`, exit code 1 and the stuck lane
/// named, instead of hanging; a restart copies exactly.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the crash points: cargo test --features eosmirror/failpoints"
)]
fn a_lane_stuck_in_a_call_ends_the_run() {
    let case = Case::new("stuck-lane", &bed().target.bootstrap);
    write_block(&case.topic, "a", 600);
    let stall_ms = "21000";
    let stuck = format!("{}=7*off->1*sleep(600000)", failpoints::TXN_BEFORE_COMMIT);
    let started = Instant::now();
    let mut mirror = case.setup.start_args_env(
        &case.args(&[
            "--health.stall.ms",
            stall_ms,
            "--shutdown.timeout.ms",
            "3000",
        ]),
        &[("FAILPOINTS", &stuck)],
    );
    let code = mirror.wait_exit(CRASH_WITHIN);
    let took = started.elapsed();
    let output = mirror.output();
    assert_eq!(
        code,
        1,
        "exit code of a stalled run; output tail:\n{}",
        tail(&output, 30)
    );
    let error = error_line(&output)
        .unwrap_or_else(|| panic!("no error line; output tail:\n{}", tail(&output, 30)));
    for needle in [
        "made no progress",
        "--health.stall.ms",
        "librdkafka",
        "restart",
    ] {
        assert!(error.contains(needle), "{needle:?} missing from: {error}");
    }
    eprintln!("a stuck lane ended the run after {took:?}: {error}");
    restart_with_more_data(&case);
}

/// A lane that panics (here at its third flushed batch, the fail crate's
/// `panic` action) ends the run at once, exit code 1 and the lane named,
/// instead of leaving the lane owned by an instance that no longer copies
/// it until the health watchdog notices; its open transaction is never
/// committed, and a restart copies exactly.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the crash points: cargo test --features eosmirror/failpoints"
)]
fn a_panicking_lane_ends_the_run() {
    let case = Case::new("panicking-lane", &bed().target.bootstrap);
    write_block(&case.topic, "a", 600);
    let armed = format!(
        "{}=2*off->1*panic(injected lane panic)",
        failpoints::LANE_AFTER_FLUSH
    );
    let mut mirror = case.setup.start_args_env(
        &case.args(&["--health.stall.ms", "600000"]),
        &[("FAILPOINTS", &armed)],
    );
    let code = mirror.wait_exit(CRASH_WITHIN);
    let output = mirror.output();
    assert_eq!(
        code,
        1,
        "exit code of a run whose lane panicked; output tail:\n{}",
        tail(&output, 30)
    );
    let error = error_line(&output)
        .unwrap_or_else(|| panic!("no error line; output tail:\n{}", tail(&output, 30)));
    for needle in ["lane-", "panicked: injected lane panic", "restart"] {
        assert!(error.contains(needle), "{needle:?} missing from: {error}");
    }
    restart_with_more_data(&case);
}

/// An instance killed mid-copy (SIGKILL, transactions open); the next one
/// fences it and dies on its second lane's way from `init_transactions` to
/// reading the positions; a third one copies on.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the crash points: cargo test --features eosmirror/failpoints"
)]
fn crash_between_fencing_and_reading_positions() {
    let bed = bed();
    let case = Case::new("crash-point-init", &bed.target.bootstrap);
    write_block(&case.topic, "a", 3000);
    let mut first = case.start(&[]);
    first.wait_until(
        CATCH_UP,
        Duration::from_millis(100),
        || {
            let copied: usize = committed_on_target(&case.topic)?.values().sum();
            (copied > 0).then_some(())
        },
        |output| format!("nothing copied:\n{}", tail(output, 30)),
    );
    first.kill();

    write_block(&case.topic, "b", 600);
    let mut second = case.start_crashing(failpoints::LANE_AFTER_INIT, 1, &[]);
    assert_crashed_at(&mut second, failpoints::LANE_AFTER_INIT);

    let mut third = case.start(&[]);
    wait_caught_up(&case, &mut third);
    assert_resumed_after_commits(&third);
    stop_cleanly(&mut third);
    assert_exact_copy(&bed.source, &bed.target, &case.topic);
    assert_exact_translation(&case);
}

// ---------------------------------------------------------------------------
// A crash in group sync
// ---------------------------------------------------------------------------

/// Group sync dies right after committing a group's translation on the
/// target. `failover` (source gone, eosmirror gone) must then find a record
/// of the group that agrees with the target (it refuses to rewind a group),
/// and a restarted sync must follow the source group exactly.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the crash points: cargo test --features eosmirror/failpoints"
)]
fn crash_in_group_sync_after_the_target_commit() {
    let bed = bed();
    let case = Case::new("crash-point-groups", &bed.target.bootstrap);
    let group = unique_name("crash-point-sync");
    write_block(&case.topic, "a", 300);
    write_block(&case.topic, "b", 300);
    // Copied first, so every translation below is exact from the first round.
    let mut mirror = case.start(&[]);
    wait_caught_up(&case, &mut mirror);
    stop_cleanly(&mut mirror);

    let sync = [
        "--groups.sync",
        group.as_str(),
        "--groups.sync.interval.secs",
        "1",
    ];
    let first = interesting_offsets(&case.topic, "a");
    commit_source_group(&group, &case.topic, &first);
    let mut mirror = case.start_crashing(failpoints::GROUPS_AFTER_TARGET_COMMIT, 1, &sync);
    let want = exact_translation(&case.topic, &first);
    mirror.wait_until(
        Duration::from_secs(60),
        Duration::from_millis(200),
        || (bed.target.group_offsets(&group, &case.topic, PARTITIONS) == want).then_some(()),
        |output| {
            format!(
                "the target group never reached {want:?}:\n{}",
                tail(output, 30)
            )
        },
    );
    // The second round that commits (the source group moved) dies; records
    // are being copied meanwhile.
    write_block(&case.topic, "c", 300);
    let second = interesting_offsets(&case.topic, "b");
    // Taken while eosmirror runs: once it died, reading the target waits
    // until the transactions it left open are aborted.
    let want = exact_translation(&case.topic, &second);
    commit_source_group(&group, &case.topic, &second);
    assert_crashed_at(&mut mirror, failpoints::GROUPS_AFTER_TARGET_COMMIT);
    assert_eq!(
        bed.target.group_offsets(&group, &case.topic, PARTITIONS),
        want,
        "the crashed round had committed the target group"
    );

    let (code, stdout, stderr) = case.setup.failover(&group);
    assert_eq!(
        code,
        Some(0),
        "failover after the crash:\n{stdout}\n{stderr}"
    );
    assert_eq!(
        bed.target.group_offsets(&group, &case.topic, PARTITIONS),
        want,
        "failover moved the group:\n{stdout}"
    );

    let mut mirror = case.start(&sync);
    let third = interesting_offsets(&case.topic, "c");
    commit_source_group(&group, &case.topic, &third);
    wait_caught_up(&case, &mut mirror);
    let want = exact_translation(&case.topic, &third);
    mirror.wait_until(
        Duration::from_secs(60),
        Duration::from_millis(200),
        || (bed.target.group_offsets(&group, &case.topic, PARTITIONS) == want).then_some(()),
        |output| {
            format!(
                "the restarted sync never moved the group to {want:?}:\n{}",
                tail(output, 30)
            )
        },
    );
    stop_cleanly(&mut mirror);
    assert_exact_copy(&bed.source, &bed.target, &case.topic);
}

// ---------------------------------------------------------------------------
// The commit's response lost (inside librdkafka)
// ---------------------------------------------------------------------------

/// Writes a block of source data every half second until stopped, so
/// transactions keep flowing whatever the faults do.
struct Writer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(topic: &str) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stop, topic) = (stop.clone(), topic.to_string());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    write_block(&topic, &format!("w{n}"), 100);
                    n += 1;
                    std::thread::sleep(Duration::from_millis(500));
                }
            })
        };
        Writer {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops writing; every block written is complete.
    fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The target's answer to a commit is lost four times: the broker committed
/// (or aborted), eosmirror's connection closes before it hears so. Twice
/// eosmirror carries on by itself, twice it is killed (SIGKILL) right after
/// the loss, with the outcome unknown to it, and restarted.
#[test]
fn lost_commit_responses_lose_and_duplicate_nothing() {
    let bed = bed();
    let Some(listener) = bed.target.proxied else {
        eprintln!("skipped: the target has no proxied listener");
        return;
    };
    let proxy = Proxy::start(listener);
    let bootstrap = proxy.bootstrap();
    let case = Case::new("lost-end-txn", &bootstrap);
    write_block(&case.topic, "a", 600);
    let writer = Writer::start(&case.topic);
    let mut mirror = case.start(&[]);
    for round in 0..4 {
        let dropped = proxy.get().stats().end_txn_responses_dropped;
        proxy.get().drop_end_txn_responses(1);
        mirror.wait_until(
            Duration::from_secs(60),
            Duration::from_millis(5),
            || (proxy.get().stats().end_txn_responses_dropped > dropped).then_some(()),
            |output| {
                format!(
                    "round {round}: no EndTxn response dropped:\n{}",
                    tail(output, 30)
                )
            },
        );
        let killed = round % 2 == 1;
        if killed {
            mirror.kill();
            mirror = case.start(&[]);
        }
        // Copying goes on.
        let total = || committed_on_target(&case.topic).map(|c| c.values().sum::<usize>());
        let copied = total().unwrap_or(0);
        mirror.wait_until(
            CATCH_UP,
            Duration::from_millis(200),
            || total().filter(|&now| now > copied),
            |output| {
                format!(
                    "round {round}: copying stopped after the lost response:\n{}",
                    tail(output, 30)
                )
            },
        );
        eprintln!(
            "round {round} (killed: {killed}): {:?}",
            proxy.get().stats()
        );
        for line in mirror.output().lines().filter(|l| l.contains("WARN")) {
            eprintln!("  eosmirror: {line}");
        }
    }
    writer.finish();
    wait_caught_up(&case, &mut mirror);
    stop_cleanly(&mut mirror);
    assert_exact_copy(&bed.source, &bed.target, &case.topic);
    assert_exact_translation(&case);
}

/// A lane whose source consumer stops delivering one partition (the fault
/// point pauses it after the first committed batch, as consumers were seen
/// to stay silent after a source broker freeze or restart) while records
/// keep coming to every partition, so the lane keeps committing: one to
/// two minutes later (a window of `SILENCE_LIMIT` in which the partition
/// stood still) the lane finds committed records waiting past its
/// position, starts a new session with a new consumer, and the copy
/// completes exactly, while eosmirror keeps running.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the fault points: cargo test --features eosmirror/failpoints"
)]
fn a_silent_source_consumer_is_replaced_by_a_new_session() {
    let case = Case::new("silent-source", &bed().target.bootstrap);
    write_block(&case.topic, "a", 600);
    let silent = format!("{}=1*return->off", failpoints::LANE_SOURCE_SILENT);
    // Never parked: a lane whose only partition falls silent would park
    // after --park.idle.ms and wake at once with a new consumer (its end
    // lies past the consumer's position), which hides this watch.
    let mut mirror = case.setup.start_args_env(
        &case.args(&["--park.idle.ms", "0"]),
        &[("FAILPOINTS", &silent)],
    );
    let writer = Writer::start(&case.topic);
    wait_for_restart(&mut mirror, "source_silent", Duration::from_secs(300));
    writer.finish();
    wait_caught_up(&case, &mut mirror);
    let output = mirror.output();
    assert!(
        output.contains(&format!("fault point {}", failpoints::LANE_SOURCE_SILENT)),
        "the fault point never fired:\n{}",
        tail(&output, 30)
    );
    let replaced = lane_restarts(&output, "reason=\"source_silent\"");
    assert_eq!(
        replaced.len(),
        1,
        "one session replaced for its silent consumer:\n{}",
        tail(&output, 30)
    );
    eprintln!("{}", replaced[0]);
    stop_cleanly(&mut mirror);
    assert_exact_copy(&bed().source, &bed().target, &case.topic);
}

/// Resume's read of the lane's positions goes on through the errors
/// librdkafka recovers from by itself (every poll faulted with "all brokers
/// down", `read::connection-lost`) and gives up only after its no-progress
/// limit, naming the error the client last saw; the lane's session starts
/// over. An instance whose target answers again copies on exactly.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the fault points: cargo test --features eosmirror/failpoints"
)]
fn a_stalled_resume_read_names_the_clients_last_error() {
    let case = Case::new("resume-read-stall", &bed().target.bootstrap);
    write_block(&case.topic, "a", 600);
    let mut first = case.start(&[]);
    wait_caught_up(&case, &mut first);
    stop_cleanly(&mut first);

    let lost = format!("{}=return", failpoints::READ_CONNECTION_LOST);
    let mut second = case
        .setup
        .start_args_env(&case.args(&[]), &[("FAILPOINTS", &lost)]);
    // The limit is the transaction timeout (10 s here) plus 10 s.
    let restart = wait_for_restart(&mut second, "resume_read", CRASH_WITHIN);
    second.kill();
    for needle in [
        "made no progress towards offset",
        "the cluster stopped answering (the client's last error: ",
        "AllBrokersDown",
    ] {
        assert!(
            restart.contains(needle),
            "{needle:?} missing from: {restart}"
        );
    }
    eprintln!("{restart}");
    restart_with_more_data(&case);
}

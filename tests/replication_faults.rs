//! Exactly-once under faults: a zombie instance, network partitions and
//! connection resets between eosmirror and its clusters.
//!
//! Every test keeps a producer writing to the source while the fault
//! happens, then lets eosmirror catch up and judges the copy with
//! `assert_exact_copy`, which reads both clusters directly and never uses
//! eosmirror's own code.
//!
//! The network tests put a `FaultProxy` on a broker's proxied listener (the
//! port the broker advertises there), so every connection eosmirror makes
//! through that listener crosses the proxy (`support::proxy`).
//!
//! Each test uses its own source alias and transactional-id prefix, so its
//! internal topics and transactional ids are its own and no other test's
//! stalled transaction can hold back its position reads.

mod support;

use std::time::{Duration, Instant};

use eosmirror_chaos::proxy::Fault;
use support::mirror::{assert_exact_copy, tail, wait_for_copy, Mirror, MirrorSetup};
use support::proxy::Proxy;
use support::workload::Workload;
use support::{
    bed, free_local_address, http_get, unique_name, Cluster, Isolation, TestBed, TestRecord,
};

/// Transaction timeout given to eosmirror: short, so that faults longer than
/// it fit in a test.
const TRANSACTION_TIMEOUT_MS: &str = "10000";

/// Generous bound for anything that waits on eosmirror (2 shared cores).
const PATIENCE: Duration = Duration::from_secs(240);

/// Committed records of `topic` on `cluster` (0 while the topic is missing).
fn committed_total(cluster: &Cluster, topic: &str) -> usize {
    if cluster.partition_count(topic).is_none() {
        return 0;
    }
    cluster.read_all(topic, Isolation::ReadCommitted).len()
}

/// Waits until the target holds more than `beyond` committed records of
/// `topic`, failing if `mirror` exits or `limit` passes.
fn wait_for_target_beyond(
    target: &Cluster,
    topic: &str,
    beyond: usize,
    mirror: &mut Mirror,
    limit: Duration,
) -> usize {
    mirror.wait_until(
        limit,
        Duration::from_millis(500),
        || Some(committed_total(target, topic)).filter(|&now| now > beyond),
        |output| {
            format!(
                "target copy of {topic} has no more than {beyond} records after {limit:?}; eosmirror output tail:\n{}",
                tail(output, 60)
            )
        },
    )
}

/// Sleeps for `duration`, failing at once if `mirror` exits meanwhile.
fn sleep_while_running(mirror: &mut Mirror, duration: Duration, during: &str) {
    let until = Instant::now() + duration;
    while Instant::now() < until {
        assert!(
            mirror.is_running(),
            "eosmirror exited during {during}; output:\n{}",
            mirror.output()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Lines of eosmirror's output that announce a session restart, for the
/// test's own log.
fn restarts(output: &str) -> Vec<&str> {
    output
        .lines()
        .filter(|l| l.contains("restarting lane session"))
        .collect()
}

/// Arguments every test passes: its own alias and transactional ids, a short
/// transaction timeout and a quick topic refresh.
fn common_args(alias: &str, prefix: &str, commit_interval_ms: &str) -> Vec<String> {
    [
        "--source.alias",
        alias,
        "--transactional.id.prefix",
        prefix,
        "--transaction.timeout.ms",
        TRANSACTION_TIMEOUT_MS,
        "--commit.interval.ms",
        commit_interval_ms,
        "--refresh.interval.ms",
        "1000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Polls `path` on eosmirror's endpoint until it answers `status`; returns
/// the body.
fn wait_for_probe(mirror: &mut Mirror, address: &str, path: &str, status: u16) -> String {
    let mut last = (0, String::new());
    mirror.wait_until(
        PATIENCE,
        Duration::from_millis(250),
        || {
            last = http_get(address, path);
            (last.0 == status).then(|| last.1.clone())
        },
        |output| {
            format!(
                "{path} never answered {status}; eosmirror output tail:\n{}",
                tail(output, 30)
            )
        },
    )
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Two instances of one deployment (same transactional-id prefix and alias):
/// B starts while A is frozen (SIGSTOP) with a transaction open. The fleet's
/// group gives B every lane once A's session expires; B's
/// `init_transactions` fences A and aborts its open transaction, so nothing
/// A wrote before the freeze becomes visible. When A thaws, the group tells
/// it that its lanes moved: it never re-initialises them (which would fence
/// B), rejoins and takes a share in a clean hand-over (see
/// [`thaw_zombie_and_judge`]).
#[test]
fn zombie_instance_is_fenced_and_writes_nothing() {
    let bed = bed();
    let partitions = 4;
    let topic = bed.source.create_topic("zombie", partitions);
    let alias = unique_name("zombie");
    let prefix = unique_name("zombie-txn");
    // Long transactions: A is most likely frozen with one open.
    let args = common_args(&alias, &prefix, "2000");
    let workload = Workload::start(&bed.source, &topic, partitions);

    let setup_a = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut a = setup_a.start_bare(&topic, &as_strs(&args));
    wait_for_target_beyond(&bed.target, &topic, 0, &mut a, PATIENCE);

    // Freeze A, preferably while records of an open transaction are on the
    // target (read_uncommitted sees more than read_committed).
    let mut frozen_mid_transaction = false;
    for _ in 0..20 {
        a.signal(libc::SIGSTOP);
        let committed = bed.target.read_all(&topic, Isolation::ReadCommitted).len();
        let uncommitted = bed
            .target
            .read_all(&topic, Isolation::ReadUncommitted)
            .len();
        if uncommitted > committed {
            frozen_mid_transaction = true;
            eprintln!(
                "A frozen with {} uncommitted copies",
                uncommitted - committed
            );
            break;
        }
        a.signal(libc::SIGCONT);
        std::thread::sleep(Duration::from_millis(300));
    }
    if !frozen_mid_transaction {
        eprintln!("A frozen, but no open transaction of it was seen on the target");
    }
    let at_freeze = committed_total(&bed.target, &topic);

    // B takes over: it must fence A and copy on.
    let setup_b = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut b = setup_b.start_bare(&topic, &as_strs(&args));
    let grown = wait_for_target_beyond(&bed.target, &topic, at_freeze + 300, &mut b, PATIENCE);
    eprintln!("target grew from {at_freeze} to {grown} records while A was frozen");
    // Every partition has been committed by B by now.
    sleep_while_running(&mut b, Duration::from_secs(3), "B's copying");

    thaw_zombie_and_judge(bed, &topic, &mut a, &mut b, workload);
}

/// Like [`zombie_instance_is_fenced_and_writes_nothing`], but A is frozen
/// with no transaction open, idle after copying everything, and thaws to
/// find a backlog: it begins a new transaction and sends copies before it
/// learns that it was fenced.
///
/// The zombie learns it was fenced from `send` (`Local: Fatal error`) or
/// from a failed abort. It must then ask the group, not start a new session
/// at once: a new `init_transactions` would fence B, and the two would fence
/// each other for ever.
#[test]
fn zombie_thawed_between_transactions_is_fenced() {
    let bed = bed();
    let partitions = 4;
    let topic = bed.source.create_topic("zombie-idle", partitions);
    let alias = unique_name("zombie-idle");
    let prefix = unique_name("zombie-idle-txn");
    let args = common_args(&alias, &prefix, "500");
    bed.source
        .produce(&topic, &numbered("first", 400, partitions));

    let setup_a = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut a = setup_a.start_bare(&topic, &as_strs(&args));
    wait_for_copy(&bed.source, &bed.target, &topic, PATIENCE, &mut a);
    // Idle: everything committed, no transaction open.
    sleep_while_running(&mut a, Duration::from_secs(2), "A's idling");
    a.signal(libc::SIGSTOP);
    let committed = bed.target.read_all(&topic, Isolation::ReadCommitted).len();
    let uncommitted = bed
        .target
        .read_all(&topic, Isolation::ReadUncommitted)
        .len();
    eprintln!("A frozen idle: {committed} committed, {uncommitted} uncommitted copies");

    // A backlog the zombie will find when it thaws; B copies it meanwhile.
    bed.source
        .produce(&topic, &numbered("backlog", 8000, partitions));
    let setup_b = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut b = setup_b.start_bare(&topic, &as_strs(&args));
    wait_for_copy(&bed.source, &bed.target, &topic, PATIENCE, &mut b);
    // B keeps committing while A thaws.
    let workload = Workload::start(&bed.source, &topic, partitions);
    let now = committed_total(&bed.target, &topic);
    wait_for_target_beyond(&bed.target, &topic, now + 100, &mut b, PATIENCE);
    thaw_zombie_and_judge(bed, &topic, &mut a, &mut b, workload);
}

/// `count` records with a key, a value and a header, round-robin over
/// `partitions`.
fn numbered(tag: &str, count: usize, partitions: i32) -> Vec<TestRecord> {
    (0..count)
        .map(|i| TestRecord {
            partition: i as i32 % partitions,
            key: Some(format!("{tag}-k{i}").into_bytes()),
            value: Some(format!("{tag}-v{i}-").repeat(1 + i % 7).into_bytes()),
            headers: vec![("n".into(), Some(i.to_string().into_bytes()))],
            timestamp: None,
        })
        .collect()
}

/// What eosmirror logs when the fleet's group assigns it lanes.
const ASSIGNED: &str = "the fleet's group assigned lanes to this instance";

/// What eosmirror logs when the group takes lanes away from it.
const TAKEN: &str = "the fleet's group took lanes from this instance";

/// Thaws the frozen zombie `a` while `b`, the instance that took its lanes
/// over, copies on. The fleet's group decides who owns what: A learns that
/// its lanes were taken, stops touching them without re-initialising any
/// (which would fence B), rejoins the group and takes a share of the lanes
/// in a clean hand-over. B is never fenced. A then leaves (SIGTERM, exit 0)
/// and B takes every lane back; the target is an exact copy.
fn thaw_zombie_and_judge(
    bed: &TestBed,
    topic: &str,
    a: &mut Mirror,
    b: &mut Mirror,
    workload: Workload,
) {
    let before_thaw = a.output().len();
    a.signal(libc::SIGCONT);
    let since_thaw = a.wait_for_output(before_thaw, &[TAKEN, ASSIGNED], Duration::from_secs(120));
    eprintln!(
        "the zombie rejoined the fleet:\n{}",
        since_thaw
            .lines()
            .filter(|l| l.contains("fleet"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Both copy for a while, then the zombie leaves and hands its lanes back.
    sleep_while_running(a, Duration::from_secs(5), "the shared copy");
    sleep_while_running(b, Duration::from_secs(1), "the shared copy");
    let a_code = a.stop(Duration::from_secs(90));
    assert_eq!(
        a_code,
        0,
        "the thawed instance did not stop cleanly:\n{}",
        tail(&a.output(), 40)
    );

    let sent = workload.finish();
    eprintln!("workload wrote {sent} records");
    wait_for_copy(&bed.source, &bed.target, topic, PATIENCE, b);
    let b_code = b.stop(Duration::from_secs(90));
    let b_output = b.output();
    assert_eq!(b_code, 0, "B did not stop cleanly; output:\n{b_output}");
    let b_fenced: Vec<&str> = restarts(&b_output)
        .into_iter()
        .filter(|l| l.contains("fenced"))
        .collect();
    assert!(
        b_fenced.is_empty(),
        "the zombie fenced B after it was thawed:\n{}",
        b_fenced.join("\n")
    );
    assert_exact_copy(&bed.source, &bed.target, topic);
}

/// The target is unreachable (blackholed, connections left open) for longer
/// than the transaction timeout, so the coordinator aborts eosmirror's open
/// transactions and bumps their epochs. After the heal eosmirror must carry
/// on by itself — in particular it must not mistake its own timed-out
/// transaction for a takeover by another instance — and the target ends an
/// exact copy.
#[test]
fn survives_target_blackhole_longer_than_transaction_timeout() {
    survives_blackhole(Path::Target, Duration::from_secs(18));
}

/// A copy under a workload whose target path crosses a fault proxy. The
/// fields drop in order: the mirror before the proxy it talks through.
struct CopyThroughTargetProxy {
    mirror: Mirror,
    workload: Workload,
    topic: String,
    /// Committed copies on the target once the copy was seen under way.
    copied: usize,
    _setup: MirrorSetup,
    proxy: Proxy,
}

/// Starts a workload on a new topic (`name`, `partitions`) and eosmirror
/// copying it through a fault proxy on the target path (`common_args`
/// with a 300 ms commit interval, then `extra`), and waits until more than
/// `beyond` copies are committed. `None` when the target has no proxied
/// listener (external clusters): the caller skips.
fn copy_through_target_proxy(
    name: &str,
    partitions: i32,
    beyond: usize,
    extra: &[&str],
) -> Option<CopyThroughTargetProxy> {
    let bed = bed();
    let Some(listener) = bed.target.proxied else {
        eprintln!("skipped: the target has no proxied listener");
        return None;
    };
    let proxy = Proxy::start(listener);
    let topic = bed.source.create_topic(name, partitions);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &proxy.bootstrap());
    let workload = Workload::start(&bed.source, &topic, partitions);
    let mut args = common_args(
        &unique_name(name),
        &unique_name(&format!("{name}-txn")),
        "300",
    );
    args.extend(extra.iter().map(|a| a.to_string()));
    let mut mirror = setup.start_bare(&topic, &as_strs(&args));
    let copied = wait_for_target_beyond(&bed.target, &topic, beyond, &mut mirror, PATIENCE);
    Some(CopyThroughTargetProxy {
        mirror,
        workload,
        topic,
        copied,
        _setup: setup,
        proxy,
    })
}

/// Every connection to the target is reset (RST) several times while
/// eosmirror copies: in-flight produce, commit and position reads fail
/// mid-way. The target ends an exact copy and eosmirror never stops.
#[test]
fn survives_target_connection_resets() {
    let bed = bed();
    let Some(CopyThroughTargetProxy {
        mut mirror,
        workload,
        topic,
        mut copied,
        _setup,
        proxy,
    }) = copy_through_target_proxy("target-resets", 4, 100, &[])
    else {
        return;
    };

    for round in 0..6 {
        proxy.get().reset_connections();
        // Vary the instant within the commit cycle.
        let pause = Duration::from_millis(1500 + 700 * round);
        sleep_while_running(&mut mirror, pause, "connection resets");
        eprintln!("reset {round}: {:?}", proxy.get().stats());
    }
    copied = wait_for_target_beyond(&bed.target, &topic, copied + 200, &mut mirror, PATIENCE)
        .max(copied);
    eprintln!("copying goes on after the resets: {copied} records");
    let sent = workload.finish();
    eprintln!("workload wrote {sent} records");
    wait_for_copy(&bed.source, &bed.target, &topic, PATIENCE, &mut mirror);
    let code = mirror.stop(Duration::from_secs(90));
    let output = mirror.output();
    assert_eq!(code, 0, "eosmirror did not stop cleanly; output:\n{output}");
    assert_exact_copy(&bed.source, &bed.target, &topic);
    eprintln!("restarts: {:#?}", restarts(&output));
}

/// The source is unreachable for a while (blackholed) while the workload
/// keeps writing to it directly: consumption stalls, nothing wrong is
/// written, and after the heal the copy catches up to an exact copy.
#[test]
fn survives_source_blackhole() {
    survives_blackhole(Path::Source, Duration::from_secs(15));
}

/// Which of eosmirror's network paths a test breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Source,
    Target,
}

/// Copies under a workload, blackholes `path` for `duration`, heals it, and
/// judges: eosmirror recovers by itself, never reports a takeover, stops
/// cleanly, and the target is an exact copy.
fn survives_blackhole(path: Path, duration: Duration) {
    let bed = bed();
    let broken = match path {
        Path::Source => &bed.source,
        Path::Target => &bed.target,
    };
    let Some(listener) = broken.proxied else {
        eprintln!("skipped: the {} has no proxied listener", broken.name);
        return;
    };
    let proxy = Proxy::start(listener);
    let partitions = 4;
    let topic = bed
        .source
        .create_topic(&format!("{}-blackhole", broken.name), partitions);
    let alias = unique_name("blackhole");
    let prefix = unique_name("blackhole-txn");
    let setup = match path {
        Path::Source => MirrorSetup::new(&proxy.bootstrap(), &bed.target.bootstrap),
        Path::Target => MirrorSetup::new(&bed.source.bootstrap, &proxy.bootstrap()),
    };
    let workload = Workload::start(&bed.source, &topic, partitions);
    let metrics_address = free_local_address();
    let mut args = common_args(&alias, &prefix, "500");
    args.extend(["--metrics.address".to_string(), metrics_address.clone()]);
    if path == Path::Target {
        // The fleet's group lives on the target too. Its session outlasts
        // the blackhole so that the lanes, not a lost membership, are what
        // `/readyz` reports; losing the session in a target outage is the
        // chaos suite's `target-blackhole` (3 s sessions).
        let session_ms = (duration * 3).as_millis().to_string();
        args.extend(["--fleet.session.timeout.ms".to_string(), session_ms]);
    }
    let mut mirror = setup.start_bare(&topic, &as_strs(&args));
    let before = wait_for_target_beyond(&bed.target, &topic, 200, &mut mirror, PATIENCE);
    wait_for_probe(&mut mirror, &metrics_address, "/readyz", 200);

    proxy.get().set_fault(Fault::BLACKHOLE);
    eprintln!("{} blackholed at {before} copied records", broken.name);
    let blackholed = Instant::now();
    if path == Path::Target {
        // Nothing commits: not ready within a batch and the ready window
        // (2 × commit interval + 10 s); live all along.
        let why = wait_for_probe(&mut mirror, &metrics_address, "/readyz", 503);
        eprintln!(
            "/readyz after {:?} of blackhole: {why}",
            blackholed.elapsed()
        );
        assert!(
            why.contains("lane-"),
            "/readyz names the waiting lanes: {why}"
        );
        let (live, why) = http_get(&metrics_address, "/healthz");
        assert_eq!(live, 200, "/healthz during a target outage: {why}");
    }
    sleep_while_running(
        &mut mirror,
        duration.saturating_sub(blackholed.elapsed()),
        "the blackhole",
    );
    let during = committed_total(&bed.target, &topic);
    proxy.get().set_fault(Fault::FORWARD);
    eprintln!(
        "{} healed; {during} copied records; proxy {:?}",
        broken.name,
        proxy.get().stats()
    );

    // Recovery needs no manual action.
    let after = wait_for_target_beyond(&bed.target, &topic, during + 300, &mut mirror, PATIENCE);
    wait_for_probe(&mut mirror, &metrics_address, "/readyz", 200);
    eprintln!("copying resumed: {after} records");
    let sent = workload.finish();
    eprintln!("workload wrote {sent} records");
    wait_for_copy(&bed.source, &bed.target, &topic, PATIENCE, &mut mirror);
    assert!(mirror.is_running());
    let code = mirror.stop(Duration::from_secs(90));
    let output = mirror.output();
    assert_eq!(code, 0, "eosmirror did not stop cleanly; output:\n{output}");
    assert_exact_copy(&bed.source, &bed.target, &topic);
    eprintln!("restarts: {:#?}", restarts(&output));
}

/// SIGTERM while the commit of the lane's last batch fails (fault point
/// `lane::stop-commit-fails`, as when the target stops answering during a
/// shutdown): the lane, still the instance's, aborts its transaction before
/// the run ends. Left open, it would hold back every `read_committed`
/// reader of the partitions it wrote until the transaction timeout (120 s
/// here) — after a cutover's final stop, the
/// consumers just moved to the target.
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs --features eosmirror/failpoints"
)]
#[test]
fn a_lane_stopped_while_its_commit_fails_aborts_its_transaction() {
    let bed = bed();
    let topic = bed.source.create_topic("stop-abort", 1);
    let (_setup, mut mirror) =
        start_with_an_open_transaction(&topic, &[("FAILPOINTS", "lane::stop-commit-fails=return")]);

    mirror.signal(libc::SIGTERM);
    let code = mirror.wait_exit(Duration::from_secs(90));
    let output = mirror.output();
    assert_eq!(code, 0, "exit code; output:\n{}", tail(&output, 40));
    assert!(
        output.contains("fault point lane::stop-commit-fails"),
        "the fault never fired: the batch committed or was never open:\n{}",
        tail(&output, 40)
    );
    assert!(
        output.contains("aborted the transaction the lane ended with"),
        "no abort logged:\n{}",
        tail(&output, 40)
    );

    // A record written after the run ended is readable at once: no
    // transaction of the lane holds the partition's last stable offset.
    bed.target
        .produce(&topic, &[TestRecord::new(0, "after", "the stop")]);
    let started = Instant::now();
    let committed = bed.target.read_all(&topic, Isolation::ReadCommitted);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(15),
        "read_committed waited {took:?} for the lane's transaction"
    );
    let values: Vec<_> = committed.iter().map(|r| r.value.clone()).collect();
    assert_eq!(
        values,
        vec![Some(b"the stop".to_vec())],
        "committed records"
    );
}

/// Starts eosmirror on one-partition `topic` with a 60 s commit interval
/// (so that a slow machine still signals it with the batch open) and a
/// 120 s transaction timeout, writes 5 records to the source and waits until their copies are in the
/// target's log, in the lane's open transaction. The setup holds the run's
/// files: keep it while the mirror runs.
fn start_with_an_open_transaction(topic: &str, env: &[(&str, &str)]) -> (MirrorSetup, Mirror) {
    let bed = bed();
    let alias = unique_name("open-txn");
    let prefix = unique_name("open-txn-txn");
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start_args_env(
        &[
            "--include",
            topic,
            "--source.alias",
            &alias,
            "--transactional.id.prefix",
            &prefix,
            "--commit.interval.ms",
            "60000",
            "--transaction.timeout.ms",
            "120000",
            "--refresh.interval.ms",
            "1000",
        ],
        env,
    );
    mirror.wait_for_output(0, &["lane session started"], PATIENCE);
    let records: Vec<TestRecord> = (0..5)
        .map(|i| TestRecord::new(0, &format!("k{i}"), &format!("v{i}")))
        .collect();
    bed.source.produce(topic, &records);
    mirror.wait_until(
        PATIENCE,
        Duration::from_millis(200),
        || (bed.target.watermarks(topic, 0).1 >= 5).then_some(()),
        |output| format!("no copy reached the target:\n{}", tail(output, 30)),
    );
    (setup, mirror)
}

/// A second SIGTERM (a second or more after the first) ends a stop that
/// waits (here on a blackholed target) at once, with 143 as a shell reports
/// a process SIGTERM ended: an operator never needs SIGKILL to end
/// eosmirror.
#[test]
fn a_second_sigterm_exits_at_once() {
    let Some(CopyThroughTargetProxy {
        mut mirror,
        workload,
        _setup,
        proxy,
        ..
    }) = copy_through_target_proxy("second-signal", 1, 50, &[])
    else {
        return;
    };
    proxy.get().set_fault(Fault::BLACKHOLE);
    sleep_while_running(&mut mirror, Duration::from_secs(1), "the blackhole");
    mirror.signal(libc::SIGTERM);
    mirror.wait_for_output(0, &["SIGTERM received; shutting down"], PATIENCE);
    // Within a second it would count as the same request.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        mirror.is_running(),
        "the stop did not wait on the blackholed target; output:\n{}",
        tail(&mirror.output(), 30)
    );
    let sent = Instant::now();
    mirror.signal(libc::SIGTERM);
    let code = mirror.wait_exit(Duration::from_secs(60));
    let took = sent.elapsed();
    workload.finish();
    proxy.get().set_fault(Fault::FORWARD);
    let output = mirror.output();
    assert_eq!(code, 143, "exit code; output:\n{}", tail(&output, 30));
    assert!(
        took < Duration::from_secs(5),
        "exited {took:?} after the second SIGTERM; output:\n{}",
        tail(&output, 30)
    );
    assert!(
        output.contains("SIGTERM received again; exiting now"),
        "{}",
        tail(&output, 30)
    );
}

/// SIGTERM while a lane's batch is open and waits for records, under a
/// commit interval longer than the shutdown timeout: the stop commits the
/// batch at once (the wait for the next record looks at the stop flag),
/// exits 0, and the copies are committed, instead of waiting for the
/// interval to end and timing out.
#[test]
fn a_stop_commits_an_open_batch_without_waiting_for_its_interval() {
    let bed = bed();
    let topic = bed.source.create_topic("stop-open-batch", 1);
    let (_setup, mut mirror) = start_with_an_open_transaction(&topic, &[]);
    let sent = Instant::now();
    let code = mirror.stop(Duration::from_secs(90));
    let took = sent.elapsed();
    let output = mirror.output();
    assert_eq!(code, 0, "exit code; output:\n{}", tail(&output, 30));
    assert!(
        took < Duration::from_secs(20),
        "stopped {took:?} after SIGTERM (commit interval 60 s); output:\n{}",
        tail(&output, 30)
    );
    let committed = bed.target.read_all(&topic, Isolation::ReadCommitted);
    assert_eq!(committed.len(), 5, "copies committed at the stop");
}

/// SIGTERM while the target is unreachable (blackholed: connections open,
/// nothing answers): no lane can commit or abort, and the fleet's group
/// cannot be left, yet the process exits within `--shutdown.timeout.ms` and
/// the grace for what follows it, non-zero and naming the lanes that did
/// not stop; an operator's deploy or a pod's termination grace period is
/// not outlived.
#[test]
fn a_sigterm_during_a_target_outage_exits_within_the_shutdown_timeout() {
    let Some(CopyThroughTargetProxy {
        mut mirror,
        workload,
        _setup,
        proxy,
        ..
    }) = copy_through_target_proxy("stop-in-outage", 2, 100, &["--shutdown.timeout.ms", "5000"])
    else {
        return;
    };

    proxy.get().set_fault(Fault::BLACKHOLE);
    // Into the outage: the lanes' batches wait on the target.
    sleep_while_running(&mut mirror, Duration::from_secs(3), "the blackhole");
    let sent = Instant::now();
    mirror.signal(libc::SIGTERM);
    let code = mirror.wait_exit(Duration::from_secs(120));
    let took = sent.elapsed();
    workload.finish();
    proxy.get().set_fault(Fault::FORWARD);
    let output = mirror.output();
    eprintln!("exited {code} {took:?} after SIGTERM");
    // 5 s for the lanes, at most 5 s for the last status records and 5 s
    // of the runtime's grace, and slack for a loaded machine: far below
    // the minute or more a stop would wait on the blackholed target.
    assert!(
        took < Duration::from_secs(35),
        "exited {took:?} after SIGTERM with --shutdown.timeout.ms 5000; output:\n{}",
        tail(&output, 40)
    );
    assert_ne!(code, 0, "exit code; output:\n{}", tail(&output, 40));
    assert!(
        output.contains("did not stop within 5s after shutdown was requested"),
        "the lanes left running are not named; output:\n{}",
        tail(&output, 40)
    );
}

//! Exactly-once through crashes and through loss of the local state: eosmirror
//! killed with SIGKILL at random instants, its state dir deleted, corrupted
//! or belonging to other clusters, and an idle partition whose progress
//! history aged out. Every copy is judged by reading both clusters
//! (`read_committed`), never through eosmirror's own code.
//!
//! Each test uses its own `--source.alias`, so its internal topics and
//! transactional ids are its own: a killed instance of another test (whose
//! open transactions hold back the last stable offset until they are fenced)
//! never slows down this test's position reads.

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use eosmirror_state::{Checkpoint, ClusterIdentity, OpenOutcome, SourcePartition, StateStore};
use rdkafka::admin::{AdminOptions, AlterConfig, ResourceSpecifier};
use rdkafka::consumer::{BaseConsumer, Consumer};
use support::mirror::{
    assert_exact_copy, copy_differences, count_committed, remove, tail, Mirror, MirrorSetup,
};
use support::{bed, unique_name, Cluster, Isolation, TestRecord, TxnOutcome};

/// How long a copy may take to catch up before the test fails. Generous:
/// the machine is small and shared with other test runs.
const CATCH_UP: Duration = Duration::from_secs(300);
/// How long a graceful stop (SIGTERM) may take.
const STOP: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A tiny seeded PRNG (xorshift64*), so a failing run can be replayed with
/// `EOSMIRROR_CRASH_SEED=<seed>`.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `low..high`.
    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low)
    }
}

/// The seed from `EOSMIRROR_CRASH_SEED`, else from the clock; printed.
fn seed(test: &str) -> u64 {
    let seed = std::env::var("EOSMIRROR_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("{test}: seed {seed} (replay with EOSMIRROR_CRASH_SEED={seed})");
    seed
}

/// Small records with unique values, spread round-robin over partitions.
fn records(tag: &str, partitions: &[i32], first: usize, count: usize) -> Vec<TestRecord> {
    (first..first + count)
        .map(|i| {
            let mut r = TestRecord::new(
                partitions[i % partitions.len()],
                &format!("{tag}-k{}", i % 97),
                &format!("{tag}-v{i}"),
            );
            if i % 5 == 0 {
                r.headers = vec![("n".into(), Some(i.to_string().into_bytes()))];
            }
            r
        })
        .collect()
}

/// Waits until the target holds at least as many committed records as the
/// source in every partition. With exactly-once the target never holds
/// more, so this returns as soon as the copy is complete — or as soon as it
/// holds duplicates, which `assert_exact_copy` then reports at once.
fn wait_caught_up(topic: &str, mirror: &mut Mirror, setup: &MirrorSetup) {
    let bed = bed();
    mirror.wait_until(
        CATCH_UP,
        Duration::from_secs(1),
        || {
            let want = count_committed(&bed.source, topic);
            bed.target.partition_count(topic)?;
            let have = count_committed(&bed.target, topic);
            want.iter()
                .all(|(p, n)| have.get(p).copied().unwrap_or(0) >= *n)
                .then_some(())
        },
        |output| {
            format!(
                "copy of {topic} incomplete after {CATCH_UP:?}: {:?}\neosmirror output tail:\n{}\n{}",
                copy_differences(&bed.source, &bed.target, topic),
                tail(output, 40),
                history(setup)
            )
        },
    );
}

/// Like `assert_exact_copy`, but on failure also prints where every
/// eosmirror instance of the test resumed (its "lane session started"
/// lines) and its warnings and errors: the evidence for a bug report.
fn assert_exact_copy_with_history(topic: &str, setup: &MirrorSetup) {
    let bed = bed();
    let problems = copy_differences(&bed.source, &bed.target, topic);
    assert!(
        problems.is_empty(),
        "not an exact copy:\n{}\n{}",
        problems.join("\n"),
        history(setup)
    );
    assert_exact_copy(&bed.source, &bed.target, topic);
}

/// The interesting lines of every eosmirror log in the setup's directory,
/// in start order.
fn history(setup: &MirrorSetup) -> String {
    let mut logs: Vec<(u64, PathBuf)> = fs::read_dir(setup.dir.path())
        .unwrap()
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?.to_string();
            let n = name
                .strip_prefix("eosmirror-")?
                .strip_suffix(".log")?
                .parse()
                .ok()?;
            Some((n, path))
        })
        .collect();
    logs.sort();
    let mut out = String::from("eosmirror history (session starts, warnings, errors):\n");
    for (_, path) in logs {
        out.push_str(&format!("--- {}\n", path.display()));
        for line in fs::read_to_string(&path).unwrap_or_default().lines() {
            if line.contains("lane session started")
                || line.contains("WARN")
                || line.contains("ERROR")
                || line.contains("error")
            {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Arguments giving the run its own alias (internal topics, transactional
/// ids) plus `extra`.
fn args<'a>(alias: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--source.alias", alias];
    args.extend_from_slice(extra);
    args
}

fn progress_topic(alias: &str) -> String {
    format!("__eosmirror.progress.{alias}")
}

fn position_topic(alias: &str) -> String {
    format!("__eosmirror.position.{alias}")
}

/// Stops eosmirror with SIGTERM and asserts a clean exit.
fn stop_cleanly(mirror: &mut Mirror) {
    let code = mirror.stop(STOP);
    assert_eq!(
        code,
        0,
        "eosmirror did not stop cleanly; output:\n{}",
        mirror.output()
    );
}

/// Entries next to the state dir whose names mark a moved-aside state dir.
fn moved_aside(state_dir: &Path) -> Vec<PathBuf> {
    let name = state_dir.file_name().unwrap().to_str().unwrap().to_string();
    let mut found: Vec<PathBuf> = fs::read_dir(state_dir.parent().unwrap())
        .unwrap()
        .filter_map(|e| {
            let path = e.ok()?.path();
            let file = path.file_name()?.to_str()?;
            file.starts_with(&format!("{name}.corrupt-"))
                .then_some(path)
        })
        .collect();
    found.sort();
    found
}

/// (low, high) watermarks of one partition.
fn watermarks(cluster: &Cluster, topic: &str, partition: i32) -> (i64, i64) {
    let consumer: BaseConsumer = cluster.client_config().create().expect("consumer");
    consumer
        .fetch_watermarks(topic, partition, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{}: watermarks of {topic}-{partition}: {e}", cluster.name))
}

/// The cluster id a broker reports.
fn cluster_id(cluster: &Cluster) -> String {
    let consumer: BaseConsumer = cluster.client_config().create().expect("consumer");
    consumer
        .client()
        .fetch_cluster_id(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("{}: no cluster id", cluster.name))
}

/// Sets topic configs on `cluster`, keeping the topic's other dynamic
/// configs (the admin API available replaces the whole set).
fn alter_topic(cluster: &Cluster, topic: &str, settings: &[(&str, &str)]) {
    let admin = cluster.admin();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(60)));
    let described = runtime
        .block_on(admin.describe_configs([&ResourceSpecifier::Topic(topic)], &options))
        .expect("describe configs");
    let mut merged: BTreeMap<String, String> = BTreeMap::new();
    for resource in described {
        let resource = resource.expect("describe topic configs");
        for entry in resource.entries {
            if entry.source == rdkafka::admin::ConfigSource::DynamicTopic {
                if let Some(value) = entry.value {
                    merged.insert(entry.name, value);
                }
            }
        }
    }
    for (k, v) in settings {
        merged.insert(k.to_string(), v.to_string());
    }
    let mut alter = AlterConfig::new(ResourceSpecifier::Topic(topic));
    for (k, v) in &merged {
        alter = alter.set(k, v);
    }
    let results = runtime
        .block_on(admin.alter_configs([&alter], &options))
        .expect("alter configs");
    for result in results {
        if let Err((_, code)) = result {
            panic!("{}: alter configs of {topic}: {code}", cluster.name);
        }
    }
}

// ---------------------------------------------------------------------------
// 1. SIGKILL at random moments while the source is being written
// ---------------------------------------------------------------------------

/// What the source writer wrote.
#[derive(Debug, Default, Clone, Copy)]
struct Written {
    plain: usize,
    committed_in_txn: usize,
    aborted_in_txn: usize,
    transactions: usize,
}

/// Streams at least `total` plain records into `topic` in chunks, with
/// source transactions (committed or aborted at random) in between.
fn stream_source(topic: &str, partitions: i32, total: usize, seed: u64) -> Written {
    const CHUNK: usize = 2_500;
    const TXN: usize = 400;
    let bed = bed();
    let all: Vec<i32> = (0..partitions).collect();
    let mut rng = Rng::new(seed);
    let mut written = Written::default();
    let mut n = 0;
    while written.plain < total {
        bed.source.produce(topic, &records("plain", &all, n, CHUNK));
        n += CHUNK;
        written.plain += CHUNK;
        if rng.range(0, 3) == 0 {
            let outcome = if rng.range(0, 2) == 0 {
                TxnOutcome::Commit
            } else {
                TxnOutcome::Abort
            };
            let tag = match outcome {
                TxnOutcome::Commit => "txn-commit",
                TxnOutcome::Abort => "txn-abort",
            };
            bed.source
                .produce_transaction(topic, &records(tag, &all, n, TXN), outcome);
            n += TXN;
            written.transactions += 1;
            match outcome {
                TxnOutcome::Commit => written.committed_in_txn += TXN,
                TxnOutcome::Abort => written.aborted_in_txn += TXN,
            }
        }
    }
    written
}

/// Waits `delay`, checks eosmirror is still running (it must not stop by
/// itself), kills it with SIGKILL and starts it again on the same state dir.
fn kill_and_restart(
    mirror: &mut Mirror,
    setup: &MirrorSetup,
    topic: &str,
    run_args: &[&str],
    delay: Duration,
    kills: &mut Vec<(Duration, Duration)>,
    started: Instant,
) {
    std::thread::sleep(delay);
    assert!(
        mirror.is_running(),
        "eosmirror exited by itself before kill #{}; output:\n{}\n{}",
        kills.len() + 1,
        mirror.output(),
        history(setup)
    );
    mirror.kill();
    kills.push((started.elapsed(), delay));
    *mirror = setup.start(topic, run_args);
}

#[test]
fn sigkill_at_random_moments_loses_and_duplicates_nothing() {
    const PARTITIONS: i32 = 4;
    const RECORDS: usize = 200_000;
    const MIN_KILLS: usize = 5;
    const MAX_KILLS: usize = 25;
    let bed = bed();
    let seed = seed("sigkill");
    let mut rng = Rng::new(seed);
    let topic = bed.source.create_topic("crash", PARTITIONS);
    let alias = unique_name("crash");
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let run_args = args(&alias, &[]);

    let writer_done = Arc::new(AtomicBool::new(false));
    let writer = {
        let topic = topic.clone();
        let done = writer_done.clone();
        let writer_seed = rng.next();
        std::thread::spawn(move || {
            let written = stream_source(&topic, PARTITIONS, RECORDS, writer_seed);
            done.store(true, Ordering::SeqCst);
            written
        })
    };

    let started = Instant::now();
    let mut mirror = setup.start(&topic, &run_args);
    // Let the broker compact the position topic while instances die: what
    // an hour of operation does (eosmirror rolls its segments hourly), in
    // seconds. Killed instances leave aborted position records that are
    // newer than the committed ones; compaction must not let them shadow
    // the committed positions, and resuming must not trip over the gaps.
    let position = position_topic(&alias);
    let deadline = Instant::now() + CATCH_UP;
    while bed.target.partition_count(&position).is_none() {
        assert!(
            Instant::now() < deadline && mirror.is_running(),
            "eosmirror never created {position}:\n{}",
            mirror.output()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    alter_topic(
        &bed.target,
        &position,
        &[
            ("segment.ms", "1000"),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("delete.retention.ms", "1000"),
        ],
    );
    let mut kills = Vec::new();
    // Kills while the source is being written: nearly always in the middle
    // of a transaction (one is open whenever records flow), sometimes while
    // the instance is still starting or reading its position.
    while kills.len() < MIN_KILLS
        || (!writer_done.load(Ordering::SeqCst) && kills.len() < MAX_KILLS)
    {
        let delay = Duration::from_millis(rng.range(300, 3_000));
        kill_and_restart(
            &mut mirror,
            &setup,
            &topic,
            &run_args,
            delay,
            &mut kills,
            started,
        );
    }
    let written = writer.join().expect("source writer panicked");
    println!(
        "sigkill: writer done after {:?}: {written:?}",
        started.elapsed()
    );
    wait_caught_up(&topic, &mut mirror, &setup);
    println!("sigkill: caught up after {:?}", started.elapsed());

    // Kills while nothing flows: between transactions.
    for _ in 0..2 {
        let delay = Duration::from_millis(rng.range(300, 3_000));
        kill_and_restart(
            &mut mirror,
            &setup,
            &topic,
            &run_args,
            delay,
            &mut kills,
            started,
        );
    }
    bed.source.produce_transaction(
        &topic,
        &records("last-txn", &(0..PARTITIONS).collect::<Vec<_>>(), 0, 400),
        TxnOutcome::Commit,
    );
    println!(
        "sigkill: {} kills (at, after delay): {kills:?}",
        kills.len()
    );
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);
    assert_exact_copy_with_history(&topic, &setup);

    let source_total: usize = count_committed(&bed.source, &topic).values().sum();
    assert_eq!(
        source_total,
        written.plain + written.committed_in_txn + 400,
        "the source itself does not hold what the writer committed"
    );
    // Kills that landed mid-transaction leave aborted copies in the target
    // log (visible read_uncommitted only): evidence the test hit them.
    let uncommitted = bed
        .target
        .read_all(&topic, Isolation::ReadUncommitted)
        .len();
    let (low, high) = watermarks(&bed.target, &position, 0);
    println!(
        "sigkill: position topic offsets {low}..{high} hold {} records (committed or not)",
        bed.target
            .read_all(&position, Isolation::ReadUncommitted)
            .len()
    );
    println!(
        "sigkill: target holds {source_total} committed copies and {} aborted ones; took {:?}",
        uncommitted - source_total,
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------
// 2. State dir deleted between runs
// ---------------------------------------------------------------------------

#[test]
fn deleted_state_dir_is_rebuilt_from_the_target_without_duplicates() {
    let bed = bed();
    let partitions = [0, 1, 2];
    let topic = bed.source.create_topic("state-deleted", 3);
    let alias = unique_name("deleted");
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let run_args = args(&alias, &[]);

    // Part one, with a committed and an aborted source transaction.
    bed.source
        .produce(&topic, &records("a", &partitions, 0, 3_000));
    bed.source.produce_transaction(
        &topic,
        &records("a-txn", &partitions, 3_000, 300),
        TxnOutcome::Commit,
    );
    bed.source.produce_transaction(
        &topic,
        &records("a-abort", &partitions, 3_300, 300),
        TxnOutcome::Abort,
    );
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);
    assert!(setup.state_dir.is_dir(), "eosmirror made no state dir");

    // Part two: more records, state gone, restart.
    bed.source
        .produce(&topic, &records("b", &partitions, 0, 3_000));
    remove(&setup.state_dir);
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);
    assert!(
        mirror.output().contains("created local state"),
        "the restart did not start from an empty state dir:\n{}",
        mirror.output()
    );
    assert_exact_copy_with_history(&topic, &setup);

    // Part three: killed in the middle of copying, state gone, restart. The
    // killed instance's open transaction must be fenced and the position
    // found on the target alone.
    bed.source
        .produce(&topic, &records("c", &partitions, 0, 30_000));
    let before: usize = count_committed(&bed.target, &topic).values().sum();
    let mut mirror = setup.start(&topic, &run_args);
    let deadline = Instant::now() + CATCH_UP;
    while count_committed(&bed.target, &topic).values().sum::<usize>() == before {
        assert!(Instant::now() < deadline, "eosmirror copied nothing");
        assert!(mirror.is_running(), "{}", mirror.output());
        std::thread::sleep(Duration::from_millis(200));
    }
    mirror.kill();
    remove(&setup.state_dir);
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);
    assert_exact_copy_with_history(&topic, &setup);
}

// ---------------------------------------------------------------------------
// 3. State dir corrupted between runs
// ---------------------------------------------------------------------------

/// Restarts eosmirror on a damaged state dir and checks that it moved the
/// dir aside (log line and `.corrupt-` sibling), rebuilt, and copied exactly.
fn restart_on_damaged_state(
    setup: &MirrorSetup,
    topic: &str,
    run_args: &[&str],
    aside_before: usize,
) {
    let mut mirror = setup.start(topic, run_args);
    wait_caught_up(topic, &mut mirror, setup);
    stop_cleanly(&mut mirror);
    let output = mirror.output();
    assert!(
        output.contains("moved it aside"),
        "eosmirror did not report moving the damaged state dir aside:\n{output}"
    );
    let aside = moved_aside(&setup.state_dir);
    assert_eq!(
        aside.len(),
        aside_before + 1,
        "expected one more .corrupt- dir next to {}: {aside:?}",
        setup.state_dir.display()
    );
    let newest = aside.last().unwrap();
    assert!(
        output.contains(&newest.display().to_string()),
        "the log does not name where the state went ({}):\n{output}",
        newest.display()
    );
    assert_exact_copy_with_history(topic, setup);
}

#[test]
fn corrupt_state_dir_is_moved_aside_and_rebuilt_from_the_target() {
    let bed = bed();
    let partitions = [0, 1, 2];
    let topic = bed.source.create_topic("state-corrupt", 3);
    let alias = unique_name("corrupt");
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let run_args = args(&alias, &[]);

    bed.source
        .produce(&topic, &records("a", &partitions, 0, 3_000));
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);

    // Round one: garbage in sled's config file (longer than 8 bytes, or
    // sled ignores it).
    let conf = setup.state_dir.join("conf");
    assert!(
        conf.is_file(),
        "no sled conf in {}",
        setup.state_dir.display()
    );
    fs::write(&conf, [0xA5u8; 64]).unwrap();
    bed.source
        .produce(&topic, &records("b", &partitions, 0, 3_000));
    restart_on_damaged_state(&setup, &topic, &run_args, 0);

    // Round two: garbage over every sled data file but the config.
    let mut damaged = Vec::new();
    for entry in fs::read_dir(&setup.state_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path.file_name().unwrap() != "conf" {
            let len = fs::metadata(&path).unwrap().len().max(4096) as usize;
            fs::write(&path, vec![0x5Au8; len]).unwrap();
            damaged.push(path);
        }
    }
    assert!(!damaged.is_empty(), "no sled data files to damage");
    bed.source.produce_transaction(
        &topic,
        &records("c-txn", &partitions, 0, 600),
        TxnOutcome::Commit,
    );
    bed.source
        .produce(&topic, &records("c", &partitions, 0, 3_000));
    restart_on_damaged_state(&setup, &topic, &run_args, 1);

    // Round three: the data file cut in half, as a crashed disk might leave
    // it. sled then either recovers an older prefix of its log (a cache
    // *behind* the target, which eosmirror must notice and correct) or
    // finds no header (moved aside). Either way: an exact copy.
    let db = setup.state_dir.join("db");
    let len = fs::metadata(&db).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&db)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    bed.source
        .produce(&topic, &records("d", &partitions, 0, 3_000));
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);
    let output = mirror.output();
    println!(
        "corrupt: after cutting db from {len} bytes to {}: {}",
        len / 2,
        if output.contains("moved it aside") {
            "moved aside"
        } else if output.contains("reopened local state") {
            "reopened (sled recovered a prefix)"
        } else {
            "?"
        }
    );
    assert_exact_copy_with_history(&topic, &setup);
}

// ---------------------------------------------------------------------------
// 4. Foreign state dir
// ---------------------------------------------------------------------------

/// A state dir created for `identity`, holding one checkpoint for `topic`.
fn make_state_dir(dir: &Path, identity: &ClusterIdentity, topic: &str) {
    let (store, outcome) = StateStore::open(dir, identity).expect("create state dir");
    assert_eq!(outcome, OpenOutcome::Created);
    store
        .record_commit(
            &SourcePartition::new(topic, 0),
            &Checkpoint {
                next_source_offset: 1_000,
                next_target_offset: 1_001,
                progress_offset: 5,
            },
            &[],
        )
        .unwrap();
    store.flush().unwrap();
}

/// Runs eosmirror on a state dir made for other clusters; returns its output
/// after checking that it refused and left the target and the dir alone.
fn run_on_foreign_state(foreign: &ClusterIdentity, own_alias: &str, case: &str) -> String {
    let bed = bed();
    let topic = bed.source.create_topic("foreign", 2);
    bed.source.produce(&topic, &records("a", &[0, 1], 0, 100));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    make_state_dir(&setup.state_dir, foreign, &topic);

    let (code, output) = setup.run_to_exit(&topic, &args(own_alias, &[]), Duration::from_secs(120));
    println!("foreign ({case}): exit code {code}; output:\n{output}");
    assert_ne!(code, 0, "{case}: eosmirror accepted a foreign state dir");
    let dir = setup.state_dir.display().to_string();
    assert!(
        output.contains(&dir),
        "{case}: the message does not name the state dir {dir}:\n{output}"
    );
    assert!(
        output.contains("belongs to other clusters"),
        "{case}: the message does not say what is wrong:\n{output}"
    );
    assert!(
        output.contains(&format!("{:?}", foreign.source_alias))
            && output.contains(&format!("{:?}", foreign.source_cluster_id))
            && output.contains(&format!("{:?}", foreign.target_cluster_id)),
        "{case}: the message does not say whose state dir it is:\n{output}"
    );
    assert!(
        output.contains(&format!("delete {dir}")),
        "{case}: the message does not say what to do:\n{output}"
    );

    // Nothing written to the target: no copy, no internal topics.
    for name in [
        topic.clone(),
        progress_topic(own_alias),
        position_topic(own_alias),
    ] {
        assert_eq!(
            bed.target.partition_count(&name),
            None,
            "{case}: eosmirror created {name} on the target"
        );
    }
    // The foreign dir is neither moved aside nor changed.
    assert!(
        moved_aside(&setup.state_dir).is_empty(),
        "{case}: moved aside"
    );
    let (store, outcome) = StateStore::open(&setup.state_dir, foreign).expect("reopen");
    assert_eq!(outcome, OpenOutcome::Reopened, "{case}");
    assert_eq!(
        store
            .checkpoint(&SourcePartition::new(&topic, 0))
            .unwrap()
            .map(|c| c.next_source_offset),
        Some(1_000),
        "{case}: the foreign checkpoint changed"
    );
    output
}

#[test]
fn foreign_state_dir_is_refused_and_nothing_is_written() {
    let bed = bed();
    let alias = unique_name("foreign");
    let (source_id, target_id) = (cluster_id(&bed.source), cluster_id(&bed.target));
    let cases = [
        (
            "other clusters, same alias",
            ClusterIdentity {
                source_alias: alias.clone(),
                source_cluster_id: "some-other-source-cluster".into(),
                target_cluster_id: "some-other-target-cluster".into(),
            },
        ),
        (
            "other target cluster",
            ClusterIdentity {
                source_alias: alias.clone(),
                source_cluster_id: source_id.clone(),
                target_cluster_id: "some-other-target-cluster".into(),
            },
        ),
        (
            "same clusters, other alias",
            ClusterIdentity {
                source_alias: format!("{alias}-other"),
                source_cluster_id: source_id,
                target_cluster_id: target_id,
            },
        ),
    ];
    for (case, foreign) in &cases {
        run_on_foreign_state(foreign, &alias, case);
    }
}

#[test]
fn state_dir_errors_name_the_real_flag() {
    let bed = bed();
    let alias = unique_name("flag");
    // A foreign dir.
    let foreign = ClusterIdentity {
        source_alias: alias.clone(),
        source_cluster_id: "some-other-source-cluster".into(),
        target_cluster_id: "some-other-target-cluster".into(),
    };
    let foreign_output = run_on_foreign_state(&foreign, &alias, "flag name");

    // A dir locked by another process (here: this test holding the store).
    let topic = bed.source.create_topic("locked", 1);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let identity = ClusterIdentity {
        source_alias: alias.clone(),
        source_cluster_id: cluster_id(&bed.source),
        target_cluster_id: cluster_id(&bed.target),
    };
    let (held, _) = StateStore::open(&setup.state_dir, &identity).expect("open");
    let (code, locked_output) =
        setup.run_to_exit(&topic, &args(&alias, &[]), Duration::from_secs(120));
    drop(held);
    assert_ne!(code, 0, "{locked_output}");
    assert!(
        locked_output.contains("locked by another process"),
        "{locked_output}"
    );
    assert_eq!(bed.target.partition_count(&topic), None, "{locked_output}");

    let wrong: Vec<&String> = [&foreign_output, &locked_output]
        .into_iter()
        .filter(|output| !output.contains("--state.dir") || output.contains("--state-dir"))
        .collect();
    assert!(
        wrong.is_empty(),
        "messages name a flag eosmirror does not have (it has --state.dir):\n{wrong:#?}"
    );
}

// ---------------------------------------------------------------------------
// 5. Idle partition, short progress retention, state deleted
// ---------------------------------------------------------------------------

#[test]
fn idle_partition_position_survives_progress_retention_and_state_loss() {
    let bed = bed();
    let topic = bed.source.create_topic("idle", 2);
    let alias = unique_name("idle");
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let run_args = args(&alias, &["--progress.retention.ms", "1000"]);
    let progress = progress_topic(&alias);
    let position = position_topic(&alias);

    // Both partitions get records and are copied.
    bed.source.produce(&topic, &records("a", &[0, 1], 0, 2_000));
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    let idle_since = count_committed(&bed.source, &topic)[&1];

    // Every progress record of partition 1 lies below this offset.
    let (_, idle_progress_end) = watermarks(&bed.target, &progress, 0);
    // Let the broker roll segments quickly, so that retention (1 s, set by
    // eosmirror) can delete them and compaction of the position topic can
    // run: what weeks of operation do, in seconds.
    alter_topic(&bed.target, &progress, &[("segment.ms", "1000")]);
    alter_topic(
        &bed.target,
        &position,
        &[
            ("segment.ms", "1000"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );

    // Only partition 0 moves on, until retention has deleted every progress
    // record of partition 1.
    let moving_since = Instant::now();
    let deadline = moving_since + Duration::from_secs(180);
    let mut n = 2_000;
    let mut rounds = 0;
    loop {
        bed.source.produce(&topic, &records("b", &[0], n, 50));
        n += 50;
        rounds += 1;
        let (low, _) = watermarks(&bed.target, &progress, 0);
        // At least 20 rounds, so partition 0 commits many positions while
        // partition 1 idles.
        if low >= idle_progress_end && rounds >= 20 {
            println!(
                "idle: progress topic start moved to {low} after {:?} and {} records to partition 0 (partition 1's last progress record was below {idle_progress_end})",
                moving_since.elapsed(),
                n - 2_000
            );
            break;
        }
        assert!(
            mirror.is_running(),
            "{}\n{}",
            mirror.output(),
            history(&setup)
        );
        assert!(
            Instant::now() < deadline,
            "progress retention never deleted partition 1's records (start {low}, needed {idle_progress_end})"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    wait_caught_up(&topic, &mut mirror, &setup);
    // Let the log cleaner compact the position topic (each transaction
    // there is one position record and one commit marker, so fewer records
    // than half the offsets means compaction removed some), as it would have
    // long done in production. Not asserted: the cleaner runs when it runs.
    let compaction_deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (low, high) = watermarks(&bed.target, &position, 0);
        let records = bed
            .target
            .read_all(&position, Isolation::ReadUncommitted)
            .len();
        if (records as i64) < (high - low) / 2 {
            println!(
                "idle: position topic compacted: offsets {low}..{high} hold {records} records"
            );
            break;
        }
        if Instant::now() > compaction_deadline {
            println!("idle: position topic not compacted yet (offsets {low}..{high} hold {records} records); going on without");
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    stop_cleanly(&mut mirror);

    // State gone; partition 0 moves on, partition 1 stays idle; restart.
    remove(&setup.state_dir);
    bed.source.produce(&topic, &records("c", &[0], n, 500));
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);
    assert_eq!(
        count_committed(&bed.source, &topic)[&1],
        idle_since,
        "partition 1 was not idle"
    );
    assert_exact_copy_with_history(&topic, &setup);
}

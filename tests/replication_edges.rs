//! `eosmirror run` at the edges of the data path: source records deleted
//! before (or while not) being copied, topics and partitions that appear
//! while it runs, topic selection, and topic settings carried to the target.

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::time::Duration;

use support::mirror::{
    assert_exact_copy, by_partition, count_committed, tail, wait_for_copy, Mirror, MirrorSetup,
};
use support::{bed, unique_name, Cluster, Isolation, ReadRecord, TestRecord, TxnOutcome};

/// How long a copy may take on a busy machine.
const COPY_LIMIT: Duration = Duration::from_secs(180);
/// How long eosmirror may take to stop or to exit by itself.
const EXIT_LIMIT: Duration = Duration::from_secs(120);

/// `count` keyed records for `partition`, tagged so that every batch differs.
/// Timestamps are explicit but recent: the brokers check retention every 10 s
/// and would delete records stamped older than a topic's retention.ms.
fn records(tag: &str, partition: i32, count: usize) -> Vec<TestRecord> {
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 60_000;
    (0..count)
        .map(|i| TestRecord {
            partition,
            key: Some(format!("{tag}-p{partition}-k{i}").into_bytes()),
            value: Some(
                format!("{tag}-p{partition}-v{i}")
                    .repeat(1 + i % 7)
                    .into_bytes(),
            ),
            headers: vec![("i".into(), Some(i.to_string().into_bytes()))],
            timestamp: Some(base + (i as i64 * 7919) % 10_000),
        })
        .collect()
}

/// `len` pseudo-random bytes (xorshift): no compression codec shrinks them.
fn incompressible(len: usize) -> Vec<u8> {
    std::iter::successors(Some(0x9E37_79B9_7F4A_7C15u64), |x| {
        let x = x ^ (x << 13);
        let x = x ^ (x >> 7);
        Some(x ^ (x << 17))
    })
    .map(|x| (x >> 56) as u8)
    .take(len)
    .collect()
}

/// Whether `copy` carries what `original` does, judged as
/// `support::mirror::copy_differences` judges it.
fn same_record(original: &ReadRecord, copy: &ReadRecord) -> bool {
    original.key == copy.key
        && original.value == copy.value
        && original.headers == copy.headers
        && original.timestamp_ms() == copy.timestamp_ms()
        && matches!(copy.timestamp, rdkafka::Timestamp::CreateTime(_))
}

/// Panics unless `actual` holds exactly the records of `expected`, in order.
fn assert_same_records(what: &str, expected: &[ReadRecord], actual: &[ReadRecord]) {
    assert_eq!(
        expected.len(),
        actual.len(),
        "{what}: expected {} records, found {}",
        expected.len(),
        actual.len()
    );
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        assert!(
            same_record(e, a),
            "{what}: record #{i} differs: expected source offset {} ({:?}), found target offset {} ({:?})",
            e.offset,
            e.value.as_deref().map(String::from_utf8_lossy),
            a.offset,
            a.value.as_deref().map(String::from_utf8_lossy),
        );
    }
}

/// Committed records of one partition of `topic`.
fn partition_records(cluster: &Cluster, topic: &str, partition: i32) -> Vec<ReadRecord> {
    by_partition(cluster.read_all(topic, Isolation::ReadCommitted))
        .remove(&partition)
        .unwrap_or_default()
}

/// Waits until the target holds `want` committed records per partition of
/// `topic` (for copies that are deliberately not equal to the source).
fn wait_for_counts(
    target: &Cluster,
    topic: &str,
    want: &BTreeMap<i32, usize>,
    mirror: &mut Mirror,
) {
    let mut have = BTreeMap::new();
    mirror.wait_until(
        COPY_LIMIT,
        Duration::from_millis(500),
        || {
            have = match target.partition_count(topic) {
                Some(_) => count_committed(target, topic),
                None => BTreeMap::new(),
            };
            (&have == want).then_some(())
        },
        |output| {
            format!(
                "{topic}: target does not hold {want:?} records per partition after {COPY_LIMIT:?}\neosmirror output tail:\n{}",
                tail(output, 40)
            )
        },
    );
}

/// Records deleted at the source before eosmirror ever ran are not a gap (a
/// fresh copy starts at the low watermark). Records deleted after part of the
/// partition was copied but before the rest was are: eosmirror stops that
/// partition and names the lost range, copies nothing past it, copies the
/// other partitions on, and exits non-zero naming it at shutdown; with
/// `--on.source.gap skip` it continues after the gap, exactly once, logging
/// and counting what it skipped.
#[test]
fn source_truncation_is_a_named_gap_unless_skipped() {
    let bed = bed();
    let topic = bed.source.create_topic("edges-gap", 2);
    bed.source.produce(&topic, &records("first", 0, 100));
    bed.source.produce(&topic, &records("first", 1, 20));
    // Before eosmirror ever ran: offsets 0..30 of partition 0 disappear.
    bed.source.delete_records(&topic, 0, 30);

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start(&topic, &[]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    let first_output = mirror.output();
    assert!(
        !first_output.contains("were deleted") && !first_output.contains("skipping"),
        "a fresh start at the low watermark is not a gap:\n{first_output}"
    );
    assert_exact_copy(&bed.source, &bed.target, &topic);
    assert_eq!(
        partition_records(&bed.target, &topic, 0).len(),
        70,
        "the 70 records left after DeleteRecords"
    );
    let first_copy_p0 = partition_records(&bed.target, &topic, 0);

    // While eosmirror is stopped (it copied up to source offset 100): 50 new
    // records at offsets 100..150, of which 100..120 are deleted uncopied.
    bed.source.produce(&topic, &records("second", 0, 50));
    bed.source.produce(&topic, &records("second", 1, 10));
    let before_gap = by_partition(bed.source.read_all(&topic, Isolation::ReadCommitted));
    assert_eq!(bed.source.watermarks(&topic, 0), (30, 150));
    bed.source.delete_records(&topic, 0, 120);

    let gap = format!("{topic}-0: source records at offsets 100..120 were deleted");
    let metrics_address = support::free_local_address();
    let mut mirror = setup.start(&topic, &["--metrics.address", &metrics_address]);
    // The gap stops partition 0 only: partition 1 is copied on.
    wait_for_counts(
        &bed.target,
        &topic,
        &BTreeMap::from([(0, 70), (1, 30)]),
        &mut mirror,
    );
    mirror.wait_until(
        EXIT_LIMIT,
        Duration::from_millis(200),
        || reports_only_partition_0_stopped(&metrics_address, &topic),
        |output| {
            format!(
                "partition 0 was never reported stopped:\n{}",
                tail(output, 40)
            )
        },
    );
    // A stopped partition makes the instance not ready, but it is live:
    // restarting it would only stop the partition again.
    let (live, why) = support::http_get(&metrics_address, "/healthz");
    assert_eq!(live, 200, "/healthz with a stopped partition: {why}");
    let (ready, why) = support::http_get(&metrics_address, "/readyz");
    assert_eq!(ready, 503, "/readyz with a stopped partition: {why}");
    assert!(
        why.contains(&gap),
        "/readyz names the stopped partition: {why}"
    );
    let code = mirror.stop(EXIT_LIMIT);
    let output = mirror.output();
    assert_ne!(
        code, 0,
        "a run with a stopped partition must not exit 0:\n{output}"
    );
    assert!(
        output.contains(&gap),
        "the error must name topic, partition and lost offsets ({gap:?}):\n{output}"
    );
    assert!(
        output.contains("eosmirror: error:") && output.contains("1 partition(s) stopped"),
        "the stopped partition is the run's error:\n{output}"
    );
    // Nothing was skipped: partition 0 of the target is as the first run left it.
    assert_same_records(
        "target partition 0 after the refused gap",
        &first_copy_p0,
        &partition_records(&bed.target, &topic, 0),
    );

    // Opting in: the copy continues after the gap.
    let metrics_address = support::free_local_address();
    let mut mirror = setup.start(
        &topic,
        &[
            "--on.source.gap",
            "skip",
            "--metrics.address",
            &metrics_address,
        ],
    );
    let want = BTreeMap::from([(0, 70 + 30), (1, 30)]);
    wait_for_counts(&bed.target, &topic, &want, &mut mirror);
    let metrics = support::scrape_metrics(&metrics_address);
    assert_eq!(
        support::metric_value(
            &metrics,
            "eosmirror_source_gap_offsets_total",
            &[("topic", &topic), ("partition", "0")]
        ),
        Some(20.0),
        "the skipped offsets are counted:\n{metrics}"
    );
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    let skip_output = mirror.output();
    assert!(
        skip_output.lines().any(|line| line.contains("skipping")
            && line.contains(&format!("partition={topic}-0"))
            && line.contains("first=100")
            && line.contains("end_exclusive=120")),
        "the skip is logged with the partition and the lost offsets:\n{skip_output}"
    );

    // Partition 0 of the target: the first copy, then the source records
    // after the gap; partition 1 is a plain exact copy.
    let expected_p0: Vec<ReadRecord> = before_gap[&0]
        .iter()
        .filter(|r| r.offset < 100 || r.offset >= 120)
        .cloned()
        .collect();
    let target_p0 = partition_records(&bed.target, &topic, 0);
    assert_same_records(
        "target partition 0 after the skip",
        &expected_p0,
        &target_p0,
    );
    assert_same_records(
        "target partition 0 tail = source partition 0 now",
        &partition_records(&bed.source, &topic, 0),
        &target_p0[70..],
    );
    assert_same_records(
        "target partition 1",
        &partition_records(&bed.source, &topic, 1),
        &partition_records(&bed.target, &topic, 1),
    );

    // The skipped position was committed: a default (fail) run finds no gap
    // and copies what follows exactly once.
    bed.source.produce(&topic, &records("third", 0, 5));
    let mut mirror = setup.start(&topic, &[]);
    let want = BTreeMap::from([(0, 70 + 30 + 5), (1, 30)]);
    wait_for_counts(&bed.target, &topic, &want, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert_same_records(
        "target partition 0 tail after the last run",
        &partition_records(&bed.source, &topic, 0),
        &partition_records(&bed.target, &topic, 0)[70..],
    );
}

/// Whether eosmirror's metrics report `topic`-0 stopped (and no other).
fn reports_only_partition_0_stopped(metrics_address: &str, topic: &str) -> Option<()> {
    let metrics = support::scrape_metrics(metrics_address);
    let stopped = |p: &str| {
        support::metric_value(
            &metrics,
            "eosmirror_partition_stopped",
            &[("topic", topic), ("partition", p)],
        )
    };
    let total = support::metric_value(&metrics, "eosmirror_partitions_stopped", &[]);
    (stopped("0") == Some(1.0) && stopped("1").is_none() && total == Some(1.0)).then_some(())
}

/// Records deleted at the source while eosmirror runs, before it copied
/// them (retention catching up with a slow or paused mirror): the same named
/// gap as at start-up, not a silent stall.
#[test]
fn source_truncation_while_running_is_a_named_gap() {
    let bed = bed();
    let topic = bed.source.create_topic("edges-gap-live", 1);
    bed.source.produce(&topic, &records("first", 0, 20));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start(&topic, &["--log", "info,eosmirror=debug"]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);

    // Paused, eosmirror cannot copy what arrives now; part of it is deleted
    // before it resumes. A fetch it sent just before the pause is still
    // answered by the broker (into the socket buffer) when data arrives, so
    // let that long poll (fetch.wait.max.ms, 500 ms) run out empty first.
    mirror.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(3));
    bed.source.produce(&topic, &records("second", 0, 30));
    bed.source.delete_records(&topic, 0, 35);
    mirror.signal(libc::SIGCONT);

    let code = mirror.wait_exit(EXIT_LIMIT);
    let output = mirror.output();
    assert_ne!(code, 0, "a source gap must stop eosmirror:\n{output}");
    let gap = format!("{topic}-0: source records at offsets 20..35 were deleted");
    assert!(
        output.contains(&gap),
        "the error must name topic, partition and lost offsets ({gap:?}):\n{output}"
    );
    assert_eq!(
        partition_records(&bed.target, &topic, 0).len(),
        20,
        "nothing past the gap was copied"
    );

    // Opting in, the copy continues after the gap: offsets 35..50.
    let mut mirror = setup.start(&topic, &["--on.source.gap", "skip"]);
    wait_for_counts(
        &bed.target,
        &topic,
        &BTreeMap::from([(0, 20 + 15)]),
        &mut mirror,
    );
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert_same_records(
        "target partition 0 after the skip",
        &partition_records(&bed.source, &topic, 0),
        &partition_records(&bed.target, &topic, 0)[20..],
    );
}

/// A record the target refuses for good (here larger than the target
/// topic's `max.message.bytes`, 1 MB by default; librdkafka sends a record
/// larger than its batch size in a batch of its own) stops its partition,
/// named with the source offset and the broker's reason, and nothing of the
/// partition from it on is copied; the lane's other partition is copied on.
/// librdkafka makes the transaction abortable and fails the records it had
/// queued with it, so the refusal must be told apart from those, not
/// retried for ever.
#[test]
fn a_record_the_target_refuses_stops_its_partition_only() {
    refused_record_stops_its_partition_only(
        "edges-refused",
        100,
        300,
        &["--commit.interval.ms", "100"],
    );
}

/// As above, with the lane still sending the batch's later records when
/// the refusal arrives: librdkafka then refuses those sends too (the
/// transaction is abortable), and the refusal behind them must still be
/// found, not aborted and re-read for ever. The throttle spaces the sends
/// 100 ms apart inside a 3 s transaction.
#[test]
fn a_refusal_met_while_the_batch_is_still_sent_stops_its_partition() {
    refused_record_stops_its_partition_only(
        "edges-refused-mid-batch",
        20,
        20,
        &[
            "--throttle.records.per.sec",
            "10",
            "--commit.interval.ms",
            "3000",
        ],
    );
}

/// Copies a topic of a 1.5 MB record after `before` ones in partition 0
/// and `other` records in partition 1 (see [`with_a_big_record`]) with
/// `extra` flags to a target topic with the default `max.message.bytes`:
/// partition 0 stops at its big record, partition 1 is copied whole.
fn refused_record_stops_its_partition_only(
    name: &str,
    before: usize,
    other: usize,
    extra: &[&str],
) {
    let bed = bed();
    let topic = &with_a_big_record(name, before, 1_500_000, other);
    // Created before eosmirror would carry the source's limit.
    bed.target.create_topic_with(topic, 2, &[]);

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let metrics_address = support::free_local_address();
    let mut args = vec![
        "--lanes",
        "1",
        "--metrics.address",
        &metrics_address,
        "--refresh.interval.ms",
        "1000",
    ];
    args.extend_from_slice(extra);
    let mut mirror = setup.start_bare(topic, &args);
    let topic = topic.to_string();
    wait_for_partition_0_stopped(&mut mirror, &metrics_address, &topic);
    wait_for_partition(&bed.source, &bed.target, &topic, 1, &mut mirror);
    let code = mirror.stop(EXIT_LIMIT);
    let output = mirror.output();
    assert_ne!(
        code, 0,
        "a run with a stopped partition exited 0:\n{output}"
    );
    let refusal = format!("{topic}-0: the target rejected the copy of source offset {before}");
    assert!(
        output.contains(&refusal),
        "the error must name the partition and the offset ({refusal:?}):\n{}",
        tail(&output, 40)
    );
    assert_copied_before(&bed.source, &bed.target, &topic, before);
}

/// With `check.crcs=true` librdkafka reports a source record batch whose
/// checksum does not match (here a byte flipped in the source broker's
/// segment file) and goes on past it. The run stops naming the problem
/// instead of copying the batches after it without its records.
#[test]
fn a_corrupt_source_batch_stops_the_run_instead_of_being_skipped() {
    // Its middle is inside the checksummed part.
    corrupt_source_batch_stops_the_run("edges-corrupt", |bytes, second, len| {
        let middle = second + 12 + len / 2;
        (middle, !bytes[middle])
    });
}

/// A batch whose format version (magic byte, outside the checksum) librdkafka
/// does not know, here 3: it reports the batch as not implemented and goes
/// on past it, which must stop the run as well.
#[test]
fn a_source_batch_of_an_unknown_format_stops_the_run_instead_of_being_skipped() {
    // After the base offset (8 bytes), the length (4) and the leader epoch (4).
    corrupt_source_batch_stops_the_run("edges-magic", |_, second, _| (second + 16, 3));
}

/// Writes the byte `corrupt` returns at the position it returns (given the
/// segment's bytes, where the second of three batches starts and its
/// length) into a source partition's segment, then copies it.
fn corrupt_source_batch_stops_the_run(
    name: &str,
    corrupt: impl Fn(&[u8], usize, usize) -> (usize, u8),
) {
    let bed = bed();
    let Some(source_logs) = support::local_log_dir("source") else {
        return;
    };
    let topic = bed.source.create_topic(name, 1);
    for tag in ["a", "b", "c"] {
        bed.source.produce(&topic, &records(tag, 0, 50));
    }
    assert_eq!(bed.source.watermarks(&topic, 0), (0, 150));
    // Read before the damage: the batch may be unreadable after it.
    let source_p0 = partition_records(&bed.source, &topic, 0);
    // The second batch: v2 batches start with an 8-byte base offset and a
    // 4-byte length of the rest.
    let segment = source_logs.join(format!("{topic}-0/00000000000000000000.log"));
    let mut log = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&segment)
        .unwrap_or_else(|e| panic!("{}: {e}", segment.display()));
    let mut bytes = Vec::new();
    log.read_to_end(&mut bytes).unwrap();
    let batch_len = |at: usize| i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap());
    let second = 12 + batch_len(0) as usize;
    let (at, byte) = corrupt(&bytes, second, batch_len(second) as usize);
    log.seek(SeekFrom::Start(at as u64)).unwrap();
    log.write_all(&[byte]).unwrap();
    log.sync_all().unwrap();

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&setup.consumer_config)
        .and_then(|mut f| f.write_all(b"check.crcs=true\n"))
        .unwrap();
    let mut mirror = setup.start(&topic, &[]);
    let code = mirror.wait_exit(EXIT_LIMIT);
    let output = mirror.output();
    assert_ne!(code, 0, "{}", tail(&output, 30));
    assert!(
        output.contains("could not read what a source broker sent")
            && output.contains("kafka-dump-log.sh"),
        "the stop does not name the unreadable batch:\n{}",
        tail(&output, 30)
    );
    // Nothing of the third batch: at most the first one.
    let copied = partition_records(&bed.target, &topic, 0);
    assert!(copied.len() <= 50, "{} copied", copied.len());
    assert_same_records("target partition 0", &source_p0[..copied.len()], &copied);
    // No other test's broker restart should meet the damaged segment.
    bed.source.delete_topic(&topic);
}

/// A source topic of two partitions: `before` records, one of `big_bytes`
/// (incompressible, so that no codec shrinks it) and 100 more in partition
/// 0; `other` records in partition 1.
fn with_a_big_record(name: &str, before: usize, big_bytes: usize, other: usize) -> String {
    let source = &bed().source;
    let topic = unique_name(name);
    let limit = (big_bytes + (1 << 20)).to_string();
    source.create_topic_with(&topic, 2, &[("max.message.bytes", &limit)]);
    source.produce(&topic, &records("before", 0, before));
    let big = TestRecord {
        partition: 0,
        key: Some(b"big".to_vec()),
        value: Some(incompressible(big_bytes)),
        headers: vec![],
        timestamp: None,
    };
    source.produce_with(&topic, &[big], &[("message.max.bytes", &limit)]);
    source.produce(&topic, &records("after", 0, 100));
    source.produce(&topic, &records("other", 1, other));
    topic
}

/// Waits until the instance's metrics report `topic`-0 stopped (and no
/// other partition).
fn wait_for_partition_0_stopped(mirror: &mut Mirror, metrics_address: &str, topic: &str) {
    mirror.wait_until(
        COPY_LIMIT,
        Duration::from_millis(200),
        || reports_only_partition_0_stopped(metrics_address, topic),
        |output| {
            format!(
                "partition 0 was never reported stopped:\n{}",
                tail(output, 40)
            )
        },
    );
}

/// Waits until the target's `partition` holds exactly the source's.
fn wait_for_partition(
    source: &Cluster,
    target: &Cluster,
    topic: &str,
    partition: i32,
    mirror: &mut Mirror,
) {
    let want = partition_records(source, topic, partition);
    mirror.wait_until(
        COPY_LIMIT,
        Duration::from_millis(500),
        || (partition_records(target, topic, partition).len() == want.len()).then_some(()),
        |output| {
            format!(
                "{topic}-{partition} was not copied whole:\n{}",
                tail(output, 40)
            )
        },
    );
    assert_same_records(
        &format!("target partition {partition}"),
        &want,
        &partition_records(target, topic, partition),
    );
}

/// The target's partition 0 holds a prefix of the source's first `stop`
/// records: nothing at or past the record that stopped it.
fn assert_copied_before(source: &Cluster, target: &Cluster, topic: &str, stop: usize) {
    let source_p0 = partition_records(source, topic, 0);
    let copied = partition_records(target, topic, 0);
    assert!(copied.len() <= stop, "{} copied", copied.len());
    assert_same_records("target partition 0", &source_p0[..copied.len()], &copied);
}

/// A record whose value is larger than a lane's producer queue (a quarter
/// of `--max.memory.bytes` split over the lanes) can never be queued:
/// librdkafka answers "queue full" however long the lane waits. It stops
/// its partition, named with the memory bound to use, instead of holding
/// the lane's other partitions for ever; with that bound the copy is exact.
#[test]
fn a_record_larger_than_the_producer_queue_stops_its_partition_with_the_fix() {
    let bed = bed();
    let topic = with_a_big_record("edges-too-large", 10, 3_000_000, 100);

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let metrics_address = support::free_local_address();
    // One lane, 2 MiB of producer queue.
    let mut mirror = setup.start(
        &topic,
        &[
            "--lanes",
            "1",
            "--max.memory.bytes",
            "8MiB",
            "--metrics.address",
            &metrics_address,
        ],
    );
    wait_for_partition_0_stopped(&mut mirror, &metrics_address, &topic);
    wait_for_partition(&bed.source, &bed.target, &topic, 1, &mut mirror);
    let code = mirror.stop(EXIT_LIMIT);
    let output = mirror.output();
    assert_ne!(
        code, 0,
        "a run with a stopped partition exited 0:\n{output}"
    );
    assert_copied_before(&bed.source, &bed.target, &topic, 10);
    let named = format!(
        "{topic}-0: the record at source offset 10 has a value of 3000000 bytes, more than a lane's producer queue holds (2097152 bytes"
    );
    assert!(
        output.contains(&named),
        "{named:?} missing:\n{}",
        tail(&output, 40)
    );
    assert!(
        output.contains("--max.memory.bytes of at least 12MiB"),
        "{}",
        tail(&output, 40)
    );

    let mut mirror = setup.start(&topic, &["--lanes", "1", "--max.memory.bytes", "12MiB"]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

/// With a pattern `--include`, topics created while eosmirror runs and
/// partitions added to a replicated source topic are picked up at the next
/// refresh: copied exactly, target topics created or grown to match.
/// A transactional source ends each transaction with a commit marker after
/// its records. The copy's position goes past it even when no record
/// follows, so a group caught up at the source's end translates with
/// nothing to read again, and once retention (here DeleteRecords up to the
/// end) has deleted the records and the marker, the next run finds no gap.
#[test]
fn a_deleted_trailing_transaction_marker_is_no_gap() {
    let bed = bed();
    let topic = bed.source.create_topic("edges-marker", 1);
    bed.source
        .produce_transaction(&topic, &records("first", 0, 10), TxnOutcome::Commit);
    let (_, end) = bed.source.watermarks(&topic, 0);
    assert_eq!(end, 11, "10 records and the commit marker");
    let group = unique_name("caught-up");
    bed.source.commit_group(&group, &[(&topic, 0, end)]);

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let metrics = support::free_local_address();
    let mut mirror = setup.start(
        &topic,
        &[
            "--groups.sync",
            &group,
            "--groups.sync.interval.secs",
            "1",
            "--metrics.address",
            &metrics,
        ],
    );
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    mirror.wait_until(
        Duration::from_secs(30),
        Duration::from_millis(200),
        || {
            let scraped = support::scrape_metrics(&metrics);
            let rereads =
                support::metric_value(&scraped, "eosmirror_group_rereads", &[("group", &group)]);
            (rereads == Some(0.0)).then_some(())
        },
        |output| {
            format!(
                "the group at the source's end kept a re-read count: {}\n{}",
                support::scrape_metrics(&metrics),
                tail(output, 40)
            )
        },
    );
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());

    bed.source.delete_records(&topic, 0, end);
    bed.source
        .produce_transaction(&topic, &records("second", 0, 5), TxnOutcome::Commit);
    let mut mirror = setup.start(&topic, &[]);
    wait_for_counts(&bed.target, &topic, &BTreeMap::from([(0, 15)]), &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    let output = mirror.output();
    assert!(
        !output.contains("were deleted") && !output.contains("skipping"),
        "only a marker was deleted past the copy:\n{output}"
    );
    let copied: Vec<_> = partition_records(&bed.target, &topic, 0)
        .iter()
        .map(|r| r.value.clone())
        .collect();
    let produced: Vec<_> = records("first", 0, 10)
        .into_iter()
        .chain(records("second", 0, 5))
        .map(|r| r.value)
        .collect();
    assert_eq!(copied, produced);
}

#[test]
fn new_topics_and_partitions_are_picked_up_while_running() {
    let bed = bed();
    let prefix = unique_name("edges-grow");
    let existing = format!("{prefix}-existing");
    let later = format!("{prefix}-later");
    bed.source.create_topic_with(&existing, 2, &[]);
    for p in 0..2 {
        bed.source.produce(&existing, &records("before", p, 25));
    }

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start(&format!("{prefix}-.*"), &["--target.add.partitions"]);
    wait_for_copy(&bed.source, &bed.target, &existing, COPY_LIMIT, &mut mirror);
    assert_eq!(bed.target.partition_count(&existing), Some(2));

    // A new matching topic, and two more partitions for the existing one.
    bed.source.create_topic_with(&later, 3, &[]);
    for p in 0..3 {
        bed.source
            .produce(&later, &records("later", p, 15 + p as usize));
    }
    bed.source.add_partitions(&existing, 4);
    for p in 0..4 {
        bed.source
            .produce(&existing, &records("after", p, 10 + p as usize));
    }

    wait_for_copy(&bed.source, &bed.target, &later, COPY_LIMIT, &mut mirror);
    wait_for_copy(&bed.source, &bed.target, &existing, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert_exact_copy(&bed.source, &bed.target, &later);
    assert_exact_copy(&bed.source, &bed.target, &existing);
    assert_eq!(bed.target.partition_count(&later), Some(3));
    assert_eq!(bed.target.partition_count(&existing), Some(4));
    let output = mirror.output();
    assert!(
        output.contains("added partitions to target topic"),
        "growing the target topic is logged:\n{output}"
    );
}

/// `--include` with ','-separated alternatives (MirrorMaker style, spaces
/// allowed) and `--exclude`: exactly the selected topics are created on the
/// target; internal topics (`__*`) never, even when named explicitly.
#[test]
fn include_and_exclude_select_exactly_the_named_topics() {
    let bed = bed();
    let p = unique_name("edges-filter");
    let name = |suffix: &str| format!("{p}-{suffix}");
    let internal = format!("__{p}-internal");
    let selected = [name("a"), name("b"), name("tmp-1")];
    let not_selected = [name("ab"), name("c"), name("tmp-2"), name("a-b")];
    for (i, topic) in selected.iter().chain(&not_selected).enumerate() {
        bed.source.create_topic_with(topic, 1 + (i % 2) as i32, &[]);
        bed.source.produce(topic, &records(topic, 0, 5));
    }
    bed.source.create_topic_with(&internal, 1, &[]);
    bed.source.produce(&internal, &records("internal", 0, 5));

    let include = format!(
        "{}, {},{}-tmp.*,{internal},__consumer_offsets,__transaction_state",
        name("a"),
        name("b"),
        p
    );
    let exclude = name("tmp-2");
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start(&include, &["--exclude", &exclude]);
    for topic in &selected {
        wait_for_copy(&bed.source, &bed.target, topic, COPY_LIMIT, &mut mirror);
    }
    // Target topics are created in one refresh, before any copying: a wrongly
    // selected topic would exist by now. Give one more refresh anyway.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    for topic in &selected {
        assert_exact_copy(&bed.source, &bed.target, topic);
        assert_eq!(
            bed.target.partition_count(topic),
            bed.source.partition_count(topic),
            "{topic}"
        );
    }
    for topic in not_selected.iter().chain([&internal]) {
        assert_eq!(
            bed.target.partition_count(topic),
            None,
            "{topic} is not selected but was created on the target"
        );
    }
    let output = mirror.output();
    assert!(
        !output.contains("partition joins its lane partition=__"),
        "an internal topic was replicated:\n{output}"
    );
    let selected_partitions: i32 = selected
        .iter()
        .map(|t| bed.source.partition_count(t).unwrap())
        .sum();
    assert_eq!(
        output.matches("partition joins its lane").count(),
        selected_partitions as usize,
        "every partition of the selected topics joins a lane, once:\n{output}"
    );
}

/// A target topic made beforehand with LogAppendTime would replace every
/// copy's timestamp with its append time: refused before anything is
/// copied, naming the topic and the command that fixes it; after the fix
/// the copy is exact, timestamps included.
#[test]
fn a_target_topic_that_stamps_append_times_is_refused_until_set_to_create_time() {
    let bed = bed();
    let topic = unique_name("edges-append-time");
    bed.source.create_topic_with(&topic, 1, &[]);
    bed.source.produce(&topic, &records("stamped", 0, 20));
    bed.target
        .create_topic_with(&topic, 1, &[("message.timestamp.type", "LogAppendTime")]);

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let (code, output) = setup.run_to_exit(&topic, &[], EXIT_LIMIT);
    assert_ne!(code, 0, "{output}");
    assert!(
        output.contains(&format!(
            "target topic(s) {topic} have message.timestamp.type=LogAppendTime"
        )) && output.contains(&format!(
            "--entity-name {topic} --add-config message.timestamp.type=CreateTime"
        )),
        "{output}"
    );
    assert_eq!(bed.target.watermarks(&topic, 0), (0, 0), "{output}");

    bed.target
        .set_topic_config(&topic, "message.timestamp.type", "CreateTime");
    let mut mirror = setup.start(&topic, &[]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

/// Settings set on a source topic (retention, cleanup policy, size limits)
/// are set on the target topic eosmirror creates, and nothing else is but
/// CreateTime: the timestamp type is not carried (the copies keep the
/// source's timestamps, whatever the target broker's default).
#[test]
fn topic_settings_are_carried_to_the_created_target_topic() {
    let bed = bed();
    let topic = unique_name("edges-settings");
    let carried = [
        ("retention.ms", "123456789"),
        ("cleanup.policy", "compact"),
        ("max.message.bytes", "2000000"),
        ("min.compaction.lag.ms", "60000"),
        ("compression.type", "zstd"),
    ];
    let mut source_settings = carried.to_vec();
    source_settings.push(("message.timestamp.type", "LogAppendTime"));
    bed.source.create_topic_with(&topic, 2, &source_settings);
    bed.source.produce(&topic, &records("compact", 0, 20));
    bed.source.produce(&topic, &records("compact", 1, 20));
    // Larger than the broker's default limit (1 MB): only fits because
    // max.message.bytes is carried.
    let big = TestRecord {
        partition: 1,
        key: Some(b"big".to_vec()),
        // Incompressible, so that no codec brings it under 1 MB.
        value: Some(incompressible(1_500_000)),
        headers: vec![],
        timestamp: None,
    };
    bed.source
        .produce_with(&topic, &[big], &[("message.max.bytes", "2000000")]);

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start(&topic, &[]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert_exact_copy(&bed.source, &bed.target, &topic);

    let source_overrides = bed.source.topic_overrides(&topic);
    assert_eq!(
        source_overrides
            .get("message.timestamp.type")
            .map(String::as_str),
        Some("LogAppendTime"),
        "test setup: {source_overrides:?}"
    );
    let target_overrides = bed.target.topic_overrides(&topic);
    let expected: BTreeMap<String, String> = carried
        .iter()
        .chain(&[("message.timestamp.type", "CreateTime")])
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(
        target_overrides, expected,
        "the target topic's own settings must be exactly the carried source settings, and CreateTime"
    );
}

/// A source topic with a `max.message.bytes` far below 1 MB: its copy is
/// created with the same limit, which bounds each record batch the target
/// takes, not only each record. Small records sent fast fill batches of up
/// to librdkafka's `batch.size` (1 MB), which such a topic refuses whole.
#[test]
fn a_topic_with_a_small_batch_limit_is_copied_whole() {
    let bed = bed();
    let topic = unique_name("edges-small-batches");
    let limit = "20000";
    bed.source
        .create_topic_with(&topic, 1, &[("max.message.bytes", limit)]);
    let records: Vec<TestRecord> = (0..400)
        .map(|i| TestRecord {
            partition: 0,
            key: Some(format!("k{i}").into_bytes()),
            value: Some(incompressible(1000 + i)),
            headers: vec![],
            timestamp: None,
        })
        .collect();
    bed.source
        .produce_with(&topic, &records, &[("batch.size", "16384")]);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start(&topic, &[]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

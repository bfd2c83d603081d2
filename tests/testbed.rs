//! Proves the test bed itself: real brokers, real transactions, two clusters.
//! Every exactly-once test later relies on these facts holding.

mod support;

use rdkafka::Timestamp;
use support::{bed, Isolation, ReadRecord, TestRecord, TxnOutcome};

/// Records covering every field a copy must keep: null key, null value,
/// duplicate and binary headers, explicit old timestamps.
fn assorted_records(batch: &str, partitions: i32, count: usize) -> Vec<TestRecord> {
    (0..count)
        .map(|i| TestRecord {
            partition: i as i32 % partitions,
            key: (i % 5 != 0).then(|| format!("{batch}-key-{i}").into_bytes()),
            value: (i % 7 != 3).then(|| format!("{batch}-value-{i}").into_bytes()),
            headers: vec![
                ("h".to_string(), Some(vec![0, 159, 146, 150, i as u8])),
                ("h".to_string(), None),
                ("batch".to_string(), Some(batch.as_bytes().to_vec())),
            ],
            timestamp: Some(1_000_000_000_000 + i as i64),
        })
        .collect()
}

fn assert_same_records(read: &[ReadRecord], expected: &[TestRecord]) {
    assert_eq!(read.len(), expected.len(), "record count");
    // `read` is in partition then offset order; so is `expected` once sorted
    // stably by partition (writes within a partition keep their order).
    let mut expected: Vec<&TestRecord> = expected.iter().collect();
    expected.sort_by_key(|r| r.partition);
    for (got, want) in read.iter().zip(expected) {
        assert!(got.matches(want), "read {got:?}\nexpected {want:?}");
    }
}

#[test]
fn read_committed_sees_exactly_the_committed_transactions() {
    let target = &bed().target;
    let topic = target.create_topic("bed-txn", 3);
    let first = assorted_records("first", 3, 30);
    let aborted = assorted_records("aborted", 3, 21);
    let last = assorted_records("last", 3, 12);

    target.produce_transaction(&topic, &first, TxnOutcome::Commit);
    target.produce_transaction(&topic, &aborted, TxnOutcome::Abort);
    target.produce_transaction(&topic, &last, TxnOutcome::Commit);

    let committed = target.read_all(&topic, Isolation::ReadCommitted);
    let expected: Vec<TestRecord> = first.iter().chain(&last).cloned().collect();
    assert_same_records(&committed, &expected);
    assert!(committed
        .iter()
        .all(|r| matches!(r.timestamp, Timestamp::CreateTime(ms) if ms >= 1_000_000_000_000)));

    // Commit and abort markers occupy offsets: partition 0 got 10 committed,
    // then a marker, 7 aborted, a marker, 4 committed, a marker.
    let p0: Vec<i64> = committed
        .iter()
        .filter(|r| r.partition == 0)
        .map(|r| r.offset)
        .collect();
    let want_p0: Vec<i64> = (0..10).chain(19..23).collect();
    assert_eq!(p0, want_p0, "offsets of partition 0 under read_committed");

    let everything = target.read_all(&topic, Isolation::ReadUncommitted);
    let expected_all: Vec<TestRecord> =
        first.iter().chain(&aborted).chain(&last).cloned().collect();
    assert_same_records(&everything, &expected_all);
}

#[test]
fn plain_records_keep_every_field() {
    let source = &bed().source;
    let topic = source.create_topic("bed-plain", 2);
    let records = assorted_records("plain", 2, 20);
    source.produce(&topic, &records);
    assert_same_records(&source.read_all(&topic, Isolation::ReadCommitted), &records);
}

#[test]
fn the_two_clusters_are_independent() {
    let bed = bed();
    let topic = bed.source.create_topic("bed-independent", 4);
    assert_eq!(bed.source.partition_count(&topic), Some(4));
    assert_eq!(bed.target.partition_count(&topic), None);

    let on_target = bed.target.create_topic("bed-independent", 1);
    assert_eq!(bed.source.partition_count(&on_target), None);
}

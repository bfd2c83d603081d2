//! The independent copy checker (`eosmirror-chaos compare`) finds each kind
//! of difference, so a green check means something.

mod support;

use std::time::Duration;

use eosmirror_chaos::checker::{compare_topic, Difference, Side, TopicPair};
use support::{bed, unique_name, TestRecord, TxnOutcome};

fn records(n: usize) -> Vec<TestRecord> {
    (0..n)
        .map(|i| TestRecord {
            partition: 0,
            key: Some(format!("k{i}").into_bytes()),
            value: Some(format!("v{i}").into_bytes()),
            headers: vec![("h".into(), Some(vec![i as u8]))],
            timestamp: Some(1_600_000_000_000 + i as i64),
        })
        .collect()
}

/// Writes `source_records` to a new topic on the source and `target_records`
/// to the same-named topic on the target, then compares.
fn compare(source_records: &[TestRecord], target_records: &[TestRecord]) -> Option<Difference> {
    let bed = bed();
    let topic = unique_name("checker");
    bed.source.create_topic_with(&topic, 1, &[]);
    bed.target.create_topic_with(&topic, 1, &[]);
    bed.source.produce(&topic, source_records);
    bed.target
        .produce_transaction(&topic, target_records, TxnOutcome::Commit);
    let reports = compare_topic(
        &Side::new("source", &bed.source.bootstrap),
        &Side::new("target", &bed.target.bootstrap),
        &TopicPair {
            source: topic.clone(),
            target: topic.clone(),
        },
        Duration::from_secs(60),
    )
    .expect("compare");
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].source_records, source_records.len() as u64);
    assert_eq!(reports[0].target_records, target_records.len() as u64);
    reports[0].first_difference.clone()
}

#[test]
fn identical_sequences_are_exact() {
    assert_eq!(compare(&records(20), &records(20)), None);
}

#[test]
fn a_missing_tail_is_missing() {
    let all = records(20);
    assert_eq!(
        compare(&all, &all[..17]),
        Some(Difference::Missing {
            index: 17,
            source_offset: 17
        })
    );
}

#[test]
fn a_duplicate_is_unexpected() {
    let all = records(10);
    let mut doubled = all.clone();
    doubled.push(all[9].clone());
    // The target's 11th record sits at offset 10 (one transaction, marker after it).
    assert_eq!(
        compare(&all, &doubled),
        Some(Difference::Unexpected {
            index: 10,
            target_offset: 10
        })
    );
}

#[test]
fn an_altered_header_is_altered() {
    let all = records(10);
    let mut altered = all.clone();
    altered[4].headers[0].1 = Some(vec![99]);
    assert_eq!(
        compare(&all, &altered),
        Some(Difference::Altered {
            index: 4,
            source_offset: 4,
            target_offset: 4
        })
    );
}

#[test]
fn aborted_target_records_are_invisible() {
    let bed = bed();
    let topic = unique_name("checker-aborted");
    bed.source.create_topic_with(&topic, 1, &[]);
    bed.target.create_topic_with(&topic, 1, &[]);
    let all = records(6);
    bed.source.produce(&topic, &all);
    bed.target
        .produce_transaction(&topic, &all[..3], TxnOutcome::Commit);
    bed.target
        .produce_transaction(&topic, &all[3..], TxnOutcome::Abort);
    bed.target
        .produce_transaction(&topic, &all[3..], TxnOutcome::Commit);
    let reports = compare_topic(
        &Side::new("source", &bed.source.bootstrap),
        &Side::new("target", &bed.target.bootstrap),
        &TopicPair {
            source: topic.clone(),
            target: topic.clone(),
        },
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(reports[0].first_difference, None);
}

/// A record dropped from the middle, a swapped pair, and a change of each
/// field are each found at the first record they touch: the checker pairs
/// the n-th committed records and compares everything of them.
#[test]
fn every_field_and_every_place_is_compared() {
    let all = records(10);
    let altered_at_5 = Some(Difference::Altered {
        index: 5,
        source_offset: 5,
        target_offset: 5,
    });
    let mut dropped = all.clone();
    dropped.remove(5);
    let mut swapped = all.clone();
    swapped.swap(5, 6);
    let mut key = all.clone();
    key[5].key = Some(b"another key".to_vec());
    let mut value = all.clone();
    value[5].value = None;
    let mut timestamp = all.clone();
    timestamp[5].timestamp = timestamp[5].timestamp.map(|t| t + 1);
    for (change, target) in [
        ("dropped", dropped),
        ("swapped", swapped),
        ("key", key),
        ("value", value),
        ("timestamp", timestamp),
    ] {
        assert_eq!(compare(&all, &target), altered_at_5, "{change}");
    }
}

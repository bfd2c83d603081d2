//! Exact offset translation against real Kafka: `translate --apply`,
//! continuous group sync inside `run`, and `cutover`. A consumer of the same
//! group on the target must read exactly the records the source group had
//! not consumed: not one re-read, not one skipped, checked record by record.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eosmirror::wire::{InternalTopics, ProgressRecord};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use support::mirror::{assert_exact_copy, tail, wait_for_copy, Mirror, MirrorSetup};
use support::{
    bed, copy_offset, unique_name, Cluster, Isolation, OpenTransaction, ReadRecord, TestRecord,
    TxnOutcome,
};

/// What a consumer of `group` reads from its committed offsets to the end
/// of each partition (`read_committed`), per partition.
fn resume_as_group(
    cluster: &Cluster,
    group: &str,
    topic: &str,
    partitions: i32,
) -> BTreeMap<i32, Vec<ReadRecord>> {
    let start = cluster.group_offsets(group, topic, partitions);
    let consumer: BaseConsumer = cluster
        .client_config()
        .set("group.id", unique_name("reader"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .unwrap();
    let mut ends = BTreeMap::new();
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        let from = *start
            .get(&p)
            .unwrap_or_else(|| panic!("{group} has no offset for {topic}-{p}"));
        list.add_partition_offset(topic, p, Offset::Offset(from))
            .unwrap();
        ends.insert(
            p,
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(30))
                .unwrap()
                .1,
        );
    }
    consumer.assign(&list).unwrap();
    let mut out: BTreeMap<i32, Vec<ReadRecord>> =
        (0..partitions).map(|p| (p, Vec::new())).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let positions = consumer.position().unwrap();
        let done = ends.iter().all(|(p, end)| {
            matches!(positions.find_partition(topic, *p).map(|e| e.offset()), Some(Offset::Offset(o)) if o >= *end)
                || start[p] >= *end
        });
        if done {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "reading {topic} as {group} did not reach the end"
        );
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            let m = m.unwrap();
            out.get_mut(&m.partition())
                .unwrap()
                .push(ReadRecord::from_message(&m));
        }
    }
}

/// A record's content: key, value, headers, timestamp.
type Content = (
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
    Option<i64>,
);

/// Content only (offsets differ between source and target).
fn contents(records: &[ReadRecord]) -> Vec<Content> {
    records
        .iter()
        .map(|r| {
            (
                r.key.clone(),
                r.value.clone(),
                r.headers.clone(),
                r.timestamp_ms(),
            )
        })
        .collect()
}

/// The committed source records a group at `offset` has not consumed yet.
fn remaining(source: &[ReadRecord], partition: i32, offset: i64) -> Vec<ReadRecord> {
    source
        .iter()
        .filter(|r| r.partition == partition && r.offset >= offset)
        .cloned()
        .collect()
}

fn record(partition: i32, tag: &str, i: usize) -> TestRecord {
    TestRecord {
        partition,
        key: Some(format!("{tag}-k{i}").into_bytes()),
        value: Some(format!("{tag}-v{i}").into_bytes()),
        headers: vec![("i".into(), Some(i.to_string().into_bytes()))],
        timestamp: None,
    }
}

/// Offsets present in `[0, high)` but never returned, even uncommitted:
/// transaction markers.
fn markers(cluster: &Cluster, topic: &str, partition: i32, all: &[ReadRecord]) -> Vec<i64> {
    let (_, high) = cluster.watermarks(topic, partition);
    (0..high)
        .filter(|o| {
            !all.iter()
                .any(|r| r.partition == partition && r.offset == *o)
        })
        .collect()
}

#[test]
fn translate_apply_resumes_a_group_exactly_across_markers_aborts_and_compaction() {
    let bed = bed();
    // Transactional topic: plain, committed, aborted, committed, plain.
    let topic = bed.source.create_topic("groups-txn", 3);
    for p in 0..3 {
        let batch = |from: usize, to: usize| -> Vec<TestRecord> {
            (from..to).map(|i| record(p, "t", i)).collect()
        };
        bed.source.produce(&topic, &batch(0, 10));
        bed.source
            .produce_transaction(&topic, &batch(10, 15), TxnOutcome::Commit);
        bed.source
            .produce_transaction(&topic, &batch(15, 18), TxnOutcome::Abort);
        bed.source
            .produce_transaction(&topic, &batch(18, 23), TxnOutcome::Commit);
        bed.source.produce(&topic, &batch(23, 28));
    }
    // Compacted topic: older values of each key compacted away.
    let compacted = unique_name("groups-compact");
    bed.source.create_topic_with(
        &compacted,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "100"),
            ("min.cleanable.dirty.ratio", "0.001"),
            ("retention.ms", "-1"),
        ],
    );
    for round in 0..3 {
        let batch: Vec<TestRecord> = (0..10)
            .map(|k| TestRecord {
                partition: 0,
                key: Some(format!("key{k}").into_bytes()),
                value: Some(format!("round{round}").into_bytes()),
                headers: vec![],
                timestamp: None,
            })
            .collect();
        bed.source.produce(&compacted, &batch);
        std::thread::sleep(Duration::from_millis(300));
    }
    bed.source.produce(&compacted, &[record(0, "roll", 0)]);
    // The cleaner may take two passes (round 0, then round 1): wait for the
    // final state, 10 latest values plus the roll record, or the expected
    // copy below would be read from a log still being compacted.
    let deadline = Instant::now() + Duration::from_secs(120);
    while bed
        .source
        .read_all(&compacted, Isolation::ReadCommitted)
        .len()
        > 11
    {
        assert!(
            Instant::now() < deadline,
            "the broker did not compact {compacted} fully within 120 s"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    let compacted_source = bed.source.read_all(&compacted, Isolation::ReadCommitted);
    let first_kept = compacted_source[0].offset;
    assert!(first_kept > 0, "compaction left offset 0");

    let source = bed.source.read_all(&topic, Isolation::ReadCommitted);
    let all = bed.source.read_all(&topic, Isolation::ReadUncommitted);
    let aborted_offset = all
        .iter()
        .find(|r| r.partition == 1 && r.value.as_deref() == Some(&b"t-v15"[..]))
        .unwrap()
        .offset;
    let marker = markers(&bed.source, &topic, 2, &all)[0];
    // Offsets chosen to land on every kind of gap.
    let group = unique_name("group");
    let offsets = [
        (topic.as_str(), 0, 3),                  // a plain record
        (topic.as_str(), 1, aborted_offset),     // an aborted record
        (topic.as_str(), 2, marker),             // a commit marker
        (compacted.as_str(), 0, first_kept - 1), // a compacted-away record
    ];
    bed.source.commit_group(&group, &offsets);

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    setup.copy_and_check(&format!("{topic}|{compacted}"), &[], &[&topic, &compacted]);

    let (code, stdout, stderr) = setup.command("translate", &["--group", &group, "--apply"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(stdout.matches("(exact)").count(), 4, "{stdout}");
    assert_eq!(stdout.matches("[applied;").count(), 4, "{stdout}");

    let on_target = resume_as_group(&bed.target, &group, &topic, 3);
    for (t, p, o) in &offsets[..3] {
        let want = remaining(&source, *p, *o);
        assert!(!want.is_empty());
        assert_eq!(
            contents(&on_target[p]),
            contents(&want),
            "{t}-{p} from source offset {o}"
        );
    }
    let on_target = resume_as_group(&bed.target, &group, &compacted, 1);
    assert_eq!(
        contents(&on_target[&0]),
        contents(&remaining(&compacted_source, 0, first_kept - 1))
    );

    // Again: nothing to change.
    let (code, stdout, _) = setup.command("translate", &["--group", &group, "--apply"]);
    assert_eq!(code, 0);
    assert_eq!(stdout.matches("[unchanged;").count(), 4, "{stdout}");

    // A target group ahead is never moved back without --allow-rewind.
    let ahead = bed.target.group_offsets(&group, &topic, 3)[&0] + 2;
    bed.target.commit_group(&group, &[(&topic, 0, ahead)]);
    let (code, _, stderr) = setup.command("translate", &["--group", &group, "--apply"]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("backwards") && stderr.contains("--allow-rewind"),
        "{stderr}"
    );
    assert_eq!(
        bed.target.group_offsets(&group, &topic, 3)[&0],
        ahead,
        "nothing was committed"
    );
    let (code, _, stderr) = setup.command(
        "translate",
        &["--group", &group, "--apply", "--allow-rewind"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(bed.target.group_offsets(&group, &topic, 3)[&0] < ahead);

    // A group with active members on the target is not touched.
    let member = ActiveMember::join(&bed.target, &group, &topic);
    let (code, _, stderr) = setup.command("translate", &["--group", &group, "--apply"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("active member"), "{stderr}");
    drop(member);
}

/// Runs `translate` for `group` while `open` stays open, committing it 2 s
/// after the command starts; returns the command's JSON report (it must
/// succeed).
fn translate_while_open(
    setup: &MirrorSetup,
    group: &str,
    open: OpenTransaction,
) -> serde_json::Value {
    let committer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        open.commit();
    });
    let (code, report, output) = translate_json(setup, group);
    committer.join().unwrap();
    assert_eq!(code, 0, "{output}");
    report.unwrap_or_else(|| panic!("no report:\n{output}"))
}

/// `translate --group <group> --format json`: the exit code, the report
/// (none when standard output is not JSON), and standard output and error
/// for assertion messages.
fn translate_json(setup: &MirrorSetup, group: &str) -> (i32, Option<serde_json::Value>, String) {
    let (code, stdout, stderr) =
        setup.command("translate", &["--group", group, "--format", "json"]);
    let report = serde_json::from_str(&stdout).ok();
    (code, report, format!("{stdout}\n{stderr}"))
}

/// A partition idle for longer than the progress topic's retention has no
/// offset mapping left there. A group caught up on it must still translate
/// (from the compacted position topic) and resume exactly: nothing re-read,
/// nothing skipped when copying goes on.
#[test]
fn translate_idle_partitions_after_their_progress_records_expired() {
    let bed = bed();
    let topic = bed.source.create_topic("groups-idle", 2);
    let first: Vec<TestRecord> = (0..40).map(|i| record(i as i32 % 2, "old", i)).collect();
    bed.source.produce(&topic, &first);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    setup.copy_and_check(&topic, &[], &[&topic]);

    // The group consumed everything; then retention empties the progress topic.
    let group = unique_name("group-idle");
    let ends: Vec<(i32, i64)> = (0..2)
        .map(|p| (p, bed.source.watermarks(&topic, p).1))
        .collect();
    let offsets: Vec<(&str, i32, i64)> = ends
        .iter()
        .map(|&(p, end)| (topic.as_str(), p, end))
        .collect();
    bed.source.commit_group(&group, &offsets);
    let more: Vec<TestRecord> = (0..10).map(|i| record(i as i32 % 2, "new", i)).collect();
    expire_apply_and_resume(&setup, &topic, &group, &ends, &more, &[], 5);
}

/// Expires the copy's history as the progress topic's retention would
/// (every record of its partition 0 deleted), then translates `group` with
/// `--apply`: each of its partitions, at the `from` offsets, goes to the
/// replicated tail. Copying goes on with `more` (a run with `run_args`),
/// and the group reads on the target exactly the source records from its
/// offsets, `per_partition` of them in each partition.
fn expire_apply_and_resume(
    setup: &MirrorSetup,
    topic: &str,
    group: &str,
    from: &[(i32, i64)],
    more: &[TestRecord],
    run_args: &[&str],
    per_partition: usize,
) {
    let bed = bed();
    let progress = InternalTopics::for_alias(&setup.alias).progress;
    let (_, progress_end) = bed.target.watermarks(&progress, 0);
    bed.target.delete_records(&progress, 0, progress_end);

    let (code, stdout, stderr) = setup.command("translate", &["--group", group, "--apply"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(
        stdout.matches("(replicated tail").count(),
        from.len(),
        "{stdout}"
    );
    assert_eq!(stdout.matches("[applied;").count(), from.len(), "{stdout}");

    bed.source.produce(topic, more);
    setup.copy_and_check(topic, run_args, &[topic]);
    let source = bed.source.read_all(topic, Isolation::ReadCommitted);
    let on_target = resume_as_group(&bed.target, group, topic, from.len() as i32);
    for &(p, offset) in from {
        assert_eq!(
            contents(&on_target[&p]),
            contents(&remaining(&source, p, offset)),
            "{topic}-{p} from source offset {offset}"
        );
        assert_eq!(on_target[&p].len(), per_partition);
    }
}

/// A group caught up on a source transaction's commit marker (a consumer
/// commits the offset after its last record, the marker's) translates to
/// the replicated tail after the progress topic's retention deleted the
/// history of the copies: the position record says where the copies end,
/// so nothing is known to lie between them and the position past the
/// marker. Copying goes on and the group reads exactly the new records.
#[test]
fn a_group_on_the_marker_after_the_last_copy_translates_after_the_history_expired() {
    let bed = bed();
    let topic = bed.source.create_topic("groups-on-marker", 2);
    let first: Vec<TestRecord> = (0..10).map(|i| record(0, "txn", i)).collect();
    bed.source
        .produce_transaction(&topic, &first, TxnOutcome::Commit);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    // One lane; partition 1's record is copied after partition 0's
    // marker was read, so by then the lane has recorded the position past
    // the marker (waited for below).
    let mut mirror = setup.start(&topic, &["--lanes", "1"]);
    for more in [vec![], vec![record(1, "plain", 0)]] {
        bed.source.produce(&topic, &more);
        wait_for_copy(
            &bed.source,
            &bed.target,
            &topic,
            Duration::from_secs(90),
            &mut mirror,
        );
    }
    let position_topic = InternalTopics::for_alias(&setup.alias).position;
    let position_of_0 = || {
        bed.target
            .read_all(&position_topic, Isolation::ReadCommitted)
            .into_iter()
            .filter_map(|r| r.value)
            .map(|value| ProgressRecord::decode(&value).unwrap())
            .rfind(|p| p.source.topic == topic && p.source.partition == 0)
    };
    let position = mirror.wait_until(
        Duration::from_secs(60),
        Duration::from_millis(500),
        || position_of_0().filter(|p| p.next_source_offset == 11),
        |out| {
            format!(
                "partition 0's position never moved past its marker to 11: {:?}\n{out}",
                position_of_0()
            )
        },
    );
    assert_eq!((position.copies_end, position.next_target_offset), (10, 10));
    assert_eq!(
        mirror.stop(Duration::from_secs(60)),
        0,
        "{}",
        mirror.output()
    );

    let group = unique_name("group-on-marker");
    let from = [(0, 10), (1, 1)];
    let offsets: Vec<(&str, i32, i64)> =
        from.iter().map(|&(p, o)| (topic.as_str(), p, o)).collect();
    bed.source.commit_group(&group, &offsets);
    let more: Vec<TestRecord> = (0..6).map(|i| record(i as i32 % 2, "new", i)).collect();
    expire_apply_and_resume(&setup, &topic, &group, &from, &more, &["--lanes", "1"], 3);
}

/// Retention of one lane's history says nothing of another lane's. A
/// group behind a partition's first copy (the source's retention took
/// those records before they were copied) translates to that copy when
/// the partition's lane kept all its history, even though the history of
/// the group's other partition, in another lane, expired; that one is
/// refused as expired.
#[test]
fn one_lanes_expired_history_does_not_expire_the_partitions_of_another() {
    let bed = bed();
    let topic = bed.source.create_topic("groups-lane-expiry", 2);
    let records: Vec<TestRecord> = (0..40).map(|i| record(i as i32 % 2, "r", i)).collect();
    bed.source.produce(&topic, &records);
    bed.source.delete_records(&topic, 1, 10);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    // Two lanes: a topic's partitions go round-robin, one to each.
    setup.copy_and_check(&topic, &["--lanes", "2"], &[&topic]);

    let progress = InternalTopics::for_alias(&setup.alias).progress;
    let lane_of_partition_0 = bed
        .target
        .read_all(&progress, Isolation::ReadCommitted)
        .into_iter()
        .find(|r| {
            let record = ProgressRecord::decode(r.value.as_deref().unwrap_or_default()).unwrap();
            record.source.topic == topic && record.source.partition == 0
        })
        .expect("a progress record of partition 0")
        .partition;
    let (_, end) = bed.target.watermarks(&progress, lane_of_partition_0);
    bed.target
        .delete_records(&progress, lane_of_partition_0, end);

    let group = unique_name("lane-expiry");
    bed.source
        .commit_group(&group, &[(&topic, 0, 5), (&topic, 1, 5)]);
    let (_, report, output) = translate_json(&setup, &group);
    let report = report.unwrap_or_else(|| panic!("{output}"));
    let partition = |p: i64| {
        report["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["partition"].as_i64() == Some(p))
            .unwrap_or_else(|| panic!("no partition {p}: {report}"))
            .clone()
    };
    let expired = partition(0);
    assert!(
        expired["error"]
            .as_str()
            .is_some_and(|e| e.contains("retention")),
        "{report}"
    );
    // Source offset 10, partition 1's first copy, is at target offset 0.
    let kept = partition(1);
    assert_eq!(
        kept["translation"]["target_offset"].as_i64(),
        Some(0),
        "{report}"
    );
}

/// A partition first copied from past its offset 0 (records deleted on the
/// source before eosmirror saw them) has all its history in its lane's
/// partition of the progress topic, from the claim that began it, even
/// when retention has deleted other partitions' older records there: a
/// group before its first copy translates to that copy, not "expired".
#[test]
fn a_history_begun_after_the_lanes_oldest_records_expired_is_complete() {
    let bed = bed();
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    // One lane: both topics' histories share the progress partition.
    let older = bed.source.create_topic("groups-lane-older", 1);
    let records: Vec<TestRecord> = (0..10).map(|i| record(0, "o", i)).collect();
    bed.source.produce(&older, &records);
    setup.copy_and_check(&older, &["--lanes", "1"], &[&older]);
    let progress = InternalTopics::for_alias(&setup.alias).progress;
    let (_, end) = bed.target.watermarks(&progress, 0);
    bed.target.delete_records(&progress, 0, end);

    let later = bed.source.create_topic("groups-lane-later", 1);
    let records: Vec<TestRecord> = (0..20).map(|i| record(0, "l", i)).collect();
    bed.source.produce(&later, &records);
    bed.source.delete_records(&later, 0, 10);
    setup.copy_and_check(&later, &["--lanes", "1"], &[&later]);

    let group = unique_name("begun-later");
    bed.source.commit_group(&group, &[(&later, 0, 5)]);
    let (code, report, output) = translate_json(&setup, &group);
    let report = report.unwrap_or_else(|| panic!("{output}"));
    assert_eq!(code, 0, "{report}");
    // Source offset 10, the first copy, is at target offset 0.
    let translation = &report["partitions"][0]["translation"];
    assert_eq!(translation["target_offset"].as_i64(), Some(0), "{report}");
    assert_eq!(translation["kind"], "exact", "{report}");
    // verify reads the whole history alike: complete, so the copy is
    // checked from the source's first record, not "unverifiable".
    let (code, stdout, stderr) = setup.command("verify", &["--include", &later]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("verdict: EXACT"), "{stdout}");
}

/// A progress topic deleted and created again (by `run`, which finds it
/// missing) starts empty, not where retention would have left it: a group
/// offset among the copies made before is refused as expired, not
/// translated to the first copy after (which would skip the records in
/// between); an offset copied since translates exactly.
#[test]
fn a_group_behind_a_progress_topic_deleted_and_created_again_is_refused_as_expired() {
    let bed = bed();
    let topic = bed.source.create_topic("groups-progress-recreated", 1);
    let old: Vec<TestRecord> = (0..20).map(|i| record(0, "old", i)).collect();
    bed.source.produce(&topic, &old);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    setup.copy_and_check(&topic, &[], &[&topic]);

    let progress = InternalTopics::for_alias(&setup.alias).progress;
    bed.target.delete_topic(&progress);
    let new: Vec<TestRecord> = (0..10).map(|i| record(0, "new", i)).collect();
    bed.source.produce(&topic, &new);
    let output = setup.copy_and_check(&topic, &[], &[&topic]);
    assert!(
        bed.target.partition_count(&progress).is_some(),
        "run did not create the progress topic again:\n{output}"
    );

    let source = bed.source.read_all(&topic, Isolation::ReadCommitted);
    let target = bed.target.read_all(&topic, Isolation::ReadCommitted);
    for (offset, expired) in [(5, true), (25, false)] {
        let group = unique_name("progress-recreated");
        bed.source.commit_group(&group, &[(&topic, 0, offset)]);
        let (_, report, output) = translate_json(&setup, &group);
        let report = report.unwrap_or_else(|| panic!("{output}"));
        let partition = &report["partitions"][0];
        if expired {
            assert!(
                partition["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("deleted and created again")),
                "source offset {offset}: {report}"
            );
        } else {
            assert_eq!(
                partition["translation"]["target_offset"].as_i64(),
                Some(copy_offset(&source, &target, 0, offset)),
                "source offset {offset}: {report}"
            );
        }
    }
}

/// A copy the target deleted (its retention, here DeleteRecords) is no
/// place to move a group to: a consumer there would skip what it has not
/// read, by its auto.offset.reset. The partition is named with where the
/// target's log starts and the way out, `translate` exits non-zero and
/// `--apply` commits nothing; a group past the deleted copies translates
/// exactly as before.
#[test]
fn a_group_whose_next_copy_the_target_deleted_is_refused_naming_the_first_kept() {
    let bed = bed();
    let topic = bed.source.create_topic("groups-target-deleted", 1);
    let records: Vec<TestRecord> = (0..30).map(|i| record(0, "r", i)).collect();
    bed.source.produce(&topic, &records);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    setup.copy_and_check(&topic, &[], &[&topic]);
    let source = bed.source.read_all(&topic, Isolation::ReadCommitted);
    let target = bed.target.read_all(&topic, Isolation::ReadCommitted);
    bed.target.delete_records(&topic, 0, 20);

    let behind = unique_name("target-deleted-behind");
    bed.source.commit_group(&behind, &[(&topic, 0, 5)]);
    let (code, report, output) = translate_json(&setup, &behind);
    assert_ne!(code, 0, "{output}");
    let report = report.unwrap_or_else(|| panic!("{output}"));
    let error = report["partitions"][0]["error"]
        .as_str()
        .unwrap_or_default();
    let copy = copy_offset(&source, &target, 0, 5);
    assert!(
        error.contains(&format!("no longer has the copy the group reads next (target offset {copy}): its log starts at 20"))
            && error.contains("--reset-offsets --to-offset 20"),
        "{report}"
    );
    let (code, stdout, stderr) = setup.command("translate", &["--group", &behind, "--apply"]);
    assert_ne!(code, 0, "{stdout}\n{stderr}");
    assert!(stderr.contains("not applying"), "{stdout}\n{stderr}");
    assert_eq!(
        bed.target.group_offsets(&behind, &topic, 1),
        BTreeMap::new()
    );

    let past = unique_name("target-deleted-past");
    bed.source.commit_group(&past, &[(&topic, 0, 25)]);
    let (code, report, output) = translate_json(&setup, &past);
    assert_eq!(code, 0, "{output}");
    let report = report.unwrap_or_else(|| panic!("{output}"));
    assert_eq!(
        report["partitions"][0]["translation"]["target_offset"].as_i64(),
        Some(copy_offset(&source, &target, 0, 25)),
        "{report}"
    );
}

/// Translation reads only the tail of the mapping history the groups need,
/// not all of it: a progress topic whose oldest record is unreadable
/// (standing for days of history) still translates a recent group offset,
/// exactly; a group that needs the whole history meets the unreadable
/// record.
#[test]
fn translation_reads_only_the_tail_of_the_history_its_groups_need() {
    const RECORDS: i64 = 6_000;
    let bed = bed();
    let topic = bed.source.create_topic("groups-tail", 1);
    let source: Vec<_> = (0..RECORDS as usize).map(|i| record(0, "t", i)).collect();
    bed.source.produce(&topic, &source);
    bed.target
        .create_topic_with(&topic, 1, &[("retention.ms", "-1")]);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let internal = InternalTopics::for_alias(&setup.alias);
    bed.target
        .create_topic_with(&internal.position, 1, &[("retention.ms", "-1")]);
    // Each copy one target offset further on than its source.
    bed.target
        .write_long_history(&bed.source, &internal.progress, &topic, RECORDS, 1);

    // Two groups near the end: one exact, one caught up (the tail).
    let (recent, caught_up) = (unique_name("tail-recent"), unique_name("tail-caught-up"));
    bed.source
        .commit_group(&recent, &[(&topic, 0, RECORDS - 50)]);
    bed.source.commit_group(&caught_up, &[(&topic, 0, RECORDS)]);
    for (group, target_offset, kind) in [
        (&recent, RECORDS - 49, "exact"),
        (&caught_up, RECORDS + 1, "tail"),
    ] {
        let (code, report, output) = translate_json(&setup, group);
        let report = report.unwrap_or_else(|| panic!("{group}: no report:\n{output}"));
        assert_eq!(code, 0, "{output}");
        let translation = &report["partitions"][0]["translation"];
        assert_eq!(
            translation["target_offset"].as_i64(),
            Some(target_offset),
            "{report}"
        );
        assert_eq!(translation["kind"], kind, "{report}");
    }
    // The whole history is needed from offset 0, and its first record
    // cannot be read.
    let oldest = unique_name("tail-oldest");
    bed.source.commit_group(&oldest, &[(&topic, 0, 0)]);
    let (code, _, output) = translate_json(&setup, &oldest);
    assert_ne!(code, 0, "{output}");
    assert!(output.contains("offset 0 is unreadable"), "{output}");
}

/// A partition idle for longer than the progress topic's retention has no
/// commit left in its lane's history, only its position. A group caught up
/// on it translates from that position: no search through its lane's whole
/// history (standing for days of another partition's commits) for a commit
/// that is not there. A group behind the position needs the history.
/// Kafka writes a commit's markers partition by partition, so translation
/// waits until the position and progress partitions it reads agree.
#[test]
fn a_group_caught_up_on_an_idle_partition_needs_none_of_its_lanes_history() {
    let bed = bed();
    let busy = bed.source.create_topic("groups-idle-busy", 1);
    let idle = bed.source.create_topic("groups-idle", 1);
    let idle_records: Vec<_> = (0..10).map(|i| record(0, "i", i)).collect();
    bed.source.produce(&idle, &idle_records);
    for topic in [&busy, &idle] {
        bed.target
            .create_topic_with(topic, 1, &[("retention.ms", "-1")]);
    }
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let internal = InternalTopics::for_alias(&setup.alias);
    // One lane: the busy partition's history is the idle one's lane's.
    bed.target
        .write_long_history(&bed.source, &internal.progress, &busy, 6_000, 0);
    bed.target
        .write_position(&bed.source, &internal.position, &idle, 10, 11);

    let caught_up = unique_name("idle-caught-up");
    bed.source.commit_group(&caught_up, &[(&idle, 0, 10)]);
    let (code, report, output) = translate_json(&setup, &caught_up);
    assert_eq!(code, 0, "{output}");
    let report = report.unwrap_or_else(|| panic!("{output}"));
    let translation = &report["partitions"][0]["translation"];
    assert_eq!(translation["target_offset"].as_i64(), Some(11), "{report}");
    assert_eq!(translation["kind"], "tail", "{report}");
    assert_eq!(translation["rereads"].as_i64(), Some(0), "{report}");

    let behind = unique_name("idle-behind");
    bed.source.commit_group(&behind, &[(&idle, 0, 4)]);
    let (code, _, stderr) = setup.command("translate", &["--group", &behind]);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("offset 0 is unreadable"), "{stderr}");

    // Kafka writes a commit's markers partition by partition: a commit
    // may be readable in the progress topic and not yet in the position
    // topic. Translation waits for a transaction open in the position
    // partition, and reads the position it commits.
    let position = bed.target.commit_record(&bed.source, &idle, None, 10, 15);
    let open = bed.target.open_transaction(&internal.position, &[position]);
    let report = translate_while_open(&setup, &caught_up, open);
    assert_eq!(
        report["partitions"][0]["translation"]["target_offset"].as_i64(),
        Some(15),
        "the position committed while translate waited: {report}"
    );

    // The other way round: a commit readable in the position topic and not
    // yet in the progress topic. Its records 15..17 are copied to 16..18;
    // a group at 16 belongs at 17, not at the tail past them. (A claim at
    // 15 in the history first: the commit the search for 16 ends at.)
    let claim = bed.target.commit_record(&bed.source, &idle, None, 15, 16);
    bed.target.produce(&internal.progress, &[claim]);
    let copies = bed
        .target
        .commit_record(&bed.source, &idle, Some((15, 16, 2)), 17, 18);
    let open = bed.target.open_transaction(&internal.progress, &[copies]);
    let position = bed.target.commit_record(&bed.source, &idle, None, 17, 18);
    bed.target.produce(&internal.position, &[position]);
    let in_commit = unique_name("idle-in-commit");
    bed.source.commit_group(&in_commit, &[(&idle, 0, 16)]);
    let report = translate_while_open(&setup, &in_commit, open);
    let translation = &report["partitions"][0]["translation"];
    assert_eq!(translation["target_offset"].as_i64(), Some(17), "{report}");
    assert_eq!(translation["kind"], "exact", "{report}");
}

/// A partition with nothing copied yet translates to the end of its target
/// partition, which is not 0 once retention or DeleteRecords emptied it: a
/// group moved there must not land before the target's first offset.
#[test]
fn a_partition_with_nothing_copied_translates_to_the_end_of_its_emptied_target() {
    let bed = bed();
    let topic = bed.source.create_topic("groups-emptied", 1);
    bed.target
        .create_topic_with(&topic, 1, &[("retention.ms", "-1")]);
    let old: Vec<TestRecord> = (0..5).map(|i| record(0, "old", i)).collect();
    bed.target.produce(&topic, &old);
    bed.target.delete_records(&topic, 0, 5);
    let group = unique_name("group-emptied");
    bed.source.commit_group(&group, &[(&topic, 0, 0)]);

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start(&topic, &[]);
    // Translatable once the lane's first session claimed the partition.
    let translation = mirror.wait_until(
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let (code, report, _) = translate_json(&setup, &group);
            let report = report?;
            let translation = report["partitions"][0]["translation"].clone();
            (code == 0 && translation.is_object()).then_some(translation)
        },
        |out| format!("the group never translated:\n{out}"),
    );
    assert_eq!(
        translation["target_offset"].as_i64(),
        Some(5),
        "{translation}"
    );

    // The first copy lands there too.
    let new: Vec<TestRecord> = (0..3).map(|i| record(0, "new", i)).collect();
    bed.source.produce(&topic, &new);
    wait_for_copy(
        &bed.source,
        &bed.target,
        &topic,
        Duration::from_secs(120),
        &mut mirror,
    );
    let (code, report, output) = translate_json(&setup, &group);
    assert_eq!(code, 0, "{output}");
    let report = report.unwrap_or_else(|| panic!("{output}"));
    let translation = &report["partitions"][0]["translation"];
    assert_eq!(translation["target_offset"].as_i64(), Some(5), "{report}");
    assert_eq!(translation["kind"], "exact", "{report}");
    assert_eq!(
        mirror.stop(Duration::from_secs(30)),
        0,
        "{}",
        mirror.output()
    );
}

/// A consumer that joins `group` and keeps polling until dropped.
struct ActiveMember {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ActiveMember {
    fn join(cluster: &Cluster, group: &str, topic: &str) -> ActiveMember {
        let consumer: BaseConsumer = cluster
            .client_config()
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "latest")
            .set("session.timeout.ms", "6000")
            .create()
            .unwrap();
        consumer.subscribe(&[topic]).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let (joined_tx, joined_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let mut told = false;
            while !flag.load(Ordering::Relaxed) {
                let _ = consumer.poll(Duration::from_millis(100));
                if !told && consumer.assignment().is_ok_and(|a| a.count() > 0) {
                    let _ = joined_tx.send(());
                    told = true;
                }
            }
            consumer.unsubscribe();
        });
        joined_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("consumer joined its group");
        ActiveMember {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for ActiveMember {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A source topic of 2 partitions, an idle and an active source group, the
/// active one also consuming on the target, and a mirror syncing both every
/// second that has copied the topic.
struct TwoGroups {
    topic: String,
    idle: String,
    active: String,
    setup: MirrorSetup,
    mirror: Mirror,
    /// The active group's consumer on the target.
    member: ActiveMember,
}

impl TwoGroups {
    /// `records` records over the two partitions; each group committed at
    /// its offsets of partitions 0 and 1; `extra` arguments for the mirror.
    fn start(
        prefix: &str,
        records: usize,
        idle_at: [i64; 2],
        active_at: [i64; 2],
        extra: &[&str],
    ) -> TwoGroups {
        let bed = bed();
        let topic = bed.source.create_topic(prefix, 2);
        let produced: Vec<_> = (0..records)
            .map(|i| record(i as i32 % 2, prefix, i))
            .collect();
        bed.source.produce(&topic, &produced);
        let idle = unique_name("idle");
        let active = unique_name("active");
        for (group, [o0, o1]) in [(&idle, idle_at), (&active, active_at)] {
            bed.source
                .commit_group(group, &[(&topic, 0, o0), (&topic, 1, o1)]);
        }
        bed.target
            .create_topic_with(&topic, 2, &[("retention.ms", "-1")]);
        let member = ActiveMember::join(&bed.target, &active, &topic);

        let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
        let pattern = format!("{idle}|{active}");
        let mut args = vec![
            "--groups.sync",
            &pattern,
            "--groups.sync.interval.secs",
            "1",
        ];
        args.extend_from_slice(extra);
        let mut mirror = setup.start(&topic, &args);
        wait_for_copy(
            &bed.source,
            &bed.target,
            &topic,
            Duration::from_secs(120),
            &mut mirror,
        );
        TwoGroups {
            topic,
            idle,
            active,
            setup,
            mirror,
            member,
        }
    }
}

#[test]
fn group_sync_follows_idle_target_groups_and_leaves_active_ones_alone() {
    let bed = bed();
    let metrics = support::free_local_address();
    let TwoGroups {
        topic,
        idle,
        active,
        mut mirror,
        member,
        ..
    } = TwoGroups::start(
        "groups-sync",
        200,
        [30, 40],
        [10, 10],
        &["--metrics.address", &metrics],
    );
    let source = bed.source.read_all(&topic, Isolation::ReadCommitted);
    let target = bed.target.read_all(&topic, Isolation::ReadCommitted);

    for (o0, o1) in [(30, 40), (77, 100)] {
        bed.source
            .commit_group(&idle, &[(&topic, 0, o0), (&topic, 1, o1)]);
        let want: BTreeMap<i32, i64> = [(0, o0), (1, o1)]
            .into_iter()
            .map(|(p, o)| (p, copy_offset(&source, &target, p, o)))
            .collect();
        // Within a few sync intervals (1 s each).
        mirror.wait_until(
            Duration::from_secs(30),
            Duration::from_millis(200),
            || (bed.target.group_offsets(&idle, &topic, 2) == want).then_some(()),
            |out| {
                format!("the idle target group did not follow the source group to {want:?}:\n{out}")
            },
        );
    }
    let scraped = support::scrape_metrics(&metrics);
    assert_eq!(
        support::metric_value(&scraped, "eosmirror_group_rereads", &[("group", &idle)]),
        Some(0.0),
        "{scraped}"
    );
    let age = support::metric_value(
        &scraped,
        "eosmirror_group_translation_age_seconds",
        &[("group", &idle)],
    )
    .unwrap();
    assert!(age < 10.0, "translation age {age}");

    // The active group's consumers own its offsets on the target.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        bed.target.group_offsets(&active, &topic, 2),
        BTreeMap::new()
    );
    drop(member);
    assert_eq!(
        mirror.stop(Duration::from_secs(30)),
        0,
        "{}",
        mirror.output()
    );
}

/// Runs `eosmirror failover` for `groups` while `mirror` syncs, until its
/// exit code and JSON report satisfy `done` (the sync rounds have recorded
/// what the test needs); returns them.
fn wait_for_failover(
    setup: &MirrorSetup,
    mirror: &mut Mirror,
    groups: &str,
    done: impl Fn(Option<i32>, &serde_json::Value) -> bool,
) -> (Option<i32>, serde_json::Value) {
    let last = std::cell::RefCell::new(String::new());
    mirror.wait_until(
        Duration::from_secs(30),
        Duration::from_millis(500),
        || {
            let (code, stdout, stderr) = setup.failover(groups);
            *last.borrow_mut() = format!("{stdout}\n{stderr}");
            let report: serde_json::Value = serde_json::from_str(&stdout).ok()?;
            done(code, &report).then_some((code, report))
        },
        |out| {
            format!(
                "failover never reported what the test waits for:\n{}\n{out}",
                last.borrow()
            )
        },
    )
}

/// Failover's recovery point needs the source's end offsets, which every
/// sync round records with each partition's replicated position. A
/// partition that retention emptied before anything was copied (its log
/// starts past 0, nothing to copy, no position yet) must not stop that.
#[test]
fn group_sync_records_source_ends_past_a_partition_emptied_by_retention() {
    let bed = bed();
    let topic = bed.source.create_topic("groups-ends", 2);
    let records: Vec<_> = (0..20).map(|i| record(i as i32 % 2, "e", i)).collect();
    bed.source.produce(&topic, &records);
    bed.source.delete_records(&topic, 1, 10);
    let group = unique_name("ends");
    bed.source.commit_group(&group, &[(&topic, 0, 4)]);

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
    // Failover never contacts the source: what it reports is what the sync
    // rounds recorded on the target.
    let (_, report) = wait_for_failover(&setup, &mut mirror, &group, |code, _| code == Some(0));
    for p in 0..2 {
        let rpo = report["rpo"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["topic"] == topic.as_str() && r["partition"] == p)
            .unwrap_or_else(|| panic!("no recovery point of {topic}-{p}: {report}"));
        assert_eq!(rpo["source_end"].as_i64(), Some(10), "{rpo}");
        assert_eq!(rpo["replicated_position"].as_i64(), Some(10), "{rpo}");
        assert_eq!(rpo["unreplicated_offsets"].as_i64(), Some(0), "{rpo}");
    }
    assert_eq!(
        mirror.stop(Duration::from_secs(30)),
        0,
        "{}",
        mirror.output()
    );
}

/// A new two-partition source topic of 20 records and a new group that
/// consumed 4 and 6 of them, named from the prefixes.
fn source_with_a_group(topic_prefix: &str, group_prefix: &str) -> (String, String) {
    let bed = bed();
    let topic = bed.source.create_topic(topic_prefix, 2);
    let records: Vec<_> = (0..20).map(|i| record(i as i32 % 2, "r", i)).collect();
    bed.source.produce(&topic, &records);
    let group = unique_name(group_prefix);
    bed.source
        .commit_group(&group, &[(&topic, 0, 4), (&topic, 1, 6)]);
    (topic, group)
}

/// Group sync records a group's source offsets on the target before it
/// moves the target group, so failover, which never rewinds a group, finds
/// a record at least as new. A record the target refuses (here the groups
/// topic's `max.message.bytes` is below any record; revoked Write does the
/// same) fails the round, and the target group does not move.
#[test]
fn group_sync_moves_no_group_whose_record_the_target_refused() {
    let bed = bed();
    let (topic, group) = source_with_a_group("groups-refused", "refused");

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    bed.target.create_topic_with(
        &format!("__eosmirror.groups.{}", setup.alias),
        1,
        &[("cleanup.policy", "compact"), ("max.message.bytes", "100")],
    );
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
    // Rounds run every second and go on failing; none may move the group.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut refusals = 0;
    while refusals < 3 {
        assert!(
            bed.target.group_offsets(&group, &topic, 2).is_empty(),
            "the target group moved without its record:\n{}",
            mirror.output()
        );
        refusals = mirror
            .output()
            .matches("the target refused a record")
            .count();
        assert!(
            Instant::now() < deadline,
            "no round failed naming the refused record:\n{}",
            mirror.output()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    mirror.kill();
}

/// One group's record too large for the groups topic (its
/// `max.message.bytes`, here a group with a very long name) leaves that
/// group where it is, named, while the other groups move. (A refused
/// record failed the whole round, so no group was synced any more.)
#[test]
fn a_refused_group_record_leaves_only_that_group_behind() {
    let bed = bed();
    let topic = bed.source.create_topic("groups-one-refused", 2);
    let records: Vec<_> = (0..20).map(|i| record(i as i32 % 2, "r", i)).collect();
    bed.source.produce(&topic, &records);
    let prefix = unique_name("one-refused");
    let small = format!("{prefix}-small");
    let large = format!("{prefix}-{}", "x".repeat(4000));
    for group in [&small, &large] {
        bed.source
            .commit_group(group, &[(&topic, 0, 4), (&topic, 1, 6)]);
    }

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    bed.target.create_topic_with(
        &format!("__eosmirror.groups.{}", setup.alias),
        1,
        &[("cleanup.policy", "compact"), ("max.message.bytes", "2000")],
    );
    let pattern = format!("{prefix}-.*");
    let mut mirror = setup.start(
        &topic,
        &[
            "--groups.sync",
            &pattern,
            "--groups.sync.interval.ms",
            "1000",
        ],
    );
    mirror.wait_until(
        Duration::from_secs(120),
        Duration::from_millis(500),
        || (bed.target.group_offsets(&small, &topic, 2).len() == 2).then_some(()),
        |output| format!("the small group never moved:\n{}", tail(output, 40)),
    );
    mirror.wait_for_output(
        0,
        &["the group is not moved this round", &large],
        Duration::from_secs(60),
    );
    assert!(
        bed.target.group_offsets(&large, &topic, 2).is_empty(),
        "the group whose record was refused moved without it:\n{}",
        mirror.output()
    );
    mirror.kill();
}

/// SIGTERM while a group-sync round is under way (fault point
/// `groups::slow-commit`: it waits 10 s before committing the target
/// groups): the round ends, committing, before the instance leaves the
/// fleet's group. (Before, the instance left at once and the process ended
/// while the round waited: had another instance taken lane 0, and group
/// sync with it, the round could have committed after that instance's
/// newer rounds.)
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs --features eosmirror/failpoints"
)]
#[test]
fn a_group_sync_round_ends_before_the_instance_leaves_the_fleet() {
    let bed = bed();
    let (topic, group) = source_with_a_group("groups-stop-mid-round", "stop-mid-round");

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start_env(
        &topic,
        &["--groups.sync", &group, "--groups.sync.interval.ms", "1000"],
        &[("FAILPOINTS", "groups::slow-commit=return")],
    );
    // SIGTERM while a round waits to commit: its last "waiting" line is
    // after its last commit (a round waits only while it has offsets to
    // commit, so once the group is in place no round waits again).
    let waiting = "fault point groups::slow-commit: waiting 10 s";
    let committing = "fault point groups::slow-commit: committing the target groups now";
    let log = mirror.log.clone();
    mirror.wait_until(
        Duration::from_secs(120),
        Duration::from_millis(100),
        || {
            let output = std::fs::read_to_string(&log).unwrap_or_default();
            let last_wait = output.rfind(waiting)?;
            output
                .rfind(committing)
                .is_none_or(|c| c < last_wait)
                .then_some(())
        },
        |output| format!("no round waited to commit:\n{}", tail(output, 30)),
    );
    mirror.signal(libc::SIGTERM);
    let code = mirror.wait_exit(Duration::from_secs(90));
    let output = mirror.output();
    assert_eq!(code, 0, "{output}");
    let committed = output
        .find("fault point groups::slow-commit: committing the target groups now")
        .unwrap_or_else(|| panic!("the round never went on to commit:\n{output}"));
    let left = output
        .find("the fleet's group took lanes from this instance")
        .unwrap_or_else(|| panic!("the instance never left the fleet's group:\n{output}"));
    assert!(
        committed < left,
        "the instance left the fleet's group before its round committed:\n{output}"
    );
    let moved = bed.target.group_offsets(&group, &topic, 2);
    assert_eq!(moved.len(), 2, "the round's commit did not land: {moved:?}");
}

/// A commit the local cache missed (its write and the partition's reset
/// both failed) must not leave a hole that a later commit's write closes
/// over: group sync would translate a group inside the missing commit to
/// the next cached copy, and a consumer would skip the missing commit's
/// records after a failover.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the failpoints feature (tests/run enables it)"
)]
fn group_sync_translates_a_commit_the_cache_missed_from_the_target() {
    let bed = bed();
    let topic = bed.source.create_topic("groups-cache-hole", 1);
    let group = unique_name("cache-hole");
    let batch = |tag: &str| -> Vec<TestRecord> { (0..10).map(|i| record(0, tag, i)).collect() };
    bed.source.produce(&topic, &batch("a"));
    bed.source.commit_group(&group, &[(&topic, 0, 0)]);

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start_env(
        &topic,
        &["--groups.sync", &group, "--groups.sync.interval.ms", "1000"],
        &[("FAILPOINTS", "lane::cache-write-fails=1*off->1*return")],
    );
    let copied = |mirror: &mut Mirror| {
        wait_for_copy(
            &bed.source,
            &bed.target,
            &topic,
            Duration::from_secs(120),
            mirror,
        )
    };
    copied(&mut mirror);
    // Each batch is copied before the next is written (by a producer
    // without transactions: offsets 0..40), so the second commit, the one
    // not cached, is one of the first two batches' and copied records, and
    // commits with copies follow it.
    for tag in ["b", "c", "d"] {
        bed.source.produce(&topic, &batch(tag));
        copied(&mut mirror);
    }

    let output = mirror.output();
    let needle = "fault point lane::cache-write-fails: source offsets ";
    let (from, to): (i64, i64) = output
        .split_once(needle)
        .and_then(|(_, rest)| rest.split_once(' '))
        .and_then(|(range, _)| range.split_once(".."))
        .map(|(from, to)| (from.parse().unwrap(), to.parse().unwrap()))
        .unwrap_or_else(|| panic!("the fault point was not reached:\n{output}"));
    assert!(
        from < to && to <= 20,
        "the missed commit is not one of the first two batches': {from}..{to}"
    );
    // The commit after the hole was refused and the partition reset; the
    // commits after that were cached again.
    let refused = output.matches("local state not updated").count();
    assert_eq!(refused, 1, "refused cache writes:\n{}", tail(&output, 40));

    let source = bed.source.read_all(&topic, Isolation::ReadCommitted);
    let target = bed.target.read_all(&topic, Isolation::ReadCommitted);
    let inside = (from + to) / 2;
    bed.source.commit_group(&group, &[(&topic, 0, inside)]);
    let want = BTreeMap::from([(0, copy_offset(&source, &target, 0, inside))]);
    mirror.wait_until(
        Duration::from_secs(30),
        Duration::from_millis(200),
        || (bed.target.group_offsets(&group, &topic, 1) == want).then_some(()),
        |out| {
            format!(
                "group sync did not translate source offset {inside} (of the commit the cache \
                 missed, {from}..{to}) to {want:?}, but to {:?}:\n{}",
                bed.target.group_offsets(&group, &topic, 1),
                tail(out, 40)
            )
        },
    );
    assert_eq!(
        mirror.stop(Duration::from_secs(30)),
        0,
        "{}",
        mirror.output()
    );
}

/// In a failover every group that can move moves: a group with consumers
/// already on the target is named, with the exit code non-zero, and does
/// not hold back the others.
#[test]
fn failover_moves_every_group_it_can_and_names_the_others() {
    let bed = bed();
    let TwoGroups {
        topic,
        idle,
        active,
        setup,
        mut mirror,
        member,
    } = TwoGroups::start("groups-failover", 40, [5, 7], [3, 3], &[]);
    let pattern = format!("{idle}|{active}");
    // Both groups recorded: one moved, one named.
    let (code, report) = wait_for_failover(&setup, &mut mirror, &pattern, |_, report| {
        let moved = report["groups"].as_array().map_or(0, Vec::len);
        report["problems"].as_array().map_or(0, Vec::len) + moved == 2
    });
    assert_eq!(code, Some(1), "{report}");
    let problems = report["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{report}");
    let problem = problems[0].as_str().unwrap();
    assert!(
        problem.contains(&format!(
            "group {active:?} has 1 active member(s) on the target"
        )),
        "{problem}"
    );
    let moved = report["groups"].as_array().unwrap();
    assert_eq!(moved.len(), 1, "{report}");
    assert_eq!(moved[0]["group"], idle.as_str(), "{report}");

    // The idle group resumes on the target exactly where it stopped.
    let source = bed.source.read_all(&topic, Isolation::ReadCommitted);
    let target = bed.target.read_all(&topic, Isolation::ReadCommitted);
    let want: BTreeMap<i32, i64> = [(0, 5), (1, 7)]
        .into_iter()
        .map(|(p, o)| (p, copy_offset(&source, &target, p, o)))
        .collect();
    assert_eq!(bed.target.group_offsets(&idle, &topic, 2), want);
    drop(member);
    assert_eq!(
        mirror.stop(Duration::from_secs(30)),
        0,
        "{}",
        mirror.output()
    );
}

/// A group deleted on the source leaves the groups topic at the next sync
/// round, so a failover never brings it back on the target.
#[test]
fn a_group_deleted_on_the_source_is_left_out_of_failover() {
    let bed = bed();
    let TwoGroups {
        topic,
        idle,
        active,
        setup,
        mut mirror,
        member,
    } = TwoGroups::start("groups-deleted", 40, [5, 7], [3, 3], &[]);
    // Synced: the idle group followed on the target.
    mirror.wait_until(
        Duration::from_secs(30),
        Duration::from_millis(200),
        || (bed.target.group_offsets(&idle, &topic, 2).len() == 2).then_some(()),
        |out| format!("the idle group was never synced:\n{out}"),
    );
    drop(member);
    bed.source.delete_group(&active);
    bed.source.delete_group(&idle);
    let since = mirror.output().len();
    for group in [&idle, &active] {
        mirror.wait_for_output(
            since,
            &[&format!("failover leaves it out group={group}")],
            Duration::from_secs(30),
        );
    }
    // The operator deletes the idle group's copy too; the active group's
    // consumer left the target.
    bed.target.delete_group(&idle);
    let (code, stdout, stderr) = setup.failover(&format!("{idle}|{active}"));
    assert_ne!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("no recorded group matches"),
        "{stdout}\n{stderr}"
    );
    for group in [&idle, &active] {
        assert_eq!(
            bed.target.group_offsets(group, &topic, 2),
            BTreeMap::new(),
            "failover brought {group} back"
        );
    }
    assert_eq!(
        mirror.stop(Duration::from_secs(30)),
        0,
        "{}",
        mirror.output()
    );
}

/// A source broker lists no group of an offsets partition it cannot lead
/// (offline, or its leadership moving), and reports no error. Group sync
/// asks every recorded group for its offsets, listed or not, so a group the
/// listings leave out (fault point `groups::listing-empty`) keeps its
/// record while its offsets answer, and failover still moves it.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the fault points: cargo test --features eosmirror/failpoints"
)]
fn a_group_left_out_of_the_source_listing_keeps_its_record() {
    let bed = bed();
    let topic = bed.source.create_topic("groups-unlisted", 2);
    let produced: Vec<_> = (0..40).map(|i| record(i as i32 % 2, "u", i)).collect();
    bed.source.produce(&topic, &produced);
    let group = unique_name("unlisted");
    bed.source
        .commit_group(&group, &[(&topic, 0, 5), (&topic, 1, 7)]);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    // Listed in the first two rounds, left out of every later one.
    let mut mirror = setup.start_env(
        &topic,
        &["--groups.sync", &group, "--groups.sync.interval.secs", "1"],
        &[("FAILPOINTS", "groups::listing-empty=2*off->return")],
    );
    wait_for_copy(
        &bed.source,
        &bed.target,
        &topic,
        Duration::from_secs(120),
        &mut mirror,
    );
    // Two rounds without the group in the listing: the first is over.
    mirror.wait_for_new_lines(
        "fault point groups::listing-empty",
        2,
        Duration::from_secs(60),
    );
    let output = mirror.output();
    assert!(
        !output.contains(&format!("failover leaves it out group={group}")),
        "a group left out of a listing lost its record:\n{}",
        tail(&output, 30)
    );

    let (code, stdout, stderr) = setup.failover(&group);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["groups"][0]["group"], group.as_str(), "{report}");
    let source = bed.source.read_all(&topic, Isolation::ReadCommitted);
    let target = bed.target.read_all(&topic, Isolation::ReadCommitted);
    let want: BTreeMap<i32, i64> = [(0, 5), (1, 7)]
        .into_iter()
        .map(|(p, o)| (p, copy_offset(&source, &target, p, o)))
        .collect();
    assert_eq!(bed.target.group_offsets(&group, &topic, 2), want);
    assert_eq!(
        mirror.stop(Duration::from_secs(30)),
        0,
        "{}",
        mirror.output()
    );
}

#[test]
fn cutover_completes_on_a_stopped_stream_and_times_out_when_replication_stalls() {
    let bed = bed();
    let topic = bed.source.create_topic("groups-cutover", 2);
    let group = unique_name("cutover");
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start(&topic, &[]);
    // A live stream that then stops.
    for burst in 0..10 {
        let batch: Vec<_> = (0..20)
            .map(|i| record(i as i32 % 2, "c", burst * 20 + i))
            .collect();
        bed.source
            .produce_transaction(&topic, &batch, TxnOutcome::Commit);
        std::thread::sleep(Duration::from_millis(200));
    }
    bed.source
        .commit_group(&group, &[(&topic, 0, 25), (&topic, 1, 61)]);

    let args = [
        "--include",
        &topic,
        "--groups",
        &group,
        "--timeout.ms",
        "60000",
    ];
    let (code, stdout, stderr) = setup.command("cutover", &args);
    assert_eq!(
        code,
        0,
        "{stdout}\n{stderr}\neosmirror run's output:\n{}",
        mirror.output()
    );
    assert!(stdout.contains("cutover: COMPLETE"), "{stdout}");
    assert!(stdout.contains("verdict: EXACT"), "{stdout}");
    let source = bed.source.read_all(&topic, Isolation::ReadCommitted);
    let on_target = resume_as_group(&bed.target, &group, &topic, 2);
    for (p, o) in [(0, 25), (1, 61)] {
        assert_eq!(
            contents(&on_target[&p]),
            contents(&remaining(&source, p, o)),
            "partition {p}"
        );
    }
    // Idempotent.
    let (code, stdout, stderr) = setup.command("cutover", &args);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(stdout.matches("[unchanged;").count(), 2, "{stdout}");

    // Replication stalled: a clear report and a non-zero exit.
    mirror.kill();
    bed.source
        .produce(&topic, &[record(0, "late", 0), record(1, "late", 1)]);
    let (code, stdout, _) = setup.command(
        "cutover",
        &[
            "--include",
            &topic,
            "--groups",
            &group,
            "--timeout.ms",
            "3000",
        ],
    );
    assert_ne!(code, 0, "{stdout}");
    assert!(
        stdout.contains("did not reach the source's end"),
        "{stdout}"
    );
    assert!(stdout.contains("NOT COMPLETE"), "{stdout}");
}

/// A source topic of two partitions whose 20 records (one committed
/// transaction) a running mirror copied, and a group committed at offsets 3
/// and 4 on the source.
fn copied_with_a_group(name: &str) -> (String, String, MirrorSetup, Mirror, Vec<TestRecord>) {
    let bed = bed();
    let topic = bed.source.create_topic(&format!("groups-{name}"), 2);
    let group = unique_name(name);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start(&topic, &[]);
    let committed: Vec<_> = (0..20).map(|i| record(i as i32 % 2, "o", i)).collect();
    bed.source
        .produce_transaction(&topic, &committed, TxnOutcome::Commit);
    wait_for_copy(
        &bed.source,
        &bed.target,
        &topic,
        Duration::from_secs(120),
        &mut mirror,
    );
    bed.source
        .commit_group(&group, &[(&topic, 0, 3), (&topic, 1, 4)]);
    (topic, group, setup, mirror, committed)
}

/// Cutover's report line naming the source transactions still open.
fn open_transaction_problem(stdout: &str) -> &str {
    stdout
        .lines()
        .find(|l| l.starts_with("problem: source transactions that were open"))
        .unwrap_or_else(|| panic!("no open-transaction problem reported:\n{stdout}"))
}

#[test]
fn cutover_waits_for_a_source_transaction_left_open_and_names_its_partition() {
    let bed = bed();
    let (topic, group, setup, mut mirror, committed) = copied_with_a_group("cutover-open-txn");

    // A two-phase-commit sink between checkpoints: records of partition 1
    // in the log, their transaction open. The end of committed data stands
    // still, so the copy looks caught up.
    let held: Vec<_> = (0..5).map(|i| record(1, "open", i)).collect();
    let open = bed.source.open_transaction(&topic, &held);
    let (code, stdout, stderr) = setup.command(
        "cutover",
        &[
            "--include",
            &topic,
            "--groups",
            &group,
            "--timeout.ms",
            "5000",
        ],
    );
    assert_ne!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("cutover: NOT COMPLETE"), "{stdout}");
    let problem = open_transaction_problem(&stdout);
    assert!(
        problem.contains(&format!("{topic}-1 (offsets [")),
        "{problem}"
    );
    assert!(!problem.contains(&format!("{topic}-0")), "{problem}");
    assert!(
        problem.contains("cannot name the transactional id"),
        "{problem}"
    );
    assert!(
        bed.target.group_offsets(&group, &topic, 2).is_empty(),
        "groups moved by an incomplete cutover:\n{stdout}"
    );

    // verify checks the committed records and names the open ones.
    let (code, stdout, stderr) = setup.command("verify", &["--include", &topic]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let partition_1 = stdout
        .split_once(&format!("{topic}-1: exact"))
        .unwrap_or_else(|| panic!("{stdout}"))
        .1;
    assert!(
        partition_1.contains("in an open source transaction: source offsets ["),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("in an open source transaction").count(),
        1,
        "{stdout}"
    );

    // The transaction commits while a cutover waits for it: the copy then
    // takes its records, and cutover completes on an exact copy.
    let mut open = Some(open);
    let (code, stdout, stderr) = setup.command_watching(
        "cutover",
        &[
            "--include",
            &topic,
            "--groups",
            &group,
            "--timeout.ms",
            "120000",
        ],
        &[],
        |line| {
            if line.contains(
                "waiting for source transactions that were open when cutover looked at the producers",
            )
            {
                if let Some(open) = open.take() {
                    open.commit();
                }
            }
        },
    );
    assert!(
        open.is_none(),
        "cutover never waited for the open transaction:\n{stdout}\n{stderr}"
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("cutover: COMPLETE"), "{stdout}");
    assert!(stdout.contains("verdict: EXACT"), "{stdout}");
    assert_exact_copy(&bed.source, &bed.target, &topic);
    let source = bed.source.read_all(&topic, Isolation::ReadCommitted);
    assert_eq!(source.len(), committed.len() + held.len());
    let on_target = resume_as_group(&bed.target, &group, &topic, 2);
    for (p, o) in [(0, 3), (1, 4)] {
        assert_eq!(
            contents(&on_target[&p]),
            contents(&remaining(&source, p, o)),
            "partition {p}"
        );
    }
    assert_eq!(
        mirror.stop(Duration::from_secs(30)),
        0,
        "{}",
        mirror.output()
    );
}

/// A producer that writes while cutover verifies, and a consumer of the
/// group that reads those records and stops before cutover reads its
/// offsets, leave the group past the copy: moving it would have it read
/// those records again once copied. Cutover moves no group and says why.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the fault points: cargo test --features eosmirror/failpoints"
)]
fn cutover_moves_no_group_when_the_source_was_written_while_it_ran() {
    let bed = bed();
    let (topic, group, setup, mut mirror, _) = copied_with_a_group("cutover-late-write");
    assert_eq!(
        mirror.stop(Duration::from_secs(30)),
        0,
        "{}",
        mirror.output()
    );

    let late: Vec<_> = (0..5).map(|i| record(1, "late", i)).collect();
    let mut written = false;
    let (code, stdout, stderr) = setup.command_watching(
        "cutover",
        &[
            "--include",
            &topic,
            "--groups",
            &group,
            "--timeout.ms",
            "30000",
        ],
        &[("FAILPOINTS", "cutover::slow-groups=return")],
        |line| {
            if line.contains("fault point cutover::slow-groups") && !written {
                bed.source.produce(&topic, &late);
                let (_, end) = bed.source.watermarks(&topic, 1);
                bed.source.commit_group(&group, &[(&topic, 1, end)]);
                written = true;
            }
        },
    );
    assert!(
        written,
        "cutover never reached its fault point:\n{stdout}\n{stderr}"
    );
    assert_ne!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("cutover: NOT COMPLETE"), "{stdout}");
    assert!(
        stdout.contains("producers wrote to the source while cutover ran"),
        "{stdout}"
    );
    assert!(
        bed.target.group_offsets(&group, &topic, 2).is_empty(),
        "groups moved past the copy:\n{stdout}"
    );
}

/// A broker's group listing leaves out, without an error, the groups of an
/// offsets partition it cannot lead; a group the pattern names outright is
/// asked for by name and moved all the same, and a name that is no group
/// on the source is a problem.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the fault points: cargo test --features eosmirror/failpoints"
)]
fn cutover_moves_a_named_group_the_listing_left_out() {
    let bed = bed();
    let (topic, group, setup, mut mirror, _) = copied_with_a_group("cutover-unlisted");
    let (code, stdout, stderr) = setup.command_env(
        "cutover",
        &[
            "--include",
            &topic,
            "--groups",
            &format!("{group}|never-listed-.*"),
            "--timeout.ms",
            "30000",
        ],
        &[("FAILPOINTS", "groups::listing-empty=return")],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("cutover: COMPLETE"), "{stdout}");
    assert_eq!(
        bed.target.group_offsets(&group, &topic, 2).len(),
        2,
        "the named group was not moved:\n{stdout}"
    );
    // A name that is no group (a typo) is a problem, not a group moved.
    let typo = format!("{group}-typo");
    let (code, stdout, stderr) = setup.command(
        "cutover",
        &[
            "--include",
            &topic,
            "--groups",
            &format!("{group}|{typo}"),
            "--timeout.ms",
            "30000",
        ],
    );
    assert_ne!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("cutover: NOT COMPLETE"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "group {typo:?}, named in --groups, has no committed offset"
        )),
        "{stdout}"
    );
    // A pattern matching only groups that consumed other topics moves
    // nothing, which is no complete cutover either.
    let elsewhere = bed.source.create_topic("cutover-elsewhere", 1);
    let reader = unique_name("reads-elsewhere");
    bed.source.commit_group(&reader, &[(&elsewhere, 0, 0)]);
    let (code, stdout, stderr) = setup.command(
        "cutover",
        &[
            "--include",
            &topic,
            "--groups",
            &format!("{reader}.*"),
            "--timeout.ms",
            "30000",
        ],
    );
    assert_ne!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("cutover: NOT COMPLETE"), "{stdout}");
    assert!(
        stdout.contains("no consumer group matching")
            && stdout.contains("check --groups and --include"),
        "{stdout}"
    );
    assert_eq!(
        mirror.stop(Duration::from_secs(30)),
        0,
        "{}",
        mirror.output()
    );
}

/// A source transaction begun while cutover looks at the producers (between
/// its two samples of the high watermarks) holds records the copy lacks
/// just as one open before it started: cutover waits for it, and reports
/// it when it stays open, instead of moving the groups.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the fault points: cargo test --features eosmirror/failpoints"
)]
fn cutover_waits_for_a_source_transaction_begun_while_it_looks_at_the_producers() {
    let bed = bed();
    let (topic, group, setup, mut mirror, _) = copied_with_a_group("cutover-txn-in-look");

    let held: Vec<_> = (0..5).map(|i| record(1, "open", i)).collect();
    let mut open = None;
    let (code, stdout, stderr) = setup.command_watching(
        "cutover",
        &[
            "--include",
            &topic,
            "--groups",
            &group,
            "--timeout.ms",
            "5000",
        ],
        &[("FAILPOINTS", "cutover::slow-look=return")],
        |line| {
            if line.contains("fault point cutover::slow-look") && open.is_none() {
                open = Some(bed.source.open_transaction(&topic, &held));
            }
        },
    );
    let open = open
        .unwrap_or_else(|| panic!("cutover never reached its fault point:\n{stdout}\n{stderr}"));
    assert_ne!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("cutover: NOT COMPLETE"), "{stdout}");
    // Partition 1: 10 records and their transaction's marker, then the
    // 5 held ones.
    let problem = open_transaction_problem(&stdout);
    assert!(
        problem.contains(&format!("{topic}-1 (offsets [11, 16))")),
        "{problem}"
    );
    assert!(
        bed.target.group_offsets(&group, &topic, 2).is_empty(),
        "groups moved by an incomplete cutover:\n{stdout}"
    );

    open.commit();
    wait_for_copy(
        &bed.source,
        &bed.target,
        &topic,
        Duration::from_secs(120),
        &mut mirror,
    );
    assert_eq!(
        mirror.stop(Duration::from_secs(30)),
        0,
        "{}",
        mirror.output()
    );
}

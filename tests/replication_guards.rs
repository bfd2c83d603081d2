//! Guards against the mistakes that would silently duplicate data.

mod support;

use std::time::Duration;

use eosmirror::wire::{InternalTopics, ProgressRecord};
use eosmirror_state::SourcePartition;
use support::mirror::{assert_exact_copy, wait_for_copy, Mirror, MirrorSetup};
use support::{bed, Isolation, TestBed, TestRecord};

#[test]
fn a_changed_alias_is_refused_instead_of_copying_again() {
    let bed = bed();
    let topic = bed.source.create_topic("guard-alias", 2);
    let records: Vec<TestRecord> = (0..40)
        .map(|i| TestRecord::new(i % 2, &format!("k{i}"), &format!("v{i}")))
        .collect();
    bed.source.produce(&topic, &records);

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let alias = format!("{topic}-a");
    setup.copy_and_check(&topic, &["--source.alias", &alias], &[&topic]);

    // Same target, new alias, fresh state dir: no position is known, but the
    // target partitions hold the earlier copy.
    let other = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let other_alias = format!("{topic}-b");
    let (code, output) = other.run_to_exit(
        &topic,
        &["--source.alias", &other_alias],
        Duration::from_secs(90),
    );
    assert_ne!(code, 0, "{output}");
    assert!(
        output.contains("already holds committed records"),
        "{output}"
    );
    assert!(output.contains("--target.allow.nonempty"), "{output}");
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

/// Two partitions of 50 records each copied by a one-lane run, stopped.
fn copied_two_partitions(bed: &TestBed, prefix: &str) -> (String, MirrorSetup) {
    let topic = bed.source.create_topic(prefix, 2);
    let records: Vec<TestRecord> = (0..100)
        .map(|i| TestRecord::new(i % 2, &format!("k{i}"), &format!("v{i}")))
        .collect();
    bed.source.produce(&topic, &records);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    setup.copy_and_check(&topic, &["--lanes", "1"], &[&topic]);
    (topic, setup)
}

/// Writes `value` (`None`: a tombstone) as partition 0's record of the
/// setup's position topic, whose only partition is the one lane's.
fn write_position(bed: &TestBed, setup: &MirrorSetup, topic: &str, value: Option<Vec<u8>>) {
    bed.target.produce(
        &InternalTopics::for_alias(&setup.alias).position,
        &[TestRecord {
            partition: 0,
            key: Some(ProgressRecord::key(&SourcePartition::new(topic, 0))),
            value,
            headers: vec![],
            timestamp: None,
        }],
    );
}

/// Starts the setup's one-lane run again with 20 new records in partition
/// 1, and waits until it names `stop` and has copied partition 1.
fn restarted_naming(bed: &TestBed, setup: &MirrorSetup, topic: &str, stop: &str) -> Mirror {
    let more: Vec<TestRecord> = (100..120)
        .map(|i| TestRecord::new(1, &format!("k{i}"), &format!("v{i}")))
        .collect();
    bed.source.produce(topic, &more);
    let mut mirror = setup.start(topic, &["--lanes", "1"]);
    mirror.wait_for_output(0, &[stop], Duration::from_secs(90));
    wait_for_copy(
        &bed.source,
        &bed.target,
        topic,
        Duration::from_secs(90),
        &mut mirror,
    );
    mirror
}

/// A target partition whose end fell below the copies its position
/// records (an unclean leader election cut it; here the position is moved
/// past the end instead, which a lane cannot tell apart) stops that
/// partition by name at the next session start, with no new record needed
/// to notice it; the other partition is copied on. Before, the lane
/// resumed after the position, and copies committed there left the lost
/// ones unreported for good.
#[test]
fn a_target_partition_that_lost_committed_copies_is_a_named_stop() {
    let bed = bed();
    let (topic, setup) = copied_two_partitions(bed, "guard-truncated");
    let partition = SourcePartition::new(&topic, 0);
    let last = bed
        .target
        .read_all(
            &InternalTopics::for_alias(&setup.alias).position,
            Isolation::ReadCommitted,
        )
        .into_iter()
        .filter_map(|r| r.value)
        .map(|value| ProgressRecord::decode(&value).unwrap())
        .rfind(|record| record.source == partition)
        .expect("a position of partition 0");
    let (_, target_end) = bed.target.watermarks(&topic, 0);
    assert!(last.next_target_offset < target_end);
    let moved = ProgressRecord {
        runs: Vec::new(),
        next_target_offset: target_end + 10,
        ..last
    };
    write_position(bed, &setup, &topic, Some(moved.encode()));

    let stop = format!("{topic}-0: the target partition ends at offset {target_end}");
    let mirror = restarted_naming(bed, &setup, &topic, &stop);
    assert_stopped_with(mirror, "--start.over", &topic, target_end);
}

/// `mirror`'s output has `needle`; stopped, it exits non-zero (a partition
/// was stopped), and partition 0 still ends at `target_end`.
fn assert_stopped_with(mut mirror: Mirror, needle: &str, topic: &str, target_end: i64) {
    let output = mirror.output();
    assert!(output.contains(needle), "{needle:?} missing:\n{output}");
    assert_ne!(
        mirror.stop(Duration::from_secs(90)),
        0,
        "{}",
        mirror.output()
    );
    assert_eq!(
        bed().target.watermarks(topic, 0).1,
        target_end,
        "nothing may be copied into partition 0:\n{}",
        mirror.output()
    );
}

/// A tombstone in the compacted position topic (how Kafka's tools delete
/// a key's record) deletes that partition's position: the partition is
/// stopped by name as one whose target holds copies the target does not
/// account for, and the lane copies its other partitions on. Before, the
/// lane took the null value for a corrupt record and the whole run ended,
/// at every restart until the cleaner removed the tombstone.
#[test]
fn a_deleted_position_stops_its_partition_only() {
    let bed = bed();
    let (topic, setup) = copied_two_partitions(bed, "guard-tombstone");
    let (_, target_end) = bed.target.watermarks(&topic, 0);
    write_position(bed, &setup, &topic, None);

    let stop = format!("{topic}-0: the local state says");
    let mirror = restarted_naming(bed, &setup, &topic, &stop);
    assert_stopped_with(
        mirror,
        "the target has no position for these topics",
        &topic,
        target_end,
    );
}

/// A cache of topics replaced since, for a partition the target has no
/// position of at all: the target lost its positions (its internal topics
/// reset, or a target rebuilt under the same cluster id), and a start-over
/// always leaves one. The partition is stopped by name. Before, the cache
/// was forgotten as one of topics started over, and the partition was
/// copied again from the source's first record without a word.
#[test]
fn a_cache_the_target_has_no_position_for_is_not_copied_again_from_the_start() {
    let bed = bed();
    let (topic, setup) = copied_two_partitions(bed, "guard-reset");
    write_position(bed, &setup, &topic, None);
    bed.target.delete_topic(&topic);

    let (code, output) = setup.run_to_exit(&topic, &["--lanes", "1"], Duration::from_secs(90));
    assert_ne!(code, 0, "{output}");
    assert!(
        output.contains(&format!(
            "{topic}-0: the local state says source offsets up to 50 were copied, but the target has no position"
        )),
        "{output}"
    );
    assert_eq!(
        bed.target.watermarks(&topic, 0).1,
        0,
        "nothing may be copied again from the start:\n{output}"
    );
}

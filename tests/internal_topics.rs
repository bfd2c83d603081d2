//! Internal topics that already exist on the target are checked before
//! eosmirror trusts them: one set up to lose positions or history is refused
//! at start with the fix, before anything is created, and the named fix
//! lets the next run copy.

mod support;

use std::time::{Duration, Instant};

use rdkafka::admin::{AdminOptions, AlterConfig, ResourceSpecifier};
use support::mirror::{assert_exact_copy, count_committed, wait_for_copy, MirrorSetup};
use support::{bed, Cluster, TestRecord};

/// A refused run connects to both clusters, reads metadata and one
/// DescribeConfigs, then exits; the rest is slack for a busy machine.
const REFUSAL_LIMIT: Duration = Duration::from_secs(45);

/// A source topic with records and a mirror setup of its own (its own alias,
/// so its own internal topics).
fn source_with_records(prefix: &str) -> (String, MirrorSetup) {
    let bed = bed();
    let topic = bed.source.create_topic(prefix, 2);
    let records: Vec<TestRecord> = (0..20)
        .map(|i| TestRecord::new(i % 2, &format!("k{i}"), &format!("v{i}")))
        .collect();
    bed.source.produce(&topic, &records);
    (
        topic,
        MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap),
    )
}

/// Runs eosmirror expecting a refusal: exit 1, quickly, with one error line,
/// which is returned.
fn refused(setup: &MirrorSetup, topic: &str, extra: &[&str]) -> String {
    let started = Instant::now();
    let (code, output) = setup.run_to_exit(topic, extra, REFUSAL_LIMIT * 2);
    let took = started.elapsed();
    assert_eq!(code, 1, "exit code; output:\n{output}");
    assert!(
        took < REFUSAL_LIMIT,
        "the refusal took {took:?}; output:\n{output}"
    );
    let lines: Vec<&str> = output
        .lines()
        .filter(|l| l.starts_with("eosmirror: error:"))
        .collect();
    assert_eq!(lines.len(), 1, "one error line expected:\n{output}");
    lines[0].to_string()
}

/// Neither the copy of `topic` nor any internal topic of `alias` but
/// `existing` was created.
fn assert_nothing_created(target: &Cluster, topic: &str, alias: &str, existing: &str) {
    for kind in ["progress", "position", "groups"] {
        let internal = format!("__eosmirror.{kind}.{alias}");
        if internal != existing {
            assert_eq!(
                target.partition_count(&internal),
                None,
                "{internal} was created by a refused run"
            );
        }
    }
    assert_eq!(
        target.partition_count(topic),
        None,
        "{topic} was created on the target by a refused run"
    );
}

/// Sets one topic config the way the fix command would (legacy
/// AlterConfigs, which resets the topic's other overrides: fine for these
/// topics, whose other settings the test does not rely on).
fn set_topic_config(target: &Cluster, topic: &str, key: &str, value: &str) {
    let alter = AlterConfig::new(ResourceSpecifier::Topic(topic)).set(key, value);
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(30)));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build runtime");
    let results = runtime
        .block_on(target.admin().alter_configs([&alter], &options))
        .unwrap_or_else(|e| panic!("alter configs of {topic}: {e}"));
    for result in results {
        result.unwrap_or_else(|(_, code)| panic!("alter configs of {topic}: {code}"));
    }
}

#[test]
fn a_position_topic_with_cleanup_policy_delete_is_refused_before_anything_is_created() {
    let bed = bed();
    let (topic, setup) = source_with_records("internal-position");
    let position = format!("__eosmirror.position.{}", setup.alias);
    // The right partition count (the default lane count), the wrong policy.
    bed.target
        .create_topic_with(&position, 4, &[("cleanup.policy", "delete")]);

    let line = refused(&setup, &topic, &[]);
    for needle in [
        format!("{position} has cleanup.policy=delete, but eosmirror needs cleanup.policy=compact"),
        format!(
            "`kafka-configs.sh --bootstrap-server {} --alter --entity-type topics --entity-name {position} --add-config cleanup.policy=compact`",
            bed.target.bootstrap
        ),
        "nothing was created or changed".to_string(),
    ] {
        assert!(line.contains(&needle), "{needle:?} missing from: {line}");
    }
    assert_nothing_created(&bed.target, &topic, &setup.alias, &position);
    assert!(
        bed.target
            .read_all(&position, support::Isolation::ReadUncommitted)
            .is_empty(),
        "the refused run wrote to {position}"
    );

    // The fix the message names is all it takes.
    set_topic_config(&bed.target, &position, "cleanup.policy", "compact");
    setup.copy_and_check(&topic, &[], &[&topic]);
}

#[test]
fn a_progress_topic_with_shorter_retention_than_configured_is_refused() {
    let bed = bed();
    let (topic, setup) = source_with_records("internal-progress");
    let progress = format!("__eosmirror.progress.{}", setup.alias);
    bed.target.create_topic_with(
        &progress,
        4,
        &[("cleanup.policy", "delete"), ("retention.ms", "3600000")],
    );

    let line = refused(&setup, &topic, &["--progress.retention.ms", "86400000"]);
    for needle in [
        format!("{progress} has retention.ms=3600000, shorter than --progress.retention.ms=86400000"),
        format!(
            "`kafka-configs.sh --bootstrap-server {} --alter --entity-type topics --entity-name {progress} --add-config retention.ms=86400000`",
            bed.target.bootstrap
        ),
        "or run with --progress.retention.ms 3600000".to_string(),
        "nothing was created or changed".to_string(),
    ] {
        assert!(line.contains(&needle), "{needle:?} missing from: {line}");
    }
    assert_nothing_created(&bed.target, &topic, &setup.alias, &progress);

    // The other way out the message names: accept the shorter history.
    setup.copy_and_check(&topic, &["--progress.retention.ms", "3600000"], &[&topic]);
}

/// The checks run at every topic refresh, not only at start: a position
/// topic switched to deletion while eosmirror runs stops the run at the next
/// refresh, with the same message.
#[test]
fn a_position_topic_altered_while_running_stops_the_run_at_the_next_refresh() {
    let bed = bed();
    let (topic, setup) = source_with_records("internal-altered");
    let position = format!("__eosmirror.position.{}", setup.alias);
    let mut mirror = setup.start(&topic, &[]);
    wait_for_copy(
        &bed.source,
        &bed.target,
        &topic,
        Duration::from_secs(120),
        &mut mirror,
    );

    set_topic_config(&bed.target, &position, "cleanup.policy", "delete");
    // The test refresh interval is 1 s.
    let code = mirror.wait_exit(REFUSAL_LIMIT);
    let output = mirror.output();
    assert_eq!(code, 1, "exit code; output:\n{output}");
    let needle =
        format!("{position} has cleanup.policy=delete, but eosmirror needs cleanup.policy=compact");
    assert!(
        output.contains(&needle),
        "{needle:?} missing from:\n{output}"
    );
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

/// A progress topic whose records the target refuses for good (here its
/// `max.message.bytes` is below any progress record; a revoked Write or a
/// policy does the same) makes every commit of a batch fail. The lane
/// stops the run naming the topic and the fix instead of aborting and
/// re-reading the same batch for ever, and nothing of the batch is
/// committed.
#[test]
fn a_progress_record_the_target_refuses_stops_the_run_naming_the_topic() {
    let bed = bed();
    let (topic, setup) = source_with_records("internal-refused");
    let progress = format!("__eosmirror.progress.{}", setup.alias);
    bed.target.create_topic_with(
        &progress,
        4,
        &[
            ("cleanup.policy", "delete"),
            ("retention.ms", "604800000"),
            ("max.message.bytes", "100"),
        ],
    );

    // Short, so that a transaction the lane could not abort does not hold
    // back the target's partitions for the tests after this one.
    let (code, output) = setup.run_to_exit(
        &topic,
        &["--transaction.timeout.ms", "5000"],
        Duration::from_secs(90),
    );
    assert_eq!(code, 1, "exit code; output:\n{output}");
    let needle = format!("the target refused the progress record of {topic}-");
    assert!(
        output.contains(&needle),
        "{needle:?} missing from:\n{output}"
    );
    for needle in [
        format!("in {progress} ["),
        "max.message.bytes".to_string(),
        "the lane's copies were not committed".to_string(),
    ] {
        assert!(
            output.contains(&needle),
            "{needle:?} missing from:\n{output}"
        );
    }
    let committed = count_committed(&bed.target, &topic);
    assert_eq!(
        committed.values().sum::<usize>(),
        0,
        "copies of a batch whose progress record was refused were committed: {committed:?}"
    );
}

//! A topic deleted and created again under the same name is another topic:
//! its offsets start over. Positions recorded for the old one must never
//! be applied to the new one (that silently skips the new topic's first
//! records and mixes both on the target). Against real Kafka.

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::process::Command;
use std::time::{Duration, Instant};

use support::mirror::{
    assert_exact_copy, by_partition, remove, wait_for_copy, Mirror, MirrorSetup,
};
use support::{
    bed, free_local_address, metric_value, scrape_metrics, unique_name, Cluster, Isolation,
    ReadRecord, TestRecord,
};

const COPY_LIMIT: Duration = Duration::from_secs(120);
const EXIT_LIMIT: Duration = Duration::from_secs(120);

fn records(tag: &str, partitions: i32, count: usize) -> Vec<TestRecord> {
    (0..partitions)
        .flat_map(|p| (0..count).map(move |i| TestRecord::new(p, &format!("{tag}-{p}-{i}"), tag)))
        .collect()
}

/// Values on the target per partition, in order.
fn target_values(cluster: &Cluster, topic: &str) -> BTreeMap<i32, Vec<Vec<u8>>> {
    by_partition(cluster.read_all(topic, Isolation::ReadCommitted))
        .into_iter()
        .map(|(p, rs)| (p, rs.into_iter().filter_map(|r| r.value).collect()))
        .collect()
}

/// Copies `tag` records of a fresh two-partition topic and stops cleanly.
fn copied_topic(setup: &MirrorSetup, prefix: &str) -> String {
    let bed = bed();
    let topic = bed.source.create_topic(prefix, 2);
    bed.source.produce(&topic, &records("old", 2, 100));
    let mut mirror = setup.start(&topic, &[]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert_exact_copy(&bed.source, &bed.target, &topic);
    topic
}

fn recreate(cluster: &Cluster, topic: &str) {
    cluster.delete_topic(topic);
    cluster.create_topic_with(topic, 2, &[]);
}

/// Starts a run of `topic` with group sync of `group`, kept going by a
/// healthy topic while `topic`'s partitions are stopped, and waits until
/// two rounds have refused the group with `refusal` (the first round that
/// logged it has flushed its records by the second); the target group
/// must not have moved. Returns the running mirror and its metrics address.
fn sync_refusing(setup: &MirrorSetup, topic: &str, group: &str, refusal: &str) -> (Mirror, String) {
    let bed = bed();
    let healthy = bed.source.create_topic("recreated-healthy", 1);
    bed.source.produce(&healthy, &records("h", 1, 10));
    let metrics_address = free_local_address();
    let mut mirror = setup.start(
        &format!("{topic}|{healthy}"),
        &[
            "--groups.sync",
            group,
            "--groups.sync.interval.secs",
            "1",
            "--metrics.address",
            &metrics_address,
        ],
    );
    let not_translated = format!("{topic}-0 has no translation: {refusal}");
    mirror.wait_for_output(0, &[&not_translated], COPY_LIMIT);
    let since = mirror.output().len();
    mirror.wait_for_output(since, &[&not_translated], COPY_LIMIT);
    assert_eq!(
        bed.target.group_offsets(group, topic, 2),
        BTreeMap::new(),
        "group sync moved {group} although it refused it"
    );
    (mirror, metrics_address)
}

#[test]
fn a_recreated_source_topic_stops_the_run_until_started_over_and_translates_its_new_offsets() {
    let bed = bed();
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let topic = copied_topic(&setup, "recreated-source");
    let old_copy = target_values(&bed.target, &topic);

    // More records than the old position: resuming there would skip the
    // new topic's first 100 records and append the rest to the old copy.
    recreate(&bed.source, &topic);
    bed.source.produce(&topic, &records("new", 2, 150));
    let (code, output) = setup.run_to_exit(&topic, &[], EXIT_LIMIT);
    assert_ne!(
        code, 0,
        "a recreated source topic must stop eosmirror:\n{output}"
    );
    for needle in [
        format!("{topic}-"),
        "the source topic was deleted and created again".to_string(),
        format!("--start.over '{topic}'"),
        "--exclude".to_string(),
    ] {
        assert!(
            output.contains(&needle),
            "the error must say {needle:?}:\n{output}"
        );
    }
    assert_eq!(
        target_values(&bed.target, &topic),
        old_copy,
        "nothing of the new topic may reach the old copy"
    );

    // The operator's choice: an empty target topic, and --start.over.
    bed.target.delete_topic(&topic);
    let mut mirror = setup.start(&topic, &["--start.over", &topic]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert!(
        mirror.output().contains("starting it over"),
        "the start-over must be logged:\n{}",
        mirror.output()
    );
    assert_exact_copy(&bed.source, &bed.target, &topic);

    // Translation uses the new topic's history only (the old one mapped
    // the same source offsets to a deleted target topic).
    let group = unique_name("recreated-group");
    bed.source
        .commit_group(&group, &[(&topic, 0, 40), (&topic, 1, 149)]);
    let (code, stdout, stderr) = setup.command(
        "translate",
        &["--group", &group, "--topic", &topic, "--apply"],
    );
    assert_eq!(code, 0, "translate failed:\n{stdout}\n{stderr}");
    let translated = bed.target.group_offsets(&group, &topic, 2);
    let source = by_partition(bed.source.read_all(&topic, Isolation::ReadCommitted));
    let target = by_partition(bed.target.read_all(&topic, Isolation::ReadCommitted));
    for (partition, source_offset) in [(0, 40), (1, 149)] {
        let first_after = |records: &[ReadRecord], offset: i64| {
            records
                .iter()
                .find(|r| r.offset >= offset)
                .map(|r| r.value.clone())
        };
        let target_offset = translated[&partition];
        assert_eq!(
            first_after(&target[&partition], target_offset),
            first_after(&source[&partition], source_offset),
            "partition {partition}: the group resumes at source offset {source_offset}, the translation says target offset {target_offset}"
        );
    }

    // Started over once: later runs resume normally.
    bed.source.produce(&topic, &records("later", 2, 10));
    let mut mirror = setup.start(&topic, &[]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

/// Recreated with more partitions, a topic has partitions no position
/// names. They are the new topic's as much as the others: none of them may
/// reach the old copy before the operator says `--start.over` (with the
/// default 4 lanes, some of them find an old position in their own lane,
/// the others in the lane of partition 0).
#[test]
fn a_source_topic_recreated_with_more_partitions_copies_none_of_them_until_started_over() {
    let bed = bed();
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let topic = copied_topic(&setup, "recreated-wider");
    let old_copy = target_values(&bed.target, &topic);

    bed.source.delete_topic(&topic);
    bed.source.create_topic_with(&topic, 8, &[]);
    bed.source.produce(&topic, &records("new", 8, 50));
    let (code, output) = setup.run_to_exit(&topic, &["--target.add.partitions"], EXIT_LIMIT);
    assert_ne!(
        code, 0,
        "a recreated source topic must stop eosmirror:\n{output}"
    );
    for partition in 0..8 {
        let stop = format!("{topic}-{partition}: the source topic was deleted and created again");
        assert!(output.contains(&stop), "{stop:?} is missing:\n{output}");
    }
    let mut now = target_values(&bed.target, &topic);
    now.retain(|_, values| !values.is_empty());
    assert_eq!(
        now, old_copy,
        "nothing of the new topic may reach the old copy"
    );

    bed.target.delete_topic(&topic);
    let mut mirror = setup.start(&topic, &["--start.over", &topic]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

/// A lane that comes back with a cache of the topics before a start-over
/// (another instance of the fleet started them over meanwhile, or a crash
/// lost the cache's writes since) has a cache ahead of the target, in
/// offsets of deleted topics: not a loss of the target's data.
#[test]
fn a_cache_of_the_topics_before_a_start_over_is_forgotten_not_taken_for_lost_data() {
    let bed = bed();
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let topic = copied_topic(&setup, "stale-cache");
    let stale_state = setup.dir.path().join("state-before-start-over");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(&setup.state_dir)
        .arg(&stale_state)
        .status()
        .expect("run cp");
    assert!(copied.success(), "copying the state dir failed");

    // Fewer records than the cached positions (100 a partition).
    recreate(&bed.source, &topic);
    bed.source.produce(&topic, &records("new", 2, 20));
    bed.target.delete_topic(&topic);
    let mut mirror = setup.start(&topic, &["--start.over", &topic]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());

    remove(&setup.state_dir);
    fs::rename(&stale_state, &setup.state_dir).unwrap();
    bed.source.produce(&topic, &records("later", 2, 5));
    let mut mirror = setup.start(&topic, &[]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert!(
        !mirror.output().contains("lost committed data"),
        "a stale cache is no loss:\n{}",
        mirror.output()
    );
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

#[test]
fn a_source_topic_recreated_while_running_is_a_named_stop() {
    let bed = bed();
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let topic = bed.source.create_topic("recreated-live", 2);
    bed.source.produce(&topic, &records("old", 2, 100));
    let mut mirror = setup.start(&topic, &[]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    let old_copy = target_values(&bed.target, &topic);

    recreate(&bed.source, &topic);
    bed.source.produce(&topic, &records("new", 2, 150));
    let code = mirror.wait_exit(EXIT_LIMIT);
    let output = mirror.output();
    assert_ne!(code, 0, "eosmirror must stop:\n{output}");
    assert!(
        output.contains("the source topic was deleted and created again"),
        "the stop must name the recreated topic:\n{output}"
    );
    assert_eq!(
        target_values(&bed.target, &topic),
        old_copy,
        "nothing of the new topic may reach the old copy"
    );
}

/// A source topic deleted for good leaves its lane at the next refresh:
/// the lane copies its other partitions on. Before, the lane kept the
/// topic: its next session (here after a park) failed on the missing topic
/// and restarted for as long as the run lasted, copying nothing.
#[test]
fn a_source_topic_deleted_while_running_leaves_its_lane_and_the_others_go_on() {
    let bed = bed();
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let gone = bed.source.create_topic("deleted-live", 2);
    let kept = bed.source.create_topic("deleted-kept", 2);
    bed.source.produce(&gone, &records("old", 2, 100));
    bed.source.produce(&kept, &records("old", 2, 100));
    // One lane: both topics' partitions share it. It parks once idle, and
    // the next record starts a new session.
    let mut mirror = setup.start(
        &format!("{gone},{kept}"),
        &["--lanes", "1", "--park.idle.ms", "1000"],
    );
    wait_for_copy(&bed.source, &bed.target, &gone, COPY_LIMIT, &mut mirror);
    wait_for_copy(&bed.source, &bed.target, &kept, COPY_LIMIT, &mut mirror);

    let since = mirror.output().len();
    bed.source.delete_topic(&gone);
    mirror.wait_for_output(since, &["partition leaves its lane"], COPY_LIMIT);
    bed.source.produce(&kept, &records("new", 2, 50));
    wait_for_copy(&bed.source, &bed.target, &kept, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert_exact_copy(&bed.source, &bed.target, &kept);
}

/// As above, with the topic deleted while a batch of it is open (the
/// throttle keeps each 3 s transaction reading): the batch is not
/// committed, and the topic leaves its lane at the next refresh. Before,
/// the check before the commit took the missing topic for a recreated one
/// and stopped its partitions with that advice, failing the run.
#[test]
fn a_source_topic_deleted_in_the_middle_of_a_batch_leaves_its_lane() {
    let bed = bed();
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let gone = bed.source.create_topic("deleted-mid-batch", 1);
    let kept = bed.source.create_topic("deleted-mid-batch-kept", 1);
    bed.source.produce(&gone, &records("old", 1, 300));
    bed.source.produce(&kept, &records("old", 1, 10));
    let mut mirror = setup.start_bare(
        &format!("{gone},{kept}"),
        &[
            "--lanes",
            "1",
            "--refresh.interval.ms",
            "1000",
            "--throttle.records.per.sec",
            "20",
            "--commit.interval.ms",
            "3000",
        ],
    );
    mirror.wait_for_output(0, &["lane session started"], COPY_LIMIT);
    std::thread::sleep(Duration::from_secs(4));
    let since = mirror.output().len();
    bed.source.delete_topic(&gone);
    mirror.wait_for_output(since, &["partition leaves its lane"], COPY_LIMIT);
    bed.source.produce(&kept, &records("new", 1, 10));
    wait_for_copy(&bed.source, &bed.target, &kept, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert!(
        !mirror.output().contains("created again"),
        "a deleted topic was taken for a recreated one:\n{}",
        mirror.output()
    );
    assert!(
        mirror
            .output()
            .contains("was deleted while the batch was read"),
        "the deletion must end an open batch:\n{}",
        mirror.output()
    );
    assert_exact_copy(&bed.source, &bed.target, &kept);
}

/// The local cache holds what is copied, not all ever copied: a topic
/// deleted while running is forgotten by its lane when it leaves it, one
/// deleted while eosmirror was stopped at the next start.
#[test]
fn the_cache_of_a_deleted_topic_is_forgotten() {
    let bed = bed();
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let live = bed.source.create_topic("forgotten-live", 2);
    let stopped = bed.source.create_topic("forgotten-stopped", 1);
    let kept = bed.source.create_topic("forgotten-kept", 1);
    for (topic, partitions) in [(&live, 2), (&stopped, 1), (&kept, 1)] {
        bed.source.produce(topic, &records("old", partitions, 20));
    }
    let include = format!("{live},{stopped},{kept}");
    // One lane: the deleted topic's partitions leave it together.
    let mut mirror = setup.start(&include, &["--lanes", "1"]);
    for topic in [&live, &stopped, &kept] {
        wait_for_copy(&bed.source, &bed.target, topic, COPY_LIMIT, &mut mirror);
    }
    let since = mirror.output().len();
    bed.source.delete_topic(&live);
    let forgot = |n: usize| format!("forgot the local cache of {n} partition(s) no longer copied");
    mirror.wait_for_output(since, &[&forgot(2)], COPY_LIMIT);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());

    bed.source.delete_topic(&stopped);
    let mut mirror = setup.start(&include, &["--lanes", "1"]);
    mirror.wait_for_output(0, &[&forgot(1)], COPY_LIMIT);
    bed.source.produce(&kept, &records("new", 1, 10));
    wait_for_copy(&bed.source, &bed.target, &kept, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    assert_exact_copy(&bed.source, &bed.target, &kept);
}

#[test]
fn a_recreated_target_topic_is_a_named_stop() {
    let bed = bed();
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let topic = copied_topic(&setup, "recreated-target");

    bed.target.delete_topic(&topic);
    bed.source.produce(&topic, &records("more", 2, 10));
    let (code, output) = setup.run_to_exit(&topic, &[], EXIT_LIMIT);
    assert_ne!(
        code, 0,
        "a recreated target topic must stop eosmirror:\n{output}"
    );
    assert!(
        output.contains("the target topic was deleted and created again"),
        "the stop must name the recreated target topic:\n{output}"
    );
    assert_eq!(
        bed.target.read_all(&topic, Isolation::ReadCommitted).len(),
        0,
        "nothing may be copied into the recreated target topic at the old positions"
    );
}

/// verify after a target topic recreated and copied over again with
/// `--start.over`, while the new copy is still shorter than the old one:
/// the old copy's progress records, past the new topic's end, are no part
/// of the new history. (verify cut the history at the first of them and
/// never read the new copy's records: "the target topic was deleted and
/// created again", the very fix just applied, until the new copy outgrew
/// the old one.)
#[test]
fn verify_reads_the_new_copy_of_a_target_topic_started_over() {
    let bed = bed();
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let topic = bed.source.create_topic("started-over-verify", 1);
    // The old copy: one transaction (and marker) per record, so it ends
    // far past where one transaction of them all would.
    let mut mirror = setup.start(&topic, &[]);
    for i in 0..20 {
        bed.source
            .produce(&topic, &[TestRecord::new(0, &format!("k{i}"), "old")]);
        wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    }
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    let (_, old_end) = bed.target.watermarks(&topic, 0);

    bed.target.delete_topic(&topic);
    let mut mirror = setup.start(&topic, &["--start.over", &topic]);
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(EXIT_LIMIT), 0, "{}", mirror.output());
    let (_, new_end) = bed.target.watermarks(&topic, 0);
    assert!(
        new_end < old_end,
        "the new copy ({new_end}) must be shorter than the old ({old_end}) for this test"
    );

    let (code, stdout, stderr) = setup.command("verify", &["--include", &topic]);
    assert_eq!(code, 0, "verify:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("verdict: EXACT") && stdout.contains("20 source and 20 target records"),
        "{stdout}"
    );
}

/// A group's offsets on a source topic deleted and created again are the
/// new topic's. Through the old copy's mapping they would become positions
/// in the old copy that look exact: `translate`, group sync and failover
/// refuse them by name instead (verify says why the copy is no copy of the
/// new topic, cutover does not wait for it to catch up), and status and
/// failover count the new topic's records as not replicated.
#[test]
fn a_group_on_a_recreated_source_topic_is_not_translated_through_the_old_copy() {
    let bed = bed();
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let topic = copied_topic(&setup, "recreated-groups");
    recreate(&bed.source, &topic);
    bed.source.produce(&topic, &records("new", 2, 30));
    let group = unique_name("recreated-groups");
    bed.source
        .commit_group(&group, &[(&topic, 0, 20), (&topic, 1, 30)]);
    let refusal = "the source topic was deleted and created again";

    let (code, stdout, stderr) = setup.command(
        "translate",
        &["--group", &group, "--topic", &topic, "--apply"],
    );
    assert_ne!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stderr.contains(refusal) && stderr.contains(&format!("--start.over '{topic}'")),
        "translate must name the recreated topic:\n{stdout}\n{stderr}"
    );
    assert_eq!(bed.target.group_offsets(&group, &topic, 2), BTreeMap::new());
    // verify names it too: the target holds a copy of the old topic.
    let (code, stdout, stderr) = setup.command("verify", &["--include", &topic]);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(
        stdout.contains(refusal),
        "verify must name the recreated topic:\n{stdout}\n{stderr}"
    );

    // status counts the new topic's records as not replicated.
    let (code, stdout, stderr) =
        setup.command("status", &["--max.lag.records", "29", "--format", "json"]);
    assert_eq!(code, 1, "lagging:\n{stdout}\n{stderr}");
    let status: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    for line in status["partitions"].as_array().unwrap() {
        assert_eq!(line["lag_records"].as_i64(), Some(30), "{line}");
        assert!(line["notes"].to_string().contains(refusal), "{line}");
    }

    // cutover names the partitions at once: their copy cannot catch up
    // before a start-over, so it does not wait for it.
    let started = Instant::now();
    let (code, stdout, stderr) = setup.command(
        "cutover",
        &[
            "--include",
            &topic,
            "--groups",
            &group,
            "--timeout.ms",
            "60000",
        ],
    );
    assert_ne!(code, 0, "{stdout}\n{stderr}");
    for partition in 0..2 {
        let problem = format!("problem: {topic}-{partition}: {refusal}");
        assert!(
            stdout.contains(&problem),
            "{problem:?}:\n{stdout}\n{stderr}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "cutover waited for a copy that cannot catch up:\n{stdout}"
    );
    assert_eq!(bed.target.group_offsets(&group, &topic, 2), BTreeMap::new());

    // A healthy topic keeps the run (and its group sync) going while the
    // recreated topic's partitions are stopped.
    let (mut mirror, _) = sync_refusing(&setup, &topic, &group, refusal);
    mirror.stop(EXIT_LIMIT);

    let (code, stdout, stderr) = setup.failover(&group);
    assert_ne!(code, Some(0), "{stdout}\n{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    let problems = report["problems"].to_string();
    assert!(
        problems.contains(&group) && problems.contains(refusal),
        "{report}"
    );
    assert_eq!(bed.target.group_offsets(&group, &topic, 2), BTreeMap::new());
    for partition in 0..2 {
        let rpo = report["rpo"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["topic"] == topic.as_str() && r["partition"] == partition)
            .unwrap_or_else(|| panic!("no recovery point of {topic}-{partition}: {report}"));
        assert_eq!(rpo["unreplicated_offsets"].as_i64(), Some(30), "{rpo}");
    }
}

/// A target topic deleted and created again holds none of the copy its
/// mapping describes: a group's offsets translated through that mapping
/// would land on records that are not there (or on other records later).
/// `translate` and group sync (whose local cache also holds the old copy's
/// mapping) refuse them by name and move nothing.
#[test]
fn a_group_is_not_translated_into_a_recreated_target_topic() {
    let bed = bed();
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let topic = copied_topic(&setup, "recreated-target-groups");
    recreate(&bed.target, &topic);
    let group = unique_name("recreated-target-groups");
    bed.source
        .commit_group(&group, &[(&topic, 0, 50), (&topic, 1, 100)]);
    let refusal = "the target topic was deleted and created again";

    let (code, stdout, stderr) = setup.command(
        "translate",
        &["--group", &group, "--topic", &topic, "--apply"],
    );
    assert_ne!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stderr.contains(refusal),
        "translate must name the recreated target topic:\n{stdout}\n{stderr}"
    );
    assert_eq!(bed.target.group_offsets(&group, &topic, 2), BTreeMap::new());

    // Group sync, in a run kept going by a healthy topic, with the state
    // dir (and its cache of the old copy) of the run that made it.
    let (mut mirror, metrics_address) = sync_refusing(&setup, &topic, &group, refusal);
    // Never synced: an alert on the translation's age fires.
    let age = metric_value(
        &scrape_metrics(&metrics_address),
        "eosmirror_group_translation_age_seconds",
        &[("group", &group)],
    );
    assert_eq!(age, Some(f64::INFINITY));
    // Deleted on the source, the group is no longer synced: its age stops
    // firing the alert.
    bed.source.delete_group(&group);
    let since = mirror.output().len();
    mirror.wait_for_output(since, &["its record is removed"], COPY_LIMIT);
    let age = metric_value(
        &scrape_metrics(&metrics_address),
        "eosmirror_group_translation_age_seconds",
        &[("group", &group)],
    );
    assert!(age.is_some_and(f64::is_nan), "{age:?}");
    mirror.stop(EXIT_LIMIT);
    assert_eq!(
        bed.target.read_all(&topic, Isolation::ReadCommitted).len(),
        0,
        "nothing may be copied into the recreated target topic at the old positions"
    );
}

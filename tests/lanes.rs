//! Lanes against real Kafka: many partitions copied exactly by a few lanes
//! (through kill -9 and a zombie), threads that do not grow with the
//! partition count, and a lane count that is fixed per deployment.

mod support;

use std::time::{Duration, Instant};

use support::mirror::{
    assert_exact_copy, fenced_restarts, fences_per_lane, lane_restarts, remove, tail,
    wait_for_copy, Mirror, MirrorSetup, MAX_ZOMBIE_FENCES,
};
use support::{
    bed, free_local_address, metric_value, scrape_metrics, unique_name, Isolation, TestRecord,
    TxnOutcome,
};

const PATIENCE: Duration = Duration::from_secs(240);

/// `count` records spread over `partitions`, each with a key, a value and a
/// header.
fn spread(tag: &str, count: usize, partitions: i32) -> Vec<TestRecord> {
    (0..count)
        .map(|i| TestRecord {
            partition: (i * 7919) as i32 % partitions,
            key: Some(format!("{tag}-k{i}").into_bytes()),
            value: Some(format!("{tag}-v{i}").into_bytes()),
            headers: vec![("n".into(), Some(i.to_string().into_bytes()))],
            timestamp: None,
        })
        .collect()
}

/// Threads of a running process.
fn threads(mirror: &Mirror) -> usize {
    std::fs::read_dir(format!("/proc/{}/task", mirror.pid()))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Records an instance reports replicated (its metrics), over all
/// partitions: progress, without reading a just-created 1,000-partition
/// topic whose leaders may not be known yet.
fn replicated(metrics_address: &str) -> usize {
    scrape_metrics(metrics_address)
        .lines()
        .filter(|l| l.starts_with("eosmirror_records_replicated_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as usize
}

/// Committed records on the target, over all partitions.
fn committed(topic: &str) -> usize {
    bed().target.read_all(topic, Isolation::ReadCommitted).len()
}

/// 1,000 source partitions, 4 lanes: the copy survives a kill -9 in the
/// middle and a frozen zombie that thaws after a new instance took its
/// lanes over, and ends exact. Threads stay at a few per lane.
#[test]
fn a_thousand_partitions_copy_exactly_through_kill_and_zombie() {
    let bed = bed();
    let partitions = 1000;
    let topic = bed.source.create_topic("lanes-many", partitions);
    let _deleted = DeletedAtTheEnd(&topic);
    bed.source.produce(&topic, &spread("a", 20_000, partitions));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let metrics = free_local_address();
    let args = [
        "--lanes",
        "4",
        "--transaction.timeout.ms",
        "10000",
        "--metrics.address",
        &metrics,
    ];

    // First instance: killed mid-copy.
    let mut first = setup.start(&topic, &args);
    first.wait_until(
        PATIENCE,
        Duration::from_millis(500),
        || Some(replicated(&metrics)).filter(|&n| n > 2_000),
        |output| format!("nothing copied; output:\n{}", tail(output, 40)),
    );
    let peak_threads = threads(&first);
    first.kill();
    // The run waited for the target's new partitions before starting its
    // lanes: none of them restarted because a partition had no leader yet.
    let first_output = first.output();
    assert!(
        first_output.contains("the target answers for the partitions just created"),
        "{}",
        tail(&first_output, 40)
    );
    let early_restarts = lane_restarts(&first_output, "NotLeaderForPartition");
    assert!(early_restarts.is_empty(), "{}", early_restarts.join("\n"));

    // Second instance: resumes, then is frozen (a zombie).
    bed.source.produce(&topic, &spread("b", 10_000, partitions));
    let mut zombie = setup.start(&topic, &args);
    zombie.wait_until(
        PATIENCE,
        Duration::from_millis(500),
        || Some(replicated(&metrics)).filter(|&n| n > 1_000),
        |output| {
            format!(
                "the second instance copied nothing; output:\n{}",
                tail(output, 40)
            )
        },
    );
    zombie.signal(libc::SIGSTOP);

    // Third instance takes the lanes over and copies the rest.
    bed.source.produce(&topic, &spread("c", 10_000, partitions));
    // Its own state dir (the zombie holds the lock of the first), the
    // same alias and transactional ids.
    let owner_setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let owner_metrics = free_local_address();
    let mut owner_args = args.to_vec();
    owner_args[5] = &owner_metrics;
    owner_args.extend(["--source.alias", &setup.alias]);
    let mut owner = owner_setup.start(&topic, &owner_args);
    wait_for_copy(&bed.source, &bed.target, &topic, PATIENCE, &mut owner);

    // The zombie thaws: the fleet's group tells it that its lanes moved; it
    // rejoins, takes a share in a clean hand-over, and leaves on SIGTERM.
    let before_thaw = zombie.output().len();
    zombie.signal(libc::SIGCONT);
    zombie.wait_for_output(
        before_thaw,
        &[
            "the fleet's group took lanes from this instance",
            "the fleet's group assigned lanes to this instance",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(
        zombie.stop(Duration::from_secs(60)),
        0,
        "the thawed instance did not leave cleanly:\n{}",
        tail(&zombie.output(), 40)
    );
    bed.source.produce(&topic, &spread("d", 2_000, partitions));
    wait_for_copy(&bed.source, &bed.target, &topic, PATIENCE, &mut owner);
    let owner_threads = threads(&owner);
    assert_eq!(
        owner.stop(Duration::from_secs(60)),
        0,
        "{}",
        tail(&owner.output(), 40)
    );
    // No fencing back and forth. A zombie frozen between the group's
    // confirmation and its init_transactions for a lane still sends that
    // init when it thaws, and fences the new owner's lane once (librdkafka
    // may retry it inside the call) before the group tells the zombie the
    // lane moved: a few fences of a lane at most, never a loop.
    let owner_output = owner.output();
    assert!(
        fences_per_lane(&owner_output)
            .values()
            .all(|&n| n <= MAX_ZOMBIE_FENCES),
        "the zombie fenced the new owner more than {MAX_ZOMBIE_FENCES} times in a lane:\n{}",
        fenced_restarts(&owner_output).join("\n")
    );
    assert_exact_copy(&bed.source, &bed.target, &topic);
    // librdkafka runs a few threads per client and broker; with one source
    // and one target broker that is well under 100 for 4 lanes, whatever
    // the partition count.
    for (who, n) in [("first", peak_threads), ("owner", owner_threads)] {
        assert!(
            n > 0 && n < 100,
            "{who} instance ran {n} threads for 4 lanes"
        );
    }
}

/// A test topic deleted from both clusters when the test ends, also when
/// it fails: 1,000 partitions on each single-broker test cluster weigh on
/// every later test.
struct DeletedAtTheEnd<'a>(&'a str);

impl Drop for DeletedAtTheEnd<'_> {
    fn drop(&mut self) {
        // Best effort, and never a panic (a second one while the test
        // unwinds would abort the binary): the target may not have it.
        for cluster in [&bed().source, &bed().target] {
            if let Err(e) = cluster.try_delete_topic(self.0) {
                eprintln!("cleanup: {e}");
            }
        }
    }
}

/// The lane count is fixed for a deployment: a later run with another count
/// is refused before it writes anything, and names the count to use.
/// MirrorMaker's `--num.streams` is taken as the lane count.
#[test]
fn a_different_lane_count_is_refused_with_the_count_to_use() {
    let bed = bed();
    let topic = bed.source.create_topic("lanes-fixed", 6);
    bed.source.produce(&topic, &spread("a", 600, 6));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    setup.copy_and_check(&topic, &["--num.streams", "2"], &[&topic]);
    let position = format!("__eosmirror.position.{}", setup.alias);
    let progress = format!("__eosmirror.progress.{}", setup.alias);
    assert_eq!(bed.target.partition_count(&position), Some(2));
    assert_eq!(bed.target.partition_count(&progress), Some(2));

    bed.source.produce(&topic, &spread("b", 300, 6));
    let before = committed(&topic);
    let started = Instant::now();
    let (code, output) = setup.run_to_exit(&topic, &["--lanes", "3"], Duration::from_secs(60));
    assert_ne!(
        code, 0,
        "a run with another lane count was not refused:\n{output}"
    );
    assert!(
        output.contains("Run with --lanes 2") && output.contains(&setup.alias),
        "the refusal does not name the lane count to use:\n{output}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(committed(&topic), before, "the refused run copied records");
    assert_eq!(bed.target.partition_count(&position), Some(2));

    // With the recorded count it carries on, exactly.
    setup.copy_and_check(&topic, &["--lanes", "2"], &[&topic]);
}

/// Partitions added by hand to the internal topics pass the lane-count
/// check with the new count, but each partition's position stays in the
/// partition of the lane the old count gave it: the lane that reads it
/// stops the run naming it. Before, it was passed over: the run went on
/// with the moved partitions stopped as "not empty" at best, and with
/// `--target.allow.nonempty` it copied them again from the first record.
/// A cold start (no state dir), so every lane reads its whole partition: a
/// warm one reads from its cache's oldest position (its cache then stops a
/// moved partition as lost data), and a fleet's other instances read from
/// theirs, which may start past the old records (see ARCHITECTURE).
#[test]
fn positions_left_in_another_lanes_partition_stop_the_run() {
    let bed = bed();
    let topic = bed.source.create_topic("lanes-by-hand", 6);
    bed.source.produce(&topic, &spread("a", 600, 6));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    setup.copy_and_check(&topic, &["--lanes", "1"], &[&topic]);
    for internal in ["position", "progress"] {
        bed.target
            .add_partitions(&format!("__eosmirror.{internal}.{}", setup.alias), 2);
    }

    remove(&setup.state_dir);
    let before = committed(&topic);
    let (code, output) = setup.run_to_exit(&topic, &["--lanes", "2"], Duration::from_secs(60));
    assert_ne!(code, 0, "{output}");
    assert!(
        output.contains("which --lanes 2 puts in another lane")
            && output.contains("This deployment cannot resume"),
        "{output}"
    );
    assert_eq!(
        committed(&topic),
        before,
        "records were copied again:\n{output}"
    );
}

/// Starts a run of `topic` with `extra` that stops at the fault point
/// between reading the target's metadata and creating topics or adding
/// partitions, and waits until it is there: what the test does meanwhile
/// is what another instance started at the same time would do.
fn waiting_to_create(setup: &MirrorSetup, topic: &str, extra: &[&str]) -> Mirror {
    let mut args = vec![
        "--include",
        topic,
        "--commit.interval.ms",
        "100",
        // Only the first refresh may see the target as it was, as in the race.
        "--refresh.interval.ms",
        "600000",
    ];
    args.extend_from_slice(extra);
    let go = setup.dir.path().join("create-now");
    let armed = format!("topics::slow-create=1*return({})", go.display());
    let mut mirror = setup.start_args_env(&args, &[("FAILPOINTS", &armed)]);
    mirror.wait_for_output(0, &["fault point topics::slow-create"], PATIENCE);
    mirror
}

/// Lets the run waiting at `topics::slow-create` create its topics.
fn go_on_creating(setup: &MirrorSetup) {
    std::fs::write(setup.dir.path().join("create-now"), b"").expect("fault point's file");
}

/// Two instances of one deployment started at the same time with different
/// `--lanes`: the one whose internal topics another instance created first,
/// with another partition count, is refused before it copies anything
/// (they would write the same source partitions under two transactional
/// ids). Here the test creates them while the instance waits at a fault
/// point between reading the target's metadata and creating its topics.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the fault points: cargo test --features eosmirror/failpoints"
)]
fn a_lane_count_raced_in_by_another_instance_is_refused_before_copying() {
    let bed = bed();
    let topic = bed.source.create_topic("lanes-raced", 4);
    bed.source.produce(&topic, &spread("a", 400, 4));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let position = format!("__eosmirror.position.{}", setup.alias);
    let progress = format!("__eosmirror.progress.{}", setup.alias);
    let mut mirror = waiting_to_create(&setup, &topic, &["--lanes", "4"]);
    bed.target
        .create_topic_with(&position, 2, &[("cleanup.policy", "compact")]);
    bed.target.create_topic_with(&progress, 2, &[]);
    go_on_creating(&setup);

    let code = mirror.wait_exit(Duration::from_secs(60));
    let output = mirror.output();
    assert_ne!(code, 0, "{}", tail(&output, 30));
    assert!(
        output.contains("Run with --lanes 2"),
        "the refusal does not name the lane count to use:\n{}",
        tail(&output, 30)
    );
    assert_eq!(committed(&topic), 0, "the refused run copied records");
}

/// Two instances with `--target.add.partitions` both grow a target topic
/// whose source gained partitions: the broker refuses the second
/// CreatePartitions (InvalidPartitions: the topic has them already), and
/// that instance decides again on fresh metadata instead of failing its
/// start. Here the test grows the topic while the instance waits at a
/// fault point between reading the target's metadata and adding them.
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the fault points: cargo test --features eosmirror/failpoints"
)]
fn partitions_another_instance_added_meanwhile_are_taken_as_added() {
    let bed = bed();
    let topic = bed.source.create_topic("lanes-grown", 2);
    bed.target.create_topic_with(&topic, 2, &[]);
    bed.source.add_partitions(&topic, 4);
    bed.source.produce(&topic, &spread("a", 400, 4));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = waiting_to_create(&setup, &topic, &["--target.add.partitions"]);
    bed.target.add_partitions(&topic, 4);
    go_on_creating(&setup);

    wait_for_copy(&bed.source, &bed.target, &topic, PATIENCE, &mut mirror);
    assert_eq!(mirror.stop(PATIENCE), 0, "{}", tail(&mirror.output(), 30));
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

/// A topic the target refuses to create (a cloud cluster's creation
/// policy, a quota, an ACL) stops neither the run nor the discovery of
/// other topics: it is named with what to do, counted, and asked for again
/// at every refresh, while a topic that appears after it is copied exactly.
/// A restart meets the same refusal at its first refresh and copies on too
/// (a fatal refusal there would leave a restarted fleet copying nothing).
/// (The fault point makes the target refuse topics named like its
/// argument, as PolicyViolation.)
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the fault points: cargo test --features eosmirror/failpoints"
)]
fn a_topic_the_target_refuses_to_create_leaves_the_others_copied() {
    left_out_topic_leaves_the_others_copied(
        "refused",
        "topics::refuse-create=return(-left-out)",
        &|topic| vec![format!("the target refused to create topic {topic} (")],
    );
}

/// Likewise a topic whose settings the source refuses to describe (no
/// DescribeConfigs ACL for it): the copy eosmirror would create carries
/// them, so the topic is left out with the ACL to grant. Before, every
/// refresh failed on it: no topic or partition that appeared later was
/// copied, for as long as the run lasted. (The fault point makes the
/// source refuse topics named like its argument, as
/// TopicAuthorizationFailed.)
#[test]
#[cfg_attr(
    not(feature = "failpoints"),
    ignore = "needs the fault points: cargo test --features eosmirror/failpoints"
)]
fn a_topic_whose_settings_cannot_be_read_leaves_the_others_copied() {
    left_out_topic_leaves_the_others_copied(
        "undescribed",
        "topics::refuse-describe=return(-left-out)",
        &|topic| {
            vec![
                format!("the settings of source topic {topic} could not be read"),
                format!("--operation DescribeConfigs --topic {topic}"),
            ]
        },
    );
}

/// Copies a topic, then has `fault` (a `FAILPOINTS` value matching topics
/// named `-left-out`) leave out one that appears, named by `told`'s lines,
/// while one that appears after it is copied; and again after a restart.
fn left_out_topic_leaves_the_others_copied(
    name: &str,
    fault: &str,
    told: &dyn Fn(&str) -> Vec<String>,
) {
    let bed = bed();
    let prefix = unique_name(name);
    let first = bed.source.create_topic(&format!("{prefix}-first"), 2);
    bed.source.produce(&first, &spread("a", 20, 2));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let pattern = format!("{prefix}-.*");
    let metrics = free_local_address();
    let fault = [("FAILPOINTS", fault)];
    let mut mirror = setup.start_env(&pattern, &["--metrics.address", &metrics], &fault);
    wait_for_copy(&bed.source, &bed.target, &first, PATIENCE, &mut mirror);

    let left_out = bed.source.create_topic(&format!("{prefix}-left-out"), 2);
    bed.source.produce(&left_out, &spread("r", 10, 2));
    let later = bed.source.create_topic(&format!("{prefix}-later"), 3);
    bed.source.produce(&later, &spread("l", 30, 3));
    let lines = told(&left_out);
    let needles: Vec<&str> = lines.iter().map(String::as_str).collect();
    mirror.wait_for_output(0, &needles, PATIENCE);
    wait_for_copy(&bed.source, &bed.target, &later, PATIENCE, &mut mirror);
    let text = scrape_metrics(&metrics);
    assert_eq!(
        metric_value(&text, "eosmirror_topics_refused", &[]),
        Some(1.0)
    );
    assert_eq!(bed.target.partition_count(&left_out), None);
    assert_eq!(
        mirror.stop(Duration::from_secs(60)),
        0,
        "{}",
        tail(&mirror.output(), 30)
    );
    assert_exact_copy(&bed.source, &bed.target, &first);
    assert_exact_copy(&bed.source, &bed.target, &later);

    // A restart names it at its first refresh and copies on.
    let mut mirror = setup.start_env(&pattern, &[], &fault);
    mirror.wait_for_output(0, &needles, PATIENCE);
    bed.source.produce(&later, &spread("m", 6, 3));
    wait_for_copy(&bed.source, &bed.target, &later, PATIENCE, &mut mirror);
    assert_eq!(
        mirror.stop(Duration::from_secs(60)),
        0,
        "{}",
        tail(&mirror.output(), 30)
    );
    assert_exact_copy(&bed.source, &bed.target, &later);
}

/// Positions written in another on-target format (an older eosmirror under
/// the same alias) stop the run with the format named, instead of being
/// read again and again.
#[test]
fn positions_in_another_format_stop_the_run_with_the_format_named() {
    let bed = bed();
    let topic = bed.source.create_topic("lanes-format", 4);
    bed.source.produce(&topic, &spread("a", 40, 4));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let position = format!("__eosmirror.position.{}", setup.alias);
    bed.target
        .create_topic_with(&position, 4, &[("cleanup.policy", "compact")]);
    // A version-1 record (format byte 1) in every lane's partition.
    let old: Vec<TestRecord> = (0..4)
        .map(|p| TestRecord {
            partition: p,
            key: Some(vec![1, 0]),
            value: Some(vec![1, 0, 0, 0]),
            headers: vec![],
            timestamp: None,
        })
        .collect();
    bed.target.produce(&position, &old);
    let (code, output) = setup.run_to_exit(&topic, &[], Duration::from_secs(120));
    assert_ne!(code, 0, "{output}");
    assert!(
        output.contains("format version 1") && output.contains("--source.alias"),
        "the stop does not name the format and the way out:\n{output}"
    );
}

/// Lines of eosmirror's output that contain `needle`.
fn count_lines(output: &str, needle: &str) -> usize {
    output.lines().filter(|l| l.contains(needle)).count()
}

/// An idle lane parks (closes its clients) and wakes for the next record,
/// exactly. The source's records end in transaction markers and an aborted
/// transaction, which a parked lane must not take for records (it would
/// wake and park again and again), and a record written while the lanes
/// are parked is copied, exactly once, without a restart.
#[test]
fn an_idle_lane_parks_and_wakes_for_the_next_record() {
    let bed = bed();
    let partitions = 6;
    let topic = bed.source.create_topic("lanes-park", partitions);
    bed.source
        .produce_transaction(&topic, &spread("a", 600, partitions), TxnOutcome::Commit);
    bed.source
        .produce_transaction(&topic, &spread("x", 60, partitions), TxnOutcome::Abort);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let metrics = free_local_address();
    let mut mirror = setup.start(
        &topic,
        &[
            "--lanes",
            "2",
            "--park.idle.ms",
            "3000",
            "--metrics.address",
            &metrics,
        ],
    );
    wait_for_copy(&bed.source, &bed.target, &topic, PATIENCE, &mut mirror);
    let deadline = Instant::now() + Duration::from_secs(60);
    while count_lines(&mirror.output(), "lane parked") < 2 {
        assert!(
            Instant::now() < deadline && mirror.is_running(),
            "the idle lanes never parked:\n{}",
            tail(&mirror.output(), 40)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let parked = scrape_metrics(&metrics);
    assert_eq!(
        parked
            .lines()
            .filter(|l| l.starts_with("eosmirror_lane_parked{") && l.ends_with(" 1"))
            .count(),
        2,
        "both lanes parked:\n{parked}"
    );

    // Quiet: the markers and the aborted records wake nothing.
    let parked_at = mirror.output().len();
    std::thread::sleep(Duration::from_secs(8));
    let output = mirror.output();
    assert_eq!(
        (
            count_lines(&output, "lane parked"),
            count_lines(&output, "lane woke")
        ),
        (2, 0),
        "a parked lane woke with nothing to copy:\n{}",
        tail(&output, 40)
    );

    // One record, to one partition: its lane wakes and copies it.
    let since = output.len();
    bed.source
        .produce_transaction(&topic, &spread("b", 1, partitions), TxnOutcome::Commit);
    mirror.wait_for_output(since, &["lane woke"], Duration::from_secs(60));
    wait_for_copy(&bed.source, &bed.target, &topic, PATIENCE, &mut mirror);
    // Records to every partition: the lane that copied the one record and
    // the one still parked both take them.
    bed.source.produce(&topic, &spread("c", 300, partitions));
    wait_for_copy(&bed.source, &bed.target, &topic, PATIENCE, &mut mirror);
    assert_eq!(mirror.stop(Duration::from_secs(60)), 0);
    let output = mirror.output().split_off(parked_at);
    assert!(
        lane_restarts(&output, "").is_empty(),
        "parking restarted a lane:\n{}",
        tail(&output, 40)
    );
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

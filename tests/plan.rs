//! `eosmirror plan`, the preflight before a cutover, against the real
//! clusters: it says what `run` would create or refuse, names a security
//! mistake without printing the secret, works through the SASL_SSL listener
//! with a JKS trust store, writes nothing, and never fences a running
//! instance with its transaction probe.

mod support;

use std::fs;
use std::time::Duration;

use support::mirror::{assert_exact_copy, wait_for_copy, MirrorSetup};
use support::{bed, secured_target, TestRecord, SASL_USER};

const PLAIN: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

fn records(count: i32, partitions: i32) -> Vec<TestRecord> {
    (0..count)
        .map(|i| TestRecord::new(i % partitions, &format!("k{i}"), &format!("value-{i:04}")))
        .collect()
}

/// Runs `eosmirror plan --include <topic>` plus `extra`; exit code, stdout
/// and stderr (printed for the test log).
fn plan(setup: &MirrorSetup, topic: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["--include", topic];
    args.extend_from_slice(extra);
    let (code, out, err) = setup.command("plan", &args);
    eprintln!("plan exit {code}\n--- stdout\n{out}--- stderr\n{err}");
    (code, out, err)
}

/// Appends `line` to the properties file `file`.
fn append(file: &std::path::Path, line: &str) {
    let mut text = std::fs::read_to_string(file).unwrap();
    text.push_str(line);
    std::fs::write(file, text).unwrap();
}

/// The plan's `problem:` line that names `setting`, checked to name the
/// file `file` too.
fn problem_in_file<'a>(out: &'a str, setting: &str, file: &std::path::Path) -> &'a str {
    let problem = out
        .lines()
        .find(|l| l.starts_with("problem:") && l.contains(setting))
        .unwrap_or_else(|| panic!("no problem line names {setting}:\n{out}"));
    assert!(problem.contains(&file.display().to_string()), "{problem}");
    problem
}

fn internal_topics(alias: &str) -> [String; 4] {
    ["progress", "position", "groups", "status"].map(|kind| format!("__eosmirror.{kind}.{alias}"))
}

#[test]
fn a_new_topic_is_planned_for_creation_and_nothing_is_written() {
    let bed = bed();
    let topic = bed.source.create_topic("plan-new", 3);
    bed.source.produce(&topic, &records(30, 3));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);

    let (code, out, _) = plan(
        &setup,
        &topic,
        &["--throttle", "100", "--throttle.records.per.sec", "10"],
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "create: topic {topic} on the target: 3 partition(s)"
        )),
        "{out}"
    );
    for internal in internal_topics(&setup.alias) {
        assert!(
            out.contains(&format!("create: internal topic {internal}:")),
            "{out}"
        );
    }
    assert!(out.contains("ok: source cluster"), "{out}");
    assert!(out.contains("ok: target cluster"), "{out}");
    assert!(
        out.contains(&format!(
            "ok: the target accepts transactions under eosmirror.{}.*",
            setup.alias
        )),
        "{out}"
    );
    assert!(
        out.contains("at most 30 records over 3 partition(s)"),
        "{out}"
    );
    assert!(out.contains("mean key+value+header size"), "{out}");
    // 30 records at 10/s: 3 s; 30 x ~12 bytes at 100 B/s: 4 s.
    assert!(out.contains("at --throttle.records.per.sec 10"), "{out}");
    assert!(out.contains("plan: READY"), "{out}");
    assert!(
        out.contains("note: ACLs not listed: without a SASL user"),
        "{out}"
    );

    let (code, json, _) = plan(&setup, &topic, &["--format", "json"]);
    assert_eq!(code, 0, "{json}");
    let report: serde_json::Value = serde_json::from_str(&json).expect("JSON report");
    assert_eq!(report["verdict"], "ready", "{json}");
    assert_eq!(report["estimate"]["records_at_most"], 30, "{json}");

    assert_eq!(
        bed.target.partition_count(&topic),
        None,
        "plan created the target topic"
    );
    for internal in internal_topics(&setup.alias) {
        assert_eq!(
            bed.target.partition_count(&internal),
            None,
            "plan created {internal}"
        );
    }
    assert!(!setup.state_dir.exists(), "plan created a state dir");
}

/// Settings librdkafka refuses only with what the lanes need (more than 5
/// requests in flight with idempotence; a poll interval below the session
/// timeout) make `run` stop at start: `plan` names them too, with the
/// file, instead of answering that nothing would stop `run`.
#[test]
fn settings_run_would_refuse_for_its_lanes_are_a_problem() {
    let bed = bed();
    let topic = bed.source.create_topic("plan-lane-settings", 1);
    bed.source.produce(&topic, &records(3, 1));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let (code, out, _) = plan(&setup, &topic, &[]);
    assert_eq!(code, 0, "{out}");

    append(
        &setup.producer_config,
        "\nmax.in.flight.requests.per.connection=10\n",
    );
    let (code, out, _) = plan(&setup, &topic, &[]);
    assert_eq!(code, 1, "{out}");
    problem_in_file(&out, "max.in.flight", &setup.producer_config);
    // The transaction probe uses the file's connection settings only.
    assert!(
        out.contains("\nok: the target accepts transactions"),
        "{out}"
    );
}

/// librdkafka judges `socket.timeout.ms` against the transaction timeout,
/// and a lane's fetch share comes from `--max.memory.bytes`: `plan` takes
/// both flags, so it judges the files as the run given them will.
#[test]
fn the_files_are_judged_with_the_runs_transaction_timeout() {
    let bed = bed();
    let topic = bed.source.create_topic("plan-txn-timeout", 1);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    append(&setup.producer_config, "\nsocket.timeout.ms=30000\n");
    append(&setup.consumer_config, "\nfetch.max.bytes=104857600\n");

    // A fetch above a lane's share of the memory bound is a warning with its cost.
    let (code, out, _) = plan(&setup, &topic, &["--max.memory.bytes", "64MiB"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("warning: fetch.max.bytes=104857600")
                && l.contains("over 4 lane(s)")),
        "{out}"
    );
    let (code, out, _) = plan(&setup, &topic, &["--transaction.timeout.ms", "10000"]);
    assert_eq!(code, 1, "{out}");
    problem_in_file(&out, "socket.timeout.ms", &setup.producer_config);
    // The probe's producer, refused alike, adds no "unknown" to the problem.
    assert!(!out.contains("unknown:"), "{out}");

    // Above the brokers' transaction.max.timeout.ms (900000 by default).
    let (code, out, _) = plan(&setup, &topic, &["--transaction.timeout.ms", "3600000"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("problem:")
            && l.contains("transaction.max.timeout.ms")
            && l.contains("lower --transaction.timeout.ms")),
        "{out}"
    );
}

/// A run's command line plans as it runs: `--num.streams` is the lane
/// count, run-only flags are accepted, and flags `run` refuses are a
/// problem with the message `run` stops with.
#[test]
fn mirrormaker_flags_plan_as_they_run() {
    let bed = bed();
    let topic = bed.source.create_topic("plan-mirrormaker", 1);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);

    let (code, out, err) = plan(&setup, &topic, &["--num.streams", "3"]);
    assert_eq!(code, 0, "{out}");
    let progress = format!("__eosmirror.progress.{}", setup.alias);
    assert!(
        out.contains(&format!(
            "create: internal topic {progress}: 3 partition(s)"
        )),
        "{out}"
    );
    assert!(err.contains("--num.streams 3 taken as --lanes 3"), "{err}");

    // Run-only flags (MirrorMaker's --offset.commit.interval.ms among them)
    // are accepted; flags run refuses are a problem, as run stops on them.
    let (code, out, _) = plan(
        &setup,
        &topic,
        &[
            "--offset.commit.interval.ms",
            "1000",
            "--metrics.address",
            "127.0.0.1:0",
        ],
    );
    assert_eq!(code, 0, "{out}");
    for (flags, named) in [
        (
            &["--message.handler", "com.example.Handler"][..],
            "--message.handler is not supported",
        ),
        (
            &["--transaction.timeout.ms", "300000"][..],
            "--health.stall.ms 180000 is not longer",
        ),
        (
            &["--offset.commit.interval.ms", "40000"][..],
            "--commit.interval.ms 40000",
        ),
    ] {
        let (code, out, _) = plan(&setup, &topic, flags);
        assert_eq!(code, 1, "{flags:?}: {out}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("problem: run refuses its flags:") && l.contains(named)),
            "{flags:?}: {out}"
        );
    }

    // Flags run cannot even take are a problem too (not "could not tell"),
    // all named at once, and the plan stops before any cluster: what it
    // would check there depends on them.
    let missing = setup.dir.path().join("no-such-throttle.json");
    let (code, out, _) = plan(
        &setup,
        &topic,
        &[
            "--lanes",
            "0",
            "--exclude",
            "(",
            "--throttle.file",
            missing.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{out}");
    let problems: Vec<&str> = out.lines().filter(|l| l.starts_with("problem:")).collect();
    assert_eq!(problems.len(), 3, "{out}");
    for named in [
        "--lanes 0: expected 1 to",
        "is not a valid regex",
        "no-such-throttle.json",
    ] {
        assert!(
            problems
                .iter()
                .any(|l| l.starts_with("problem: run refuses its flags:") && l.contains(named)),
            "{named}: {out}"
        );
    }
    assert!(!out.contains("ok:"), "no cluster is contacted: {out}");
}

#[test]
fn a_target_topic_with_fewer_partitions_blocks_and_is_named_with_its_fix() {
    let bed = bed();
    let topic = bed.source.create_topic("plan-short", 3);
    bed.source.produce(&topic, &records(9, 3));
    bed.target.create_topic_with(&topic, 2, &[]);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);

    let (code, out, _) = plan(&setup, &topic, &[]);
    assert_eq!(code, 1, "{out}");
    let problem = out
        .lines()
        .find(|l| l.starts_with("problem:") && l.contains(&topic))
        .unwrap_or_else(|| panic!("no problem line names {topic}:\n{out}"));
    assert!(
        problem.contains("has 2 partition(s), fewer than its source's 3"),
        "{problem}"
    );
    assert!(
        problem.contains(&format!("--alter --topic {topic} --partitions 3")),
        "{problem}"
    );
    assert!(problem.contains("--target.add.partitions"), "{problem}");
    assert!(out.contains("plan: BLOCKED: 1 problem(s)"), "{out}");

    let (code, out, _) = plan(&setup, &topic, &["--target.add.partitions"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "add-partitions: topic {topic} on the target: from 2 to 3 partition(s)"
        )),
        "{out}"
    );
    assert_eq!(
        bed.target.partition_count(&topic),
        Some(2),
        "plan changed it"
    );
}

#[test]
fn a_wrong_sasl_password_is_named_and_never_printed() {
    let bed = bed();
    let Some(sasl) = &bed.target.sasl_plain else {
        eprintln!("skipped: the target has no SASL listener");
        return;
    };
    let topic = bed.source.create_topic("plan-sasl", 1);
    let wrong = "not-the-password-plan-51c2";
    let setup = MirrorSetup::new(&bed.source.bootstrap, sasl);
    fs::write(
        &setup.producer_config,
        format!(
            "bootstrap.servers={sasl}\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
             sasl.jaas.config={PLAIN} required username=\"{}\" password=\"{wrong}\";\n",
            SASL_USER.0
        ),
    )
    .unwrap();

    let (code, out, err) = plan(&setup, &topic, &["--log", "trace"]);
    assert_eq!(code, 1, "{out}");
    let problem = out
        .lines()
        .find(|l| l.starts_with("problem:") && l.contains("target cluster"))
        .unwrap_or_else(|| panic!("no problem line for the target:\n{out}"));
    assert!(problem.contains("authentication failed"), "{problem}");
    assert!(problem.contains("sasl.jaas.config"), "{problem}");
    for output in [&out, &err] {
        assert!(!output.contains(wrong), "the password was printed");
    }
    assert!(out.contains("plan: BLOCKED"), "{out}");
}

#[test]
fn a_sasl_ssl_target_with_a_jks_truststore_is_ready() {
    let Some(s) = secured_target() else { return };
    let bed = bed();
    let topic = bed.source.create_topic("plan-secured", 2);
    bed.source.produce(&topic, &records(10, 2));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &s.sasl_ssl_plain);
    fs::write(
        &setup.producer_config,
        format!(
            "bootstrap.servers={}\n\
             sasl.jaas.config={PLAIN} required username=\"{}\" password=\"{}\";\n\
             sasl.mechanism=PLAIN\n\
             security.protocol=SASL_SSL\n\
             ssl.truststore.location={}\n\
             ssl.truststore.password={}\n\
             ssl.endpoint.identification.algorithm=\n",
            s.sasl_ssl_plain,
            s.cred("PLAIN_USER"),
            s.cred("PLAIN_PASSWORD"),
            s.file("client.truststore.jks"),
            s.cred("CLIENT_TRUSTSTORE_PASSWORD"),
        ),
    )
    .unwrap();

    let (code, out, err) = plan(&setup, &topic, &["--log", "debug"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("ok: target cluster")
            && l.contains(&format!("reachable at {}", s.sasl_ssl_plain))),
        "{out}"
    );
    assert!(out.contains("ok: the target accepts transactions"), "{out}");
    assert!(out.contains(&format!("create: topic {topic}")), "{out}");
    // The local target has no authorizer; librdkafka answers DescribeAcls
    // with an empty list then, which plan must not present as proof.
    assert!(
        out.contains(&format!(
            "DescribeAcls lists no ACL for User:{}",
            s.cred("PLAIN_USER")
        )),
        "{out}"
    );
    for secret in s.passwords() {
        assert!(
            !out.contains(&secret) && !err.contains(&secret),
            "a password was printed"
        );
    }
    assert_eq!(bed.target.partition_count(&topic), None);
}

#[test]
fn a_running_mirror_is_not_fenced_by_plan() {
    let bed = bed();
    let topic = bed.source.create_topic("plan-live", 2);
    bed.source.produce(&topic, &records(100, 2));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start(&topic, &["--lanes", "2"]);
    wait_for_copy(
        &bed.source,
        &bed.target,
        &topic,
        Duration::from_secs(120),
        &mut mirror,
    );

    // The plan runs while the mirror copies a new batch.
    bed.source.produce(&topic, &records(100, 2));
    let (code, out, _) = plan(&setup, &topic, &["--lanes", "2"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("ok: topic {topic} exists on the target")),
        "{out}"
    );
    for internal in internal_topics(&setup.alias) {
        assert!(
            out.contains(&format!("ok: internal topic {internal} exists")),
            "{out}"
        );
    }
    assert!(!out.contains(".lane-0"), "plan used a lane's id:\n{out}");

    // Still copying after the probe: new records arrive, no lane restarted
    // because it was fenced.
    bed.source.produce(&topic, &records(100, 2));
    wait_for_copy(
        &bed.source,
        &bed.target,
        &topic,
        Duration::from_secs(120),
        &mut mirror,
    );
    let code = mirror.stop(Duration::from_secs(30));
    let output = mirror.output();
    assert_eq!(code, 0, "{output}");
    assert!(
        !output
            .lines()
            .any(|l| l.contains("restarting lane session") && l.contains("fenced")),
        "a lane was fenced:\n{output}"
    );
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

#[test]
fn an_internal_topic_run_would_refuse_is_a_problem_with_its_fix() {
    let bed = bed();
    let topic = bed.source.create_topic("plan-internal", 1);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let position = format!("__eosmirror.position.{}", setup.alias);
    bed.target
        .create_topic_with(&position, 4, &[("cleanup.policy", "delete")]);

    let (code, out, _) = plan(&setup, &topic, &[]);
    assert_eq!(code, 1, "{out}");
    let problem = out
        .lines()
        .find(|l| l.starts_with("problem:") && l.contains(&position))
        .unwrap_or_else(|| panic!("no problem line names {position}:\n{out}"));
    assert!(problem.contains("cleanup.policy=delete"), "{problem}");
    assert!(
        problem.contains("--add-config cleanup.policy=compact"),
        "{problem}"
    );
    assert_eq!(bed.target.partition_count(&topic), None);
}

/// A target topic made beforehand with LogAppendTime is refused by `run`
/// before anything is copied into it; the preflight says so with the
/// command that sets CreateTime, and passes once it is set.
#[test]
fn a_target_topic_that_stamps_append_times_blocks_with_its_fix() {
    let bed = bed();
    let topic = bed.source.create_topic("plan-append-time", 2);
    bed.source.produce(&topic, &records(4, 2));
    bed.target
        .create_topic_with(&topic, 2, &[("message.timestamp.type", "LogAppendTime")]);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);

    let (code, out, _) = plan(&setup, &topic, &[]);
    assert_eq!(code, 1, "{out}");
    let problem = out
        .lines()
        .find(|l| l.starts_with("problem:") && l.contains(&topic))
        .unwrap_or_else(|| panic!("no problem line names {topic}:\n{out}"));
    assert!(
        problem.contains("message.timestamp.type=LogAppendTime: run refuses it"),
        "{problem}"
    );
    assert!(
        problem.contains(&format!(
            "--entity-name {topic} --add-config message.timestamp.type=CreateTime"
        )),
        "{problem}"
    );
    assert!(
        !out.lines()
            .any(|l| l.starts_with("ok:") && l.contains(&format!("topic {topic} exists"))),
        "the refused topic is also reported fine:\n{out}"
    );

    // One that --target.add.partitions would extend is refused alike.
    let fewer = bed.source.create_topic("plan-append-time-fewer", 3);
    bed.target
        .create_topic_with(&fewer, 2, &[("message.timestamp.type", "LogAppendTime")]);
    let (code, out, _) = plan(&setup, &fewer, &["--target.add.partitions"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("problem:")
            && l.contains(&fewer)
            && l.contains("message.timestamp.type=LogAppendTime: run refuses it")),
        "{out}"
    );

    bed.target
        .set_topic_config(&topic, "message.timestamp.type", "CreateTime");
    let (code, out, _) = plan(&setup, &topic, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "ok: topic {topic} exists on the target with 2 partition(s)"
        )),
        "{out}"
    );
}

//! `eosmirror run` given bad input: each mistake ends the run with a non-zero
//! exit and a message that names the problem and the fix, before anything is
//! written to the target; and no secret is ever printed.

mod support;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use support::mirror::{assert_exact_copy, wait_for_copy, MirrorSetup};
use support::{bed, unique_name, Isolation, TestRecord};

/// Generous bound for runs that fail before connecting.
const QUICK_LIMIT: Duration = Duration::from_secs(60);
/// eosmirror gives up on an unreachable cluster after 30 s (CONNECT_TIMEOUT);
/// the rest is slack for a busy machine.
const CONNECT_LIMIT: Duration = Duration::from_secs(90);
const COPY_LIMIT: Duration = Duration::from_secs(180);

/// One run's input: a source topic with records, selected by `--include`,
/// and an alias of its own, so that the internal topics it would create on
/// the target are its own too.
struct Case {
    setup: MirrorSetup,
    topic: String,
    alias: String,
}

impl Case {
    /// A fresh source topic with a few records; properties files pointing at
    /// the test bed (tests overwrite them).
    fn new(prefix: &str) -> Case {
        let bed = bed();
        let topic = bed.source.create_topic(prefix, 2);
        bed.source.produce(
            &topic,
            &[
                TestRecord::new(0, "k0", "v0"),
                TestRecord::new(1, "k1", "v1"),
                TestRecord::new(0, "k2", "v2"),
            ],
        );
        Case {
            setup: MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap),
            alias: topic.clone(),
            topic,
        }
    }

    fn write_consumer_config(&self, text: &str) {
        fs::write(&self.setup.consumer_config, text).unwrap();
    }

    fn write_producer_config(&self, text: &str) {
        fs::write(&self.setup.producer_config, text).unwrap();
    }

    /// Runs eosmirror on this case's topic until it exits by itself; returns
    /// the exit code, the output and how long the run took.
    fn run(&self, extra: &[&str], limit: Duration) -> (i32, String, Duration) {
        let mut args = vec!["--source.alias", &self.alias];
        args.extend_from_slice(extra);
        let started = Instant::now();
        let (code, output) = self.setup.run_to_exit(&self.topic, &args, limit);
        (code, output, started.elapsed())
    }

    /// Neither the copy of the topic nor eosmirror's internal topics exist
    /// on the target.
    fn assert_nothing_written(&self) {
        let target = &bed().target;
        for topic in [
            self.topic.clone(),
            format!("__eosmirror.progress.{}", self.alias),
            format!("__eosmirror.position.{}", self.alias),
        ] {
            assert_eq!(
                target.partition_count(&topic),
                None,
                "{topic} was created on the target by a run that should have written nothing"
            );
        }
        assert!(
            !self.setup.state_dir.exists(),
            "a run that should have done nothing created the state dir {}",
            self.setup.state_dir.display()
        );
    }
}

/// The one line eosmirror prints for the error that ends the run.
fn error_line(output: &str) -> &str {
    let lines: Vec<&str> = output
        .lines()
        .filter(|l| l.starts_with("eosmirror: error:"))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "expected exactly one `eosmirror: error:` line:\n{output}"
    );
    lines[0]
}

/// Asserts a failed run: exit code 1 and an error line containing every
/// one of `needles`. Returns the error line.
fn assert_failed<'o>(code: i32, output: &'o str, needles: &[&str]) -> &'o str {
    assert_eq!(code, 1, "exit code; output:\n{output}");
    let line = error_line(output);
    for needle in needles {
        assert!(line.contains(needle), "{needle:?} missing from: {line}");
    }
    line
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

/// A `\u` escape without four hex digits: the Java properties syntax error
/// is reported with the file, the line and how to write the escape, in
/// either file, for keys as well as values.
#[test]
fn malformed_properties_file_names_file_and_line() {
    let bed = bed();
    let case = Case::new("cli-escape");
    case.write_consumer_config(&format!(
        "# source cluster\nbootstrap.servers={}\nclient.id=mirror\\u00e9-\\u12G4\n",
        bed.source.bootstrap
    ));
    let (code, output, _) = case.run(&[], QUICK_LIMIT);
    let consumer_file = display(&case.setup.consumer_config);
    let line = assert_failed(
        code,
        &output,
        &[
            &format!("{consumer_file}: line 3"),
            "client.id",
            "four hex digits",
        ],
    );
    assert!(
        !line.contains(&display(&case.setup.producer_config)),
        "only the bad file is named: {line}"
    );
    case.assert_nothing_written();

    case.write_consumer_config(&format!("bootstrap.servers={}\n", bed.source.bootstrap));
    case.write_producer_config(&format!(
        "bootstrap.servers={}\n\n\n\\uZZZZ.key=1\n",
        bed.target.bootstrap
    ));
    let (code, output, _) = case.run(&[], QUICK_LIMIT);
    assert_failed(
        code,
        &output,
        &[
            &format!("{}: line 4", display(&case.setup.producer_config)),
            "the key",
            "four hex digits",
        ],
    );
    case.assert_nothing_written();
}

/// A properties file that does not exist is named, with the operating
/// system's reason said once (the cause is part of the message and of the
/// error chain; the chain must not print it twice).
#[test]
fn missing_properties_file_is_named_with_the_reason_once() {
    let case = Case::new("cli-missing");
    fs::remove_file(&case.setup.consumer_config).unwrap();
    let (code, output, _) = case.run(&[], QUICK_LIMIT);
    let consumer_file = display(&case.setup.consumer_config);
    let line = assert_failed(
        code,
        &output,
        &[&format!("cannot read properties file {consumer_file}")],
    );
    assert_eq!(
        line.matches("(os error 2)").count(),
        1,
        "the operating system's reason is said exactly once: {line}"
    );
    case.assert_nothing_written();
}

/// A key librdkafka does not know (a typo) is rejected naming the file, the
/// line and the key, with the fix.
#[test]
fn unknown_key_is_rejected_naming_key_and_file() {
    let bed = bed();
    let case = Case::new("cli-unknown-key");
    case.write_producer_config(&format!(
        "bootstrap.servers={}\nlinger.mss=5\n",
        bed.target.bootstrap
    ));
    let (code, output, _) = case.run(&[], QUICK_LIMIT);
    assert_failed(
        code,
        &output,
        &[
            &format!("{}:2:", display(&case.setup.producer_config)),
            "`linger.mss`",
            "rejected by librdkafka",
            "remove the line",
        ],
    );
    case.assert_nothing_written();

    case.write_producer_config(&format!("bootstrap.servers={}\n", bed.target.bootstrap));
    case.write_consumer_config(&format!(
        "bootstrap.servers={}\nfetch.max.wait.mss=5\n",
        bed.source.bootstrap
    ));
    let (code, output, _) = case.run(&[], QUICK_LIMIT);
    assert_failed(
        code,
        &output,
        &[
            &format!("{}:2:", display(&case.setup.consumer_config)),
            "`fetch.max.wait.mss`",
        ],
    );
    case.assert_nothing_written();
}

/// Settings librdkafka refuses only together with what the lanes need
/// (MirrorMaker 1 runs without idempotence, so its files may allow more
/// than 5 requests in flight; a consumer's poll interval below its session
/// timeout) end the run before anything is written, naming the file: a
/// lane creates its clients only after the first refresh created topics.
#[test]
fn settings_refused_with_the_lanes_own_are_named_before_anything_is_written() {
    let bed = bed();
    let case = Case::new("cli-in-flight");
    case.write_producer_config(&format!(
        "bootstrap.servers={}\nmax.in.flight.requests.per.connection=10\n",
        bed.target.bootstrap
    ));
    let (code, output, _) = case.run(&[], QUICK_LIMIT);
    assert_failed(
        code,
        &output,
        &[
            &display(&case.setup.producer_config),
            "max.in.flight",
            "nothing was written",
        ],
    );
    case.assert_nothing_written();

    case.write_producer_config(&format!("bootstrap.servers={}\n", bed.target.bootstrap));
    case.write_consumer_config(&format!(
        "bootstrap.servers={}\nmax.poll.interval.ms=30000\nsession.timeout.ms=45000\n",
        bed.source.bootstrap
    ));
    let (code, output, _) = case.run(&[], QUICK_LIMIT);
    assert_failed(
        code,
        &output,
        &[
            &display(&case.setup.consumer_config),
            "max.poll.interval.ms",
        ],
    );
    case.assert_nothing_written();
}

/// `isolation.level=read_uncommitted` would copy aborted source
/// transactions: refused with the reason, not silently overridden.
#[test]
fn read_uncommitted_is_refused_with_the_exactly_once_reason() {
    let bed = bed();
    let case = Case::new("cli-isolation");
    case.write_consumer_config(&format!(
        "bootstrap.servers={}\nisolation.level=read_uncommitted\n",
        bed.source.bootstrap
    ));
    let (code, output, _) = case.run(&[], QUICK_LIMIT);
    assert_failed(
        code,
        &output,
        &[
            &format!("{}:2:", display(&case.setup.consumer_config)),
            "isolation.level=read_uncommitted",
            "exactly-once",
            "read_committed",
            "Remove the line",
        ],
    );
    case.assert_nothing_written();
}

/// A stall limit for /healthz shorter than one blocking Kafka call may
/// take would report a lane waiting on the target as stuck, and make an
/// orchestrator restart a healthy process: refused before anything runs.
#[test]
fn health_stall_limit_shorter_than_a_blocking_call_is_refused() {
    let case = Case::new("cli-health-stall");
    let (code, output, _) = case.run(
        &[
            "--transaction.timeout.ms",
            "60000",
            "--health.stall.ms",
            "60000",
        ],
        QUICK_LIMIT,
    );
    assert_failed(
        code,
        &output,
        &["--health.stall.ms 60000", "70000 ms", "Use at least 130000"],
    );
    case.assert_nothing_written();
}

/// MirrorMaker's `--offset.commit.interval.ms` (its default, 60000, is
/// eosmirror's default transaction timeout) is how long a lane's
/// transaction collects records: one the target would abort before its
/// commit is refused before anything runs, with the longest interval to use.
#[test]
fn commit_interval_the_transaction_timeout_would_cut_short_is_refused() {
    let case = Case::new("cli-commit-interval");
    // Not `case.run`: its test defaults set --commit.interval.ms already.
    let mut mirror = case.setup.start_bare(
        &case.topic,
        &[
            "--source.alias",
            &case.alias,
            "--offset.commit.interval.ms",
            "60000",
        ],
    );
    let code = mirror.wait_exit(QUICK_LIMIT);
    let output = mirror.output();
    assert_failed(
        code,
        &output,
        &[
            "--commit.interval.ms 60000",
            "--transaction.timeout.ms 60000",
            "Use at most 30000",
        ],
    );
    case.assert_nothing_written();
}

/// A metrics address whose port is taken: refused before the clusters are
/// asked anything or the state dir is made. Before, the run found out only
/// after connecting to both clusters and creating its state dir.
#[test]
fn metrics_address_in_use_is_refused_before_anything_is_written() {
    let case = Case::new("cli-metrics-in-use");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let (code, output, _) = case.run(&["--metrics.address", &address], QUICK_LIMIT);
    assert_failed(
        code,
        &output,
        &[&format!(
            "starting the metrics endpoint on {address} (--metrics.address)"
        )],
    );
    case.assert_nothing_written();
}

/// A group pattern that is no regex: named with its option before anything
/// runs, like a bad `--include`.
#[test]
fn bad_group_pattern_is_named_with_its_option() {
    let case = Case::new("cli-bad-groups");
    let (code, output, _) = case.run(&["--groups.sync", "billing,(audit"], QUICK_LIMIT);
    assert_failed(
        code,
        &output,
        &[
            "--groups.sync pattern \"billing,(audit\" is not a valid regex",
            "use '*' for all groups",
        ],
    );
    case.assert_nothing_written();
}

/// A closed port as the source's bootstrap address.
#[test]
fn unreachable_source_is_named_with_its_address() {
    let case = Case::new("cli-no-source");
    case.write_consumer_config("bootstrap.servers=127.0.0.1:1\n");
    let (code, output, took) = case.run(&[], CONNECT_LIMIT);
    assert_failed(
        code,
        &output,
        &[
            "cannot reach the source cluster at 127.0.0.1:1",
            &display(&case.setup.consumer_config),
        ],
    );
    eprintln!("unreachable source reported after {took:?}");
    case.assert_nothing_written();
}

/// A broker whose advertised listener is unreachable from here (the local
/// source's proxied listener: the broker listens on one port and advertises
/// another, where no proxy runs in this test binary). The bootstrap answers,
/// every later request would fail: named at start-up, with the fix.
#[test]
fn unreachable_advertised_listener_is_named_with_the_fix() {
    let Some(proxied) = bed().source.proxied else {
        eprintln!("skipped: needs the local clusters' proxied listener");
        return;
    };
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", proxied.advertised_port)).is_err(),
        "something (a fault proxy of another test run?) listens on 127.0.0.1:{}; this test needs it unreachable",
        proxied.advertised_port
    );
    let case = Case::new("cli-advertised");
    case.write_consumer_config(&format!(
        "bootstrap.servers=127.0.0.1:{}\n",
        proxied.broker_port
    ));
    let (code, output, _) = case.run(&[], CONNECT_LIMIT);
    assert_failed(
        code,
        &output,
        &[
            &format!("advertises 127.0.0.1:{}", proxied.advertised_port),
            "advertised.listeners",
            &display(&case.setup.consumer_config),
        ],
    );
    case.assert_nothing_written();
}

/// A closed port as the target's bootstrap address (the source is fine).
#[test]
fn unreachable_target_is_named_with_its_address() {
    let case = Case::new("cli-no-target");
    case.write_producer_config("bootstrap.servers=127.0.0.1:1\n");
    let (code, output, took) = case.run(&[], CONNECT_LIMIT);
    assert_failed(
        code,
        &output,
        &[
            "cannot reach the target cluster at 127.0.0.1:1",
            &display(&case.setup.producer_config),
        ],
    );
    eprintln!("unreachable target reported after {took:?}");
    case.assert_nothing_written();
}

/// A target topic with fewer partitions than its source cannot hold a
/// same-partition copy: the run stops naming the topic, both counts and
/// `--target.add.partitions`, and changes nothing on the target (not even
/// the other selected topics or the internal topics). With the flag, the
/// same setup copies exactly.
#[test]
fn target_topic_with_fewer_partitions_is_refused_untouched() {
    let bed = bed();
    let prefix = unique_name("cli-partitions");
    let small = format!("{prefix}-small");
    let other = format!("{prefix}-other");
    let alias = prefix.clone();
    bed.source.create_topic_with(&small, 3, &[]);
    bed.source.create_topic_with(&other, 2, &[]);
    for p in 0..3 {
        bed.source
            .produce(&small, &[TestRecord::new(p, "k", "small")]);
    }
    bed.source
        .produce(&other, &[TestRecord::new(1, "k", "other")]);
    bed.target.create_topic_with(&small, 1, &[]);

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let include = format!("{prefix}-.*");
    let (code, output) = setup.run_to_exit(&include, &["--source.alias", &alias], CONNECT_LIMIT);
    assert_failed(
        code,
        &output,
        &[
            &format!("{small} (source 3, target 1)"),
            "--target.add.partitions",
            "nothing was created or changed",
        ],
    );
    assert_eq!(bed.target.partition_count(&small), Some(1));
    assert!(bed
        .target
        .read_all(&small, Isolation::ReadUncommitted)
        .is_empty());
    for topic in [
        other.clone(),
        format!("__eosmirror.progress.{alias}"),
        format!("__eosmirror.position.{alias}"),
    ] {
        assert_eq!(
            bed.target.partition_count(&topic),
            None,
            "{topic} was created although the run was refused"
        );
    }

    let mut mirror = setup.start(
        &include,
        &["--source.alias", &alias, "--target.add.partitions"],
    );
    wait_for_copy(&bed.source, &bed.target, &small, COPY_LIMIT, &mut mirror);
    wait_for_copy(&bed.source, &bed.target, &other, COPY_LIMIT, &mut mirror);
    assert_eq!(mirror.stop(COPY_LIMIT), 0, "{}", mirror.output());
    assert_exact_copy(&bed.source, &bed.target, &small);
    assert_exact_copy(&bed.source, &bed.target, &other);
    assert_eq!(bed.target.partition_count(&small), Some(3));
}

/// MirrorMaker 1 flags: those that would change what is copied are refused
/// with what to do instead; harmless ones are accepted (and noted), so a
/// MirrorMaker command line runs as is.
#[test]
fn mirrormaker_flags_are_refused_or_accepted() {
    let bed = bed();
    let case = Case::new("cli-mm-flags");
    let refused: [(&[&str], &[&str]); 3] = [
        (
            &["--message.handler", "com.example.Handler"],
            &[
                "--message.handler is not supported",
                "transform records in a consumer of the target",
            ],
        ),
        (
            &["--num.producers", "2"],
            &["--num.producers is not supported", "remove the flag"],
        ),
        (
            &["--abort.on.send.failure", "false"],
            &["--abort.on.send.failure=false is not supported"],
        ),
    ];
    for (flags, needles) in refused {
        let (code, output, _) = case.run(flags, QUICK_LIMIT);
        assert_failed(code, &output, needles);
        case.assert_nothing_written();
    }

    // A MirrorMaker 1 command line: --whitelist/--blacklist instead of
    // --include/--exclude, and flags eosmirror has no use for.
    let blacklist = format!("{}-nothing", case.topic);
    let mut mirror = case.setup.start_args(&[
        "--whitelist",
        &case.topic,
        "--blacklist",
        &blacklist,
        "--num.streams",
        "4",
        "--new.consumer",
        "--abort.on.send.failure",
        "true",
        "--offset.commit.interval.ms",
        "100",
        "--source.alias",
        &case.alias,
        "--refresh.interval.ms",
        "1000",
    ]);
    wait_for_copy(
        &bed.source,
        &bed.target,
        &case.topic,
        COPY_LIMIT,
        &mut mirror,
    );
    assert_eq!(mirror.stop(COPY_LIMIT), 0, "{}", mirror.output());
    assert_exact_copy(&bed.source, &bed.target, &case.topic);
    let output = mirror.output();
    for note in [
        "--num.streams 4 taken as --lanes 4",
        "--new.consumer ignored",
    ] {
        assert!(output.contains(note), "{note:?} not logged:\n{output}");
    }
}

const SECRET: &str = "hunter2-SECRET";

fn sasl_properties(bootstrap: &str) -> String {
    format!(
        "bootstrap.servers={bootstrap}\n\
         security.protocol=SASL_PLAINTEXT\n\
         sasl.mechanism=PLAIN\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"u\" password=\"{SECRET}\";\n"
    )
}

/// SASL credentials in either properties file never appear in eosmirror's
/// output, at debug and trace log levels, whether the connection fails
/// (SASL against a PLAINTEXT listener) or the JAAS text itself is malformed.
#[test]
fn secrets_are_never_printed() {
    let bed = bed();
    let target_sasl = Case::new("cli-secret-target");
    target_sasl.write_producer_config(&sasl_properties(&bed.target.bootstrap));
    let source_sasl = Case::new("cli-secret-source");
    source_sasl.write_consumer_config(&format!(
        "{}debug=all\n",
        sasl_properties(&bed.source.bootstrap)
    ));
    let bad_jaas = Case::new("cli-secret-jaas");
    bad_jaas.write_producer_config(&format!(
        "bootstrap.servers={}\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"u\" password=\"{SECRET}\"\n",
        bed.target.bootstrap
    ));

    // The connection attempts take CONNECT_TIMEOUT each: run them side by side.
    let results = std::thread::scope(|s| {
        let runs = [
            (&target_sasl, "--log", "debug", "target"),
            (&source_sasl, "--log", "trace", "source"),
            (&bad_jaas, "--log", "trace", "jaas"),
        ]
        .map(|(case, flag, level, what)| {
            s.spawn(move || (what, case.run(&[flag, level], CONNECT_LIMIT)))
        });
        runs.map(|h| h.join().unwrap())
    });
    for (what, (code, output, took)) in results {
        eprintln!("{what}: exit {code} after {took:?}");
        assert!(
            !output.contains(SECRET),
            "{what}: the password appears in eosmirror's output:\n{output}"
        );
        let line = error_line(&output);
        assert_eq!(code, 1, "{what}: {output}");
        match what {
            "target" => assert!(line.contains("target cluster"), "{line}"),
            "source" => assert!(line.contains("source cluster"), "{line}"),
            _ => assert!(
                line.contains("sasl.jaas.config") && line.contains("not shown"),
                "{line}"
            ),
        }
    }
    for case in [&target_sasl, &source_sasl, &bad_jaas] {
        case.assert_nothing_written();
    }
}

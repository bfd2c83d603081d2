//! `eosmirror run --throttle.*`: a throttled copy is still exact and never
//! faster than the limit; `--throttle.file` is re-read on SIGHUP, a bad file
//! keeps the old limits. Timing is only asserted in the direction that cannot
//! be flaky (a throttled copy takes *at least* so long).

mod support;

use std::fs;
use std::time::{Duration, Instant};

use support::mirror::{assert_exact_copy, count_committed, tail, wait_for_copy, MirrorSetup};
use support::{bed, free_local_address, metric_value, scrape_metrics, TestRecord};

/// How long a copy may take on a busy machine.
const COPY_LIMIT: Duration = Duration::from_secs(120);
const EXIT_LIMIT: Duration = Duration::from_secs(60);

fn records(partition: i32, count: usize) -> Vec<TestRecord> {
    (0..count)
        .map(|i| TestRecord::new(partition, &format!("k{i}"), &format!("p{partition}-v{i}")))
        .collect()
}

fn committed_total(topic: &str) -> usize {
    let target = &bed().target;
    if target.partition_count(topic).is_none() {
        return 0;
    }
    count_committed(target, topic).values().sum()
}

/// 2000 records at 500 records/s: one second's burst, then 1500 records
/// that cannot be read in less than 3 s. The copy is exact, and the limit
/// and the time spent waiting show in the metrics.
#[test]
fn records_per_sec_limit_paces_the_copy_and_keeps_it_exact() {
    let bed = bed();
    let topic = bed.source.create_topic("throttle-records", 2);
    bed.source.produce(&topic, &records(0, 1000));
    bed.source.produce(&topic, &records(1, 1000));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let metrics_address = free_local_address();

    let started = Instant::now();
    let mut mirror = setup.start(
        &topic,
        &[
            "--throttle.records.per.sec",
            "500",
            "--metrics.address",
            &metrics_address,
        ],
    );
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    let took = started.elapsed();
    let metrics = scrape_metrics(&metrics_address);
    let code = mirror.stop(EXIT_LIMIT);
    let output = mirror.output();
    assert_eq!(code, 0, "eosmirror did not stop cleanly:\n{output}");
    assert_exact_copy(&bed.source, &bed.target, &topic);

    // The 2000th read needs (2000 − 1 − 500) / 500 s of refill after the
    // throttle was created, which is after `started`.
    assert!(
        took >= Duration::from_millis(2900),
        "2000 records at 500 records/s copied in {took:?}"
    );
    assert!(
        output.contains("throttle: bytes.per.sec=unlimited records.per.sec=500"),
        "start-up does not name the throttle:\n{}",
        tail(&output, 40)
    );
    assert_eq!(
        metric_value(&metrics, "eosmirror_throttle_records_per_second", &[]),
        Some(500.0),
        "{metrics}"
    );
    assert_eq!(
        metric_value(&metrics, "eosmirror_throttle_bytes_per_second", &[]),
        Some(0.0),
        "{metrics}"
    );
    let waited = metric_value(&metrics, "eosmirror_throttle_wait_ms_total", &[]).unwrap_or(0.0);
    assert!(waited > 0.0, "no throttle wait counted:\n{metrics}");
}

/// A copy throttled to 10 records/s from a `--throttle.file` stays under that
/// rate; a SIGHUP with an unreadable file keeps it (and says why); a SIGHUP
/// with a new limit applies it at once: the rest of the copy, which would
/// take minutes at the old rate, finishes.
#[test]
fn sighup_rereads_the_throttle_file() {
    let bed = bed();
    let topic = bed.source.create_topic("throttle-sighup", 1);
    bed.source.produce(&topic, &records(0, 3000));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let file = setup.dir.path().join("throttle.properties");
    fs::write(&file, "# set by the test\nrecords.per.sec=10\n").unwrap();
    let metrics_address = free_local_address();

    let started = Instant::now();
    let file_arg = file.to_str().unwrap();
    let mut mirror = setup.start(
        &topic,
        &[
            "--throttle.file",
            file_arg,
            "--metrics.address",
            &metrics_address,
        ],
    );
    // The SIGHUP handler is installed before this line is logged.
    mirror.wait_until(
        COPY_LIMIT,
        Duration::from_millis(200),
        || {
            mirror_output_contains(
                &setup,
                "throttle: bytes.per.sec=unlimited records.per.sec=10 (SIGHUP re-reads the file)",
            )
            .then_some(())
        },
        |output| format!("no throttle start-up line:\n{}", tail(output, 40)),
    );
    mirror.wait_until(
        COPY_LIMIT,
        Duration::from_millis(500),
        || (committed_total(&topic) > 0).then_some(()),
        |output| format!("nothing copied:\n{}", tail(output, 40)),
    );
    std::thread::sleep(Duration::from_secs(2));
    let copied = committed_total(&topic);
    let elapsed = started.elapsed().as_secs_f64();
    // One second's burst, the rate since start, one read into debt.
    let most = 10.0 + 10.0 * elapsed + 1.0;
    assert!(
        (copied as f64) <= most,
        "{copied} records copied in {elapsed:.1} s at 10 records/s"
    );

    fs::write(&file, "records.per.sec=lots\n").unwrap();
    mirror.signal(libc::SIGHUP);
    mirror.wait_until(
        COPY_LIMIT,
        Duration::from_millis(200),
        || {
            mirror_output_contains(
                &setup,
                "records.per.sec: \"lots\" is not a positive integer; throttle stays bytes.per.sec=unlimited records.per.sec=10",
            )
            .then_some(())
        },
        |output| format!("bad throttle file not reported:\n{}", tail(output, 40)),
    );
    let metrics = scrape_metrics(&metrics_address);
    assert_eq!(
        metric_value(&metrics, "eosmirror_throttle_records_per_second", &[]),
        Some(10.0),
        "{metrics}"
    );

    fs::write(&file, "records.per.sec=1000000\nbytes.per.sec=100MiB\n").unwrap();
    mirror.signal(libc::SIGHUP);
    mirror.wait_until(
        COPY_LIMIT,
        Duration::from_millis(200),
        || {
            mirror_output_contains(
                &setup,
                "throttle changed: bytes.per.sec=unlimited records.per.sec=10 -> bytes.per.sec=104857600 records.per.sec=1000000",
            )
            .then_some(())
        },
        |output| format!("new throttle not logged:\n{}", tail(output, 40)),
    );
    let metrics = scrape_metrics(&metrics_address);
    assert_eq!(
        metric_value(&metrics, "eosmirror_throttle_records_per_second", &[]),
        Some(1_000_000.0),
        "{metrics}"
    );
    assert_eq!(
        metric_value(&metrics, "eosmirror_throttle_bytes_per_second", &[]),
        Some(104_857_600.0),
        "{metrics}"
    );
    // At 10 records/s the rest would take about five minutes.
    wait_for_copy(
        &bed.source,
        &bed.target,
        &topic,
        Duration::from_secs(90),
        &mut mirror,
    );
    let code = mirror.stop(EXIT_LIMIT);
    assert_eq!(
        code,
        0,
        "eosmirror did not stop cleanly:\n{}",
        mirror.output()
    );
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

/// Whether any eosmirror log of `setup` contains `text`.
fn mirror_output_contains(setup: &MirrorSetup, text: &str) -> bool {
    fs::read_dir(setup.dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .any(|e| fs::read_to_string(e.path()).is_ok_and(|s| s.contains(text)))
}

/// Bad throttle settings are refused before anything connects.
#[test]
fn bad_throttle_settings_are_refused_at_start() {
    // Nothing listens here: these must fail before connecting.
    let setup = MirrorSetup::new("127.0.0.1:1", "127.0.0.1:1");
    let (code, output) = setup.run_to_exit("t", &["--throttle", "10XB"], EXIT_LIMIT);
    assert_eq!(code, 2, "{output}");
    assert!(output.contains("unknown unit"), "{output}");

    let file = setup.dir.path().join("throttle.properties");
    fs::write(&file, "records.per.sec=5\n").unwrap();
    let file_arg = file.to_str().unwrap();
    let (code, output) = setup.run_to_exit(
        "t",
        &["--throttle", "5MB", "--throttle.file", file_arg],
        EXIT_LIMIT,
    );
    assert_eq!(code, 2, "{output}");
    assert!(output.contains("cannot be used with"), "{output}");

    fs::write(&file, "record.per.sec=5\n").unwrap();
    let (code, output) = setup.run_to_exit("t", &["--throttle.file", file_arg], EXIT_LIMIT);
    assert_eq!(code, 1, "{output}");
    assert!(
        output.contains("line 1: unknown key \"record.per.sec\""),
        "{output}"
    );
}

/// A backfill (40,000 records paced to 8,000/s, so it takes seconds) logs
/// one progress line per `--log.progress.ms` with copied of total, rate and
/// ETA (a total short of 40,000 only while it says lanes still read their
/// positions), then that it caught up; with `--log.format json` every line on
/// stderr is one JSON object, the progress fields kept apart for shippers.
#[test]
fn a_backfill_logs_its_progress_as_json() {
    let bed = bed();
    let topic = bed.source.create_topic("throttle-backfill", 4);
    for p in 0..4 {
        bed.source.produce(&topic, &records(p, 10_000));
    }
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let mut mirror = setup.start(
        &topic,
        &[
            "--throttle.records.per.sec",
            "8000",
            "--log.progress.ms",
            "1000",
            "--log.format",
            "json",
        ],
    );
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    // The line after the backfill comes at the next interval.
    std::thread::sleep(Duration::from_millis(1500));
    let code = mirror.stop(EXIT_LIMIT);
    let output = mirror.output();
    assert_eq!(code, 0, "eosmirror did not stop cleanly:\n{output}");

    let events: Vec<serde_json::Value> = output
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    let field = |e: &serde_json::Value, name: &str| e["fields"][name].clone();
    let backfill: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| {
            field(e, "message")
                .as_str()
                .is_some_and(|m| m.starts_with("backfill: copied"))
        })
        .collect();
    assert!(
        backfill.len() >= 2,
        "expected a progress line per second of a ~5 s backfill:\n{output}"
    );
    let mut last_copied = 0;
    for e in &backfill {
        let copied = field(e, "copied").as_u64().expect("copied");
        let total = field(e, "total").as_u64().expect("total");
        let remaining = field(e, "remaining").as_u64().expect("remaining");
        assert_eq!(total, copied + remaining, "{e}");
        // Partitions count once their lane read their positions; a line
        // before every lane did says so, and only such a line falls short.
        let lanes_reading = field(e, "lanes_reading").as_u64().expect("lanes_reading");
        if lanes_reading == 0 {
            assert_eq!(total, 40_000, "total = what there was to copy: {e}");
        } else {
            assert!(total <= 40_000, "{e}");
            let message = field(e, "message");
            assert!(
                message
                    .as_str()
                    .is_some_and(|m| m.ends_with("so the total will grow")),
                "{e}"
            );
        }
        assert!(copied >= last_copied, "copied only grows: {e}");
        last_copied = copied;
    }
    assert!(
        backfill
            .iter()
            .any(|e| field(e, "total").as_u64() == Some(40_000)),
        "no line counts all 40,000 records:\n{output}"
    );
    let moving = backfill
        .iter()
        .find(|e| field(e, "records_per_sec").as_u64().is_some_and(|r| r > 0))
        .unwrap_or_else(|| panic!("no progress line with a rate:\n{output}"));
    assert!(field(moving, "eta_secs").as_u64().is_some(), "{moving}");
    assert!(
        events.iter().any(|e| field(e, "message")
            .as_str()
            .is_some_and(|m| m.starts_with("backfill done: caught up"))),
        "no line saying the backfill caught up:\n{output}"
    );
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

/// With `--log.format json` the error that ends a run is a JSON log event
/// too, not a plain line a shipper cannot parse.
#[test]
fn the_final_error_is_json_with_log_format_json() {
    let setup = MirrorSetup::new(&bed().source.bootstrap, &bed().target.bootstrap);
    let missing = setup.state_dir.with_file_name("no-such-throttle-file");
    let (code, output) = setup.run_to_exit(
        "t",
        &[
            "--throttle.file",
            missing.to_str().unwrap(),
            "--log.format",
            "json",
        ],
        EXIT_LIMIT,
    );
    assert_ne!(code, 0, "{output}");
    let line = output
        .lines()
        .find(|l| l.contains("eosmirror: error:"))
        .unwrap_or_else(|| panic!("no error event:\n{output}"));
    let event: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    assert_eq!(event["level"], "ERROR", "{event}");
    assert!(
        event["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no-such-throttle-file")),
        "{event}"
    );
}

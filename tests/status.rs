//! `eosmirror status` against real clusters: positions and lag read from the
//! clusters after `run` stopped, a partition stopped by its own error while
//! `run` runs (from the status topic), JSON, and an alias with nothing on
//! the target.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::mirror::{tail, MirrorSetup};
use support::{bed, TestRecord};

/// How long eosmirror may take to stop.
const EXIT_LIMIT: Duration = Duration::from_secs(120);

/// `count` records for `partition`, stamped now by the producer.
fn records(tag: &str, partition: i32, count: usize) -> Vec<TestRecord> {
    (0..count)
        .map(|i| TestRecord::new(partition, &format!("{tag}-k{i}"), &format!("{tag}-v{i}")))
        .collect()
}

/// A source topic with `counts[p]` records in partition `p`, copied exactly
/// by a `run` that was then stopped (SIGTERM, exit 0).
fn copied_topic(prefix: &str, counts: &[usize]) -> (String, MirrorSetup) {
    let bed = bed();
    let topic = bed.source.create_topic(prefix, counts.len() as i32);
    for (p, &n) in counts.iter().enumerate() {
        bed.source.produce(&topic, &records("first", p as i32, n));
    }
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    setup.copy_and_check(&topic, &[], &[&topic]);
    (topic, setup)
}

/// One partition's row of the text report: replicated position, source
/// end, lag in records and state, by `topic-partition`.
fn text_rows(stdout: &str) -> BTreeMap<String, (String, String, String, String)> {
    let mut rows = BTreeMap::new();
    let mut in_table = false;
    for line in stdout.lines() {
        if line.starts_with("PARTITION") {
            in_table = true;
            continue;
        }
        if !in_table || line.starts_with(' ') || line.starts_with("note:") {
            continue;
        }
        if line.starts_with("verdict:") {
            break;
        }
        let cells: Vec<&str> = line.split_whitespace().collect();
        // PARTITION LANE REPLICATED SOURCE-END LAG LAG-TIME LAST-COMMIT STATE
        rows.insert(
            cells[0].to_string(),
            (
                cells[2].to_string(),
                cells[3].to_string(),
                cells[4].to_string(),
                cells[cells.len() - 1].to_string(),
            ),
        );
    }
    rows
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("status JSON: {e}\n{stdout}"))
}

/// The JSON partition entry of `topic`-`partition`.
fn json_partition<'a>(report: &'a Value, topic: &str, partition: i64) -> &'a Value {
    report["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .find(|p| p["topic"] == topic && p["partition"] == partition)
        .unwrap_or_else(|| panic!("no {topic}-{partition} in {report:#}"))
}

#[test]
fn an_exact_copy_after_run_stopped_is_healthy_with_lag_zero() {
    let bed = bed();
    let (topic, setup) = copied_topic("status-exact", &[30, 20, 7]);
    let (code, stdout, stderr) = setup.command("status", &[]);
    assert_eq!(code, 0, "exit code\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let rows = text_rows(&stdout);
    assert_eq!(rows.len(), 3, "{stdout}");
    for p in 0..3 {
        let (_, high) = bed.source.watermarks(&topic, p);
        let row = &rows[&format!("{topic}-{p}")];
        assert_eq!(
            row,
            &(high.to_string(), high.to_string(), "0".into(), "ok".into()),
            "{topic}-{p} (source high watermark {high}):\n{stdout}"
        );
    }
    assert!(
        stdout.contains("totals: 3 partitions, 0 lagging, 0 stopped; lag 0 records"),
        "{stdout}"
    );
    assert!(stdout.contains("verdict: HEALTHY (exit 0"), "{stdout}");
}

#[test]
fn records_produced_after_run_stopped_are_lag_counted_exactly() {
    let bed = bed();
    let (topic, setup) = copied_topic("status-behind", &[30, 20, 7]);
    let copied: Vec<i64> = (0..3).map(|p| bed.source.watermarks(&topic, p).1).collect();
    bed.source.produce(&topic, &records("second", 0, 13));
    bed.source.produce(&topic, &records("second", 1, 4));

    // Fresh records, few: within the default thresholds.
    let (code, stdout, stderr) = setup.command("status", &[]);
    assert_eq!(code, 0, "default thresholds\n{stdout}\n{stderr}");
    let (code, stdout, stderr) = setup.command("status", &["--max.lag.records", "5"]);
    assert_eq!(code, 1, "lagging exit code\n{stdout}\n{stderr}");
    let rows = text_rows(&stdout);
    let expect = [(0, 13, "lagging"), (1, 4, "ok"), (2, 0, "ok")];
    for (p, lag, state) in expect {
        let (_, high) = bed.source.watermarks(&topic, p);
        assert_eq!(high - copied[p as usize], lag);
        assert_eq!(
            rows[&format!("{topic}-{p}")],
            (
                copied[p as usize].to_string(),
                high.to_string(),
                lag.to_string(),
                state.to_string()
            ),
            "{topic}-{p}:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("totals: 3 partitions, 1 lagging, 0 stopped; lag 17 records"),
        "{stdout}"
    );
    assert!(stdout.contains("verdict: LAGGING (exit 1"), "{stdout}");

    // By time: the oldest unreplicated record is older than 0 ms.
    let (code, stdout, stderr) = setup.command("status", &["--max.lag.ms", "0"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
}

#[test]
fn json_carries_the_same_numbers_as_text() {
    let bed = bed();
    let (topic, setup) = copied_topic("status-json", &[12, 9]);
    bed.source.produce(&topic, &records("second", 1, 6));
    let (text_code, text, _) = setup.command("status", &["--max.lag.records", "5"]);
    let (code, stdout, stderr) =
        setup.command("status", &["--max.lag.records", "5", "--format", "json"]);
    assert_eq!((code, text_code), (1, 1), "{stdout}\n{stderr}");
    let report = json(&stdout);
    assert_eq!(report["verdict"], "lagging");
    assert_eq!(report["exit_code"], 1);
    assert_eq!(report["totals"]["partitions"], 2);
    assert_eq!(report["totals"]["lag_records"], 6);
    assert_eq!(report["thresholds"]["max_lag_records"], 5);
    let rows = text_rows(&text);
    for p in 0..2 {
        let (_, high) = bed.source.watermarks(&topic, p);
        let entry = json_partition(&report, &topic, p as i64);
        let row = &rows[&format!("{topic}-{p}")];
        assert_eq!(entry["source_end"], high, "{entry:#}");
        assert_eq!(entry["replicated_position"].to_string(), row.0);
        assert_eq!(entry["source_end"].to_string(), row.1);
        assert_eq!(entry["lag_records"].to_string(), row.2);
        assert_eq!(entry["state"].as_str(), Some(row.3.as_str()));
        assert!(entry["last_commit_ms"].as_i64().unwrap() > 0, "{entry:#}");
        assert!(
            entry["last_writer"]
                .as_str()
                .is_some_and(|w| w.starts_with("instance-")),
            "{entry:#}"
        );
    }
    assert_eq!(json_partition(&report, &topic, 0)["lag_records"], 0);
    assert_eq!(json_partition(&report, &topic, 1)["lag_records"], 6);
    let lag_ms = json_partition(&report, &topic, 1)["lag_ms"]
        .as_i64()
        .unwrap();
    assert!((0..120_000).contains(&lag_ms), "lag_ms {lag_ms}");
}

#[test]
fn a_partition_stopped_while_running_is_shown_with_its_reason() {
    let bed = bed();
    let (topic, setup) = copied_topic("status-stopped", &[100, 20]);
    // While run is stopped: 50 new records in partition 0, of which the
    // first 20 are deleted before they are copied (a named gap).
    bed.source.produce(&topic, &records("second", 0, 50));
    bed.source.produce(&topic, &records("second", 1, 10));
    bed.source.delete_records(&topic, 0, 120);
    let gap = format!("{topic}-0: source records at offsets 100..120 were deleted");

    let mut mirror = setup.start(&topic, &[]);
    let deadline = Instant::now() + Duration::from_secs(90);
    let report = loop {
        let (code, stdout, stderr) = setup.command("status", &["--format", "json"]);
        if code == 1 && stdout.contains("\"stopped\": \"") {
            break json(&stdout);
        }
        assert!(
            mirror.is_running(),
            "eosmirror exited:\n{}",
            tail(&mirror.output(), 40)
        );
        assert!(
            Instant::now() < deadline,
            "status never showed the stopped partition; last exit {code}:\n{stdout}\n{stderr}\neosmirror:\n{}",
            tail(&mirror.output(), 40)
        );
        std::thread::sleep(Duration::from_secs(1));
    };
    let stopped = json_partition(&report, &topic, 0);
    assert_eq!(stopped["state"], "stopped", "{report:#}");
    assert!(
        stopped["stopped"].as_str().unwrap().contains(&gap),
        "{stopped:#}"
    );
    assert_eq!(stopped["replicated_position"], 100, "{stopped:#}");
    assert_eq!(report["totals"]["stopped"], 1);
    assert_eq!(report["exit_code"], 1);
    assert_eq!(report["verdict"], "stopped");
    let other = json_partition(&report, &topic, 1);
    assert!(other["stopped"].is_null(), "{other:#}");
    // The lane of the stopped partition is owned by the running instance,
    // which also published its status.
    let lane = stopped["lane"].as_u64().unwrap() as usize;
    let lane_view = &report["lanes"][lane];
    let owner = stopped["owner"].as_str().expect("an owner");
    let instance = lane_view["status"]["instance"].as_str().unwrap();
    assert!(owner.starts_with(&format!("{instance}@")), "{report:#}");
    assert_eq!(lane_view["status"]["stale"], false, "{lane_view:#}");

    // The text shows the reason under the partition's row.
    let (code, stdout, _) = setup.command("status", &[]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains(&format!("    stopped: {gap}")), "{stdout}");
    assert!(
        text_rows(&stdout)[&format!("{topic}-0")].3 == "stopped",
        "{stdout}"
    );
    let code = mirror.stop(EXIT_LIMIT);
    assert_ne!(code, 0, "a run with a stopped partition exits non-zero");
}

#[test]
fn an_alias_with_nothing_on_the_target_cannot_tell() {
    let bed = bed();
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let (code, stdout, stderr) = setup.command("status", &[]);
    assert_eq!(code, 2, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "eosmirror: status: cannot tell: no positions found for --source.alias {}: the target has no topic __eosmirror.position.{}",
            setup.alias, setup.alias
        )),
        "{stderr}"
    );
    let (code, stdout, _) = setup.command("status", &["--format", "json"]);
    assert_eq!(code, 2);
    let report = json(&stdout);
    assert_eq!(report["verdict"], "cannot_tell");
}

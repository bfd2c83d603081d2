//! Test records, and judging the copy: waiting until the target caught up,
//! asserting it is exact, and the eosmirror history that explains a failure.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use crate::support::mirror::{
    assert_exact_copy, copy_differences, count_committed, tail, Mirror, MirrorSetup,
};
use crate::support::{bed, TestRecord};

/// How long a copy may take to catch up before the test fails. Generous:
/// the machine is small and shared with other test runs.
pub(crate) const CATCH_UP: Duration = Duration::from_secs(300);

/// Small records with unique values, spread round-robin over partitions.
pub(crate) fn records(
    tag: &str,
    partitions: &[i32],
    first: usize,
    count: usize,
) -> Vec<TestRecord> {
    (first..first + count)
        .map(|i| {
            let mut r = TestRecord::new(
                partitions[i % partitions.len()],
                &format!("{tag}-k{}", i % 97),
                &format!("{tag}-v{i}"),
            );
            if i % 5 == 0 {
                r.headers = vec![("n".into(), Some(i.to_string().into_bytes()))];
            }
            r
        })
        .collect()
}

/// Waits until the target holds at least as many committed records as the
/// source in every partition. With exactly-once the target never holds
/// more, so this returns as soon as the copy is complete — or as soon as it
/// holds duplicates, which `assert_exact_copy` then reports at once.
pub(crate) fn wait_caught_up(topic: &str, mirror: &mut Mirror, setup: &MirrorSetup) {
    let bed = bed();
    mirror.wait_until(
        CATCH_UP,
        Duration::from_secs(1),
        || {
            let want = count_committed(&bed.source, topic);
            bed.target.partition_count(topic)?;
            let have = count_committed(&bed.target, topic);
            want.iter()
                .all(|(p, n)| have.get(p).copied().unwrap_or(0) >= *n)
                .then_some(())
        },
        |output| {
            format!(
                "copy of {topic} incomplete after {CATCH_UP:?}: {:?}\neosmirror output tail:\n{}\n{}",
                copy_differences(&bed.source, &bed.target, topic),
                tail(output, 40),
                history(setup)
            )
        },
    );
}

/// Like `assert_exact_copy`, but on failure also prints where every
/// eosmirror instance of the test resumed (its "lane session started"
/// lines) and its warnings and errors: the evidence for a bug report.
pub(crate) fn assert_exact_copy_with_history(topic: &str, setup: &MirrorSetup) {
    let bed = bed();
    let problems = copy_differences(&bed.source, &bed.target, topic);
    assert!(
        problems.is_empty(),
        "not an exact copy:\n{}\n{}",
        problems.join("\n"),
        history(setup)
    );
    assert_exact_copy(&bed.source, &bed.target, topic);
}

/// The interesting lines of every eosmirror log in the setup's directory,
/// in start order.
pub(crate) fn history(setup: &MirrorSetup) -> String {
    let mut logs: Vec<(u64, PathBuf)> = fs::read_dir(setup.dir.path())
        .unwrap()
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?.to_string();
            let n = name
                .strip_prefix("eosmirror-")?
                .strip_suffix(".log")?
                .parse()
                .ok()?;
            Some((n, path))
        })
        .collect();
    logs.sort();
    let mut out = String::from("eosmirror history (session starts, warnings, errors):\n");
    for (_, path) in logs {
        out.push_str(&format!("--- {}\n", path.display()));
        for line in fs::read_to_string(&path).unwrap_or_default().lines() {
            if line.contains("lane session started")
                || line.contains("WARN")
                || line.contains("ERROR")
                || line.contains("error")
            {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

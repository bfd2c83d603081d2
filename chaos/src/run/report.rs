//! The run report: a table per scenario on stdout and the same data as JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::judge::Verdict;
use crate::ledger::Written;

/// One fault event: what was injected, when, and how long recovery took.
#[derive(Debug, Clone, Serialize)]
pub struct FaultEvent {
    /// Seconds since the scenario's fault phase began.
    pub at_secs: f64,
    /// Fault kinds injected together.
    pub kinds: Vec<String>,
    /// Parameters (hold time, delay, ...).
    pub detail: String,
    /// Healed → everything the workload had committed at the heal, and the
    /// first records it committed after it, visible on the target; `None`
    /// if that did not happen in time.
    pub recovery_ms: Option<u64>,
}

/// Recovery time percentiles of a scenario.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Percentiles {
    /// Recoveries measured.
    pub count: usize,
    /// Median, ms.
    pub p50_ms: u64,
    /// 90th percentile, ms.
    pub p90_ms: u64,
    /// 99th percentile, ms.
    pub p99_ms: u64,
    /// Longest, ms.
    pub max_ms: u64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `values`.
    pub fn of(values: &[u64]) -> Percentiles {
        let mut v = values.to_vec();
        v.sort_unstable();
        let at = |q: f64| -> u64 {
            if v.is_empty() {
                return 0;
            }
            let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
            v[rank - 1]
        };
        Percentiles {
            count: v.len(),
            p50_ms: at(0.5),
            p90_ms: at(0.9),
            p99_ms: at(0.99),
            max_ms: v.last().copied().unwrap_or(0),
        }
    }
}

/// Status of the translated-group-offsets check.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "status", content = "detail", rename_all = "snake_case")]
pub enum GroupCheck {
    /// Consumers resuming on the target re-read and skip nothing.
    Passed(String),
    /// They would re-read or skip records (counts as an anomaly).
    Failed(String),
    /// Not run, and why (not counted as passed).
    NotRun(String),
}

/// How a scenario ended.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Zero anomalies and every expected outcome happened.
    Passed,
    /// An anomaly or a deviation from the expected outcome.
    Failed,
    /// Not run (needs something these clusters do not offer).
    Skipped,
}

/// Everything about one scenario run.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    /// Scenario name.
    pub name: String,
    /// What it does.
    pub about: String,
    /// Its expected outcome.
    pub expected: String,
    /// The seed its schedule came from (the run's `--seed` replays it).
    pub seed: u64,
    /// Result.
    pub status: Status,
    /// Why it was skipped.
    pub skip_reason: Option<String>,
    /// Source topic (and its copy's name).
    pub topic: String,
    /// Logs and properties files.
    pub dir: String,
    /// Wall time of the whole scenario.
    pub duration_secs: f64,
    /// Every fault event.
    pub faults: Vec<FaultEvent>,
    /// Injections per fault kind.
    pub fault_counts: BTreeMap<String, u64>,
    /// Records written, by outcome.
    pub written: Written,
    /// The checker's verdict (includes distinct records copied).
    pub verdict: Verdict,
    /// Recovery times.
    pub recovery: Percentiles,
    /// Expected outcomes observed.
    pub outcomes: Vec<String>,
    /// Deviations from the expected outcome (any fails the scenario).
    pub deviations: Vec<String>,
    /// Translated group offsets.
    pub group: GroupCheck,
}

impl ScenarioReport {
    /// A scenario that was not run.
    pub fn skipped(name: &str, about: &str, expected: &str, seed: u64, reason: String) -> Self {
        ScenarioReport {
            name: name.into(),
            about: about.into(),
            expected: expected.into(),
            seed,
            status: Status::Skipped,
            skip_reason: Some(reason),
            topic: String::new(),
            dir: String::new(),
            duration_secs: 0.0,
            faults: Vec::new(),
            fault_counts: BTreeMap::new(),
            written: Written::default(),
            verdict: Verdict::default(),
            recovery: Percentiles::default(),
            outcomes: Vec::new(),
            deviations: Vec::new(),
            group: GroupCheck::NotRun("scenario skipped".into()),
        }
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// `--seed`: re-running with it replays every scenario's schedule.
    pub seed: u64,
    /// Per scenario.
    pub scenarios: Vec<ScenarioReport>,
    /// No scenario failed.
    pub passed: bool,
}

fn ms(v: u64) -> String {
    format!("{:.1}", Duration::from_millis(v).as_secs_f64())
}

/// The report as text: one table row per scenario, then details.
// The header goes through the same format string as the rows, so columns
// line up by construction.
#[allow(clippy::write_literal)]
pub fn table(r: &RunReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "eosmirror-chaos report — seed {} (replay: --seed {})",
        r.seed, r.seed
    );
    let _ = writeln!(
        out,
        "{:<20} {:>6} {:>6} {:>8} {:>8} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>17}  {:<8} {}",
        "scenario",
        "secs",
        "faults",
        "written",
        "copied",
        "lost",
        "dup",
        "reord",
        "alter",
        "abrtd",
        "unexp",
        "unrepl",
        "recovery s p50/p90/max",
        "result",
        "group offsets"
    );
    for s in &r.scenarios {
        if s.status == Status::Skipped {
            let _ = writeln!(
                out,
                "{:<20} skipped: {}",
                s.name,
                s.skip_reason.as_deref().unwrap_or("")
            );
            continue;
        }
        let t = &s.verdict.total;
        let faults: u64 = s.faults.len() as u64;
        let rec = if s.recovery.count == 0 {
            "-".to_string()
        } else {
            format!(
                "{}/{}/{}",
                ms(s.recovery.p50_ms),
                ms(s.recovery.p90_ms),
                ms(s.recovery.max_ms)
            )
        };
        let group = match &s.group {
            GroupCheck::Passed(_) => "ok".to_string(),
            GroupCheck::Failed(_) => "FAILED".to_string(),
            GroupCheck::NotRun(why) => format!("not run: {why}"),
        };
        let _ = writeln!(
            out,
            "{:<20} {:>6.0} {:>6} {:>8} {:>8} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>17}  {:<8} {}",
            s.name,
            s.duration_secs,
            faults,
            s.written.committed,
            t.copied,
            t.lost,
            t.duplicated,
            t.reordered,
            t.altered,
            t.aborted_read,
            t.unexpected,
            t.unreplicated,
            rec,
            match s.status {
                Status::Passed => "PASS",
                Status::Failed => "FAIL",
                Status::Skipped => "skip",
            },
            group
        );
    }
    let _ = writeln!(out);
    for s in r.scenarios.iter().filter(|s| s.status != Status::Skipped) {
        let _ = writeln!(out, "{} (seed {}): {}", s.name, s.seed, s.about);
        let _ = writeln!(out, "  expected: {}", s.expected);
        let counts: Vec<String> = s
            .fault_counts
            .iter()
            .map(|(k, v)| format!("{k}×{v}"))
            .collect();
        let _ = writeln!(
            out,
            "  faults: {}",
            if counts.is_empty() {
                "none".into()
            } else {
                counts.join(", ")
            }
        );
        let w = &s.written;
        let _ = writeln!(
            out,
            "  written: {} committed, {} aborted on purpose, {} aborted by failures, {} uncertain, {} deleted before copy",
            w.committed, w.aborted_on_purpose, w.aborted_by_failure, w.uncertain, w.deleted
        );
        if s.verdict.total.unreplicated > 0 {
            let _ = writeln!(
                out,
                "  NOT REPLICATED: {} committed records",
                s.verdict.total.unreplicated
            );
        }
        for o in &s.outcomes {
            let _ = writeln!(out, "  ok: {o}");
        }
        match &s.group {
            GroupCheck::Passed(d) => {
                let _ = writeln!(out, "  group offsets: {d}");
            }
            GroupCheck::Failed(d) => {
                let _ = writeln!(out, "  GROUP OFFSETS FAILED: {d}");
            }
            GroupCheck::NotRun(d) => {
                let _ = writeln!(out, "  group offsets: not run: {d}");
            }
        }
        for e in &s.verdict.examples {
            let _ = writeln!(out, "  ANOMALY: {e}");
        }
        // Records the source itself lost or duplicated: reported apart,
        // not anomalies of the copy.
        for (heading, count, examples, label) in [
            (
                "ABSENT AT SOURCE (lost by the source cluster, not by eosmirror)",
                s.verdict.total.absent_at_source,
                &s.verdict.absent_at_source,
                "absent at source",
            ),
            (
                "DUPLICATED AT SOURCE (the source holds them twice; the copy is exact)",
                s.verdict.total.duplicated_at_source,
                &s.verdict.duplicated_at_source,
                "duplicated at source",
            ),
        ] {
            if count > 0 {
                let _ = writeln!(out, "  {heading}: {count} records");
            }
            for e in examples {
                let _ = writeln!(out, "  {label}: {e}");
            }
        }
        for d in &s.deviations {
            let _ = writeln!(out, "  DEVIATION: {d}");
        }
        let _ = writeln!(out, "  logs: {}", s.dir);
    }
    let _ = writeln!(
        out,
        "{}",
        if r.passed {
            "result: PASS — zero anomalies, every expected outcome observed"
        } else {
            "result: FAIL"
        }
    );
    out
}

//! What verify found: anomaly classes, per-partition and total tallies, and
//! their text and JSON renderings.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::read::record::Field;

/// How many offending offsets of each class a report shows per partition.
pub const SAMPLES_PER_CLASS: usize = 5;

/// The ways a copy can differ from its source. The names are the ones the
/// chaos checker and Jepsen-style analyses use, so reports line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// A committed source record with no copy on the target.
    Missing,
    /// A source record copied more than once.
    Duplicated,
    /// Copies present but not in the source's order.
    Reordered,
    /// A copy whose key, value, headers or timestamp differ from the source.
    Altered,
    /// A target record no source record accounts for.
    Unexpected,
    /// A record of an aborted source transaction visible on the target.
    AbortedLeak,
}

impl Class {
    pub const ALL: [Class; 6] = [
        Class::Missing,
        Class::Duplicated,
        Class::Reordered,
        Class::Altered,
        Class::Unexpected,
        Class::AbortedLeak,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Missing => "missing",
            Class::Duplicated => "duplicated",
            Class::Reordered => "reordered",
            Class::Altered => "altered",
            Class::Unexpected => "unexpected",
            Class::AbortedLeak => "aborted_leak",
        }
    }
}

/// One offending record pair (either side may be absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Anomaly {
    pub class: Class,
    pub source_offset: Option<i64>,
    pub target_offset: Option<i64>,
    /// For `altered`: which parts differ.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<Field>,
}

/// Count and first examples of one class in one partition.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tally {
    pub count: u64,
    pub first: Vec<Anomaly>,
}

/// Everything verify learned about one source partition and its copy.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PartitionReport {
    pub topic: String,
    pub target_topic: String,
    pub partition: i32,
    /// Source offsets checked: `[from, to)`.
    pub source_range: (i64, i64),
    /// Target offsets checked: `[from, to)`.
    pub target_range: (i64, i64),
    pub source_records: u64,
    pub target_records: u64,
    /// Key + value + header bytes read on both sides.
    pub bytes: u64,
    /// Source offsets `[from, to)` committed on the source but not yet
    /// replicated (beyond the replicated position); not an error by itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_yet_replicated: Option<(i64, i64)>,
    /// Source offsets `[from, to)` past the last stable offset: records of
    /// a transaction still open (and any written after its start), neither
    /// committed nor aborted yet, so not checked. A commit would add
    /// records the copy does not hold yet; not an error by itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_transaction: Option<(i64, i64)>,
    /// Why (part of) this partition could not be checked. Non-empty means
    /// the verdict is "could not verify", whatever the tallies say.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unverifiable: Vec<String>,
    /// The clusters ("source", "target") that compact the topic: each
    /// cluster's cleaner removes records on its own schedule, so a record
    /// missing from a compacting side is a difference only if that side
    /// holds no later record of its key (for a tombstone: if it still holds
    /// an earlier one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub compacted_on: Vec<&'static str>,
    /// By side (source, target): whether the range read starts at that
    /// log's start, so that no record of a key can lie before it (a missing
    /// tombstone is judged by the key's earlier records).
    #[serde(skip)]
    pub from_log_start: [bool; 2],
    /// Records one side's cleaner removed (explained as above): not
    /// differences, not compared.
    #[serde(skip_serializing_if = "is_zero")]
    pub removed_by_compaction: u64,
    pub anomalies: BTreeMap<Class, Tally>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl PartitionReport {
    /// Records one anomaly: counted always, kept as an example while few.
    pub fn add(&mut self, anomaly: Anomaly) {
        let tally = self.anomalies.entry(anomaly.class).or_default();
        tally.count += 1;
        if tally.first.len() < SAMPLES_PER_CLASS {
            tally.first.push(anomaly);
        }
    }

    pub fn count(&self, class: Class) -> u64 {
        self.anomalies.get(&class).map_or(0, |t| t.count)
    }

    fn anomaly_total(&self) -> u64 {
        self.anomalies.values().map(|t| t.count).sum()
    }
}

/// The verdict, which is also the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every checked record has exactly one identical copy, and nothing else
    /// is on the target. Exit code 0.
    Exact,
    /// At least one anomaly. Exit code 1.
    DifferencesFound,
    /// Part of the range could not be checked (data or mapping gone,
    /// cluster unreachable). Exit code 2; differences found elsewhere are
    /// still listed.
    CouldNotVerify,
}

impl Verdict {
    /// The process exit code: 0 exact, 1 differences found, 2 could not verify.
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Exact => 0,
            Verdict::DifferencesFound => 1,
            Verdict::CouldNotVerify => 2,
        }
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub verdict: Verdict,
    /// `mapped` (through eosmirror's progress records) or `sequence`.
    pub mode: &'static str,
    pub partitions: Vec<PartitionReport>,
    pub totals: BTreeMap<Class, u64>,
    pub source_records: u64,
    pub target_records: u64,
    pub bytes: u64,
    pub seconds: f64,
}

impl Report {
    pub fn new(mode: &'static str, partitions: Vec<PartitionReport>, seconds: f64) -> Report {
        let totals: BTreeMap<Class, u64> = Class::ALL
            .iter()
            .map(|&c| (c, partitions.iter().map(|p| p.count(c)).sum()))
            .collect();
        let verdict = if partitions.iter().any(|p| !p.unverifiable.is_empty()) {
            Verdict::CouldNotVerify
        } else if totals.values().any(|&n| n > 0) {
            Verdict::DifferencesFound
        } else {
            Verdict::Exact
        };
        Report {
            verdict,
            mode,
            source_records: partitions.iter().map(|p| p.source_records).sum(),
            target_records: partitions.iter().map(|p| p.target_records).sum(),
            bytes: partitions.iter().map(|p| p.bytes).sum(),
            partitions,
            totals,
            seconds,
        }
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for p in &self.partitions {
            let name = if p.topic == p.target_topic {
                format!("{}-{}", p.topic, p.partition)
            } else {
                format!(
                    "{}-{} -> {}-{}",
                    p.topic, p.partition, p.target_topic, p.partition
                )
            };
            let status = if !p.unverifiable.is_empty() {
                "COULD NOT VERIFY"
            } else if p.anomaly_total() > 0 {
                "DIFFERENT"
            } else {
                "exact"
            };
            let _ = writeln!(
                out,
                "{name}: {status}: source offsets [{}, {}) {} records, target offsets [{}, {}) {} records",
                p.source_range.0,
                p.source_range.1,
                p.source_records,
                p.target_range.0,
                p.target_range.1,
                p.target_records
            );
            for reason in &p.unverifiable {
                let _ = writeln!(out, "  could not verify: {reason}");
            }
            for (class, tally) in &p.anomalies {
                let examples: Vec<String> = tally.first.iter().map(describe).collect();
                let more = if tally.count as usize > tally.first.len() {
                    ", ..."
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "  {}: {} ({}{more})",
                    class.name(),
                    tally.count,
                    examples.join(", ")
                );
            }
            if p.removed_by_compaction > 0 {
                let _ = writeln!(
                    out,
                    "  removed by compaction on one side only: {} records, each with a later record of its key there (not compared)",
                    p.removed_by_compaction
                );
            }
            if let Some((from, to)) = p.not_yet_replicated {
                let _ = writeln!(
                    out,
                    "  not yet replicated: source offsets [{from}, {to}) (not checked)"
                );
            }
            if let Some((from, to)) = p.open_transaction {
                let _ = writeln!(
                    out,
                    "  in an open source transaction: source offsets [{from}, {to}) (neither committed nor aborted yet; not checked)"
                );
            }
        }
        let totals: Vec<String> = self
            .totals
            .iter()
            .map(|(c, n)| format!("{} {n}", c.name()))
            .collect();
        let rate = self.source_records as f64 / self.seconds.max(1e-3);
        let _ = writeln!(
            out,
            "verdict: {}: {} partitions, {} source and {} target records, {:.1} MB in {:.1}s ({:.0} records/s); {}",
            match self.verdict {
                Verdict::Exact => "EXACT",
                Verdict::DifferencesFound => "DIFFERENCES FOUND",
                Verdict::CouldNotVerify => "COULD NOT VERIFY",
            },
            self.partitions.len(),
            self.source_records,
            self.target_records,
            self.bytes as f64 / 1e6,
            self.seconds,
            rate,
            totals.join(", ")
        );
        out
    }
}

fn describe(a: &Anomaly) -> String {
    let side = |name: &str, o: Option<i64>| o.map(|o| format!("{name} {o}"));
    let mut parts: Vec<String> = [
        side("source", a.source_offset),
        side("target", a.target_offset),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !a.fields.is_empty() {
        let fields: Vec<&str> = a
            .fields
            .iter()
            .map(|f| match f {
                Field::Key => "key",
                Field::Value => "value",
                Field::Headers => "headers",
                Field::Timestamp => "timestamp",
            })
            .collect();
        parts.push(format!("differs in {}", fields.join("+")));
    }
    parts.join(" -> ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(open_transaction: Option<(i64, i64)>) -> PartitionReport {
        PartitionReport {
            topic: "orders".into(),
            target_topic: "orders".into(),
            partition: 1,
            source_range: (0, 10),
            target_range: (0, 10),
            source_records: 10,
            target_records: 10,
            open_transaction,
            ..PartitionReport::default()
        }
    }

    #[test]
    fn records_in_an_open_source_transaction_are_named_in_text_and_json() {
        let report = Report::new("mapped", vec![partition(Some((10, 15)))], 1.0);
        assert!(
            report.to_text().contains(
                "orders-1: exact: source offsets [0, 10) 10 records, target offsets [0, 10) 10 records\n  in an open source transaction: source offsets [10, 15) (neither committed nor aborted yet; not checked)\n"
            ),
            "{}",
            report.to_text()
        );
        let json: serde_json::Value = serde_json::to_value(&report).unwrap();
        assert_eq!(
            json["partitions"][0]["open_transaction"],
            serde_json::json!([10, 15])
        );
        // Not an error by itself: the committed records checked are exact.
        assert_eq!(report.verdict, Verdict::Exact);

        let settled = Report::new("mapped", vec![partition(None)], 1.0);
        assert!(!settled.to_text().contains("open source transaction"));
        assert!(!serde_json::to_string(&settled)
            .unwrap()
            .contains("open_transaction"));
    }
}

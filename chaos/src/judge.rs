//! The exactly-once checker: classifies a target partition's committed
//! records against the workload's [`Ledger`], sharing no code with
//! eosmirror.
//!
//! Records are fed one at a time in target offset order ([`Judge::observe`]),
//! so the checker can run live, tailing the target while faults happen.
//! Memory is per partition and key (a [`RangeSet`] of sequence numbers seen)
//! plus a bounded list of examples, never per record.
//!
//! Classes (Jepsen's names where they exist):
//!
//! | class | meaning |
//! |---|---|
//! | lost | committed at the source, not on the target, though later records of its key are |
//! | duplicated | seen again after it was already seen |
//! | reordered | seen after a record its producer wrote later (per key, and per producer within the partition) |
//! | altered | key, value, headers or timestamp changed (checksum) |
//! | aborted_read | written in a source transaction that was aborted (on purpose, or after a failure) |
//! | unexpected | not a record of this run, in the wrong partition, or never committed (e.g. deleted at the source before it could be copied) |
//!
//! A record the workload was told is committed but that is in neither
//! cluster's log is `absent_at_source`, not lost, when the caller read the
//! source and passed what it holds ([`SourceHeld`]): eosmirror never
//! writes to the source, so the source lost it before it could be read.
//! It is reported by name but is not an eosmirror anomaly.
//!
//! Likewise duplicates are `duplicated_at_source` when the caller found the
//! copy record for record equal to the source ([`Verdict::duplicates_held_by_source`]):
//! the source holds them twice (its producer wrote them again after a
//! broker crash), and eosmirror copied them exactly.
//!
//! A swap of two neighbours counts one reordered record: the one that
//! arrives after its successor. Committed records missing after the last
//! copied record of their key are counted apart as `unreplicated` (the copy
//! has not caught up), which the runner treats as a failure once it has
//! waited for the catch-up.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::ledger::Ledger;
use crate::ranges::RangeSet;
use crate::record::{decode, Decoded, HeaderList};

/// How many example descriptions a verdict keeps.
const EXAMPLES: usize = 12;

/// Anomaly counts (per partition, or in total).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Tally {
    /// Distinct workload records of this run seen on the target.
    pub copied: u64,
    /// See the module docs.
    pub lost: u64,
    /// Committed, not on the target, and after the last copied record of
    /// its key: not (yet) replicated rather than skipped. Not an anomaly by
    /// itself — the runner waits for the copy to catch up, and fails the
    /// scenario if it never does.
    pub unreplicated: u64,
    /// Committed as far as the workload knows, but in neither the target's
    /// nor the source's log (see the module docs). Not an anomaly of the
    /// copy: the run reports it apart.
    pub absent_at_source: u64,
    /// See the module docs.
    pub duplicated: u64,
    /// Seen again, and held twice by the source too (see the module docs).
    /// Not an anomaly of the copy: the run reports it apart.
    pub duplicated_at_source: u64,
    /// See the module docs.
    pub reordered: u64,
    /// See the module docs.
    pub altered: u64,
    /// See the module docs.
    pub aborted_read: u64,
    /// See the module docs.
    pub unexpected: u64,
}

impl Tally {
    /// Sum of all anomaly classes (not `copied`).
    pub fn anomalies(&self) -> u64 {
        self.lost
            + self.duplicated
            + self.reordered
            + self.altered
            + self.aborted_read
            + self.unexpected
    }

    fn add(&mut self, o: &Tally) {
        self.copied += o.copied;
        self.lost += o.lost;
        self.unreplicated += o.unreplicated;
        self.absent_at_source += o.absent_at_source;
        self.duplicated += o.duplicated;
        self.duplicated_at_source += o.duplicated_at_source;
        self.reordered += o.reordered;
        self.altered += o.altered;
        self.aborted_read += o.aborted_read;
        self.unexpected += o.unexpected;
    }
}

/// The result of a check.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verdict {
    /// Per target partition.
    pub partitions: BTreeMap<i32, Tally>,
    /// All partitions together.
    pub total: Tally,
    /// The first anomalies, described (bounded).
    pub examples: Vec<Example>,
    /// The first records absent at the source, described (bounded).
    pub absent_at_source: Vec<String>,
    /// The first duplicates the source holds too, described (bounded).
    pub duplicated_at_source: Vec<String>,
}

impl Verdict {
    /// Counts every duplicate as held twice by the source itself. Only for
    /// a copy found equal to the source record for record (read_committed,
    /// every partition): then each duplicate on the target is one in the
    /// source's log, copied exactly.
    pub fn duplicates_held_by_source(&mut self) {
        for t in self.partitions.values_mut().chain([&mut self.total]) {
            t.duplicated_at_source += t.duplicated;
            t.duplicated = 0;
        }
        let (held, rest) = self
            .examples
            .drain(..)
            .partition(|e| e.class == Class::Duplicated);
        self.examples = rest;
        self.duplicated_at_source = held.into_iter().map(|e| e.text).collect();
    }
}

/// The anomaly classes of the module docs that examples are kept for.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// See the module docs.
    Lost,
    /// Missing after the key's last copy (see [`Tally::unreplicated`]).
    NotReplicated,
    /// See the module docs.
    Duplicated,
    /// See the module docs.
    Reordered,
    /// See the module docs.
    Altered,
    /// See the module docs.
    AbortedRead,
    /// See the module docs.
    Unexpected,
}

/// One anomaly, described for a person and tagged with its class, so a
/// later finding (the source holds the duplicates too) can move a class's
/// examples without parsing their text.
#[derive(Debug, Clone, Serialize)]
pub struct Example {
    /// Which class the record falls in.
    pub class: Class,
    /// Where it is (partition, offset, key, sequence numbers) and what is wrong.
    pub text: String,
}

impl std::fmt::Display for Example {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// What the source's log holds, of the partitions read.
#[derive(Debug, Clone, Default)]
pub struct SourceHeld {
    /// The partitions read: a lost record of another partition stays lost.
    pub partitions: BTreeSet<u32>,
    /// (partition, key) → the key sequence numbers the log holds.
    pub keys: BTreeMap<(u32, u32), RangeSet>,
}

/// Keeps `example` if fewer than [`EXAMPLES`] examples are kept.
fn note<T>(examples: &mut Vec<T>, example: T) {
    if examples.len() < EXAMPLES {
        examples.push(example);
    }
}

/// Keeps an anomaly of `class` if fewer than [`EXAMPLES`] are kept.
fn note_anomaly(examples: &mut Vec<Example>, class: Class, text: String) {
    note(examples, Example { class, text });
}

/// What has been seen of one partition and key.
#[derive(Debug, Default)]
struct Seen {
    kseqs: RangeSet,
    max: Option<u64>,
}

/// The streaming checker of one topic's copy.
#[derive(Debug)]
pub struct Judge {
    run: u64,
    keys: BTreeMap<(u32, u32), Seen>,
    /// (partition, stream) → highest per-stream sequence number seen.
    streams: BTreeMap<(u32, u8), u64>,
    tallies: BTreeMap<i32, Tally>,
    examples: Vec<Example>,
}

impl Judge {
    /// A checker for the records of workload run `run`.
    pub fn new(run: u64) -> Judge {
        Judge {
            run,
            keys: BTreeMap::new(),
            streams: BTreeMap::new(),
            tallies: BTreeMap::new(),
            examples: Vec::new(),
        }
    }

    /// Classifies the next committed record of target `partition`, at
    /// `offset` (records of a partition must come in offset order).
    pub fn observe(
        &mut self,
        partition: i32,
        offset: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &HeaderList,
        timestamp: Option<i64>,
    ) {
        let decoded = decode(key, value, headers, timestamp);
        let tally = self.tallies.entry(partition).or_default();
        let meta = match decoded {
            Decoded::Foreign => {
                tally.unexpected += 1;
                note_anomaly(
                    &mut self.examples,
                    Class::Unexpected,
                    format!("p{partition}@{offset}: unexpected: not a workload record"),
                );
                return;
            }
            Decoded::Altered(meta) => {
                tally.altered += 1;
                note_anomaly(
                    &mut self.examples,
                    Class::Altered,
                    format!("p{partition}@{offset}: altered (checksum mismatch): {meta:?}"),
                );
                // A changed copy is still a copy: when its identity looks
                // like this run's, count it as seen, so it is not also lost.
                if let Some(m) = meta.filter(|m| m.run == self.run && !m.aborted()) {
                    let seen = self.keys.entry((m.partition, m.key)).or_default();
                    if !seen.kseqs.contains(m.kseq) {
                        seen.kseqs.insert(m.kseq);
                        seen.max = seen.max.max(Some(m.kseq));
                        tally.copied += 1;
                    }
                }
                return;
            }
            Decoded::Intact(meta) => meta,
        };
        if meta.run != self.run {
            tally.unexpected += 1;
            note_anomaly(
                &mut self.examples,
                Class::Unexpected,
                format!(
                    "p{partition}@{offset}: unexpected: a record of run {}",
                    meta.run
                ),
            );
            return;
        }
        if i64::from(meta.partition) != i64::from(partition) {
            tally.unexpected += 1;
            note_anomaly(
                &mut self.examples,
                Class::Unexpected,
                format!(
                    "p{partition}@{offset}: unexpected: written to partition {}",
                    meta.partition
                ),
            );
            return;
        }
        if meta.aborted() {
            tally.aborted_read += 1;
            note_anomaly(
                &mut self.examples,
                Class::AbortedRead,
                format!(
                "p{partition}@{offset}: aborted read: key {} of a transaction aborted on purpose",
                meta.key
            ),
            );
            return;
        }
        let seen = self.keys.entry((meta.partition, meta.key)).or_default();
        if seen.kseqs.contains(meta.kseq) {
            tally.duplicated += 1;
            note_anomaly(
                &mut self.examples,
                Class::Duplicated,
                format!(
                    "p{partition}@{offset}: duplicated: key {} seq {}",
                    meta.key, meta.kseq
                ),
            );
            return;
        }
        let stream_max = self
            .streams
            .entry((meta.partition, meta.stream))
            .or_default();
        let late_for_key = seen.max.is_some_and(|m| meta.kseq < m);
        let late_for_stream = meta.pseq < *stream_max;
        seen.kseqs.insert(meta.kseq);
        seen.max = seen.max.max(Some(meta.kseq));
        *stream_max = (*stream_max).max(meta.pseq);
        tally.copied += 1;
        if late_for_key || late_for_stream {
            tally.reordered += 1;
            note_anomaly(&mut self.examples, Class::Reordered, format!(
                "p{partition}@{offset}: reordered: key {} seq {} (stream {} seq {}) after a later record",
                meta.key, meta.kseq, meta.stream, meta.pseq
            ));
        }
    }

    /// Whether, for every (partition, stream) in `committed_pseq`, a record
    /// at least that far in the stream has been seen: everything the
    /// workload had committed when the snapshot was taken is on the target
    /// (or lost, which [`Judge::verdict`] then reports).
    pub fn covers(&self, committed_pseq: &BTreeMap<(u32, u8), u64>) -> bool {
        committed_pseq
            .iter()
            .all(|(k, want)| self.streams.get(k).is_some_and(|have| have >= want))
    }

    /// Distinct records seen so far.
    pub fn copied(&self) -> u64 {
        self.tallies.values().map(|t| t.copied).sum()
    }

    /// Judges everything seen against the ledger: adds lost records (in the
    /// ledger as committed, never seen) and seen records that were never
    /// committed. With `source`, what the source's log holds of the keys
    /// checked, a missing record the source does not hold either is
    /// counted `absent_at_source` instead of lost.
    pub fn verdict(&self, ledger: &Ledger, source: Option<&SourceHeld>) -> Verdict {
        let mut v = Verdict {
            partitions: self.tallies.clone(),
            examples: self.examples.clone(),
            ..Verdict::default()
        };
        let empty = Seen::default();
        let none = RangeSet::new();
        for (&(p, key), k) in &ledger.keys {
            let seen_key = self.keys.get(&(p, key)).unwrap_or(&empty);
            let seen = &seen_key.kseqs;
            let missing = k.committed.difference(seen);
            // Missing records after the key's last copy: not replicated yet.
            let mut tail = RangeSet::new();
            tail.insert_range(seen_key.max.map_or(0, |m| m + 1), u64::MAX);
            let unreplicated = missing.intersection(&tail);
            let mut lost = missing.difference(&tail);
            let mut absent = RangeSet::new();
            if let Some(source) = source.filter(|s| s.partitions.contains(&p)) {
                let held = source.keys.get(&(p, key)).unwrap_or(&none);
                absent = lost.difference(held);
                lost = lost.intersection(held);
            }
            if !absent.is_empty() {
                v.partitions.entry(p as i32).or_default().absent_at_source += absent.len();
                note(
                    &mut v.absent_at_source,
                    format!(
                        "p{p}: key {key} seqs {}: acknowledged to the workload, in neither log",
                        absent.describe(4)
                    ),
                );
            }
            let mut allowed = k.committed.clone();
            allowed.extend(&k.uncertain);
            let extra = seen.difference(&allowed);
            let leaked = extra.intersection(&k.aborted);
            let unexpected = extra.difference(&k.aborted);
            let t = v.partitions.entry(p as i32).or_default();
            t.lost += lost.len();
            t.unreplicated += unreplicated.len();
            t.aborted_read += leaked.len();
            t.unexpected += unexpected.len();
            for (class, what, set) in [
                (Class::Lost, "lost", &lost),
                (Class::NotReplicated, "not replicated", &unreplicated),
                (Class::AbortedRead, "aborted read", &leaked),
                (
                    Class::Unexpected,
                    "unexpected (never committed)",
                    &unexpected,
                ),
            ] {
                if !set.is_empty() {
                    note_anomaly(
                        &mut v.examples,
                        class,
                        format!("p{p}: {what}: key {key} seqs {}", set.describe(4)),
                    );
                }
            }
        }
        for (&(p, key), seen) in &self.keys {
            if !ledger.keys.contains_key(&(p, key)) {
                v.partitions.entry(p as i32).or_default().unexpected += seen.kseqs.len();
                note_anomaly(
                    &mut v.examples,
                    Class::Unexpected,
                    format!("p{p}: unexpected: key {key} was never written"),
                );
            }
        }
        for t in v.partitions.values() {
            let t = *t;
            v.total.add(&t);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    //! Deliberately broken copies: each break is reported exactly, and
    //! nothing else is.
    use super::*;
    use crate::ledger::Outcome;
    use crate::record::{encode, Encoded, Meta, FLAG_ABORTED};

    const RUN: u64 = 99;

    /// Records as a workload writes them: two streams, three keys each,
    /// round-robin, all in partition 0; plus the ledger saying they were
    /// committed.
    fn workload(n: u64) -> (Vec<(Meta, Encoded)>, Ledger) {
        let mut kseq = BTreeMap::new();
        let mut pseq = BTreeMap::new();
        let mut out = Vec::new();
        let mut ledger = Ledger::default();
        for i in 0..n {
            let stream = (i % 2) as u8;
            let key = u32::from(stream) * 16 + (i % 3) as u32;
            let k = kseq.entry(key).or_insert(0u64);
            let p = pseq.entry(stream).or_insert(0u64);
            let meta = Meta {
                run: RUN,
                stream,
                flags: 0,
                partition: 0,
                key,
                kseq: *k,
                pseq: *p,
            };
            *k += 1;
            *p += 1;
            let headers = vec![
                ("h".to_string(), Some(vec![i as u8])),
                ("n".to_string(), None),
            ];
            let e = encode(&meta, (i % 5) as usize * 10, headers, 1_000 + i as i64);
            ledger.record(Outcome::Committed, std::slice::from_ref(&meta));
            out.push((meta, e));
        }
        (out, ledger)
    }

    fn judge(copy: &[Encoded], ledger: &Ledger) -> Verdict {
        judge_with_source(copy, ledger, None)
    }

    fn judge_with_source(
        copy: &[Encoded],
        ledger: &Ledger,
        source: Option<&SourceHeld>,
    ) -> Verdict {
        let mut j = Judge::new(RUN);
        for (offset, e) in copy.iter().enumerate() {
            j.observe(
                0,
                offset as i64,
                e.key.as_deref(),
                Some(&e.value),
                &e.headers,
                Some(e.timestamp),
            );
        }
        j.verdict(ledger, source)
    }

    fn copy(records: &[(Meta, Encoded)]) -> Vec<Encoded> {
        records.iter().map(|(_, e)| e.clone()).collect()
    }

    fn only(t: Tally, expected: Tally) {
        assert_eq!(t, expected);
    }

    #[test]
    fn exact_copy_has_no_anomaly() {
        let (records, ledger) = workload(50);
        let v = judge(&copy(&records), &ledger);
        only(
            v.total,
            Tally {
                copied: 50,
                ..Tally::default()
            },
        );
        assert!(v.examples.is_empty());
    }

    #[test]
    fn drop_one_is_one_lost() {
        let (records, ledger) = workload(50);
        let mut c = copy(&records);
        c.remove(20);
        let v = judge(&c, &ledger);
        only(
            v.total,
            Tally {
                copied: 49,
                lost: 1,
                ..Tally::default()
            },
        );
        assert_eq!(v.examples[0].class, Class::Lost, "{:?}", v.examples);
    }

    #[test]
    fn missing_from_the_source_too_is_absent_at_source_not_lost() {
        let (records, ledger) = workload(50);
        let mut c = copy(&records);
        let (gone, dropped) = (records[20].0.clone(), records[21].0.clone());
        c.drain(20..22);
        // The source's log holds everything but record 20.
        let mut source = SourceHeld::default();
        source.partitions.insert(0);
        for (m, _) in records.iter().filter(|(m, _)| *m != gone) {
            source
                .keys
                .entry((m.partition, m.key))
                .or_default()
                .insert(m.kseq);
        }
        let v = judge_with_source(&c, &ledger, Some(&source));
        only(
            v.total,
            Tally {
                copied: 48,
                lost: 1,
                absent_at_source: 1,
                ..Tally::default()
            },
        );
        assert_eq!(v.total.anomalies(), 1);
        let lost = format!("lost: key {} seqs {}", dropped.key, dropped.kseq);
        assert!(
            v.examples.iter().any(|e| e.text.contains(&lost)),
            "{:?}",
            v.examples
        );
        assert_eq!(v.absent_at_source.len(), 1);
        let absent = format!("key {} seqs {}:", gone.key, gone.kseq);
        assert!(
            v.absent_at_source[0].contains(&absent),
            "{:?}",
            v.absent_at_source
        );
    }

    #[test]
    fn a_lost_record_of_a_partition_not_read_at_the_source_stays_lost() {
        let (records, ledger) = workload(50);
        let mut c = copy(&records);
        c.drain(20..22);
        // The source read of another partition only (as after a gap, whose
        // deletion took this partition's log): nothing here is excused.
        let mut source = SourceHeld::default();
        source.partitions.insert(1);
        let v = judge_with_source(&c, &ledger, Some(&source));
        only(
            v.total,
            Tally {
                copied: 48,
                lost: 2,
                ..Tally::default()
            },
        );
    }

    #[test]
    fn missing_tail_is_unreplicated_not_lost() {
        let (records, ledger) = workload(50);
        let mut c = copy(&records);
        c.truncate(44);
        let v = judge(&c, &ledger);
        only(
            v.total,
            Tally {
                copied: 44,
                unreplicated: 6,
                ..Tally::default()
            },
        );
    }

    #[test]
    fn dup_one_is_one_duplicated() {
        let (records, ledger) = workload(50);
        let mut c = copy(&records);
        c.insert(30, c[12].clone());
        let v = judge(&c, &ledger);
        only(
            v.total,
            Tally {
                copied: 50,
                duplicated: 1,
                ..Tally::default()
            },
        );
        // A duplicate right after its original, too.
        let mut c = copy(&records);
        c.insert(13, c[12].clone());
        only(
            judge(&c, &ledger).total,
            Tally {
                copied: 50,
                duplicated: 1,
                ..Tally::default()
            },
        );
    }

    #[test]
    fn duplicates_of_an_exact_copy_are_the_sources() {
        let (records, ledger) = workload(50);
        let mut c = copy(&records);
        c.insert(30, c[12].clone());
        c.insert(40, c[20].clone());
        // A record lost as well: its example is not a duplicate's and stays.
        c.remove(25);
        let mut v = judge(&c, &ledger);
        v.duplicates_held_by_source();
        only(
            v.total,
            Tally {
                copied: 49,
                lost: 1,
                duplicated_at_source: 2,
                ..Tally::default()
            },
        );
        assert_eq!(v.total.anomalies(), 1);
        let classes: Vec<Class> = v.examples.iter().map(|e| e.class).collect();
        assert_eq!(classes, [Class::Lost], "{:?}", v.examples);
        assert_eq!(v.duplicated_at_source.len(), 2);
        assert!(
            v.duplicated_at_source
                .iter()
                .all(|e| e.contains(": duplicated: ")),
            "{:?}",
            v.duplicated_at_source
        );
        assert_eq!(
            v.partitions
                .values()
                .map(|t| t.duplicated_at_source)
                .sum::<u64>(),
            2
        );
    }

    #[test]
    fn reorder_two_is_one_reordered() {
        let (records, ledger) = workload(50);
        // Neighbours of different streams: not comparable, not reported...
        let mut c = copy(&records);
        c.swap(10, 11);
        only(
            judge(&c, &ledger).total,
            Tally {
                copied: 50,
                ..Tally::default()
            },
        );
        // ...the same stream, different keys: reported by stream order.
        let mut c = copy(&records);
        c.swap(10, 12);
        let v = judge(&c, &ledger);
        only(
            v.total,
            Tally {
                copied: 50,
                reordered: 1,
                ..Tally::default()
            },
        );
        // The same key (i and i+6: same stream, same key). The stream's
        // records 12 and 14 in between now also come after a later record
        // (16), so three records are out of order.
        let mut c = copy(&records);
        c.swap(10, 16);
        only(
            judge(&c, &ledger).total,
            Tally {
                copied: 50,
                reordered: 3,
                ..Tally::default()
            },
        );
        // Far apart: one record late.
        let mut c = copy(&records);
        let r = c.remove(5);
        c.insert(40, r);
        only(
            judge(&c, &ledger).total,
            Tally {
                copied: 50,
                reordered: 1,
                ..Tally::default()
            },
        );
    }

    #[test]
    fn leaked_aborted_record_is_one_aborted_read() {
        let (records, ledger) = workload(50);
        let mut c = copy(&records);
        let leaked = Meta {
            run: RUN,
            stream: 1,
            flags: FLAG_ABORTED,
            partition: 0,
            key: 17,
            kseq: 9,
            pseq: 30,
        };
        c.insert(31, encode(&leaked, 5, vec![], 3));
        let v = judge(&c, &ledger);
        only(
            v.total,
            Tally {
                copied: 50,
                aborted_read: 1,
                ..Tally::default()
            },
        );
        // A record of a transaction that failed and was aborted (the ledger
        // knows): also an aborted read.
        let (mut records, _) = workload(50);
        let failed = records.remove(25);
        let mut ledger2 = Ledger::default();
        for (m, _) in &records {
            ledger2.record(Outcome::Committed, std::slice::from_ref(m));
        }
        ledger2.record(Outcome::Aborted, std::slice::from_ref(&failed.0));
        let mut c = copy(&records);
        c.insert(25, failed.1.clone());
        only(
            judge(&c, &ledger2).total,
            Tally {
                copied: 50,
                aborted_read: 1,
                ..Tally::default()
            },
        );
        // Uncertain records may be there once, or not at all.
        let mut ledger = Ledger::default();
        for (m, _) in &records {
            ledger.record(Outcome::Committed, std::slice::from_ref(m));
        }
        ledger.record(Outcome::Uncertain, std::slice::from_ref(&failed.0));
        only(
            judge(&c, &ledger).total,
            Tally {
                copied: 50,
                ..Tally::default()
            },
        );
        only(
            judge(&copy(&records), &ledger).total,
            Tally {
                copied: 49,
                ..Tally::default()
            },
        );
    }

    #[test]
    fn altered_and_unexpected() {
        let (records, ledger) = workload(20);
        let mut c = copy(&records);
        c[3].timestamp += 1;
        c[4].headers.pop();
        let last = c[5].value.len() - 9;
        c[5].value[last] ^= 0xff;
        let v = judge(&c, &ledger);
        only(
            v.total,
            Tally {
                copied: 20,
                altered: 3,
                ..Tally::default()
            },
        );

        let mut c = copy(&records);
        c.push(Encoded {
            key: None,
            value: b"hello".to_vec(),
            headers: vec![],
            timestamp: 0,
        });
        let other_run = Meta {
            run: RUN + 1,
            ..records[0].0.clone()
        };
        c.push(encode(&other_run, 0, vec![], 0));
        let never_written = Meta {
            kseq: 1000,
            pseq: 1000,
            ..records[0].0.clone()
        };
        c.push(encode(&never_written, 0, vec![], 0));
        let v = judge(&c, &ledger);
        only(
            v.total,
            Tally {
                copied: 21,
                unexpected: 3,
                ..Tally::default()
            },
        );
    }

    #[test]
    fn deleted_records_must_stay_away() {
        let (records, mut ledger) = workload(20);
        ledger.mark_deleted(&[records[7].0.clone()]);
        let v = judge(&copy(&records), &ledger);
        only(
            v.total,
            Tally {
                copied: 20,
                unexpected: 1,
                ..Tally::default()
            },
        );
        let mut c = copy(&records);
        c.remove(7);
        only(
            judge(&c, &ledger).total,
            Tally {
                copied: 19,
                ..Tally::default()
            },
        );
    }

    #[test]
    fn covers_follows_the_streams() {
        let (records, ledger) = workload(10);
        let mut j = Judge::new(RUN);
        assert!(!j.covers(&ledger.committed_pseq));
        for (offset, (_, e)) in records.iter().enumerate() {
            j.observe(
                0,
                offset as i64,
                e.key.as_deref(),
                Some(&e.value),
                &e.headers,
                Some(e.timestamp),
            );
        }
        assert!(j.covers(&ledger.committed_pseq));
        assert_eq!(j.copied(), 10);
    }
}

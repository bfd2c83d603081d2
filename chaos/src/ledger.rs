//! The workload's own log of what it wrote, kept bounded.
//!
//! For every partition and key the ledger holds the sequence numbers whose
//! writes ended each way, as [`RangeSet`]s: memory grows with the number of
//! write failures, not with the number of records. Records of transactions
//! the workload aborts on purpose are only counted: they say so themselves
//! (see [`crate::record::FLAG_ABORTED`]).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::ranges::RangeSet;
use crate::record::Meta;

/// How a write ended, as far as the workload knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Acknowledged (plain producer) or in a committed transaction: must be
    /// on the target exactly once.
    Committed,
    /// In a transaction aborted on purpose: must never be on the target.
    Deliberate,
    /// In a transaction that failed and was aborted: must never be on the
    /// target.
    Aborted,
    /// The write's fate is unknown (delivery timed out, commit failed
    /// ambiguously): allowed on the target at most once.
    Uncertain,
    /// Committed, then deleted from the source (DeleteRecords) before it
    /// could be copied: must not be on the target.
    Deleted,
}

/// Sequence numbers of one partition and key, by outcome.
#[derive(Debug, Clone, Default)]
pub struct KeyLedger {
    /// See [`Outcome::Committed`].
    pub committed: RangeSet,
    /// See [`Outcome::Aborted`].
    pub aborted: RangeSet,
    /// See [`Outcome::Uncertain`].
    pub uncertain: RangeSet,
    /// See [`Outcome::Deleted`].
    pub deleted: RangeSet,
}

/// Records written, by outcome (for the report).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Written {
    /// [`Outcome::Committed`] records.
    pub committed: u64,
    /// [`Outcome::Deliberate`] records.
    pub aborted_on_purpose: u64,
    /// [`Outcome::Aborted`] records.
    pub aborted_by_failure: u64,
    /// [`Outcome::Uncertain`] records.
    pub uncertain: u64,
    /// [`Outcome::Deleted`] records.
    pub deleted: u64,
}

/// The whole ledger of one scenario run.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// (partition, key) → sequence numbers by outcome.
    pub keys: BTreeMap<(u32, u32), KeyLedger>,
    /// (partition, stream) → highest committed per-stream sequence number.
    pub committed_pseq: BTreeMap<(u32, u8), u64>,
    /// Totals.
    pub written: Written,
}

impl Ledger {
    /// Records how the writes of `records` ended.
    pub fn record(&mut self, outcome: Outcome, records: &[Meta]) {
        for m in records {
            let n = &mut self.written;
            let key = (m.partition, m.key);
            match outcome {
                Outcome::Deliberate => {
                    n.aborted_on_purpose += 1;
                    continue;
                }
                Outcome::Committed => {
                    n.committed += 1;
                    let max = self
                        .committed_pseq
                        .entry((m.partition, m.stream))
                        .or_default();
                    *max = (*max).max(m.pseq);
                }
                Outcome::Aborted => n.aborted_by_failure += 1,
                Outcome::Uncertain => n.uncertain += 1,
                Outcome::Deleted => n.deleted += 1,
            }
            let k = self.keys.entry(key).or_default();
            let set = match outcome {
                Outcome::Committed => &mut k.committed,
                Outcome::Aborted => &mut k.aborted,
                Outcome::Uncertain => &mut k.uncertain,
                Outcome::Deleted => &mut k.deleted,
                Outcome::Deliberate => unreachable!(),
            };
            set.insert(m.kseq);
        }
    }

    /// Moves committed records of `partition` to [`Outcome::Deleted`]
    /// (they were removed from the source before they could be copied).
    pub fn mark_deleted(&mut self, records: &[Meta]) {
        for m in records {
            if let Some(k) = self.keys.get_mut(&(m.partition, m.key)) {
                if k.committed.contains(m.kseq) {
                    let mut one = RangeSet::new();
                    one.insert(m.kseq);
                    k.committed = k.committed.difference(&one);
                    k.deleted.insert(m.kseq);
                    self.written.committed -= 1;
                    self.written.deleted += 1;
                }
            }
        }
    }
}

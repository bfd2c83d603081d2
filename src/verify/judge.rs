//! Classifying differences between a source partition and its copy.
//!
//! Pure logic over two ordered streams of committed records, so every class
//! is unit-tested without Kafka. Two ways of pairing records:
//!
//! - [`judge_mapped`]: through eosmirror's exact offset mapping. A source
//!   record and its copy are paired by offset, never by content, so a
//!   difference is found at the record where it happens.
//! - [`judge_sequence`]: for copies made by other tools (no mapping): the
//!   n-th committed record of each side, resynchronised by content within a
//!   bounded look-ahead.
//!
//! Records met out of place are recognised by content digest against
//! bounded windows (recently matched source records, pending mismatches,
//! aborted source records near the place), so memory stays bounded whatever
//! the partition size.

use std::collections::VecDeque;

use super::compaction::{CompactionWatch, Log};
use super::report::{Anomaly, Class, PartitionReport};
use crate::offsets::mapping::OffsetMap;
use crate::read::record::RecordImage;

/// Recently matched source records remembered to recognise duplicates.
const RECENT_WINDOW: usize = 4096;
/// Mismatched pairs held back to tell a reordering from an alteration.
const MISMATCH_WINDOW: usize = 1024;
/// Records each side looks ahead in sequence mode to resynchronise.
const LOOKAHEAD: usize = 256;
/// Source lookups (one fetch each) per partition; beyond it, stray target
/// records are classified without asking the source.
const MAX_LOOKUPS: u32 = 1000;
/// Unexplained target records kept for the final source scan; beyond it
/// they are reported as unexpected at once.
const MAX_SUSPECTS: usize = 10_000;

/// What the source holds at one offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceLookup {
    Committed(RecordImage),
    /// Present only for `read_uncommitted` readers: an aborted transaction's.
    Aborted(RecordImage),
    /// No data record (a transaction marker, compacted away, or deleted).
    Absent,
}

/// Point reads on the source, used only to explain anomalies.
pub trait Lookups {
    type Error;
    fn source_record_at(&mut self, offset: i64) -> Result<SourceLookup, Self::Error>;
    /// Every source record in `[from, to)`, aborted ones included
    /// (`read_uncommitted`), in offset order.
    fn scan_all(
        &mut self,
        from: i64,
        to: i64,
        visit: &mut dyn FnMut(&RecordImage),
    ) -> Result<(), Self::Error>;
}

type Stream<'a, E> = &'a mut dyn Iterator<Item = Result<RecordImage, E>>;

/// Shared bookkeeping of both modes.
struct Judge<'a, L: Lookups> {
    report: &'a mut PartitionReport,
    lookups: &'a mut L,
    lookups_left: u32,
    /// (source offset, digest) of recently matched source records.
    recent: VecDeque<(i64, u64)>,
    mismatches: VecDeque<Mismatch>,
    /// Target records no nearby source record explains: (offset, digest).
    /// Settled at the end by one scan of the source range.
    suspects: Vec<(i64, u64)>,
    /// For a compacted topic: records missing from one side, until a later
    /// record of their key there explains them.
    compaction: Option<CompactionWatch>,
}

/// A source record and a different target record in its place.
#[derive(Debug)]
struct Mismatch {
    source_offset: i64,
    target_offset: i64,
    source_digest: u64,
    target_digest: u64,
    fields: Vec<crate::read::record::Field>,
    reordered: bool,
}

impl<'a, L: Lookups> Judge<'a, L> {
    /// `compaction`: for a compacted topic, records one side's cleaner
    /// removed are explained (see [`CompactionWatch`]).
    fn new(
        report: &'a mut PartitionReport,
        lookups: &'a mut L,
        compaction: Option<CompactionWatch>,
    ) -> Self {
        Judge {
            report,
            lookups,
            lookups_left: MAX_LOOKUPS,
            recent: VecDeque::new(),
            mismatches: VecDeque::new(),
            suspects: Vec::new(),
            compaction,
        }
    }

    /// `record`, as the other side holds it, is not in `log` at `offset`:
    /// `anomaly`, unless that log's cleaner removed it.
    fn missing_from(&mut self, log: Log, record: &RecordImage, offset: i64, anomaly: Anomaly) {
        match &mut self.compaction {
            Some(watch) => watch.missing(log, record, offset, anomaly, self.report),
            None => self.report.add(anomaly),
        }
    }

    fn anomaly(&mut self, class: Class, source: Option<i64>, target: Option<i64>) {
        self.report.add(Anomaly {
            class,
            source_offset: source,
            target_offset: target,
            fields: Vec::new(),
        });
    }

    fn seen_source(&mut self, record: &RecordImage) {
        self.report.source_records += 1;
        self.report.bytes += record.size();
        if let Some(watch) = &mut self.compaction {
            watch.seen(Log::Source, record, self.report);
        }
    }

    fn seen_target(&mut self, record: &RecordImage) {
        self.report.target_records += 1;
        self.report.bytes += record.size();
        if let Some(watch) = &mut self.compaction {
            watch.seen(Log::Target, record, self.report);
        }
    }

    fn remember(&mut self, source: &RecordImage) {
        if self.recent.len() == RECENT_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back((source.offset, source.digest()));
    }

    /// A source record and the target record in its place.
    fn pair(&mut self, source: RecordImage, target: RecordImage) {
        self.remember(&source);
        let fields = source.differences(&target);
        if fields.is_empty() {
            return;
        }
        self.mismatches.push_back(Mismatch {
            source_offset: source.offset,
            target_offset: target.offset,
            source_digest: source.digest(),
            target_digest: target.digest(),
            fields,
            reordered: false,
        });
        if self.mismatches.len() > MISMATCH_WINDOW {
            self.settle_oldest_mismatch();
        }
    }

    /// A mismatch whose target content is some other pending mismatch's
    /// source content (and so the other way round for a swap) is a
    /// reordering; otherwise the copy was altered.
    fn settle_oldest_mismatch(&mut self) {
        let Some(m) = self.mismatches.pop_front() else {
            return;
        };
        let mut reordered = m.reordered;
        for other in self.mismatches.iter_mut() {
            if other.source_digest == m.target_digest || other.target_digest == m.source_digest {
                other.reordered = true;
                reordered = true;
            }
        }
        if reordered {
            self.anomaly(
                Class::Reordered,
                Some(m.source_offset),
                Some(m.target_offset),
            );
        } else {
            self.report.add(Anomaly {
                class: Class::Altered,
                source_offset: Some(m.source_offset),
                target_offset: Some(m.target_offset),
                fields: m.fields,
            });
        }
    }

    fn lookup(&mut self, offset: i64) -> Result<Option<SourceLookup>, L::Error> {
        if self.lookups_left == 0 {
            return Ok(None);
        }
        self.lookups_left -= 1;
        self.lookups.source_record_at(offset).map(Some)
    }

    /// A target record not in the place of the current source record, and
    /// not explained by the mapping (if any): a duplicate of a recent source
    /// record, or a suspect for the final scan.
    fn unexplained_target(&mut self, target: &RecordImage) {
        let digest = target.digest();
        if let Some(&(offset, _)) = self.recent.iter().rev().find(|(_, d)| *d == digest) {
            self.anomaly(Class::Duplicated, Some(offset), Some(target.offset));
        } else if self.suspects.len() < MAX_SUSPECTS {
            self.suspects.push((target.offset, digest));
        } else {
            self.anomaly(Class::Unexpected, None, Some(target.offset));
        }
    }

    /// Settles the suspects with one `read_uncommitted` scan of the source
    /// range: a suspect equal to a committed source record is a duplicate
    /// of it, equal to an aborted one an aborted leak, otherwise unexpected.
    /// `copied` tells committed records apart without a lookup where a
    /// mapping exists.
    fn settle_suspects(&mut self, copied: &dyn Fn(i64) -> bool) -> Result<(), L::Error> {
        if self.suspects.is_empty() {
            return Ok(());
        }
        let mut by_digest: std::collections::HashMap<u64, Vec<i64>> =
            std::collections::HashMap::new();
        for &(offset, digest) in &self.suspects {
            by_digest.entry(digest).or_default().push(offset);
        }
        let (from, to) = self.report.source_range;
        let mut matches: Vec<(i64, Vec<i64>)> = Vec::new();
        self.lookups.scan_all(from, to, &mut |record| {
            if let Some(targets) = by_digest.remove(&record.digest()) {
                matches.push((record.offset, targets));
            }
        })?;
        for (source_offset, targets) in matches {
            let class = if copied(source_offset) {
                Class::Duplicated
            } else {
                match self.lookup(source_offset)? {
                    Some(SourceLookup::Aborted(_)) => Class::AbortedLeak,
                    Some(SourceLookup::Committed(_)) => Class::Duplicated,
                    Some(SourceLookup::Absent) | None => Class::Unexpected,
                }
            };
            for target in targets {
                let source = (class != Class::Unexpected).then_some(source_offset);
                self.anomaly(class, source, Some(target));
            }
        }
        let mut left: Vec<i64> = by_digest.into_values().flatten().collect();
        left.sort_unstable();
        for target in left {
            self.anomaly(Class::Unexpected, None, Some(target));
        }
        Ok(())
    }

    fn finish(&mut self) {
        while !self.mismatches.is_empty() {
            self.settle_oldest_mismatch();
        }
        if let Some(watch) = &mut self.compaction {
            watch.finish(self.report);
        }
    }
}

/// Pairs source and target records through the offset mapping.
///
/// `source` yields the committed source records of the range, `target` the
/// committed target records of the range, both in offset order; the
/// report's `source_range` bounds the final scan for suspects, and its
/// `compacted_on` says whose cleaner may explain a record the other side
/// holds.
pub fn judge_mapped<L: Lookups>(
    source: Stream<'_, L::Error>,
    target: Stream<'_, L::Error>,
    map: &OffsetMap,
    lookups: &mut L,
    report: &mut PartitionReport,
) -> Result<(), L::Error> {
    let on = |cluster| report.compacted_on.contains(&cluster);
    let compaction = (!report.compacted_on.is_empty())
        .then(|| CompactionWatch::new([on("source"), on("target")], report.from_log_start));
    let mut judge = Judge::new(report, lookups, compaction);
    let mut s = source.next().transpose()?;
    let mut t = target.next().transpose()?;
    loop {
        match (s.take(), t.take()) {
            (None, None) => break,
            (Some(src), tgt) => {
                let Some(expected) = map.target_of(src.offset) else {
                    judge.seen_source(&src);
                    judge.anomaly(Class::Missing, Some(src.offset), None);
                    judge.remember(&src);
                    s = source.next().transpose()?;
                    t = tgt;
                    continue;
                };
                match tgt {
                    Some(tgt) if tgt.offset == expected => {
                        judge.seen_source(&src);
                        judge.seen_target(&tgt);
                        judge.pair(src, tgt);
                        s = source.next().transpose()?;
                        t = target.next().transpose()?;
                    }
                    Some(tgt) if tgt.offset < expected => {
                        judge.seen_target(&tgt);
                        stray_mapped(&mut judge, &tgt, map)?;
                        s = Some(src);
                        t = target.next().transpose()?;
                    }
                    tgt => {
                        // The mapped place holds no committed record.
                        judge.seen_source(&src);
                        let missing = Anomaly {
                            class: Class::Missing,
                            source_offset: Some(src.offset),
                            target_offset: Some(expected),
                            fields: Vec::new(),
                        };
                        judge.missing_from(Log::Target, &src, expected, missing);
                        judge.remember(&src);
                        s = source.next().transpose()?;
                        t = tgt;
                    }
                }
            }
            (None, Some(tgt)) => {
                judge.seen_target(&tgt);
                stray_mapped(&mut judge, &tgt, map)?;
                t = target.next().transpose()?;
            }
        }
    }
    judge.finish();
    judge.settle_suspects(&|offset| map.target_of(offset).is_some())
}

/// A target record met before the copy of the current source record.
fn stray_mapped<L: Lookups>(
    judge: &mut Judge<'_, L>,
    target: &RecordImage,
    map: &OffsetMap,
) -> Result<(), L::Error> {
    let Some(claimed) = map.source_of(target.offset) else {
        judge.unexplained_target(target);
        return Ok(());
    };
    // The mapping says this is the copy of `claimed`, which was not met as
    // a committed source record at this place.
    if judge.recent.iter().any(|&(o, _)| o == claimed) {
        judge.anomaly(Class::Duplicated, Some(claimed), Some(target.offset));
        return Ok(());
    }
    match judge.lookup(claimed)? {
        Some(SourceLookup::Committed(_)) => {
            judge.anomaly(Class::Duplicated, Some(claimed), Some(target.offset))
        }
        Some(SourceLookup::Aborted(_)) => {
            judge.anomaly(Class::AbortedLeak, Some(claimed), Some(target.offset))
        }
        // Not on the source (or not looked up): unexpected, unless the
        // source's cleaner removed it.
        Some(SourceLookup::Absent) | None => {
            let unexpected = Anomaly {
                class: Class::Unexpected,
                source_offset: None,
                target_offset: Some(target.offset),
                fields: Vec::new(),
            };
            judge.missing_from(Log::Source, target, claimed, unexpected);
        }
    }
    Ok(())
}

/// Pairs the n-th committed source record with the n-th committed target
/// record, resynchronising by content after a difference.
pub fn judge_sequence<L: Lookups>(
    source: Stream<'_, L::Error>,
    target: Stream<'_, L::Error>,
    lookups: &mut L,
    report: &mut PartitionReport,
) -> Result<(), L::Error> {
    let mut judge = Judge::new(report, lookups, None);
    let mut ahead_s: VecDeque<RecordImage> = VecDeque::new();
    // Target records and whether they were passed over by a reordering.
    let mut ahead_t: VecDeque<(RecordImage, bool)> = VecDeque::new();
    loop {
        while ahead_s.len() < LOOKAHEAD {
            match source.next().transpose()? {
                Some(r) => ahead_s.push_back(r),
                None => break,
            }
        }
        while ahead_t.len() < LOOKAHEAD {
            match target.next().transpose()? {
                Some(r) => ahead_t.push_back((r, false)),
                None => break,
            }
        }
        let (Some(s), Some((t, displaced))) = (ahead_s.front(), ahead_t.front()) else {
            break;
        };
        let (s_digest, t_digest, displaced) = (s.digest(), t.digest(), *displaced);
        if s.differences(t).is_empty() {
            let s = ahead_s.pop_front().expect("front exists");
            let (t, _) = ahead_t.pop_front().expect("front exists");
            judge.seen_source(&s);
            judge.seen_target(&t);
            if displaced {
                judge.anomaly(Class::Reordered, Some(s.offset), Some(t.offset));
            }
            judge.remember(&s);
            continue;
        }
        let t_later_in_source = ahead_s.iter().skip(1).any(|r| r.digest() == t_digest);
        let s_later_in_target = ahead_t
            .iter()
            .skip(1)
            .position(|(r, _)| r.digest() == s_digest);
        if t_later_in_source {
            // The source record is not here: later in the target, or missing.
            let s = ahead_s.pop_front().expect("front exists");
            judge.seen_source(&s);
            match s_later_in_target {
                Some(i) => {
                    let (moved, _) = ahead_t.remove(i + 1).expect("found above");
                    judge.seen_target(&moved);
                    judge.anomaly(Class::Reordered, Some(s.offset), Some(moved.offset));
                    for (_, passed) in ahead_t.iter_mut().take(i + 1) {
                        *passed = true;
                    }
                }
                None => judge.anomaly(Class::Missing, Some(s.offset), None),
            }
            judge.remember(&s);
        } else if s_later_in_target.is_some() {
            // Extra target records before the copy of `s`.
            let (t, _) = ahead_t.pop_front().expect("front exists");
            judge.seen_target(&t);
            judge.unexplained_target(&t);
        } else {
            let s = ahead_s.pop_front().expect("front exists");
            let (t, _) = ahead_t.pop_front().expect("front exists");
            judge.seen_source(&s);
            judge.seen_target(&t);
            judge.pair(s, t);
        }
    }
    // One side ended; whatever the other still has is unmatched.
    while let Some(s) = ahead_s.pop_front().map(Ok).or_else(|| source.next()) {
        let s = s?;
        judge.seen_source(&s);
        judge.anomaly(Class::Missing, Some(s.offset), None);
    }
    while let Some(t) = ahead_t
        .pop_front()
        .map(|(t, _)| Ok(t))
        .or_else(|| target.next())
    {
        let t = t?;
        judge.seen_target(&t);
        judge.unexplained_target(&t);
    }
    judge.finish();
    judge.settle_suspects(&|_| false)
}

#[cfg(test)]
mod tests;

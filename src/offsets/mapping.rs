//! The exact source→target offset mapping of one partition, rebuilt from
//! the progress records eosmirror committed with the data.
//!
//! Memory is proportional to the number of offset runs (one per stretch
//! without gaps on either side), not to the number of records; a map built
//! to translate given offsets ([`OffsetMap::answering`]) holds only the
//! runs their translations lie in.

use std::collections::BTreeSet;

use eosmirror_state::OffsetRun;

use crate::replication::progress::ProgressRecord;

/// The mapping of one source partition, plus what the progress records say
/// about how far replication got.
#[derive(Debug, Clone, Default)]
pub struct OffsetMap {
    /// Runs sorted by source offset, without overlaps.
    by_source: Vec<OffsetRun>,
    /// Every run as recorded (overlapping ones included), sorted by target
    /// offset: answers "which source record is this target record a copy of?".
    /// Not kept by a map answering given offsets.
    by_target: Vec<OffsetRun>,
    /// For a map answering given offsets: those whose run has not been
    /// read yet (an offset past every run read translates to the tail).
    pending: Option<BTreeSet<i64>>,
    /// The end of the last run read that was not a second copy.
    source_end_read: Option<i64>,
    /// The first source offset of the first run read.
    first_source: Option<i64>,
    /// Next source offset to copy (the replicated position), if any
    /// progress record was seen.
    pub replicated_position: Option<i64>,
    /// Target offset just past the last copy.
    pub replicated_target_end: Option<i64>,
    /// The lowest end of the copies the records read said
    /// (`ProgressRecord::copies_end`), which is the oldest record's: from
    /// there to that record's position nothing was copied, and past its
    /// position the newer records map every copy.
    earliest_copies_end: Option<i64>,
}

impl OffsetMap {
    /// A map that translates `offsets` alone ([`OffsetMap::first_at_or_after`]
    /// at those offsets, [`OffsetMap::first_known_source`] and the position):
    /// it keeps only the runs their translations lie in, and no target view.
    /// A group days behind a transactional source (a run per source
    /// transaction) then costs a run per offset, not the history read.
    pub fn answering(offsets: BTreeSet<i64>) -> OffsetMap {
        OffsetMap {
            pending: Some(offsets),
            ..OffsetMap::default()
        }
    }

    /// Adds one progress record's runs and position. Records arrive in
    /// commit order, so positions only move forward.
    pub fn add(&mut self, runs: &[OffsetRun], next_source_offset: i64, next_target_offset: i64) {
        for &run in runs {
            if self.pending.is_none() {
                self.by_target.push(run);
            }
            // A second copy of source offsets already mapped: the source
            // view keeps the first, and takes from this run only the offsets
            // past them; the target view knows both, so the second copy is
            // reported as a duplicate where it is met.
            let run = match self.source_end_read {
                Some(end) if run.source_end() <= end => continue,
                Some(end) if run.source_start < end => {
                    let mapped = end - run.source_start;
                    OffsetRun {
                        source_start: end,
                        target_start: run.target_start + mapped,
                        len: run.len - mapped as u64,
                    }
                }
                _ => run,
            };
            self.source_end_read = Some(run.source_end());
            self.first_source.get_or_insert(run.source_start);
            if let Some(pending) = &mut self.pending {
                // The offsets below its end that no earlier run answered
                // translate into this run (or to its start, from a gap).
                let later = pending.split_off(&run.source_end());
                if std::mem::replace(pending, later).is_empty() {
                    continue;
                }
            }
            match self.by_source.last_mut() {
                Some(last)
                    if last.source_end() == run.source_start
                        && last.target_end() == run.target_start =>
                {
                    last.len += run.len
                }
                _ => self.by_source.push(run),
            }
        }
        self.replicated_position = Some(
            self.replicated_position
                .map_or(next_source_offset, |p| p.max(next_source_offset)),
        );
        self.replicated_target_end = Some(
            self.replicated_target_end
                .map_or(next_target_offset, |p| p.max(next_target_offset)),
        );
    }

    /// Adds a progress record: its runs, its position and where its
    /// copies end.
    pub fn add_commit(&mut self, record: &ProgressRecord) {
        self.add(
            &record.runs,
            record.next_source_offset,
            record.next_target_offset,
        );
        self.note_copies_end(record.copies_end);
    }

    /// Adds a position record's position and where its copies end, without
    /// its runs (the history holds them, or they expired with it).
    pub fn add_position(&mut self, record: &ProgressRecord) {
        self.add(&[], record.next_source_offset, record.next_target_offset);
        self.note_copies_end(record.copies_end);
    }

    /// Takes where a record read says the copies end.
    pub fn note_copies_end(&mut self, copies_end: i64) {
        self.earliest_copies_end = Some(
            self.earliest_copies_end
                .map_or(copies_end, |e| e.min(copies_end)),
        );
    }

    /// The first source offset the map can translate when the history
    /// before the records read is unknown: its first run's, or the oldest
    /// record's end of the copies if lower (that record copied nothing from
    /// there on). `None` if the records read had neither (the caller falls
    /// back to the replicated position).
    pub fn first_known_source(&self) -> Option<i64> {
        match (self.first_source(), self.earliest_copies_end) {
            (Some(run), Some(end)) => Some(run.min(end)),
            (run, end) => run.or(end),
        }
    }

    /// Whether the map holds every run read (not only those answering
    /// given offsets): the views beyond [`OffsetMap::first_at_or_after`]
    /// need them.
    fn whole(&self) -> bool {
        self.pending.is_none()
    }

    /// The memory its runs take (their vectors' capacity): a whole
    /// history's map grows by a run or two per commit.
    pub fn held_bytes(&self) -> usize {
        (self.by_source.capacity() + self.by_target.capacity()) * std::mem::size_of::<OffsetRun>()
    }

    /// Sorts the target view; call once after the last record is added.
    pub fn seal(&mut self) {
        self.by_target.sort_by_key(|r| r.target_start);
        self.by_target.dedup();
    }

    /// Target offset of the copy of `source_offset`, if the mapping has one.
    pub fn target_of(&self, source_offset: i64) -> Option<i64> {
        debug_assert!(self.whole(), "a view of the runs a translation dropped");
        let i = self
            .by_source
            .partition_point(|r| r.source_end() <= source_offset);
        let run = self.by_source.get(i)?;
        (run.source_start <= source_offset)
            .then(|| run.target_start + (source_offset - run.source_start))
    }

    /// Source offset whose copy the mapping places at `target_offset`.
    pub fn source_of(&self, target_offset: i64) -> Option<i64> {
        debug_assert!(self.whole(), "a view of the runs a translation dropped");
        let i = self
            .by_target
            .partition_point(|r| r.target_end() <= target_offset);
        let run = self.by_target.get(i)?;
        (run.target_start <= target_offset)
            .then(|| run.source_start + (target_offset - run.target_start))
    }

    /// First mapped source offset at or after `source_offset`, with its target.
    pub fn first_at_or_after(&self, source_offset: i64) -> Option<(i64, i64)> {
        let i = self
            .by_source
            .partition_point(|r| r.source_end() <= source_offset);
        let run = self.by_source.get(i)?;
        let s = run.source_start.max(source_offset);
        Some((s, run.target_start + (s - run.source_start)))
    }

    /// First mapped target offset at or after `target_offset`, with its source.
    pub fn first_target_at_or_after(&self, target_offset: i64) -> Option<(i64, i64)> {
        debug_assert!(self.whole(), "a view of the runs a translation dropped");
        let i = self
            .by_source
            .partition_point(|r| r.target_end() <= target_offset);
        let run = self.by_source.get(i)?;
        let t = run.target_start.max(target_offset);
        Some((run.source_start + (t - run.target_start), t))
    }

    /// The source offset `count` mapped records before the end (for
    /// `--last N`); the first mapped offset if fewer are mapped.
    pub fn nth_from_end(&self, count: u64) -> Option<i64> {
        debug_assert!(self.whole(), "a view of the runs a translation dropped");
        let mut left = count;
        for run in self.by_source.iter().rev() {
            if left <= run.len {
                return Some(run.source_end() - left as i64);
            }
            left -= run.len;
        }
        self.by_source.first().map(|r| r.source_start)
    }

    /// First mapped source offset.
    pub fn first_source(&self) -> Option<i64> {
        self.first_source
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(source_start: i64, target_start: i64, len: u64) -> OffsetRun {
        OffsetRun {
            source_start,
            target_start,
            len,
        }
    }

    fn map(runs: &[OffsetRun]) -> OffsetMap {
        let mut m = OffsetMap::default();
        for r in runs {
            m.add(&[*r], r.source_end(), r.target_end() + 1);
        }
        m.seal();
        m
    }

    #[test]
    fn maps_both_ways_across_gaps() {
        // Source gap at 3 (a marker), target marker after each transaction.
        let m = map(&[run(0, 0, 3), run(4, 4, 2), run(6, 7, 1)]);
        assert_eq!(m.target_of(2), Some(2));
        assert_eq!(m.target_of(3), None);
        assert_eq!(m.target_of(6), Some(7));
        assert_eq!(m.target_of(7), None);
        assert_eq!(m.source_of(6), None);
        assert_eq!(m.source_of(7), Some(6));
        assert_eq!(m.first_at_or_after(3), Some((4, 4)));
        assert_eq!(m.first_target_at_or_after(6), Some((6, 7)));
        assert_eq!(m.nth_from_end(2), Some(5));
        assert_eq!(m.nth_from_end(100), Some(0));
        assert_eq!(m.replicated_position, Some(7));
    }

    /// A map answering given offsets keeps one run per offset at most:
    /// here the run an offset falls in, the run after a gap, and none for
    /// an offset past every run (the tail answers it).
    #[test]
    fn a_map_answering_offsets_keeps_only_their_runs() {
        let mut m = OffsetMap::answering([1, 5, 20].into());
        for r in [run(0, 0, 3), run(4, 4, 2), run(6, 7, 1), run(8, 9, 2)] {
            m.add(&[r], r.source_end(), r.target_end() + 1);
        }
        m.seal();
        assert_eq!(m.by_source, vec![run(0, 0, 3), run(4, 4, 2)]);
        assert!(m.by_target.is_empty());
        assert_eq!(m.first_at_or_after(1), Some((1, 1)));
        assert_eq!(m.first_at_or_after(5), Some((5, 5)));
        assert_eq!(m.first_at_or_after(20), None);
        assert_eq!(m.first_source(), Some(0));
        assert_eq!(m.replicated_position, Some(10));
    }

    /// Over runs with gaps on both sides and second copies, and offsets in
    /// runs, in gaps, before the first run and past the last, a map
    /// answering the offsets translates each as the whole map does, and
    /// knows the same first offset and position.
    #[test]
    fn a_map_answering_offsets_translates_them_as_the_whole_map_does() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n.max(1)
        };
        for case in 0..500 {
            let mut runs = Vec::new();
            let (mut s, mut t) = (next(5) as i64, 0i64);
            for _ in 0..next(40) {
                let len = 1 + next(4);
                runs.push(run(s, t, len));
                match next(8) {
                    0 => {
                        // A second copy of the run's first record.
                        runs.push(run(s, t + len as i64 + 1, 1));
                        t += 2;
                    }
                    1 => {
                        // A second copy of the run's last record and one
                        // offset past the run, copied only here.
                        runs.push(run(s + len as i64 - 1, t + len as i64 + 1, 2));
                        s += 1;
                        t += 3;
                    }
                    _ => {}
                }
                s += len as i64 + next(3) as i64;
                t += len as i64 + 1 + next(2) as i64;
            }
            let offsets: BTreeSet<i64> = (0..next(6)).map(|_| next(s as u64 + 5) as i64).collect();
            let mut whole = OffsetMap::default();
            let mut answering = OffsetMap::answering(offsets.clone());
            let mut rest = &runs[..];
            while !rest.is_empty() {
                let (commit, later) = rest.split_at((1 + next(3) as usize).min(rest.len()));
                rest = later;
                let last = commit[commit.len() - 1];
                for m in [&mut whole, &mut answering] {
                    m.add(commit, last.source_end(), last.target_end() + 1);
                }
            }
            whole.seal();
            answering.seal();
            for &o in &offsets {
                assert_eq!(
                    answering.first_at_or_after(o),
                    whole.first_at_or_after(o),
                    "case {case}: offset {o} over {runs:?}"
                );
            }
            assert!(answering.by_source.len() <= offsets.len(), "case {case}");
            assert_eq!(answering.first_known_source(), whole.first_known_source());
            assert_eq!(answering.replicated_position, whole.replicated_position);
        }
    }

    #[test]
    fn contiguous_runs_coalesce_and_overlaps_map_back_only() {
        let m = map(&[run(0, 0, 2), run(2, 2, 2), run(3, 10, 1)]);
        assert_eq!(m.by_source.len(), 1);
        assert_eq!(m.target_of(3), Some(3));
        assert_eq!(m.source_of(10), Some(3));
    }

    /// A second copy that also copied offsets past the first one's end maps
    /// those offsets; only the offsets copied before are a second copy.
    #[test]
    fn a_partly_second_copy_maps_the_offsets_it_copied_first() {
        let m = map(&[run(0, 0, 4), run(2, 10, 4)]);
        assert_eq!(m.target_of(3), Some(3));
        assert_eq!(m.target_of(4), Some(12));
        assert_eq!(m.target_of(5), Some(13));
        assert_eq!(m.first_at_or_after(4), Some((4, 12)));
        assert_eq!(m.source_of(11), Some(3));
        assert_eq!(m.replicated_position, Some(6));

        let mut answering = OffsetMap::answering([5].into());
        for r in [run(0, 0, 4), run(2, 10, 4)] {
            answering.add(&[r], r.source_end(), r.target_end() + 1);
        }
        answering.seal();
        assert_eq!(answering.first_at_or_after(5), Some((5, 13)));
    }
}

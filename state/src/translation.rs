//! Offset translation: which target offset holds the copy of a source offset.
//!
//! Target offsets are not source offsets plus a constant: source offsets have
//! gaps (transaction markers, compaction, aborted data that read_committed
//! skips) and the target interleaves its own commit markers. So the exact
//! mapping is recorded, run-length encoded.

use serde::{Deserialize, Serialize};

use crate::Checkpoint;

/// A maximal stretch where consecutive source offsets were copied to
/// consecutive target offsets: source `source_start + i` landed at target
/// `target_start + i` for every `i < len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetRun {
    /// First source offset of the stretch.
    pub source_start: i64,
    /// Target offset of the copy of `source_start`.
    pub target_start: i64,
    /// Number of records in the stretch; never zero.
    pub len: u64,
}

impl OffsetRun {
    /// One past the last source offset of the run.
    pub fn source_end(&self) -> i64 {
        self.source_start + self.len as i64
    }

    /// One past the last target offset of the run.
    pub fn target_end(&self) -> i64 {
        self.target_start + self.len as i64
    }

    /// The target offset of `source_offset` if the run covers it.
    pub(crate) fn target_of(&self, source_offset: i64) -> Option<i64> {
        (self.source_start..self.source_end())
            .contains(&source_offset)
            .then(|| self.target_start + (source_offset - self.source_start))
    }
}

/// The replicated tail of a partition: how far its copy got, and where the
/// next copied record will land.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tail {
    /// Next source offset to copy: everything below it is replicated.
    pub next_source_offset: i64,
    /// Target offset of the next copy (after the last commit marker).
    pub next_target_offset: i64,
}

impl Tail {
    /// Source offsets below `source_offset` that are not replicated yet: a
    /// group placed at the tail has consumed them on the source and will read
    /// their copies again (an upper bound in offsets).
    pub fn rereads(&self, source_offset: i64) -> i64 {
        (source_offset - self.next_source_offset).max(0)
    }
}

/// What looking up one source offset in the mapping finds: "where in the
/// target is source offset N?". The raw answer of whichever reader of the
/// mapping was asked (this cache, the progress topic); the group module
/// turns it into a partition's translation (`groups::translation` in the
/// eosmirror crate: target offset, exactness, re-reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetLookup {
    /// Target offset of the first replicated record whose source offset is
    /// `>=` the one asked about (exact if that offset itself was copied; the
    /// next copied record's if it fell into a gap).
    Exact(i64),
    /// Nothing at or after that source offset is replicated yet: a consumer
    /// positioned there belongs at the replicated tail of the target.
    Tail(Tail),
}

impl OffsetLookup {
    /// The translation rule, written once for every reader of the mapping
    /// (this cache and the progress topic). A committed group offset `o`
    /// means "read next the first committed record at offset >= o", so it
    /// translates to the target offset of that record's copy
    /// (`next_copy`: the first copied record at or after `o`); if no such
    /// copy exists yet, to the replicated tail. Both inputs must come from
    /// one consistent view of the mapping: a tail read after a commit that
    /// `next_copy` did not see would skip that commit's records.
    pub fn rule(next_copy: Option<i64>, tail: Tail) -> OffsetLookup {
        match next_copy {
            Some(target) => OffsetLookup::Exact(target),
            None => OffsetLookup::Tail(tail),
        }
    }
}

/// Debug-build check of what one committed transaction may record: runs that
/// are non-empty, in order, non-overlapping on both sides, and inside the
/// offsets the transaction moved over — from the previous checkpoint (if
/// any) up to the new one.
pub(crate) fn debug_assert_runs_fit(
    runs: &[OffsetRun],
    previous: Option<&Checkpoint>,
    next: &Checkpoint,
) {
    for run in runs {
        debug_assert!(run.len > 0, "empty offset run {run:?}");
    }
    for pair in runs.windows(2) {
        debug_assert!(
            pair[0].source_end() <= pair[1].source_start
                && pair[0].target_end() <= pair[1].target_start,
            "offset runs out of order or overlapping: {:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
    if let (Some(first), Some(previous)) = (runs.first(), previous) {
        debug_assert!(
            first.source_start >= previous.next_source_offset
                && first.target_start >= previous.next_target_offset,
            "offset run {first:?} starts before the previous checkpoint {previous:?}"
        );
    }
    if let Some(last) = runs.last() {
        debug_assert!(
            last.source_end() <= next.next_source_offset
                && last.target_end() <= next.next_target_offset,
            "offset run {last:?} ends after the new checkpoint {next:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_covers_exactly_its_offsets() {
        let run = OffsetRun {
            source_start: 10,
            target_start: 100,
            len: 3,
        };
        assert_eq!(run.target_of(9), None);
        assert_eq!(run.target_of(10), Some(100));
        assert_eq!(run.target_of(12), Some(102));
        assert_eq!(run.target_of(13), None);
        assert_eq!((run.source_end(), run.target_end()), (13, 103));
    }
}

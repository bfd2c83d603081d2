//! How far back the progress history must be read when only its tail is
//! needed (`verify --since` or `--last`, cutover's check of the copy's
//! tail, the translation of group offsets, failover's recovery point): the
//! mapping read then grows with the range needed, not with the history
//! kept.
//!
//! The history of a partition is a sequence of commits, each one progress
//! record in its lane's partition of the progress topic. It is read
//! backwards in growing chunks until, for every partition of the lane, the
//! commits newer than some commit `c` cover the range checked; reading
//! forwards from there gives the same mapping for that range as the whole
//! history, since a record copied inside the range is recorded after the
//! position moved past the range's start.

use std::collections::BTreeMap;

use crate::replication::progress::{Lineage, ProgressRecord};

/// A source partition: topic and partition number.
type Key = (String, i32);

/// How much of each partition's history a reader needs.
#[derive(Debug, Clone)]
pub enum Needed {
    /// All of it (`verify` without a range).
    All,
    /// The commits from the last one at or before a source offset, per
    /// partition (`--since`: its first offset at the time given; a
    /// translation: the lowest group offset).
    From(BTreeMap<Key, i64>),
    /// Commits holding at least the last `n` copied records of each
    /// partition (`--last n`; `0`: the newest commit, for its position).
    Last(u64),
}

/// What the backward search needs of one commit: not its runs, which a
/// commit of a transactional source holds by the thousand, so that a chunk
/// read backwards costs a few bytes per record.
#[derive(Debug, Clone)]
pub struct CommitSummary {
    key: Key,
    lineage: Lineage,
    next_target_offset: i64,
    copies_end: i64,
    /// Records its runs copied.
    copied: u64,
    /// It began its lineage's history: nothing older is of it.
    begins_history: bool,
}

impl From<ProgressRecord> for CommitSummary {
    fn from(record: ProgressRecord) -> CommitSummary {
        CommitSummary {
            key: (record.source.topic, record.source.partition),
            copied: record.runs.iter().map(|r| r.len).sum(),
            lineage: record.lineage,
            next_target_offset: record.next_target_offset,
            copies_end: record.copies_end,
            begins_history: record.begins_history,
        }
    }
}

/// What is known of one partition while its history is read backwards.
#[derive(Debug, Default)]
struct Coverage {
    /// The lineage of its newest commit: an older lineage's history is
    /// replaced by the newer one's, so it is never needed.
    lineage: Option<Lineage>,
    /// Records copied by the commits seen so far.
    copied: u64,
    /// The commits seen cover the range.
    covered: bool,
}

/// The backwards search over one partition of the progress topic.
#[derive(Debug)]
pub struct TailSearch<'a> {
    needed: &'a Needed,
    /// Commits past these target ends were made after verify's snapshot;
    /// they are not part of the mapping (see `read_mappings_as_of`).
    as_of: Option<&'a BTreeMap<Key, i64>>,
    partitions: BTreeMap<Key, Coverage>,
}

impl<'a> TailSearch<'a> {
    /// A search for the commits of `partitions` (those whose lane writes
    /// the progress partition searched).
    pub fn new(
        needed: &'a Needed,
        as_of: Option<&'a BTreeMap<Key, i64>>,
        partitions: impl IntoIterator<Item = Key>,
    ) -> TailSearch<'a> {
        TailSearch {
            needed,
            as_of,
            partitions: partitions
                .into_iter()
                .map(|key| (key, Coverage::default()))
                .collect(),
        }
    }

    /// Takes each partition's newest commit as the position topic held it
    /// (read before the history is searched): a range that starts at or
    /// past the end of a partition's copies (`copies_end`: its position,
    /// or below it when only markers, aborted records or a gap followed
    /// the last copy) needs no commit before it, so the search does not go
    /// looking for that partition's last commit, which for a partition
    /// idle for days lies days back in its lane's history.
    pub fn start_from_positions(&mut self, positions: &BTreeMap<Key, ProgressRecord>) {
        for (key, coverage) in &mut self.partitions {
            let Some(position) = positions.get(key) else {
                continue;
            };
            coverage.covered |= match self.needed {
                Needed::From(starts) => starts
                    .get(key)
                    .is_none_or(|&from| position.copies_end <= from),
                Needed::Last(0) => true,
                Needed::Last(_) | Needed::All => false,
            };
        }
    }

    /// Whether a record of `key` is still of interest.
    pub fn wants(&self, key: &Key) -> bool {
        self.partitions.get(key).is_some_and(|c| !c.covered)
    }

    /// Every partition's range is covered by the commits seen.
    pub fn covered(&self) -> bool {
        self.partitions.values().all(|c| c.covered)
    }

    /// The partitions whose range the commits seen do not cover yet.
    pub fn uncovered(&self) -> impl Iterator<Item = &Key> {
        self.partitions
            .iter()
            .filter(|(_, c)| !c.covered)
            .map(|(key, _)| key)
    }

    /// Takes the commits of the next older chunk, in commit order.
    pub fn older_chunk(&mut self, records: Vec<CommitSummary>) {
        let mut by_partition: BTreeMap<Key, Vec<CommitSummary>> = BTreeMap::new();
        for record in records {
            if self.wants(&record.key) {
                by_partition
                    .entry(record.key.clone())
                    .or_default()
                    .push(record);
            }
        }
        for (key, records) in by_partition {
            let end = self.as_of.and_then(|ends| ends.get(&key)).copied();
            let from = match self.needed {
                Needed::From(starts) => starts.get(&key).copied(),
                _ => None,
            };
            let coverage = self.partitions.get_mut(&key).expect("a wanted partition");
            for record in records.iter().rev() {
                // An older lineage (the topic recreated since) is no part of
                // the newest one's history, past the snapshot's end or not.
                if coverage
                    .lineage
                    .as_ref()
                    .is_some_and(|newest| *newest != record.lineage)
                {
                    coverage.covered = true;
                    break;
                }
                if end.is_some_and(|end| record.next_target_offset > end) {
                    continue;
                }
                coverage
                    .lineage
                    .get_or_insert_with(|| record.lineage.clone());
                // `record` is where the copies ended before the newer
                // commits seen (its runs and older ones end at or before
                // its `copies_end`): do they cover the range?
                coverage.covered |= match self.needed {
                    Needed::All => false,
                    Needed::From(_) => from.is_none_or(|from| record.copies_end <= from),
                    Needed::Last(n) => coverage.copied >= *n,
                };
                if coverage.covered {
                    break;
                }
                coverage.copied += record.copied;
                // The whole history is read: an offset before its first
                // copy translates to that copy, however far back it is.
                if record.begins_history {
                    coverage.covered = true;
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use eosmirror_state::{OffsetRun, SourcePartition};

    use super::*;
    use crate::topics::identity::TopicId;

    fn lineage(incarnation: u8) -> Lineage {
        Lineage {
            source_cluster_id: "source".into(),
            source_topic_id: TopicId([incarnation; 16]),
            target_topic_id: TopicId([0; 16]),
        }
    }

    /// A commit of `len` records of partition p-0 at `source`, copied to
    /// `target` (the marker follows the copies).
    fn commit(source: i64, target: i64, len: u64) -> ProgressRecord {
        ProgressRecord {
            source: SourcePartition::new("p", 0),
            lineage: lineage(1),
            runs: vec![OffsetRun {
                source_start: source,
                target_start: target,
                len,
            }],
            next_source_offset: source + len as i64,
            copies_end: source + len as i64,
            next_target_offset: target + len as i64 + 1,
            instance: 1,
            committed_at_ms: 0,
            begins_history: false,
        }
    }

    fn summaries(records: Vec<ProgressRecord>) -> Vec<CommitSummary> {
        records.into_iter().map(CommitSummary::from).collect()
    }

    /// Ten commits of ten records: source [0, 100), target [0, 110).
    fn history() -> Vec<ProgressRecord> {
        (0..10).map(|i| commit(i * 10, i * 11, 10)).collect()
    }

    fn key() -> Key {
        ("p".into(), 0)
    }

    #[test]
    fn since_is_covered_by_the_commits_after_the_position_passed_it() {
        let needed = Needed::From([(key(), 35)].into());
        let mut search = TailSearch::new(&needed, None, [key()]);
        // Commits 4..10 start at 40: 35 is not covered yet.
        search.older_chunk(summaries(history()[4..].to_vec()));
        assert!(!search.covered());
        // Commit 3 ends at 40, commit 2 at 30 <= 35: covered.
        search.older_chunk(summaries(history()[2..4].to_vec()));
        assert!(search.covered());
        // A partition whose range starts past its last commit needs the
        // last commit only (it says where the copy stands).
        let needed = Needed::From([(key(), 100)].into());
        let mut search = TailSearch::new(&needed, None, [key()]);
        search.older_chunk(summaries(history()[9..].to_vec()));
        assert!(search.covered());
    }

    #[test]
    fn last_is_covered_once_the_newer_commits_hold_n_records() {
        let needed = Needed::Last(25);
        let mut search = TailSearch::new(&needed, None, [key()]);
        search.older_chunk(summaries(history()[8..].to_vec()));
        assert!(!search.covered(), "20 records seen");
        search.older_chunk(summaries(history()[6..8].to_vec()));
        assert!(search.covered(), "30 records after commit 6");
    }

    #[test]
    fn a_partition_with_too_little_history_is_never_covered() {
        let needed = Needed::Last(1_000);
        let mut search = TailSearch::new(&needed, None, [key()]);
        search.older_chunk(summaries(history()));
        assert!(!search.covered());
        let all = Needed::All;
        let mut search = TailSearch::new(&all, None, [key()]);
        search.older_chunk(summaries(history()));
        assert!(!search.covered());
    }

    #[test]
    fn the_commit_that_began_the_history_covers_any_range() {
        // First copied from source offset 40 (its log start then): a range
        // from 5 needs nothing older than that first commit, which holds
        // where the group's next record was copied.
        let mut records = history()[4..].to_vec();
        records[0].begins_history = true;
        for needed in [Needed::From([(key(), 5)].into()), Needed::Last(1_000)] {
            let mut search = TailSearch::new(&needed, None, [key()]);
            search.older_chunk(summaries(records[1..].to_vec()));
            assert!(!search.covered(), "{needed:?}");
            search.older_chunk(summaries(records[..1].to_vec()));
            assert!(search.covered(), "{needed:?}");
        }
    }

    #[test]
    fn commits_after_the_snapshot_do_not_count() {
        let needed = Needed::Last(15);
        // The snapshot ends at target 77: commits 7..10 came after it.
        let ends = [(key(), 77)].into();
        let mut search = TailSearch::new(&needed, Some(&ends), [key()]);
        search.older_chunk(summaries(history()[5..].to_vec()));
        assert!(
            !search.covered(),
            "only commits 5 and 6 are in the snapshot"
        );
        search.older_chunk(summaries(history()[4..5].to_vec()));
        assert!(search.covered());
    }

    #[test]
    fn an_older_lineage_ends_the_search() {
        let needed = Needed::Last(1_000);
        let mut search = TailSearch::new(&needed, None, [key()]);
        let mut records = history();
        for r in &mut records[..5] {
            r.lineage = lineage(0);
        }
        search.older_chunk(summaries(records[5..].to_vec()));
        assert!(!search.covered());
        search.older_chunk(summaries(records[4..5].to_vec()));
        assert!(search.covered());
    }

    #[test]
    fn an_older_lineage_past_the_snapshot_ends_the_search() {
        // The target topic was recreated and copied over again: the new
        // copy (lineage 1, target [0, 22)) is shorter than the old one
        // (lineage 0, target up to 110), whose records lie past its end.
        let needed = Needed::Last(1_000);
        let ends = [(key(), 22)].into();
        let mut search = TailSearch::new(&needed, Some(&ends), [key()]);
        let mut old = history();
        for r in &mut old {
            r.lineage = lineage(0);
        }
        search.older_chunk(summaries(history()[..2].to_vec()));
        assert!(!search.covered());
        search.older_chunk(summaries(old[9..].to_vec()));
        assert!(search.covered(), "read on into the old copy's history");
    }

    #[test]
    fn only_the_searched_partitions_count() {
        let needed = Needed::Last(5);
        let mut search = TailSearch::new(&needed, None, [key(), ("q".into(), 1)]);
        assert!(!search.wants(&("other".into(), 0)));
        search.older_chunk(summaries(history()));
        assert!(!search.covered(), "q-1 has no commit yet");
        let mut q = commit(0, 0, 10);
        q.source = SourcePartition::new("q", 1);
        search.older_chunk(summaries(vec![q.clone(), q]));
        assert!(search.covered());
    }

    /// Commit 1 copies 0..10, commit 2 only reads past the marker at 10,
    /// commit 3 copies 11..21. A range from 10 is covered once commit 2 is
    /// seen: nothing was copied from its `copies_end` (10) on before it.
    #[test]
    fn a_commit_that_only_read_past_a_marker_covers_a_range_from_the_marker() {
        let mut past_marker = commit(0, 0, 10);
        past_marker.runs.clear();
        past_marker.next_source_offset = 11;
        let needed = Needed::From([(key(), 10)].into());
        let mut search = TailSearch::new(&needed, None, [key()]);
        search.older_chunk(summaries(vec![commit(11, 11, 10)]));
        assert!(!search.covered());
        search.older_chunk(summaries(vec![past_marker]));
        assert!(search.covered());
    }

    #[test]
    fn a_range_from_the_position_on_needs_no_history() {
        let position = |next_source: i64| [(key(), commit(next_source - 10, 0, 10))].into();
        let needed = Needed::From([(key(), 100)].into());
        let mut search = TailSearch::new(&needed, None, [key()]);
        search.start_from_positions(&position(100));
        assert!(search.covered(), "the group is at the position");
        assert!(!search.wants(&key()));
        // Or on the marker after its copies: the position read past it.
        let mut marker = commit(90, 0, 10);
        marker.next_source_offset = 101;
        let mut search = TailSearch::new(&needed, None, [key()]);
        search.start_from_positions(&[(key(), marker)].into());
        assert!(
            search.covered(),
            "the group is on the marker after the copies"
        );
        // A group behind the copies needs the commits after its offset.
        let mut search = TailSearch::new(&needed, None, [key()]);
        search.start_from_positions(&position(120));
        assert!(!search.covered());
        search.older_chunk(summaries(history()));
        assert!(search.covered(), "commit 9 starts at 90 <= 100");
        // The newest commit alone, whatever it is; a count of records
        // needs the commits themselves.
        let newest = Needed::Last(0);
        let mut search = TailSearch::new(&newest, None, [key()]);
        search.start_from_positions(&position(120));
        assert!(search.covered());
        let last = Needed::Last(5);
        let mut search = TailSearch::new(&last, None, [key()]);
        search.start_from_positions(&position(120));
        assert!(!search.covered());
    }
}

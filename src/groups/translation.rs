//! Translating a consumer group's source offset into a target offset.
//!
//! A committed offset `o` means "the next record to read is the first
//! committed record at offset ≥ o". Its translation is the target offset of
//! that record's copy, taken from the exact mapping, so gaps on either side
//! (transaction markers, aborted source data, compaction, the target's own
//! markers) never shift it. If that record is not copied yet, the group
//! belongs at the replicated tail: the target offset where the next copy
//! lands.

use eosmirror_state::{OffsetLookup, Tail};
use serde::Serialize;

use crate::offsets::mapping::OffsetMap;
use crate::offsets::topics_now::Recreated;

/// How exact a translation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TranslationKind {
    /// The target offset of the copy of the group's next record.
    Exact,
    /// The group's next record is not replicated yet: the replicated tail.
    Tail,
}

/// One partition's translated group offset: what a command reports and
/// commits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TranslatedOffset {
    pub source_offset: i64,
    pub target_offset: i64,
    pub kind: TranslationKind,
    /// Source offsets below the group's offset but at or beyond the
    /// replicated position: records the group already consumed that a
    /// consumer at the tail will read again once they are copied (an upper
    /// bound in offsets; 0 for exact translations).
    pub rereads: i64,
}

impl TranslatedOffset {
    /// `source_offset`'s translation from what the mapping's lookup found
    /// ([`OffsetLookup::rule`]); the one place a tail becomes a target
    /// offset and a re-read count, whichever reader of the mapping answered.
    pub fn from_lookup(source_offset: i64, lookup: OffsetLookup) -> TranslatedOffset {
        match lookup {
            OffsetLookup::Exact(target_offset) => TranslatedOffset {
                source_offset,
                target_offset,
                kind: TranslationKind::Exact,
                rereads: 0,
            },
            OffsetLookup::Tail(tail) => TranslatedOffset {
                source_offset,
                target_offset: tail.next_target_offset,
                kind: TranslationKind::Tail,
                rereads: tail.rereads(source_offset),
            },
        }
    }
}

/// Why an offset cannot be translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Untranslatable {
    #[error("nothing of this partition has been replicated yet: translate it once `eosmirror run` has copied some of it")]
    NothingReplicated,
    #[error("source offset {offset} precedes the oldest offset mapping kept ({first_mapped}); the progress topic's retention (--progress.retention.ms) deleted the older mappings (or the progress topic was deleted and created again since), so the exact target offset is no longer known. Set this partition of the group on the target yourself (kafka-consumer-groups.sh --reset-offsets: an earlier offset re-reads records, a later one skips them) or leave its topic out (`translate --topic`), and keep --progress.retention.ms above the longest a group lags")]
    MappingExpired { offset: i64, first_mapped: i64 },
    #[error("the target no longer has the copy the group reads next (target offset {target_offset}): its log starts at {target_start} (the target's retention or DeleteRecords deleted it: a topic eosmirror creates gets the source topic's own retention.ms, but without one it follows the target broker's default, which may keep less than the source's). A consumer there would skip what it has not read yet, [{target_offset}, {target_start}), by its auto.offset.reset. Keep the target topic's retention.ms at least the source's; for this group, commit {target_start} on the target yourself (kafka-consumer-groups.sh --reset-offsets --to-offset {target_start}) if skipping those records is acceptable")]
    CopyDeleted {
        target_offset: i64,
        target_start: i64,
    },
    #[error(transparent)]
    Recreated(#[from] Recreated),
}

/// `translated`, unless the target deleted the copy it points at: a log
/// that starts past it (`target_start`, the partition's low watermark).
pub fn still_on_target(
    translated: TranslatedOffset,
    target_start: i64,
) -> Result<TranslatedOffset, Untranslatable> {
    if translated.target_offset < target_start {
        return Err(Untranslatable::CopyDeleted {
            target_offset: translated.target_offset,
            target_start,
        });
    }
    Ok(translated)
}

/// Translates `source_offset` through `map`. `history_truncated` says the
/// history this partition needed lost its oldest records (to the progress
/// topic's retention, or with the topic deleted and created again), so
/// offsets before the first mapping kept are unknown rather than gaps.
pub fn translate(
    map: &OffsetMap,
    history_truncated: bool,
    source_offset: i64,
) -> Result<TranslatedOffset, Untranslatable> {
    let (Some(position), Some(tail)) = (map.replicated_position, map.replicated_target_end) else {
        return Err(Untranslatable::NothingReplicated);
    };
    // With the history truncated, nothing is known below the first run kept
    // (or, with none kept, below the end of the copies).
    let first_known = map.first_known_source().unwrap_or(position);
    if history_truncated && source_offset < first_known {
        return Err(Untranslatable::MappingExpired {
            offset: source_offset,
            first_mapped: first_known,
        });
    }
    let tail = Tail {
        next_source_offset: position,
        next_target_offset: tail,
    };
    let next_copy = map
        .first_at_or_after(source_offset)
        .map(|(_, target)| target);
    Ok(TranslatedOffset::from_lookup(
        source_offset,
        OffsetLookup::rule(next_copy, tail),
    ))
}

#[cfg(test)]
mod tests {
    use eosmirror_state::OffsetRun;

    use super::*;

    /// Source 0..3 copied to 0..3; source 3 is a marker, 4 and 5 aborted,
    /// 6 a marker; source 7..9 copied to target 4..6 (target marker at 3).
    fn map() -> OffsetMap {
        let mut m = OffsetMap::default();
        m.add(
            &[OffsetRun {
                source_start: 0,
                target_start: 0,
                len: 3,
            }],
            3,
            3,
        );
        m.add(
            &[OffsetRun {
                source_start: 7,
                target_start: 4,
                len: 2,
            }],
            9,
            6,
        );
        m.seal();
        m
    }

    #[test]
    fn offsets_in_gaps_translate_to_the_next_copied_record() {
        let m = map();
        let at = |o| translate(&m, false, o).unwrap();
        assert_eq!((at(0).target_offset, at(2).target_offset), (0, 2));
        for gap in [3, 4, 5, 6] {
            assert_eq!(at(gap).target_offset, 4, "source offset {gap}");
            assert_eq!(at(gap).kind, TranslationKind::Exact);
        }
        assert_eq!(at(8).target_offset, 5);
    }

    #[test]
    fn offsets_past_the_replicated_position_go_to_the_tail() {
        let m = map();
        let t = translate(&m, false, 9).unwrap();
        assert_eq!(
            (t.target_offset, t.kind, t.rereads),
            (6, TranslationKind::Tail, 0)
        );
        let t = translate(&m, false, 12).unwrap();
        assert_eq!(
            (t.target_offset, t.kind, t.rereads),
            (6, TranslationKind::Tail, 3)
        );
    }

    #[test]
    fn unknown_history_is_refused() {
        assert_eq!(
            translate(&OffsetMap::default(), false, 0),
            Err(Untranslatable::NothingReplicated)
        );
        let mut m = OffsetMap::default();
        m.add(
            &[OffsetRun {
                source_start: 50,
                target_start: 60,
                len: 5,
            }],
            55,
            65,
        );
        m.seal();
        assert!(matches!(
            translate(&m, true, 10),
            Err(Untranslatable::MappingExpired { .. })
        ));
        // Complete history: offsets before the first copy are source data
        // that never existed or was deleted before copying.
        assert_eq!(translate(&m, false, 10).unwrap().target_offset, 60);
    }

    /// Source 0..10 copied to target 0..10 (the target's marker at 10);
    /// the source's marker at 10 read past, so the position is 11. With the
    /// history expired, the position record alone says nothing was copied
    /// from 10 on: a group caught up on that marker belongs at the tail.
    #[test]
    fn a_group_on_the_marker_after_the_last_copy_translates_without_history() {
        let mut m = OffsetMap::default();
        m.add(&[], 11, 10);
        m.note_copies_end(10);
        m.seal();
        let t = translate(&m, true, 10).unwrap();
        assert_eq!(
            (t.target_offset, t.kind, t.rereads),
            (10, TranslationKind::Tail, 0)
        );
        assert_eq!(
            translate(&m, true, 9),
            Err(Untranslatable::MappingExpired {
                offset: 9,
                first_mapped: 10
            })
        );
    }

    /// The history kept starts with a commit that only read past the
    /// marker at 10 (copies ending at 10, position 11), then copies 11..13
    /// to target 11..13. A group on the marker translates to the copy of
    /// 11, exactly; one below 10 is refused.
    #[test]
    fn the_oldest_record_kept_says_where_the_known_offsets_start() {
        let mut m = OffsetMap::default();
        m.add(&[], 11, 10);
        m.note_copies_end(10);
        m.add(
            &[OffsetRun {
                source_start: 11,
                target_start: 11,
                len: 2,
            }],
            13,
            13,
        );
        m.note_copies_end(13);
        m.seal();
        let t = translate(&m, true, 10).unwrap();
        assert_eq!((t.target_offset, t.kind), (11, TranslationKind::Exact));
        assert!(matches!(
            translate(&m, true, 9),
            Err(Untranslatable::MappingExpired {
                first_mapped: 10,
                ..
            })
        ));
    }

    /// An idle partition whose progress records all expired: only its
    /// position (from the compacted position topic) is known.
    #[test]
    fn a_position_alone_translates_offsets_at_the_tail() {
        let mut m = OffsetMap::default();
        m.add(&[], 40, 52);
        m.seal();
        let t = translate(&m, true, 40).unwrap();
        assert_eq!(
            (t.target_offset, t.kind, t.rereads),
            (52, TranslationKind::Tail, 0)
        );
        assert_eq!(translate(&m, true, 43).unwrap().rereads, 3);
        assert_eq!(
            translate(&m, true, 39),
            Err(Untranslatable::MappingExpired {
                offset: 39,
                first_mapped: 40
            })
        );
    }
}

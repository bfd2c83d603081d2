//! Turning a range request, the watermarks of both sides and the offset
//! mapping into the exact offsets to read, for mapped mode. Pure, so the
//! edge cases (retention on either side, expired mapping history) are
//! unit-tested.

use super::range::Range;
use crate::offsets::mapping::OffsetMap;

/// A partition's first offset and the end of what is checked: the source's
/// last stable offset (committed data), the target's high watermark in
/// mapped mode (verify waits for the transactions below it to end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    pub low: i64,
    pub high: i64,
}

/// What is known about one partition before reading it.
#[derive(Debug)]
pub struct PlanInputs<'a> {
    pub range: Range,
    pub source: Watermarks,
    pub target: Watermarks,
    pub map: &'a OffsetMap,
    /// The history of this partition needed for the range was truncated:
    /// its lane's partition of the progress topic no longer starts at
    /// offset 0, and the commits kept do not cover the range (old mappings
    /// were deleted by retention).
    pub history_truncated: bool,
    /// For `--since`: the source's first offset at or after the time.
    pub since_offset: Option<i64>,
    /// The history is truncated and its only commit known (the position)
    /// was made after the snapshot: what the snapshot holds of the copy
    /// has no mapping left, and how far it goes is not known.
    pub copied_after_snapshot: bool,
}

/// The offsets to read and what cannot be checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub source_from: i64,
    pub source_to: i64,
    pub target_from: i64,
    pub target_to: i64,
    pub unverifiable: Vec<String>,
    /// Committed source records at or after this offset are not yet
    /// replicated (checked separately, reported, not an error).
    pub unreplicated_from: Option<i64>,
}

pub fn plan_mapped(i: &PlanInputs<'_>) -> Plan {
    let map = i.map;
    let position = map.replicated_position;
    let mut unverifiable = Vec::new();
    let no_history = |from: i64, to: i64| {
        format!("no offset mapping for target offsets [{from}, {to}): the progress topic's retention (--progress.retention.ms of `run`) deleted it, or the progress topic was deleted and created again since; verify a later range with --since or --last")
    };
    // Copies of source offsets [first copied, `to`) that the mapping knows
    // but the target no longer holds (its retention, or DeleteRecords):
    // those source records would never be read, and the range would look
    // whole.
    let copies_deleted = |to: i64| {
        map.first_source()
            .map(|first| first.max(i.source.low))
            .filter(|&from| from < to)
            .map(|from| format!("the copies of source offsets [{from}, {to}) were deleted from the target (retention or DeleteRecords on the target), so those records are not compared; verify what the target still holds with --since or --last"))
    };

    if i.copied_after_snapshot && i.target.high > i.target.low {
        // Copies whose extent no mapping kept says: nothing can be judged,
        // on either side.
        return Plan {
            source_from: i.source.low,
            source_to: i.source.low,
            target_from: i.target.high,
            target_to: i.target.high,
            unverifiable: vec![no_history(i.target.low, i.target.high)],
            unreplicated_from: None,
        };
    }

    // Where the checked stretch starts, on both sides.
    let (mut source_from, mut target_from) = match i.range {
        Range::All => match map.first_target_at_or_after(i.target.low) {
            Some((s, t)) => {
                if i.history_truncated && t > i.target.low {
                    unverifiable.push(no_history(i.target.low, t));
                    (s, t)
                } else {
                    unverifiable.extend(copies_deleted(s));
                    // With the whole history kept and the first copy still
                    // on the target, the source is read from its start:
                    // committed records before the first copy were never
                    // copied (missing), whatever the mapping claims.
                    let from = if !i.history_truncated && map.first_source() == Some(s) {
                        s.min(i.source.low)
                    } else {
                        s
                    };
                    (from, i.target.low)
                }
            }
            None => {
                // No copy at or past the target's start is mapped. With the
                // history truncated, what lies below the tail has no mapping
                // left: it is not read, so it is never judged unexpected.
                let unmapped_to = map
                    .replicated_target_end
                    .unwrap_or(i.target.low)
                    .max(i.target.low);
                if i.history_truncated && unmapped_to > i.target.low {
                    unverifiable.push(no_history(i.target.low, unmapped_to));
                } else if let Some(p) = position {
                    unverifiable.extend(copies_deleted(p));
                }
                // Nothing ever copied, by the whole history: any committed
                // source record is missing.
                let from = if !i.history_truncated && map.first_source().is_none() {
                    i.source.low
                } else {
                    position.unwrap_or(i.source.low)
                };
                (from, unmapped_to)
            }
        },
        Range::Since(_) | Range::Last(_) => {
            let from = match i.range {
                Range::Since(_) => i.since_offset.unwrap_or(i.source.high),
                _ => map
                    .nth_from_end(match i.range {
                        Range::Last(n) => n,
                        _ => unreachable!(),
                    })
                    .unwrap_or(position.unwrap_or(i.source.low)),
            };
            let target_from = match map.first_at_or_after(from) {
                Some((_, t)) => t,
                None => map.replicated_target_end.unwrap_or(i.target.high),
            };
            // With the history truncated, the mapping is known from the
            // first run kept, or from where the oldest record kept says its
            // copies end (nothing was copied from there to its position).
            let first_known = map.first_known_source().or(position);
            if i.history_truncated && first_known.is_some_and(|known| known > from) {
                // Not read: with no mapping, its records would look missing.
                let to = first_known.unwrap_or(from);
                unverifiable.push(format!("no offset mapping for source offsets [{from}, {to}): the progress topic's retention (--progress.retention.ms of `run`) deleted it, or the progress topic was deleted and created again since; verify a later range with --since or --last"));
                (to, target_from)
            } else {
                (from, target_from)
            }
        }
    };

    if source_from < i.source.low {
        let copied_to = position
            .map_or(source_from, |p| p.min(i.source.low))
            .max(source_from);
        if copied_to > source_from {
            unverifiable.push(format!(
                "source offsets [{source_from}, {copied_to}) were deleted from the source (retention or DeleteRecords) after they were copied, so their copies cannot be compared; verify what the source still has with --since or --last"
            ));
        }
        if copied_to < i.source.low {
            unverifiable.push(format!(
                "source offsets [{copied_to}, {}) were deleted from the source (retention or DeleteRecords) before they were copied: the copy cannot hold them",
                i.source.low
            ));
        }
        source_from = i.source.low;
        target_from = match map.first_at_or_after(source_from) {
            Some((_, t)) => t.max(target_from),
            None => map.replicated_target_end.unwrap_or(i.target.high),
        };
    }
    let source_to = position
        .map_or(source_from, |p| p.min(i.source.high))
        .max(source_from);
    let target_to = i.target.high.max(target_from);
    let unreplicated_from = match position {
        Some(p) if p < i.source.high => Some(p.max(i.source.low)),
        Some(_) => None,
        None => (i.source.high > i.source.low).then_some(i.source.low),
    };
    Plan {
        source_from,
        source_to,
        target_from,
        target_to,
        unverifiable,
        unreplicated_from,
    }
}

#[cfg(test)]
mod tests {
    use eosmirror_state::OffsetRun;

    use super::*;

    /// Source 0..100 copied to target 0..100 in two transactions (target
    /// marker at 50 and 101), replicated position 100.
    fn copied() -> OffsetMap {
        let mut m = OffsetMap::default();
        m.add(
            &[OffsetRun {
                source_start: 0,
                target_start: 0,
                len: 50,
            }],
            50,
            50,
        );
        m.add(
            &[OffsetRun {
                source_start: 50,
                target_start: 51,
                len: 50,
            }],
            100,
            101,
        );
        m.seal();
        m
    }

    fn inputs(map: &OffsetMap, range: Range) -> PlanInputs<'_> {
        PlanInputs {
            range,
            source: Watermarks { low: 0, high: 100 },
            target: Watermarks { low: 0, high: 102 },
            map,
            history_truncated: false,
            since_offset: None,
            copied_after_snapshot: false,
        }
    }

    #[test]
    fn all_covers_both_sides_entirely() {
        let m = copied();
        let p = plan_mapped(&inputs(&m, Range::All));
        assert_eq!(
            (p.source_from, p.source_to, p.target_from, p.target_to),
            (0, 100, 0, 102)
        );
        assert!(p.unverifiable.is_empty());
        assert_eq!(p.unreplicated_from, None);
    }

    #[test]
    fn last_and_since_start_at_the_mapped_place() {
        let m = copied();
        let p = plan_mapped(&inputs(&m, Range::Last(10)));
        assert_eq!((p.source_from, p.target_from), (90, 91));
        let p = plan_mapped(&PlanInputs {
            since_offset: Some(40),
            ..inputs(&m, Range::Since(7))
        });
        assert_eq!((p.source_from, p.target_from), (40, 40));
        let p = plan_mapped(&PlanInputs {
            since_offset: None,
            ..inputs(&m, Range::Since(7))
        });
        assert_eq!((p.source_from, p.source_to), (100, 100));
    }

    /// The target's retention (or DeleteRecords) deleted copies the
    /// source still holds: those source records are not read, and the
    /// range says so instead of looking whole.
    #[test]
    fn copies_deleted_from_the_target_make_their_range_unverifiable() {
        let m = copied();
        let p = plan_mapped(&PlanInputs {
            target: Watermarks { low: 60, high: 102 },
            ..inputs(&m, Range::All)
        });
        assert_eq!((p.source_from, p.target_from), (59, 60));
        assert_eq!(p.unverifiable.len(), 1, "{:?}", p.unverifiable);
        assert!(
            p.unverifiable[0]
                .contains("copies of source offsets [0, 59) were deleted from the target"),
            "{}",
            p.unverifiable[0]
        );
        // Every copy gone.
        let p = plan_mapped(&PlanInputs {
            target: Watermarks {
                low: 102,
                high: 102,
            },
            ..inputs(&m, Range::All)
        });
        assert_eq!((p.source_from, p.source_to), (100, 100));
        assert!(
            p.unverifiable
                .iter()
                .any(|u| u
                    .contains("copies of source offsets [0, 100) were deleted from the target")),
            "{:?}",
            p.unverifiable
        );
    }

    #[test]
    fn source_retention_makes_the_early_range_unverifiable() {
        let m = copied();
        let p = plan_mapped(&PlanInputs {
            source: Watermarks { low: 30, high: 100 },
            ..inputs(&m, Range::All)
        });
        assert_eq!(p.unverifiable.len(), 1);
        assert!(
            p.unverifiable[0].contains("source offsets [0, 30)"),
            "{:?}",
            p.unverifiable
        );
        assert_eq!((p.source_from, p.target_from), (30, 30));
        // --last inside what the source still has is fine.
        let p = plan_mapped(&PlanInputs {
            source: Watermarks { low: 30, high: 100 },
            ..inputs(&m, Range::Last(20))
        });
        assert!(p.unverifiable.is_empty());
    }

    /// Source 50..100 copied to target 51..101, the mappings of 0..50
    /// deleted by retention.
    fn second_half_kept() -> OffsetMap {
        let mut m = OffsetMap::default();
        m.add(
            &[OffsetRun {
                source_start: 50,
                target_start: 51,
                len: 50,
            }],
            100,
            101,
        );
        m.seal();
        m
    }

    #[test]
    fn expired_mapping_history_is_named() {
        let m = second_half_kept();
        let p = plan_mapped(&PlanInputs {
            history_truncated: true,
            ..inputs(&m, Range::All)
        });
        assert!(
            p.unverifiable[0].contains("target offsets [0, 51)"),
            "{:?}",
            p.unverifiable
        );
        assert_eq!(p.target_from, 51);
        // Without truncation, the unmapped records are judged: on the
        // target as unexpected, on the source (never copied) as missing.
        let p = plan_mapped(&inputs(&m, Range::All));
        assert!(p.unverifiable.is_empty());
        assert_eq!((p.source_from, p.target_from), (0, 0));
    }

    #[test]
    fn a_copy_that_began_after_the_sources_start_is_read_from_the_start() {
        // The whole history kept, and its first copy (source 50, at target
        // 0) still on the target: source records [0, 50) were never copied.
        let mut m = OffsetMap::default();
        m.add(
            &[OffsetRun {
                source_start: 50,
                target_start: 0,
                len: 50,
            }],
            100,
            51,
        );
        m.seal();
        let p = plan_mapped(&PlanInputs {
            target: Watermarks { low: 0, high: 51 },
            ..inputs(&m, Range::All)
        });
        assert!(p.unverifiable.is_empty(), "{:?}", p.unverifiable);
        assert_eq!((p.source_from, p.source_to), (0, 100));
        assert_eq!((p.target_from, p.target_to), (0, 51));
        // With the history truncated, what came before is not known.
        let p = plan_mapped(&PlanInputs {
            target: Watermarks { low: 0, high: 51 },
            history_truncated: true,
            ..inputs(&m, Range::All)
        });
        assert_eq!(p.source_from, 50);
    }

    #[test]
    fn a_position_without_any_copy_is_read_from_the_sources_start() {
        // The mapping says nothing was copied, yet the position is past
        // committed records: they are missing.
        let mut m = OffsetMap::default();
        m.add(&[], 100, 0);
        m.seal();
        let p = plan_mapped(&PlanInputs {
            target: Watermarks { low: 0, high: 0 },
            ..inputs(&m, Range::All)
        });
        assert_eq!((p.source_from, p.source_to), (0, 100));
    }

    #[test]
    fn expired_history_is_never_read_as_records_nothing_copied() {
        // Partly expired: --since before the first mapping kept starts
        // reading at it (before, [30, 50) was read and judged missing).
        let m = second_half_kept();
        let p = plan_mapped(&PlanInputs {
            history_truncated: true,
            since_offset: Some(30),
            ..inputs(&m, Range::Since(7))
        });
        assert!(
            p.unverifiable[0].contains("source offsets [30, 50)"),
            "{:?}",
            p.unverifiable
        );
        assert_eq!((p.source_from, p.target_from), (50, 51));

        // All expired, the position kept: 100 copied to 0..102.
        let mut idle = OffsetMap::default();
        idle.add(&[], 100, 102);
        idle.seal();
        let truncated = |range| PlanInputs {
            history_truncated: true,
            source: Watermarks { low: 0, high: 110 },
            ..inputs(&idle, range)
        };
        let p = plan_mapped(&truncated(Range::All));
        assert_eq!(p.unverifiable.len(), 1, "{:?}", p.unverifiable);
        assert!(p.unverifiable[0].contains("target offsets [0, 102)"));
        assert_eq!(
            (
                p.source_from,
                p.source_to,
                p.target_from,
                p.unreplicated_from
            ),
            (100, 100, 102, Some(100))
        );
        let p = plan_mapped(&PlanInputs {
            since_offset: Some(40),
            ..truncated(Range::Since(7))
        });
        assert!(p.unverifiable[0].contains("source offsets [40, 100)"));
        assert_eq!((p.source_from, p.source_to), (100, 100));
        // The position says its copies end at 97 (markers after them): a
        // range from 98 is all known, one from 90 only from 97 on.
        let mut marked = OffsetMap::default();
        marked.add(&[], 100, 102);
        marked.note_copies_end(97);
        marked.seal();
        let since = |offset| PlanInputs {
            since_offset: Some(offset),
            history_truncated: true,
            source: Watermarks { low: 0, high: 110 },
            ..inputs(&marked, Range::Since(7))
        };
        let p = plan_mapped(&since(98));
        assert!(p.unverifiable.is_empty(), "{:?}", p.unverifiable);
        assert_eq!(p.source_from, 98);
        let p = plan_mapped(&since(90));
        assert!(p.unverifiable[0].contains("source offsets [90, 97)"));
        assert_eq!(p.source_from, 97);

        // All expired and the position past the snapshot: nothing read.
        let empty = OffsetMap::default();
        let p = plan_mapped(&PlanInputs {
            history_truncated: true,
            copied_after_snapshot: true,
            ..inputs(&empty, Range::All)
        });
        assert!(p.unverifiable[0].contains("target offsets [0, 102)"));
        assert_eq!(
            (p.source_to - p.source_from, p.target_to - p.target_from),
            (0, 0)
        );
        assert_eq!(p.unreplicated_from, None);
        // Never copied, in a truncated lane: what the target holds is read
        // (and judged), and the source's records are not yet replicated.
        let p = plan_mapped(&PlanInputs {
            history_truncated: true,
            ..inputs(&empty, Range::All)
        });
        assert!(p.unverifiable.is_empty(), "{:?}", p.unverifiable);
        assert_eq!((p.target_from, p.unreplicated_from), (0, Some(0)));
    }

    #[test]
    fn records_deleted_before_they_were_copied_are_named_so() {
        // Copied up to 100; the source deleted up to 120.
        let m = copied();
        let p = plan_mapped(&PlanInputs {
            source: Watermarks {
                low: 120,
                high: 130,
            },
            ..inputs(&m, Range::All)
        });
        assert_eq!(p.unverifiable.len(), 2, "{:?}", p.unverifiable);
        assert!(p.unverifiable[0].contains("[0, 100) were deleted from the source (retention or DeleteRecords) after they were copied"));
        assert!(p.unverifiable[1].contains("[100, 120) were deleted from the source (retention or DeleteRecords) before they were copied"));
    }

    #[test]
    fn records_beyond_the_replicated_position_are_not_yet_replicated() {
        let m = copied();
        let p = plan_mapped(&PlanInputs {
            source: Watermarks { low: 0, high: 120 },
            ..inputs(&m, Range::All)
        });
        assert_eq!((p.source_to, p.unreplicated_from), (100, Some(100)));
        let empty = OffsetMap::default();
        let p = plan_mapped(&inputs(&empty, Range::All));
        assert_eq!(
            (p.source_from, p.source_to, p.unreplicated_from),
            (0, 0, Some(0))
        );
    }
}

//! Every class, in both modes, on hand-built record streams.

use std::collections::BTreeMap;
use std::convert::Infallible;

use eosmirror_state::OffsetRun;

use super::*;
use crate::read::record::{image, Field};

/// The source as point lookups see it: committed and aborted records.
#[derive(Default)]
struct FakeSource {
    committed: BTreeMap<i64, RecordImage>,
    aborted: BTreeMap<i64, RecordImage>,
}

impl Lookups for FakeSource {
    type Error = Infallible;
    fn source_record_at(&mut self, offset: i64) -> Result<SourceLookup, Infallible> {
        Ok(if let Some(r) = self.committed.get(&offset) {
            SourceLookup::Committed(r.clone())
        } else if let Some(r) = self.aborted.get(&offset) {
            SourceLookup::Aborted(r.clone())
        } else {
            SourceLookup::Absent
        })
    }
    fn scan_all(
        &mut self,
        from: i64,
        to: i64,
        visit: &mut dyn FnMut(&RecordImage),
    ) -> Result<(), Infallible> {
        let mut all: Vec<&RecordImage> = self
            .committed
            .range(from..to)
            .chain(self.aborted.range(from..to))
            .map(|(_, r)| r)
            .collect();
        all.sort_by_key(|r| r.offset);
        all.into_iter().for_each(visit);
        Ok(())
    }
}

/// Source: committed records "v0".."v{n-1}" at offsets 0..n, except that
/// `aborted` offsets hold aborted records "aborted{o}".
fn source(n: i64, aborted: &[i64]) -> FakeSource {
    let mut s = FakeSource::default();
    for o in 0..n {
        if aborted.contains(&o) {
            s.aborted.insert(o, image(o, &format!("aborted{o}")));
        } else {
            s.committed.insert(o, image(o, &format!("v{o}")));
        }
    }
    s
}

/// An exact copy's mapping: committed source offsets to 0.. on the target.
fn exact_copy(src: &FakeSource) -> (Vec<RecordImage>, OffsetMap) {
    let mut map = OffsetMap::default();
    let mut target = Vec::new();
    for (i, r) in src.committed.values().enumerate() {
        let t = i as i64;
        map.add(
            &[OffsetRun {
                source_start: r.offset,
                target_start: t,
                len: 1,
            }],
            r.offset + 1,
            t + 1,
        );
        target.push(RecordImage {
            offset: t,
            ..r.clone()
        });
    }
    map.seal();
    (target, map)
}

fn with_offsets(records: Vec<RecordImage>) -> Vec<RecordImage> {
    records
        .into_iter()
        .enumerate()
        .map(|(i, r)| RecordImage {
            offset: i as i64,
            ..r
        })
        .collect()
}

fn report(n: i64) -> PartitionReport {
    PartitionReport {
        source_range: (0, n),
        ..PartitionReport::default()
    }
}

fn mapped(
    src: &mut FakeSource,
    target: Vec<RecordImage>,
    map: &OffsetMap,
    n: i64,
) -> PartitionReport {
    let committed: Vec<_> = src.committed.values().cloned().collect();
    let mut s = committed.into_iter().map(Ok);
    let mut t = target.into_iter().map(Ok);
    let mut r = report(n);
    judge_mapped(&mut s, &mut t, map, src, &mut r).unwrap();
    r
}

fn sequence(src: &mut FakeSource, target: Vec<RecordImage>, n: i64) -> PartitionReport {
    let committed: Vec<_> = src.committed.values().cloned().collect();
    let mut s = committed.into_iter().map(Ok);
    let mut t = target.into_iter().map(Ok);
    let mut r = report(n);
    judge_sequence(&mut s, &mut t, src, &mut r).unwrap();
    r
}

/// (class, source offset, target offset) of every example found.
fn found(r: &PartitionReport) -> Vec<(Class, Option<i64>, Option<i64>)> {
    let mut out: Vec<_> = r
        .anomalies
        .values()
        .flat_map(|t| t.first.iter())
        .map(|a| (a.class, a.source_offset, a.target_offset))
        .collect();
    out.sort();
    out
}

#[test]
fn exact_copy_is_clean_in_both_modes() {
    let mut src = source(50, &[10, 11, 30]);
    let (target, map) = exact_copy(&src);
    let r = mapped(&mut src, target.clone(), &map, 50);
    assert_eq!(found(&r), vec![]);
    assert_eq!((r.source_records, r.target_records), (47, 47));
    let r = sequence(&mut src, target, 50);
    assert_eq!(found(&r), vec![]);
    assert_eq!((r.source_records, r.target_records), (47, 47));
}

#[test]
fn an_extra_target_record_is_unexpected() {
    let mut src = source(10, &[]);
    let (mut target, map) = exact_copy(&src);
    target.push(image(10, "foreign"));
    assert_eq!(
        found(&mapped(&mut src, target.clone(), &map, 10)),
        vec![(Class::Unexpected, None, Some(10))]
    );
    assert_eq!(
        found(&sequence(&mut src, target, 10)),
        vec![(Class::Unexpected, None, Some(10))]
    );
}

#[test]
fn a_dropped_record_is_missing() {
    let mut src = source(10, &[]);
    let (target, mut map) = exact_copy(&src);
    // Mapped: the mapping claims 4 -> 4, but the target never got it.
    let dropped: Vec<_> = target.iter().filter(|r| r.offset != 4).cloned().collect();
    assert_eq!(
        found(&mapped(&mut src, dropped.clone(), &map, 10)),
        vec![(Class::Missing, Some(4), Some(4))]
    );
    // Mapped: a replicator that skipped it records no mapping for it.
    map = OffsetMap::default();
    for (t, s) in [0, 1, 2, 3, 5, 6, 7, 8, 9].iter().enumerate() {
        map.add(
            &[OffsetRun {
                source_start: *s,
                target_start: t as i64,
                len: 1,
            }],
            s + 1,
            t as i64 + 1,
        );
    }
    map.seal();
    let shifted = with_offsets(dropped);
    assert_eq!(
        found(&mapped(&mut src, shifted.clone(), &map, 10)),
        vec![(Class::Missing, Some(4), None)]
    );
    assert_eq!(
        found(&sequence(&mut src, shifted, 10)),
        vec![(Class::Missing, Some(4), None)]
    );
}

#[test]
fn a_second_copy_is_duplicated() {
    let mut src = source(10, &[]);
    let (target, map) = exact_copy(&src);
    let mut doubled = target.clone();
    doubled.insert(6, target[5].clone());
    let doubled = with_offsets(doubled);
    // Sequence: the record after 5 is 5 again.
    assert_eq!(
        found(&sequence(&mut src, doubled.clone(), 10)),
        vec![(Class::Duplicated, Some(5), Some(6))]
    );
    // Mapped, with a mapping that also records the second copy.
    let mut map2 = OffsetMap::default();
    for (t, s) in [0, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9].iter().enumerate() {
        map2.add(
            &[OffsetRun {
                source_start: *s,
                target_start: t as i64,
                len: 1,
            }],
            s + 1,
            t as i64 + 1,
        );
    }
    map2.seal();
    let r = mapped(&mut src, doubled, &map2, 10);
    assert_eq!(found(&r), vec![(Class::Duplicated, Some(5), Some(6))]);
    drop(map);
}

/// A second copy that went on past the first one's end: only the offsets
/// copied twice are duplicated; the ones it copied first are its to map.
#[test]
fn a_second_copy_running_past_the_first_duplicates_only_the_overlap() {
    let mut src = source(6, &[]);
    let committed: Vec<_> = src.committed.values().cloned().collect();
    let target = with_offsets([&committed[0..4], &committed[2..6]].concat());
    let mut map = OffsetMap::default();
    for (source_start, target_start) in [(0, 0), (2, 4)] {
        map.add(
            &[OffsetRun {
                source_start,
                target_start,
                len: 4,
            }],
            source_start + 4,
            target_start + 4,
        );
    }
    map.seal();
    let r = mapped(&mut src, target, &map, 6);
    assert_eq!(
        found(&r),
        vec![
            (Class::Duplicated, Some(2), Some(4)),
            (Class::Duplicated, Some(3), Some(5))
        ]
    );
}

#[test]
fn an_altered_header_is_altered_with_the_field_named() {
    let mut src = source(10, &[]);
    let (mut target, map) = exact_copy(&src);
    target[3].headers[0].1 = Some(b"2".to_vec());
    let r = mapped(&mut src, target.clone(), &map, 10);
    assert_eq!(found(&r), vec![(Class::Altered, Some(3), Some(3))]);
    assert_eq!(
        r.anomalies[&Class::Altered].first[0].fields,
        vec![Field::Headers]
    );
    let r = sequence(&mut src, target, 10);
    assert_eq!(found(&r), vec![(Class::Altered, Some(3), Some(3))]);
}

#[test]
fn a_swapped_pair_is_reordered() {
    let mut src = source(10, &[]);
    let (mut target, map) = exact_copy(&src);
    let (a, b) = (target[3].clone(), target[4].clone());
    target[3] = RecordImage { offset: 3, ..b };
    target[4] = RecordImage { offset: 4, ..a };
    let want = vec![
        (Class::Reordered, Some(3), Some(4)),
        (Class::Reordered, Some(4), Some(3)),
    ];
    let mapped_found = found(&mapped(&mut src, target.clone(), &map, 10));
    assert_eq!(
        mapped_found,
        vec![
            (Class::Reordered, Some(3), Some(3)),
            (Class::Reordered, Some(4), Some(4)),
        ]
    );
    assert_eq!(found(&sequence(&mut src, target, 10)), want);
}

#[test]
fn a_leaked_aborted_record_is_an_aborted_leak() {
    let mut src = source(10, &[4]);
    let (target, _) = exact_copy(&src);
    // The leaked record sits where a read_uncommitted copier would put it.
    let mut leaked = target.clone();
    leaked.insert(4, src.aborted[&4].clone());
    let leaked = with_offsets(leaked);
    assert_eq!(
        found(&sequence(&mut src, leaked.clone(), 10)),
        vec![(Class::AbortedLeak, Some(4), Some(4))]
    );
    // Mapped: a mapping that claims the aborted offset was copied.
    let mut map = OffsetMap::default();
    map.add(
        &[OffsetRun {
            source_start: 0,
            target_start: 0,
            len: 10,
        }],
        10,
        10,
    );
    map.seal();
    assert_eq!(
        found(&mapped(&mut src, leaked.clone(), &map, 10)),
        vec![(Class::AbortedLeak, Some(4), Some(4))]
    );
    // Mapped, unmapped leak: found by content among the aborted records.
    let (_, exact_map) = exact_copy(&src);
    let mut appended = target;
    appended.push(RecordImage {
        offset: 9,
        ..src.aborted[&4].clone()
    });
    assert_eq!(
        found(&mapped(&mut src, appended, &exact_map, 10)),
        vec![(Class::AbortedLeak, Some(4), Some(9))]
    );
}

#[test]
fn a_longer_source_is_missing_and_a_longer_target_unexpected_at_any_length() {
    let n = (LOOKAHEAD * 3) as i64;
    let mut src = source(n, &[]);
    let (target, _) = exact_copy(&src);
    let short: Vec<_> = target[..10].to_vec();
    let r = sequence(&mut src, short, n);
    assert_eq!(r.count(Class::Missing), n as u64 - 10);
    assert_eq!(r.source_records, n as u64);
    let mut small = source(10, &[]);
    let r = sequence(&mut small, target, 10);
    assert_eq!(r.count(Class::Unexpected), n as u64 - 10);
    assert_eq!(r.target_records, n as u64);
}

/// Source of a compacted topic: committed records at offsets 0..n, key
/// `k{o % 3}`, value `v{o}`; `tombstones` hold no value.
fn keyed_source(n: i64, tombstones: &[i64]) -> FakeSource {
    let mut s = FakeSource::default();
    for o in 0..n {
        let mut record = image(o, &format!("v{o}"));
        record.key = Some(format!("k{}", o % 3).into_bytes());
        if tombstones.contains(&o) {
            record.value = None;
        }
        s.committed.insert(o, record);
    }
    s
}

/// `mapped` with the topic compacted on the clusters named in `on`.
fn mapped_compacted(
    src: &mut FakeSource,
    target: Vec<RecordImage>,
    map: &OffsetMap,
    on: &[&'static str],
) -> PartitionReport {
    let committed: Vec<_> = src.committed.values().cloned().collect();
    let mut s = committed.into_iter().map(Ok);
    let mut t = target.into_iter().map(Ok);
    let mut r = PartitionReport {
        source_range: (0, 10),
        compacted_on: on.to_vec(),
        from_log_start: [true, true],
        ..PartitionReport::default()
    };
    judge_mapped(&mut s, &mut t, map, src, &mut r).unwrap();
    r
}

#[test]
fn a_record_the_targets_cleaner_removed_is_no_difference_in_a_compacted_topic() {
    let mut src = keyed_source(10, &[]);
    let (target, map) = exact_copy(&src);
    // Target offset 1 (key k1) is gone; k1 is at 4 and 7 on the target.
    let cleaned: Vec<_> = target.iter().filter(|r| r.offset != 1).cloned().collect();
    let r = mapped_compacted(&mut src, cleaned.clone(), &map, &["target"]);
    assert_eq!(found(&r), vec![]);
    assert_eq!(r.removed_by_compaction, 1);
    // Only the target's own cleaner explains a record missing from it.
    for on in [&[][..], &["source"][..]] {
        let r = mapped_compacted(&mut src, cleaned.clone(), &map, on);
        assert_eq!(
            found(&r),
            vec![(Class::Missing, Some(1), Some(1))],
            "{on:?}"
        );
    }
    // The last record of a key has nothing later to explain it: missing.
    let lost: Vec<_> = target.iter().filter(|r| r.offset != 8).cloned().collect();
    let r = mapped_compacted(&mut src, lost, &map, &["source", "target"]);
    assert_eq!(found(&r), vec![(Class::Missing, Some(8), Some(8))]);
    assert_eq!(r.removed_by_compaction, 0);
}

#[test]
fn a_record_the_sources_cleaner_removed_is_no_difference_in_a_compacted_topic() {
    let full = keyed_source(10, &[]);
    let (target, map) = exact_copy(&full);
    // Source offset 2 (key k2) is gone after the copy; k2 is at 5 and 8.
    let mut cleaned = keyed_source(10, &[]);
    cleaned.committed.remove(&2);
    let r = mapped_compacted(&mut cleaned, target.clone(), &map, &["source"]);
    assert_eq!(found(&r), vec![]);
    assert_eq!(r.removed_by_compaction, 1);
    for on in [&[][..], &["target"][..]] {
        let r = mapped_compacted(&mut cleaned, target.clone(), &map, on);
        assert_eq!(
            found(&r),
            vec![(Class::Unexpected, None, Some(2))],
            "{on:?}"
        );
    }
    // Its key's last record gone from the source: unexpected on the target.
    let mut lost = keyed_source(10, &[]);
    lost.committed.remove(&8);
    let r = mapped_compacted(&mut lost, target, &map, &["source"]);
    assert_eq!(found(&r), vec![(Class::Unexpected, None, Some(8))]);
}

#[test]
fn a_tombstone_the_cleaner_removed_took_its_keys_earlier_records_with_it() {
    // Key k0 at 0, 3, 6 and a tombstone at 9.
    let mut src = keyed_source(10, &[9]);
    let (target, map) = exact_copy(&src);
    // The target's cleaner removed all of k0: no difference.
    let cleaned: Vec<_> = target
        .iter()
        .filter(|r| r.offset % 3 != 0)
        .cloned()
        .collect();
    let r = mapped_compacted(&mut src, cleaned, &map, &["target"]);
    assert_eq!(found(&r), vec![]);
    assert_eq!(r.removed_by_compaction, 4);
    // A tombstone missing while k0's earlier records are still there was
    // never removed by a cleaner: the copy lost it (its key would live on).
    let lost: Vec<_> = target.iter().filter(|r| r.offset != 9).cloned().collect();
    let r = mapped_compacted(&mut src, lost, &map, &["target"]);
    assert_eq!(found(&r), vec![(Class::Missing, Some(9), Some(9))]);
    assert_eq!(r.removed_by_compaction, 0);
}

#[test]
fn a_missing_tombstone_is_not_judged_when_the_range_starts_after_the_logs_start() {
    let mut src = keyed_source(10, &[9]);
    let (target, map) = exact_copy(&src);
    // Read from offset 1: k0's record at 0 lies before the range, so the
    // tombstone's absence may be a loss or the cleaner's work.
    let src_late: Vec<_> = src.committed.values().skip(1).cloned().collect();
    let target_late: Vec<_> = target
        .iter()
        .filter(|r| r.offset != 0 && r.offset % 3 != 0)
        .cloned()
        .collect();
    let mut s = src_late.into_iter().map(Ok);
    let mut t = target_late.into_iter().map(Ok);
    let mut r = PartitionReport {
        source_range: (1, 10),
        compacted_on: vec!["target"],
        from_log_start: [false, false],
        ..PartitionReport::default()
    };
    judge_mapped(&mut s, &mut t, &map, &mut src, &mut r).unwrap();
    assert_eq!(r.unverifiable.len(), 1, "{:?}", r.unverifiable);
    assert!(r.unverifiable[0].contains("before the range read"));
    // Nor are k0's earlier records (3 and 6) called missing.
    assert_eq!(found(&r), vec![]);
    assert_eq!(r.removed_by_compaction, 0);
}

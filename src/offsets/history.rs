//! Reading the offset mapping back from the progress topic: the full
//! history of what eosmirror copied where, committed with the copies.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::Arc;

use anyhow::{bail, Context};

use super::mapping::OffsetMap;
use super::tail::{CommitSummary, Needed, TailSearch};
use crate::read::{RangeReader, Side};
use crate::replication::layout::Layout;
use crate::replication::progress::{InternalTopics, Lineage, ProgressEntry, ProgressRecord};
use eosmirror_state::SourcePartition;

/// Offset mappings by source topic and partition.
pub type Mappings = BTreeMap<(String, i32), OffsetMap>;

/// Per source partition, an end offset on the target (its partition of the
/// same number).
pub type TargetEnds = BTreeMap<(String, i32), i64>;

/// Per source partition, the source offsets a translation asks about: its
/// mapping then holds only the runs that answer them (see
/// [`OffsetMap::answering`]).
pub type Answering = BTreeMap<(String, i32), BTreeSet<i64>>;

/// The source partitions whose history needed was truncated by the
/// progress topic's retention (or lost with the topic, deleted and created
/// again): below their first mapping kept, nothing is known. Per
/// partition, since one lane's retention says nothing of another's, nor of
/// a partition whose range its newer commits cover.
pub type Truncated = BTreeSet<(String, i32)>;

/// A snapshot of the target to read the mappings as of (verify).
#[derive(Clone, Copy)]
pub struct AsOf<'a> {
    /// Per partition, the target's end at the snapshot.
    pub ends: &'a TargetEnds,
    /// Most bytes the mappings read may hold together: past it the read
    /// stops with [`MappingTooLarge`].
    pub max_mapping_bytes: usize,
}

/// The mappings asked for hold more than their bound: the caller asks for
/// fewer partitions at a time, or names the partition.
#[derive(Debug, thiserror::Error)]
#[error("the offset mappings of {partitions} partition(s) need more than --max.mapping.bytes ({limit} bytes)")]
pub struct MappingTooLarge {
    /// The partitions asked for.
    pub partitions: usize,
    /// The bound passed.
    pub limit: usize,
}

/// The offset mappings of `as_of`'s partitions from the progress topic (its
/// committed records) as of a snapshot of the target: per partition, only the
/// commits whose copies all lie below the snapshot's end (`ends`). A commit
/// that ends past it was made after the snapshot, while the progress topic
/// is read later, and its source records are not in the snapshot yet.
///
/// Also returns the topics each mapping belongs to and, for each partition
/// with such a later commit, where those commits' copies start and end
/// ([`PastSnapshot`]).
///
/// Only the history `needed` is read: for a range that does not start at
/// the beginning, the tail that covers it (see [`super::tail`]). Returns
/// the partitions whose history needed was truncated by retention too; one
/// with no commit left gets its position as its mapping, if the position's
/// copies end within the snapshot.
pub fn read_mappings_as_of(
    target: &Side,
    topics: &InternalTopics,
    as_of: AsOf<'_>,
    needed: &Needed,
) -> anyhow::Result<(Mappings, Lineages, PastSnapshots, Truncated)> {
    let ends = as_of.ends;
    let wanted = ends.keys().cloned().collect();
    let lanes: Vec<(i32, i64, i64)> =
        holding(internal_topic_ranges(target, &topics.progress)?, &wanted).collect();
    // Which partitions have a position, read before the history settles:
    // one with no history at all lost it (see [`HistoryRead::unbegun`]).
    // Only a history read from offset 0 can be without any record.
    let early = if lanes.iter().any(|&(_, low, _)| low == 0)
        && target.partition_count(&topics.position)?.is_some()
    {
        Some(read_positions(target, &topics.position, &wanted)?)
    } else {
        None
    };
    // The progress records of the snapshot's transactions are readable
    // (see [`settle`]).
    let lanes: Vec<i32> = lanes.into_iter().map(|(p, ..)| p).collect();
    settle(target, &topics.progress, &lanes)?;
    let HistoryRead {
        mut histories,
        later,
        mut truncated,
        unbegun,
    } = read_histories(
        target,
        &topics.progress,
        &wanted,
        Some(as_of),
        needed,
        None,
        None,
    )?;
    if let Some(early) = &early {
        truncated.extend(unbegun.into_iter().filter(|key| early.contains_key(key)));
    }
    // A partition with no commit left (idle for longer than the retention,
    // or none since the progress topic was deleted and created again): its
    // position says how far its copy goes (without it, its copies would
    // look like records nothing copied), if its copies end within the
    // snapshot; one past its end was committed after the snapshot.
    let expired: BTreeSet<(String, i32)> = truncated
        .iter()
        .filter(|key| !histories.contains_key(*key))
        .cloned()
        .collect();
    let positions = match early {
        Some(early) => early,
        None if expired.is_empty() => BTreeMap::new(),
        None => read_positions(target, &topics.position, &expired)?,
    };
    for (key, position) in positions {
        if expired.contains(&key) {
            let mut map = OffsetMap::default();
            if position.next_target_offset <= ends[&key] {
                map.add_position(&position);
            }
            // Past the end, the lineage alone: still checked against the
            // topics now.
            histories.insert(key, (position.lineage, map));
        }
    }
    let lineages = lineages(&histories);
    Ok((seal(histories), lineages, later, truncated))
}

/// The topics (cluster and ids) each source partition's mapping was
/// recorded for.
pub type Lineages = BTreeMap<(String, i32), Lineage>;

/// One offset mapping per wanted source partition: the history `needed`
/// in the progress topic (committed records only; see [`super::tail`])
/// with its latest position merged in, so a partition idle for longer than
/// the progress topic's retention still translates. Also returns the
/// topics each mapping belongs to, and the partitions whose history
/// needed was truncated by retention.
///
/// Positions are read *before* the history, and the history's lanes are
/// settled in between (see [`settle`]): a tail newer than the runs read
/// would skip the records of the commits in between, while an older one is
/// overtaken by the history's own tail (the map keeps the newest).
/// A position of another lineage than the history's is older than it (a
/// topic that starts over writes its new lineage to the history first, with
/// its claim), so it is left out.
///
/// A partition whose range starts at or past the end of its copies (its
/// position's `copies_end`) needs none of its history (see [`TailSearch::start_from_positions`]): a group caught
/// up on a partition idle for days costs no read of those days. Only the
/// commits past the progress ends read before the positions are read for
/// it, so a start-over among them still replaces the position's lineage.
///
/// With `answering`, each mapping keeps only the runs that translate the
/// partition's offsets given there.
pub fn read_mappings_with_positions(
    target: &Side,
    topics: &InternalTopics,
    wanted: &BTreeSet<(String, i32)>,
    needed: &Needed,
    answering: Option<&Answering>,
) -> anyhow::Result<(Mappings, Lineages, Truncated)> {
    let progress = internal_topic_ranges(target, &topics.progress)?;
    let lanes: Vec<i32> = holding(progress.clone(), wanted).map(|(p, ..)| p).collect();
    let progress_ends: BTreeMap<i32, i64> = progress
        .into_iter()
        .map(|(partition, _, end)| (partition, end))
        .collect();
    // The positions hold every commit below those ends, and the history
    // read after them every commit they hold (see [`settle`]). Lane i
    // writes partition i of both topics.
    let aligned = target.partition_count(&topics.position)? == Some(progress_ends.len() as i32);
    if aligned {
        settle(target, &topics.position, &lanes)?;
    }
    let positions = read_positions(target, &topics.position, wanted)?;
    settle(target, &topics.progress, &lanes)?;
    let known = aligned.then_some(KnownTails {
        positions: &positions,
        progress_ends: &progress_ends,
    });
    let HistoryRead {
        mut histories,
        mut truncated,
        unbegun,
        ..
    } = read_histories(
        target,
        &topics.progress,
        wanted,
        None,
        needed,
        known,
        answering,
    )?;
    truncated.extend(
        unbegun
            .into_iter()
            .filter(|key| positions.contains_key(key)),
    );
    for (key, position) in positions {
        let fresh = fresh_map(answering, &key);
        let (lineage, map) = histories
            .entry(key)
            .or_insert_with(|| (position.lineage.clone(), fresh));
        if *lineage == position.lineage {
            map.add_position(&position);
        }
    }
    let lineages = lineages(&histories);
    Ok((seal(histories), lineages, truncated))
}

/// An empty mapping for `key`: one answering its offsets alone when a
/// translation asks for some.
fn fresh_map(answering: Option<&Answering>, key: &(String, i32)) -> OffsetMap {
    match answering {
        Some(offsets) => OffsetMap::answering(offsets.get(key).cloned().unwrap_or_default()),
        None => OffsetMap::default(),
    }
}

fn lineages(histories: &Histories) -> Lineages {
    histories
        .iter()
        .map(|(key, (lineage, _))| (key.clone(), lineage.clone()))
        .collect()
}

/// Each partition's history with the lineage it belongs to, not sealed.
type Histories = BTreeMap<(String, i32), (Lineage, OffsetMap)>;

/// What was known of the partitions before their history was searched.
#[derive(Clone, Copy)]
struct KnownTails<'a> {
    /// Their position records.
    positions: &'a BTreeMap<(String, i32), ProgressRecord>,
    /// The progress topic's end per partition, read before the positions:
    /// every commit after a position lies at or past it.
    progress_ends: &'a BTreeMap<i32, i64>,
}

/// Waits until no transaction is open below the high watermarks the
/// `lanes` of `topic` have now. Kafka writes a transaction's commit
/// markers partition by partition, so a lane's commit can be readable in
/// one of its internal topics and not yet in the other; its records in
/// both were written before it began to commit, so below the high
/// watermarks read once it is readable anywhere. Waits at most the
/// side's stall limit (longer than the target's transaction timeout, after
/// which a killed instance's transaction is aborted).
fn settle(target: &Side, topic: &str, lanes: &[i32]) -> anyhow::Result<()> {
    let list: Vec<SourcePartition> = lanes
        .iter()
        .map(|&lane| SourcePartition::new(topic, lane))
        .collect();
    // An empty partition (retention may have deleted all) has nothing open.
    let ends: Vec<(String, i32, i64)> = target
        .watermarks_of(&list)?
        .into_iter()
        .filter(|(_, (low, high))| high > low)
        .map(|(p, (_, high))| (p.topic, p.partition, high))
        .collect();
    target.wait_until_settled(&ends)?;
    Ok(())
}

/// A partition's records are in commit order, so when its lineage changes
/// (the topic was recreated and started over with `--start.over`) the
/// newer lineage's history replaces the older one's: offsets of one topic
/// incarnation never translate offsets of another.
fn read_histories(
    target: &Side,
    progress_topic: &str,
    wanted: &BTreeSet<(String, i32)>,
    snapshot: Option<AsOf<'_>>,
    needed: &Needed,
    known: Option<KnownTails<'_>>,
    answering: Option<&Answering>,
) -> anyhow::Result<HistoryRead> {
    let as_of = snapshot.map(|s| s.ends);
    let limit = snapshot.map_or(usize::MAX, |s| s.max_mapping_bytes);
    // The bytes the maps hold, kept as they grow and shrink.
    let held = Cell::new(0usize);
    let ranges = internal_topic_ranges(target, progress_topic)?;
    let layout = Layout::new(ranges.len() as u32).ok();
    let lane_of = |key: &(String, i32)| layout.map(|layout| lane_partition(layout, key));
    let mut truncated = Truncated::new();
    let mut histories = Histories::new();
    let mut later = PastSnapshots::new();
    // The lineage of each partition's first record past the snapshot: a
    // record of a newer lineage still replaces what was cut.
    let mut cut_lineages: BTreeMap<(String, i32), Lineage> = BTreeMap::new();
    // Whether each history read begins with the record that began it, and
    // the partitions whose history needed was read from offset 0.
    let mut begun: BTreeMap<(String, i32), bool> = BTreeMap::new();
    let mut read_from_zero: BTreeSet<(String, i32)> = BTreeSet::new();
    for (partition, low, high) in holding(ranges, wanted) {
        let keys = wanted
            .iter()
            .filter(|key| lane_of(key).is_none_or(|lane| lane == partition))
            .cloned();
        let (start, uncovered): (i64, Vec<_>) = match needed {
            Needed::All => (low, keys.collect()),
            _ => {
                let mut search = TailSearch::new(needed, as_of, keys);
                if let Some(known) = known {
                    search.start_from_positions(known.positions);
                }
                let start = tail_start(target, progress_topic, partition, low, high, &mut search)?;
                // The commits since the positions were read, in any case.
                let since_positions = known.and_then(|k| k.progress_ends.get(&partition));
                let start = since_positions.map_or(start, |&end| start.min(end).max(low));
                (start, search.uncovered().cloned().collect())
            }
        };
        let mut absorb = |record: ProgressRecord| {
            let key = (record.source.topic.clone(), record.source.partition);
            if !wanted.contains(&key) {
                return;
            }
            if let Some(cut) = cut_lineages.get(&key) {
                if *cut == record.lineage {
                    if let Some(past) = later.get_mut(&key) {
                        past.copies_end = past.copies_end.max(copies_end(&record));
                    }
                    return;
                }
                // The target topic was recreated and copied over again
                // (`--start.over`): the older copy's records, past the new
                // topic's end, are no part of the newer history.
                cut_lineages.remove(&key);
                later.remove(&key);
                if let Some((_, map)) = histories.remove(&key) {
                    held.set(held.get().saturating_sub(map.held_bytes()));
                }
                begun.remove(&key);
            }
            if let Some(&end) = as_of.and_then(|ends| ends.get(&key)) {
                if record.next_target_offset > end {
                    // Commit order: every later record of this lineage is
                    // past the end too.
                    let first_copy = record.runs.iter().map(|r| r.target_start).min();
                    later.insert(
                        key.clone(),
                        PastSnapshot {
                            first_copy: first_copy.unwrap_or(end).min(end),
                            copies_end: copies_end(&record).max(end),
                            lineage: record.lineage.clone(),
                        },
                    );
                    // Past the snapshot, it still tells whether the history
                    // read from its beginning has that beginning.
                    begun.entry(key.clone()).or_insert(record.begins_history);
                    cut_lineages.insert(key, record.lineage.clone());
                    return;
                }
            }
            let (lineage, map) = histories.entry(key.clone()).or_insert_with(|| {
                begun.insert(key.clone(), record.begins_history);
                (record.lineage.clone(), fresh_map(answering, &key))
            });
            if *lineage != record.lineage {
                begun.insert(key.clone(), record.begins_history);
                *lineage = record.lineage.clone();
                held.set(held.get().saturating_sub(map.held_bytes()));
                *map = fresh_map(answering, &key);
            }
            let before = map.held_bytes();
            map.add_commit(&record);
            held.set(held.get() + map.held_bytes().saturating_sub(before));
        };
        for_each_record_while(target, progress_topic, partition, start, high, |record| {
            absorb(record);
            if held.get() > limit {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
        if held.get() > limit {
            return Err(MappingTooLarge {
                partitions: wanted.len(),
                limit,
            }
            .into());
        }
        if low == 0 && start == 0 {
            read_from_zero.extend(uncovered);
        } else if start == low {
            // Retention deleted the beginning of a history still needed,
            // unless the history read begins with the record that began it
            // (a partition first copied after the lane's oldest records
            // left).
            truncated.extend(
                uncovered
                    .into_iter()
                    .filter(|key| begun.get(key) != Some(&true)),
            );
        }
    }
    // Read from offset 0, a history is complete only if it begins with the
    // record that began it: one without lost its beginning to a progress
    // topic deleted and created again, which starts empty, not where
    // retention left it. (Judged once every partition is read: without a
    // known layout, any may hold a history.)
    let (without_beginning, unbegun): (Vec<_>, Vec<_>) = read_from_zero
        .into_iter()
        .filter(|key| begun.get(key) != Some(&true))
        .partition(|key| begun.contains_key(key));
    truncated.extend(without_beginning);
    Ok(HistoryRead {
        histories,
        later,
        truncated,
        unbegun: unbegun.into_iter().collect(),
    })
}

/// A partition's commits made after verify's snapshot of the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastSnapshot {
    /// Where the first one's copies start (at most the snapshot's end):
    /// the snapshot is checked below it, since copies of a transaction
    /// open at the snapshot may lie below its end.
    pub first_copy: i64,
    /// Where their copies end (at least the snapshot's end). A committed
    /// copy was acknowledged by the in-sync replicas, so a target
    /// partition whose high watermark is below this lost committed copies.
    pub copies_end: i64,
    /// The topics they copied: a target topic recreated since ends below
    /// them too, and is named as recreated.
    pub lineage: Lineage,
}

/// Per source partition, its commits past the snapshot.
pub type PastSnapshots = BTreeMap<(String, i32), PastSnapshot>;

/// The target offset past `record`'s last copy (`i64::MIN`: none).
fn copies_end(record: &ProgressRecord) -> i64 {
    record
        .runs
        .iter()
        .map(|r| r.target_start + r.len as i64)
        .max()
        .unwrap_or(i64::MIN)
}

/// What [`read_histories`] read.
struct HistoryRead {
    /// The histories, per partition.
    histories: Histories,
    /// The commits past the snapshot, per partition.
    later: PastSnapshots,
    /// The partitions whose history needed is truncated.
    truncated: Truncated,
    /// The partitions read from offset 0 without a single record. One with
    /// a position read before the history (whose claim, written with it,
    /// would be in the history read after: see [`settle`]) lost its history
    /// to a progress topic deleted and created again: the caller, which
    /// knows the positions, marks it truncated.
    unbegun: BTreeSet<(String, i32)>,
}

/// Where the history `search` needs starts in `topic`-`partition`, whose
/// committed records are `[low, high)`: read backwards in chunks that
/// double up to [`MAX_TAIL_CHUNK`], so a tail of n records costs reading at
/// most some 2n, and the summaries of a chunk held at once stay near
/// 10 MB. `low` when the tail needed reaches back that far.
fn tail_start(
    target: &Side,
    topic: &str,
    partition: i32,
    low: i64,
    high: i64,
    search: &mut TailSearch<'_>,
) -> anyhow::Result<i64> {
    let mut start = high;
    let mut chunk = FIRST_TAIL_CHUNK;
    while start > low && !search.covered() {
        let end = start;
        start = (end - chunk).max(low);
        chunk = chunk.saturating_mul(2).min(MAX_TAIL_CHUNK);
        let mut records = Vec::new();
        for_each_record(target, topic, partition, start, end, |record| {
            let key = (record.source.topic.clone(), record.source.partition);
            if search.wants(&key) {
                records.push(CommitSummary::from(record));
            }
        })?;
        search.older_chunk(records);
    }
    Ok(start)
}

/// Offsets of the first chunk [`tail_start`] reads.
const FIRST_TAIL_CHUNK: i64 = 4096;

/// Offsets of the largest chunk [`tail_start`] reads: some 200 bytes of
/// summary each, so a long tail (a group days behind) costs more reads of
/// the progress topic, not more memory.
const MAX_TAIL_CHUNK: i64 = 65_536;

fn seal(histories: Histories) -> Mappings {
    histories
        .into_iter()
        .map(|(key, (_, mut map))| {
            map.seal();
            (key, map)
        })
        .collect()
}

/// Every partition of one of eosmirror's internal topics with its offsets,
/// or an error that says the target holds nothing eosmirror wrote under that
/// alias. Each end is the last stable offset: a transaction still open there
/// (a running mirror's, or a killed one's until the target aborts it) is not
/// waited for, and what it holds is not part of the history yet.
fn internal_topic_ranges(target: &Side, topic: &str) -> anyhow::Result<Vec<(i32, i64, i64)>> {
    let partitions = match target.partition_count(topic)? {
        Some(n) => n,
        None => bail!("the target has no topic {topic}: it holds no copy made by eosmirror with this --source.alias. Pass the alias `run` used (for a copy made by another tool, `verify --mode sequence` compares it; translation needs eosmirror's mapping)"),
    };
    (0..partitions)
        .map(|p| {
            let (low, end) = target.stable_watermarks(topic, p)?;
            Ok((p, low, end))
        })
        .collect()
}

/// The latest committed position record of each wanted source partition,
/// from the compacted position topic: cheap to read whatever the history.
pub fn read_positions(
    target: &Side,
    position_topic: &str,
    wanted: &BTreeSet<(String, i32)>,
) -> anyhow::Result<BTreeMap<(String, i32), ProgressRecord>> {
    let mut latest = BTreeMap::new();
    let ranges = internal_topic_ranges(target, position_topic)?;
    let layout = Layout::new(ranges.len() as u32).ok();
    for (partition, low, high) in holding(ranges, wanted) {
        for_each_entry(target, position_topic, partition, low, high, |entry| {
            let source = match &entry {
                ProgressEntry::Record(record) => &record.source,
                ProgressEntry::Tombstone(source) => source,
            };
            let key = (source.topic.clone(), source.partition);
            // A tombstone written by hand into another lane's partition
            // deletes nothing there (the lanes pass it over too).
            let elsewhere = layout.is_some_and(|l| lane_partition(l, &key) != partition);
            if wanted.contains(&key) {
                match entry {
                    ProgressEntry::Record(record) => {
                        latest.insert(key, record);
                    }
                    ProgressEntry::Tombstone(_) if !elsewhere => {
                        latest.remove(&key);
                    }
                    ProgressEntry::Tombstone(_) => {}
                }
            }
            ControlFlow::Continue(())
        })?;
    }
    Ok(latest)
}

/// The internal partition that holds `key`'s records: all of a source
/// partition's records are in its lane's partition (the partition count is
/// the lane count), in commit order.
fn lane_partition(layout: Layout, key: &(String, i32)) -> i32 {
    layout
        .lane_of(&SourcePartition::new(&key.0, key.1))
        .internal_partition()
}

/// The `ranges` of an internal topic that hold records of `wanted`: the
/// lanes of other partitions are not read (all are, if the partition count
/// is no lane count).
fn holding(
    ranges: Vec<(i32, i64, i64)>,
    wanted: &BTreeSet<(String, i32)>,
) -> impl Iterator<Item = (i32, i64, i64)> {
    let lanes: Option<BTreeSet<i32>> = Layout::new(ranges.len() as u32).ok().map(|layout| {
        wanted
            .iter()
            .map(|key| lane_partition(layout, key))
            .collect()
    });
    ranges
        .into_iter()
        .filter(move |(partition, _, _)| lanes.as_ref().is_none_or(|l| l.contains(partition)))
}

/// Decodes the committed progress records of `topic`-`partition` in
/// `[low, high)`, in order; tombstones (the progress topic is not
/// compacted: none of eosmirror's) are passed over.
fn for_each_record(
    target: &Side,
    topic: &str,
    partition: i32,
    low: i64,
    high: i64,
    mut visit: impl FnMut(ProgressRecord),
) -> anyhow::Result<()> {
    for_each_record_while(target, topic, partition, low, high, |record| {
        visit(record);
        ControlFlow::Continue(())
    })
}

/// [`for_each_record`] until `visit` breaks.
fn for_each_record_while(
    target: &Side,
    topic: &str,
    partition: i32,
    low: i64,
    high: i64,
    mut visit: impl FnMut(ProgressRecord) -> ControlFlow<()>,
) -> anyhow::Result<()> {
    for_each_entry(target, topic, partition, low, high, |entry| match entry {
        ProgressEntry::Record(record) => visit(record),
        ProgressEntry::Tombstone(_) => ControlFlow::Continue(()),
    })
}

/// Decodes the committed records and tombstones of `topic`-`partition` in
/// `[low, high)`, in order.
fn for_each_entry(
    target: &Side,
    topic: &str,
    partition: i32,
    low: i64,
    high: i64,
    mut visit: impl FnMut(ProgressEntry) -> ControlFlow<()>,
) -> anyhow::Result<()> {
    if low >= high {
        return Ok(());
    }
    let reader = RangeReader::open(target, topic, partition, low, high, true, Arc::default())?;
    for record in reader {
        let record = record?;
        let offset = record.offset;
        let entry = ProgressEntry::decode(record.key.as_deref(), record.value.as_deref())
            .with_context(|| format!("{topic}-{partition} offset {offset} is unreadable"))?;
        if visit(entry).is_break() {
            break;
        }
    }
    Ok(())
}

//! Reading the offset mapping back from the progress topic: the full
//! history of what eosmirror copied where, committed with the copies.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use anyhow::{bail, Context};

use super::mapping::OffsetMap;
use crate::read::{RangeReader, Side};
use crate::replication::progress::ProgressRecord;

/// Offset mappings by source topic and partition.
pub type Mappings = BTreeMap<(String, i32), OffsetMap>;

/// Reads the whole progress topic (committed records only) into one
/// mapping per wanted source partition. Also tells whether its history
/// was truncated by retention.
pub fn read_mappings(
    target: &Side,
    progress_topic: &str,
    wanted: &BTreeSet<(String, i32)>,
) -> anyhow::Result<(Mappings, bool)> {
    let ranges = internal_topic_ranges(target, progress_topic)?;
    let truncated = ranges.iter().any(|&(_, low, _)| low > 0);
    let mut maps = Mappings::new();
    // A source partition's records are all in one internal partition (its
    // lane's), in commit order.
    for (partition, low, high) in ranges {
        for_each_record(target, progress_topic, partition, low, high, |record| {
            let key = (record.source.topic.clone(), record.source.partition);
            if wanted.contains(&key) {
                maps.entry(key).or_default().add(
                    &record.runs,
                    record.next_source_offset,
                    record.next_target_offset,
                );
            }
        })?;
    }
    for map in maps.values_mut() {
        map.seal();
    }
    Ok((maps, truncated))
}

/// Every partition of one of eosmirror's internal topics with its offsets,
/// or an error that says the target holds nothing eosmirror wrote under that
/// alias. Each end is the last stable offset: a transaction still open there
/// (a running mirror's, or a killed one's until the target aborts it) is not
/// waited for, and what it holds is not part of the history yet.
fn internal_topic_ranges(target: &Side, topic: &str) -> anyhow::Result<Vec<(i32, i64, i64)>> {
    let partitions = match target.partition_count(topic)? {
        Some(n) => n,
        None => bail!("the target has no topic {topic}: it holds no copy made by eosmirror with this --source.alias. Pass the alias `run` used, or use --mode sequence for copies made by other tools"),
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
    for (partition, low, high) in internal_topic_ranges(target, position_topic)? {
        for_each_record(target, position_topic, partition, low, high, |record| {
            let key = (record.source.topic.clone(), record.source.partition);
            if wanted.contains(&key) {
                latest.insert(key, record);
            }
        })?;
    }
    Ok(latest)
}

/// Decodes the committed progress records of `topic`-`partition` in
/// `[low, high)`, in order.
fn for_each_record(
    target: &Side,
    topic: &str,
    partition: i32,
    low: i64,
    high: i64,
    mut visit: impl FnMut(ProgressRecord),
) -> anyhow::Result<()> {
    if low >= high {
        return Ok(());
    }
    let reader = RangeReader::open(target, topic, partition, low, high, true, Arc::default())?;
    for record in reader {
        let record = record?;
        let offset = record.offset;
        let decoded = ProgressRecord::decode(record.value.as_deref().unwrap_or_default())
            .with_context(|| format!("{topic}-{partition} offset {offset} is unreadable"))?;
        visit(decoded);
    }
    Ok(())
}

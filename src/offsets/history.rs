//! Reading the offset mapping back from the progress topic: the full
//! history of what eosmirror copied where, committed with the copies.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use anyhow::{bail, Context};
use rdkafka::types::RDKafkaErrorCode;

use super::mapping::OffsetMap;
use crate::read::{RangeReader, ReadError, Side};
use crate::replication::progress::{ProgressRecord, PROGRESS_PARTITION};

/// Offset mappings by source topic and partition.
pub type Mappings = BTreeMap<(String, i32), OffsetMap>;

/// Reads the whole progress topic (committed records only) into one
/// mapping per verified source partition. Also tells whether its history
/// was truncated by retention.
pub fn read_mappings(
    target: &Side,
    progress_topic: &str,
    wanted: &BTreeSet<(String, i32)>,
) -> anyhow::Result<(Mappings, bool)> {
    let (low, high) = internal_topic_range(target, progress_topic)?;
    let mut maps = Mappings::new();
    for_each_record(target, progress_topic, low, high, |record| {
        let key = (record.source.topic.clone(), record.source.partition);
        if wanted.contains(&key) {
            maps.entry(key).or_default().add(
                &record.runs,
                record.next_source_offset,
                record.next_target_offset,
            );
        }
    })?;
    for map in maps.values_mut() {
        map.seal();
    }
    Ok((maps, low > 0))
}

/// Offsets of one of eosmirror's internal topics, or an error that says
/// the target holds nothing eosmirror wrote under that alias. The end is
/// the last stable offset: a transaction still open there (a running
/// mirror's, or a killed one's until the target aborts it) is not waited
/// for, and what it holds is not part of the history yet.
fn internal_topic_range(target: &Side, topic: &str) -> anyhow::Result<(i64, i64)> {
    match target.stable_watermarks(topic, PROGRESS_PARTITION) {
        Ok(marks) => Ok(marks),
        Err(ReadError::Kafka { source, .. })
            if matches!(
                source.rdkafka_error_code(),
                Some(
                    RDKafkaErrorCode::UnknownTopicOrPartition
                        | RDKafkaErrorCode::UnknownPartition
                        | RDKafkaErrorCode::UnknownTopic
                )
            ) =>
        {
            bail!("the target has no topic {topic}: it holds no copy made by eosmirror with this --source.alias. Pass the alias `run` used, or use --mode sequence for copies made by other tools")
        }
        Err(e) => Err(e.into()),
    }
}

/// The latest committed position record of each wanted source partition,
/// from the compacted position topic: cheap to read whatever the history.
pub fn read_positions(
    target: &Side,
    position_topic: &str,
    wanted: &BTreeSet<(String, i32)>,
) -> anyhow::Result<BTreeMap<(String, i32), ProgressRecord>> {
    let (low, high) = internal_topic_range(target, position_topic)?;
    let mut latest = BTreeMap::new();
    for_each_record(target, position_topic, low, high, |record| {
        let key = (record.source.topic.clone(), record.source.partition);
        if wanted.contains(&key) {
            latest.insert(key, record);
        }
    })?;
    Ok(latest)
}

/// Decodes the committed progress records of `topic` in `[low, high)`, in
/// order.
fn for_each_record(
    target: &Side,
    topic: &str,
    low: i64,
    high: i64,
    mut visit: impl FnMut(ProgressRecord),
) -> anyhow::Result<()> {
    let reader = RangeReader::open(
        target,
        topic,
        PROGRESS_PARTITION,
        low,
        high,
        true,
        Arc::default(),
    )?;
    for record in reader {
        let record = record?;
        let offset = record.offset;
        let decoded = ProgressRecord::decode(record.value.as_deref().unwrap_or_default())
            .with_context(|| format!("{topic} offset {offset} is unreadable"))?;
        visit(decoded);
    }
    Ok(())
}

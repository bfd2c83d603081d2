//! Watermarks of many partitions at once.
//!
//! rdkafka's `fetch_watermarks` asks about one partition per round trip: a
//! lane of 1,250 partitions spent seconds of every session start on it.
//! Here the low and the high watermarks of all of a lane's partitions are
//! two ListOffsets requests per leader (librdkafka's `offsets_for_times`
//! with the special timestamps "earliest" and "latest"), seen at the
//! client's isolation level like `fetch_watermarks` (`read_committed`: the
//! high watermark is the last stable offset).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use eosmirror_state::SourcePartition;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};

/// Low and high watermark of each partition asked about.
pub type Watermarks = HashMap<SourcePartition, (i64, i64)>;

/// Why the watermarks of some partitions could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum WatermarksError {
    /// The request as a whole failed (no connection, time-out).
    #[error("listing offsets of {count} partitions: {source}")]
    Request {
        count: usize,
        #[source]
        source: KafkaError,
    },
    /// The answer for one partition is an error or not an offset.
    #[error("{partition}: {source}")]
    Partition {
        partition: SourcePartition,
        #[source]
        source: KafkaError,
    },
    #[error("{0}: no offset in the answer")]
    Missing(SourcePartition),
}

impl WatermarksError {
    /// The client's error behind this one, if there is one (to tell a
    /// transient failure from a lasting one).
    pub fn kafka(&self) -> Option<&KafkaError> {
        match self {
            WatermarksError::Request { source, .. } | WatermarksError::Partition { source, .. } => {
                Some(source)
            }
            WatermarksError::Missing(_) => None,
        }
    }
}

/// The watermarks of every partition in `partitions`; an error names the
/// first partition without an answer.
pub fn fetch_all<C: ConsumerContext>(
    client: &BaseConsumer<C>,
    partitions: &[SourcePartition],
    timeout: Duration,
) -> Result<Watermarks, WatermarksError> {
    if partitions.is_empty() {
        return Ok(Watermarks::new());
    }
    let low = list_offsets(client, partitions, Offset::Beginning, timeout)?;
    let high = list_offsets(client, partitions, Offset::End, timeout)?;
    partitions
        .iter()
        .map(|p| match (low.get(p), high.get(p)) {
            (Some(&Some(low)), Some(&Some(high))) => Ok((p.clone(), (low, high))),
            _ => Err(WatermarksError::Missing(p.clone())),
        })
        .collect()
}

/// The high watermark of every partition in `partitions` (the last stable
/// offset at `read_committed`), `None` where the answer has no offset: one
/// ListOffsets request per leader.
pub fn high_watermarks<C: ConsumerContext>(
    client: &BaseConsumer<C>,
    partitions: &[SourcePartition],
    timeout: Duration,
) -> Result<HashMap<SourcePartition, Option<i64>>, WatermarksError> {
    list_offsets(client, partitions, Offset::End, timeout)
}

/// For each partition in `partitions`, the first offset whose timestamp is
/// at or after `ms`, `None` where no record is: one ListOffsets request per
/// leader (one partition at a time was 1,000 round trips at 1,000
/// partitions).
pub fn offsets_for_time<C: ConsumerContext>(
    client: &BaseConsumer<C>,
    partitions: &[SourcePartition],
    ms: i64,
    timeout: Duration,
) -> Result<HashMap<SourcePartition, Option<i64>>, WatermarksError> {
    let answer = list_offsets(client, partitions, Offset::Offset(ms), timeout)?;
    partitions
        .iter()
        .map(|p| match answer.get(p) {
            Some(&offset) => Ok((p.clone(), offset)),
            None => Err(WatermarksError::Missing(p.clone())),
        })
        .collect()
}

/// Pause between attempts of [`wait_until_listed`].
const LISTED_RETRY: Duration = Duration::from_millis(200);

/// Waits until every partition in `partitions` answers ListOffsets, for at
/// most `limit`; returns the last error when they still do not. A partition
/// just created is in the metadata before its leader has loaded it, and is
/// refused until then ("not leader"); lanes started meanwhile restart with
/// a backoff that grows to seconds, each restart logged.
pub fn wait_until_listed<C: ConsumerContext>(
    client: &BaseConsumer<C>,
    partitions: &[SourcePartition],
    limit: Duration,
) -> Result<(), WatermarksError> {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match list_offsets(client, partitions, Offset::End, left.max(LISTED_RETRY)) {
            Ok(_) => return Ok(()),
            Err(e) if left.is_zero() => return Err(e),
            Err(_) => std::thread::sleep(LISTED_RETRY.min(left)),
        }
    }
}

/// One ListOffsets round: `at` is `Offset::Beginning`, `Offset::End` or a
/// timestamp as `Offset::Offset(ms)`. An answer without an offset (a time
/// past the last record) is `None`.
fn list_offsets<C: ConsumerContext>(
    client: &BaseConsumer<C>,
    partitions: &[SourcePartition],
    at: Offset,
    timeout: Duration,
) -> Result<HashMap<SourcePartition, Option<i64>>, WatermarksError> {
    let mut request = TopicPartitionList::with_capacity(partitions.len());
    for p in partitions {
        request
            .add_partition_offset(&p.topic, p.partition, at)
            .map_err(|source| WatermarksError::Partition {
                partition: p.clone(),
                source,
            })?;
    }
    let answer = client
        .offsets_for_times(request, timeout)
        .map_err(|source| WatermarksError::Request {
            count: partitions.len(),
            source,
        })?;
    let mut offsets = HashMap::with_capacity(partitions.len());
    for element in answer.elements() {
        let partition = SourcePartition::new(element.topic(), element.partition());
        if let Err(source) = element.error() {
            return Err(WatermarksError::Partition { partition, source });
        }
        let offset = match element.offset() {
            Offset::Offset(offset) => Some(offset),
            _ => None,
        };
        offsets.insert(partition, offset);
    }
    Ok(offsets)
}

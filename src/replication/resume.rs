//! Reading a source partition's resume position back from the target.
//!
//! This is the only place that decides where copying continues, and it only
//! trusts committed data on the target: the latest position record for the
//! partition in the (compacted) position topic, read with `read_committed`.
//!
//! "Latest" needs care. A `read_committed` reader stops at the last stable
//! offset, which other workers' open transactions hold back, while our own
//! committed records may lie beyond it. So the reader first takes the high
//! watermark (a `read_uncommitted` view), then reads until it has consumed
//! past it; every transaction open at that moment has to end first, which
//! bounds the wait by the transaction timeout. Our own transactional id was
//! just initialised, so none of our transactions can still be open.

use std::time::{Duration, Instant};

use eosmirror_state::SourcePartition;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::progress::{ProgressRecord, PROGRESS_PARTITION};
use crate::read::{is_deleted, reader_config};

/// The committed position of a source partition, as the target records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumePosition {
    /// The latest position record.
    pub record: ProgressRecord,
    /// Its offset in the position topic (cached as the next start hint).
    pub position_offset: i64,
}

/// Why the position could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("reading position topic {topic}: {source}")]
    Kafka {
        topic: String,
        #[source]
        source: KafkaError,
    },
    #[error("position topic {topic} did not reach offset {high_watermark} within {waited:?}: a transaction on it stays open (another eosmirror instance stalled?)")]
    Timeout {
        topic: String,
        high_watermark: i64,
        waited: Duration,
    },
    #[error("{topic}-{partition}: records at or after offset {from} were deleted (retention or DeleteRecords) while they were read, so what the partition holds is unknown; the read starts again at the partition's new start")]
    Deleted {
        topic: String,
        partition: i32,
        from: i64,
    },
    #[error("position topic {topic} holds an unreadable record at offset {offset}: {reason}")]
    Corrupt {
        topic: String,
        offset: i64,
        reason: String,
    },
}

/// Finds the latest committed position record of `source` in the position
/// topic, reading from `start_hint` (a position-topic offset known to be at
/// or before it) or from the beginning.
pub fn read_resume_position(
    target: &ClientConfig,
    position_topic: &str,
    source: &SourcePartition,
    start_hint: Option<i64>,
    wait_limit: Duration,
) -> Result<Option<ResumePosition>, ResumeError> {
    let kafka = |e| ResumeError::Kafka {
        topic: position_topic.to_string(),
        source: e,
    };
    let (low, high) =
        watermarks(target, position_topic, PROGRESS_PARTITION, wait_limit).map_err(kafka)?;
    let start = start_hint.map_or(low, |hint| hint.clamp(low, high));
    if start >= high {
        return Ok(None);
    }
    let reader =
        committed_reader(target, position_topic, PROGRESS_PARTITION, start).map_err(kafka)?;

    let wanted_key = ProgressRecord::key(source);
    let mut latest = None;
    let deadline = Instant::now() + wait_limit;
    loop {
        // Done once the reader's position passed the high watermark taken
        // above: every record below it was committed or aborted by then.
        if fetch_position(&reader, position_topic, PROGRESS_PARTITION).map_err(kafka)? >= high {
            return Ok(latest);
        }
        if Instant::now() >= deadline {
            return Err(ResumeError::Timeout {
                topic: position_topic.to_string(),
                high_watermark: high,
                waited: wait_limit,
            });
        }
        match next_message(&reader, position_topic, PROGRESS_PARTITION, start)? {
            None => {}
            Some(message) if message.key() == Some(wanted_key.as_slice()) => {
                let record = ProgressRecord::decode(message.payload().unwrap_or_default())
                    .map_err(|e| ResumeError::Corrupt {
                        topic: position_topic.to_string(),
                        offset: message.offset(),
                        reason: e.to_string(),
                    })?;
                latest = Some(ResumePosition {
                    record,
                    position_offset: message.offset(),
                });
            }
            Some(_) => {}
        }
    }
}

/// The reader's position in the topic: the next offset it will fetch. It
/// moves past transaction markers and aborted records too, which the
/// messages it returns never show.
fn fetch_position(reader: &BaseConsumer, topic: &str, partition: i32) -> Result<i64, KafkaError> {
    let position = reader.position()?;
    Ok(position
        .find_partition(topic, partition)
        .and_then(|p| match p.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        })
        .unwrap_or(-1))
}

/// Whether a target partition already holds committed records. Checked when
/// the target has no position for a source partition: copying into a
/// partition with data eosmirror did not record (another tool's copy, or a
/// changed `--source.alias`) would duplicate it.
pub fn target_has_committed_records(
    target: &ClientConfig,
    topic: &str,
    partition: i32,
    wait_limit: Duration,
) -> Result<bool, ResumeError> {
    let kafka = |e| ResumeError::Kafka {
        topic: topic.to_string(),
        source: e,
    };
    let (low, high) = watermarks(target, topic, partition, wait_limit).map_err(kafka)?;
    if high <= low {
        return Ok(false);
    }
    let reader = committed_reader(target, topic, partition, low).map_err(kafka)?;
    let deadline = Instant::now() + wait_limit;
    while Instant::now() < deadline {
        // Past the high watermark without a record: everything was aborted.
        if fetch_position(&reader, topic, partition).map_err(kafka)? >= high {
            return Ok(false);
        }
        if next_message(&reader, topic, partition, low)?.is_some() {
            return Ok(true);
        }
    }
    Err(ResumeError::Timeout {
        topic: topic.to_string(),
        high_watermark: high,
        waited: wait_limit,
    })
}

/// Low and high watermark of a partition as a `read_uncommitted` client sees
/// them: the high one counts records of open transactions too.
fn watermarks(
    target: &ClientConfig,
    topic: &str,
    partition: i32,
    timeout: Duration,
) -> Result<(i64, i64), KafkaError> {
    let client: BaseConsumer = target
        .clone()
        .set("isolation.level", "read_uncommitted")
        .create()?;
    client.fetch_watermarks(topic, partition, timeout)
}

/// A `read_committed` reader of one partition from `offset`, whose position
/// can be asked for; records deleted under it are an error (see
/// [`reader_config`]), never an empty read.
fn committed_reader(
    target: &ClientConfig,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<BaseConsumer, KafkaError> {
    let reader: BaseConsumer =
        reader_config(target, "__eosmirror.position-reader", true).create()?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, partition, Offset::Offset(offset))?;
    reader.assign(&assignment)?;
    Ok(reader)
}

/// The reader's next message; records deleted under it become
/// [`ResumeError::Deleted`].
fn next_message<'a>(
    reader: &'a BaseConsumer,
    topic: &str,
    partition: i32,
    from: i64,
) -> Result<Option<BorrowedMessage<'a>>, ResumeError> {
    match reader.poll(Duration::from_millis(100)) {
        None => Ok(None),
        Some(Ok(message)) => Ok(Some(message)),
        Some(Err(e)) if is_deleted(&e) => Err(ResumeError::Deleted {
            topic: topic.to_string(),
            partition,
            from,
        }),
        Some(Err(e)) => Err(ResumeError::Kafka {
            topic: topic.to_string(),
            source: e,
        }),
    }
}

#[cfg(test)]
mod tests {
    //! librdkafka's mock cluster stands in for the retention race: a Fetch
    //! answered with OFFSET_OUT_OF_RANGE is what a reader sees when the
    //! records it was sent to were deleted after it took the watermarks.

    use rdkafka::mocking::MockCluster;
    use rdkafka::producer::{BaseProducer, BaseRecord, DefaultProducerContext, Producer};
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(10);

    /// A one-broker mock cluster whose `topic` holds `records`, and a
    /// connection to it.
    fn cluster_with(
        topic: &str,
        records: &[(Vec<u8>, Vec<u8>)],
    ) -> (MockCluster<'static, DefaultProducerContext>, ClientConfig) {
        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic(topic, 1, 1).expect("mock topic");
        let mut connection = ClientConfig::new();
        connection.set("bootstrap.servers", cluster.bootstrap_servers());
        let producer: BaseProducer = connection.create().expect("producer");
        for (key, value) in records {
            producer
                .send(BaseRecord::to(topic).partition(0).key(key).payload(value))
                .expect("queue record");
        }
        producer.flush(TIMEOUT).expect("flush");
        (cluster, connection)
    }

    fn records_deleted_under_the_next_fetch(cluster: &MockCluster<'_, DefaultProducerContext>) {
        cluster.request_errors(
            RDKafkaApiKey::Fetch,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE],
        );
    }

    #[test]
    fn records_deleted_under_the_target_check_are_reported_as_deleted() {
        let records = vec![(b"k".to_vec(), b"v".to_vec()); 3];
        let (cluster, connection) = cluster_with("data", &records);
        assert!(target_has_committed_records(&connection, "data", 0, TIMEOUT).unwrap());

        records_deleted_under_the_next_fetch(&cluster);
        match target_has_committed_records(&connection, "data", 0, TIMEOUT) {
            Err(ResumeError::Deleted {
                topic, partition, ..
            }) => {
                assert_eq!((topic.as_str(), partition), ("data", 0))
            }
            other => panic!("expected a deletion error, got {other:?}"),
        }
    }

    #[test]
    fn records_deleted_under_the_position_read_are_reported_as_deleted() {
        let source = SourcePartition::new("orders", 3);
        let record = ProgressRecord {
            source: source.clone(),
            runs: Vec::new(),
            next_source_offset: 15,
            next_target_offset: 9,
            instance: 42,
            committed_at_ms: 1_700_000_000_000,
        };
        let (cluster, connection) = cluster_with(
            "positions",
            &[(ProgressRecord::key(&source), record.encode())],
        );
        let found = read_resume_position(&connection, "positions", &source, None, TIMEOUT)
            .unwrap()
            .expect("the position is there");
        assert_eq!(found.record, record);

        records_deleted_under_the_next_fetch(&cluster);
        match read_resume_position(&connection, "positions", &source, None, TIMEOUT) {
            Err(ResumeError::Deleted { topic, .. }) => assert_eq!(topic, "positions"),
            other => panic!("expected a deletion error, got {other:?}"),
        }
    }
}

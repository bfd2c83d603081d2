//! Reading a lane's resume positions back from the target.
//!
//! This is the only place that decides where copying continues, and it only
//! trusts committed data on the target: the latest position record of each
//! source partition in the lane's partition of the (compacted) position
//! topic, read with `read_committed`.
//!
//! "Latest" needs care. A `read_committed` reader stops at the last stable
//! offset, which open transactions hold back, while committed records may
//! lie beyond it. So the reader first takes the high watermark (a
//! `read_uncommitted` view), then reads until it has consumed past it;
//! every transaction open at that moment has to end first, which bounds the
//! wait by the transaction timeout. Only the lane writes its partition, and
//! its own transactional id was just initialised, so usually nothing is
//! open there at all.

use std::collections::HashMap;
use std::time::Duration;

use eosmirror_state::SourcePartition;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::layout::{Lane, Layout};
use super::progress::{ProgressEntry, ProgressRecord};
use crate::read::{is_deleted, offset_in, reader_config, Recovering, StallWatch};

/// The committed position of a source partition, as the target records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumePosition {
    /// The latest position record.
    pub record: ProgressRecord,
    /// Its offset in the position topic (cached as the next start hint).
    pub position_offset: i64,
}

impl ResumeError {
    /// Whether reading again cannot help: a record this eosmirror cannot
    /// decode (another format version, or damage) stays there.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            ResumeError::Corrupt { .. }
                | ResumeError::OtherLane { .. }
                | ResumeError::Regressed { .. }
        )
    }
}

/// What one read of a lane's position partition found.
#[derive(Debug, Default)]
pub struct LanePositions {
    /// Latest position of every source partition with a record there.
    pub latest: HashMap<SourcePartition, ResumePosition>,
    /// The high watermark the read went up to: every record below it was
    /// seen (or lies before the start hint).
    pub high_watermark: i64,
}

/// Why the positions could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("reading position topic {topic}: {source}")]
    Kafka {
        topic: String,
        #[source]
        source: KafkaError,
    },
    #[error("{topic}-{partition} made no progress towards offset {high_watermark} for {waited:?}: a transaction there stays open (a stalled eosmirror instance or producer?), or the cluster stopped answering{recovering}")]
    Stalled {
        topic: String,
        partition: i32,
        high_watermark: i64,
        waited: Duration,
        recovering: Recovering,
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
    #[error("{topic}-{partition} holds at offset {offset} the position of {source_partition}, which --lanes {lanes} puts in another lane: partitions were added to the internal topics by hand after positions were written, and eosmirror does not move positions between lanes. This deployment cannot resume; a new one (another --source.alias) must copy into new, empty target topics")]
    OtherLane {
        topic: String,
        partition: i32,
        offset: i64,
        source_partition: SourcePartition,
        lanes: u32,
    },
    #[error("{topic}-{partition} holds at offset {offset} a position of {source_partition} (next source offset {now_source}, next target offset {now_target}) behind the one at offset {before_offset} (next source offset {before_source}, next target offset {before_target}): one lane's committed positions only move forward, so a second writer committed positions of this alias — another deployment of it (another --transactional.id.prefix started at the same moment as this one) or a tool writing into the position topic. Stop the other writer; the copy of {source_partition} may hold records twice past source offset {now_source}: check it with `eosmirror verify`. The lanes read both records (and stop) until the position topic is compacted; after that a start resumes at the later record, behind the other, and copies the records in between again")]
    Regressed {
        topic: String,
        partition: i32,
        offset: i64,
        source_partition: SourcePartition,
        now_source: i64,
        now_target: i64,
        before_offset: i64,
        before_source: i64,
        before_target: i64,
    },
}

/// Reads the committed position records of `partition` of the position
/// topic, from `start_hint` (an offset known to be at or before every
/// record of interest) or from the beginning, up to the high watermark taken
/// first.
/// Fails after `stall_limit` without progress (not after a total time, so a
/// long compacted topic is read to its end).
pub fn read_lane_positions(
    target: &ClientConfig,
    position_topic: &str,
    lane: Lane,
    layout: Layout,
    start_hint: Option<i64>,
    stall_limit: Duration,
    on_progress: &dyn Fn(),
) -> Result<LanePositions, ResumeError> {
    let kafka = |e| ResumeError::Kafka {
        topic: position_topic.to_string(),
        source: e,
    };
    let partition = lane.internal_partition();
    let mut found = LanePositions::default();
    let (low, high) = watermarks(target, position_topic, partition, stall_limit).map_err(kafka)?;
    found.high_watermark = high;
    let start = start_hint.map_or(low, |hint| hint.clamp(low, high));
    if start >= high {
        return Ok(found);
    }
    let reader = partition_reader(target, position_topic, partition, start).map_err(kafka)?;
    let mut end = ReadToEnd::new(position_topic, partition, start, high, stall_limit);
    let mut until_report = PROGRESS_EVERY;
    loop {
        // Done once the reader's position passed the high watermark taken
        // above: every record below it was committed or aborted by then.
        if end.reached(&reader)? {
            return Ok(found);
        }
        let Some(message) = end.next_message(&reader)? else {
            continue;
        };
        let offset = message.offset();
        // A long history is read while the lane's liveness is watched.
        until_report -= 1;
        if until_report == 0 {
            on_progress();
            until_report = PROGRESS_EVERY;
        }
        let entry = ProgressEntry::decode(message.key(), message.payload()).map_err(|e| {
            ResumeError::Corrupt {
                topic: position_topic.to_string(),
                offset,
                reason: e.to_string(),
            }
        })?;
        match entry {
            // The layout decides each partition's lane for good: a position
            // here of another lane's partition means the partition count
            // changed, and that lane would not find it.
            ProgressEntry::Record(record) if layout.lane_of(&record.source) != lane => {
                return Err(ResumeError::OtherLane {
                    topic: position_topic.to_string(),
                    partition,
                    offset,
                    source_partition: record.source,
                    lanes: layout.lanes(),
                });
            }
            // A tombstone written here by hand deletes nothing: the
            // partition's positions are in its lane's partition.
            ProgressEntry::Tombstone(source) if layout.lane_of(&source) != lane => {
                tracing::warn!(
                    "{position_topic}-{partition} holds at offset {offset} a tombstone of {source}, whose positions are in partition {}: it deletes nothing",
                    layout.lane_of(&source).internal_partition()
                );
            }
            // Invariant: within one lineage a partition's committed
            // positions only move forward (fenced writers never commit).
            ProgressEntry::Record(record)
                if found.latest.get(&record.source).is_some_and(|before| {
                    before.record.lineage == record.lineage
                        && (record.next_source_offset < before.record.next_source_offset
                            || record.next_target_offset < before.record.next_target_offset)
                }) =>
            {
                let before = &found.latest[&record.source];
                return Err(ResumeError::Regressed {
                    topic: position_topic.to_string(),
                    partition,
                    offset,
                    now_source: record.next_source_offset,
                    now_target: record.next_target_offset,
                    before_offset: before.position_offset,
                    before_source: before.record.next_source_offset,
                    before_target: before.record.next_target_offset,
                    source_partition: record.source,
                });
            }
            ProgressEntry::Record(record) => {
                found.latest.insert(
                    record.source.clone(),
                    ResumePosition {
                        record,
                        position_offset: offset,
                    },
                );
            }
            ProgressEntry::Tombstone(source) => {
                found.latest.remove(&source);
            }
        }
    }
}

/// How many position records a resume read takes between two liveness
/// reports.
const PROGRESS_EVERY: u64 = 10_000;

/// A read from `start` up to a high watermark that fails after
/// `stall_limit` without progress, however long the read takes overall.
struct ReadToEnd<'t> {
    topic: &'t str,
    partition: i32,
    start: i64,
    high: i64,
    /// The reader's position when it last moved.
    last_position: i64,
    stall: StallWatch,
}

impl<'t> ReadToEnd<'t> {
    fn new(topic: &'t str, partition: i32, start: i64, high: i64, stall_limit: Duration) -> Self {
        ReadToEnd {
            topic,
            partition,
            start,
            high,
            last_position: start,
            stall: StallWatch::new(stall_limit),
        }
    }

    /// Whether `reader` has passed the high watermark; an error once it has
    /// not moved for the stall limit.
    fn reached(&mut self, reader: &BaseConsumer) -> Result<bool, ResumeError> {
        let position =
            fetch_position(reader, self.topic, self.partition).map_err(|e| ResumeError::Kafka {
                topic: self.topic.to_string(),
                source: e,
            })?;
        if position >= self.high {
            return Ok(true);
        }
        if position > self.last_position {
            self.last_position = position;
            self.stall.moved();
        } else if let Some(recovering) = self.stall.stalled() {
            return Err(ResumeError::Stalled {
                topic: self.topic.to_string(),
                partition: self.partition,
                high_watermark: self.high,
                waited: self.stall.limit(),
                recovering,
            });
        }
        Ok(false)
    }

    /// The reader's next message; records deleted under it become
    /// [`ResumeError::Deleted`].
    fn next_message<'r>(
        &mut self,
        reader: &'r BaseConsumer,
    ) -> Result<Option<BorrowedMessage<'r>>, ResumeError> {
        match self.stall.poll(reader, Duration::from_millis(100)) {
            None => Ok(None),
            Some(Ok(message)) => Ok(Some(message)),
            Some(Err(e)) if is_deleted(&e) => Err(ResumeError::Deleted {
                topic: self.topic.to_string(),
                partition: self.partition,
                from: self.start,
            }),
            Some(Err(e)) => Err(ResumeError::Kafka {
                topic: self.topic.to_string(),
                source: e,
            }),
        }
    }
}

/// The reader's position in the topic: the next offset it will fetch. It
/// moves past transaction markers and aborted records too, which the
/// messages it returns never show.
fn fetch_position(reader: &BaseConsumer, topic: &str, partition: i32) -> Result<i64, KafkaError> {
    let position = reader.position()?;
    Ok(offset_in(&position, topic, partition).unwrap_or(-1))
}

/// Whether a target partition already holds committed records. Checked when
/// the target has no position for a source partition: copying into a
/// partition with data eosmirror did not record (another tool's copy, or a
/// changed `--source.alias`) would duplicate it. `watermarks` is a client
/// from [`watermark_client`], shared by a lane's checks.
pub fn target_has_committed_records(
    target: &ClientConfig,
    watermarks: &BaseConsumer,
    topic: &str,
    partition: i32,
    stall_limit: Duration,
) -> Result<bool, ResumeError> {
    let kafka = |e| ResumeError::Kafka {
        topic: topic.to_string(),
        source: e,
    };
    let (low, high) = watermarks
        .fetch_watermarks(topic, partition, stall_limit)
        .map_err(kafka)?;
    if high <= low {
        return Ok(false);
    }
    let reader = partition_reader(target, topic, partition, low).map_err(kafka)?;
    let mut end = ReadToEnd::new(topic, partition, low, high, stall_limit);
    loop {
        // Past the high watermark without a record: everything was aborted.
        if end.reached(&reader)? {
            return Ok(false);
        }
        if end.next_message(&reader)?.is_some() {
            return Ok(true);
        }
    }
}

/// A client whose watermark queries see the `read_uncommitted` view: its
/// high watermark counts records of open transactions too.
pub fn watermark_client(target: &ClientConfig) -> Result<BaseConsumer, KafkaError> {
    target
        .clone()
        .set("isolation.level", "read_uncommitted")
        .create()
}

fn watermarks(
    target: &ClientConfig,
    topic: &str,
    partition: i32,
    timeout: Duration,
) -> Result<(i64, i64), KafkaError> {
    watermark_client(target)?.fetch_watermarks(topic, partition, timeout)
}

/// A `read_committed` reader of one partition from `offset`, whose position can be
/// asked for; records deleted under it are an error (see [`reader_config`]),
/// never an empty read.
fn partition_reader(
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
        records: &[(Vec<u8>, Option<Vec<u8>>)],
    ) -> (MockCluster<'static, DefaultProducerContext>, ClientConfig) {
        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic(topic, 1, 1).expect("mock topic");
        let mut connection = ClientConfig::new();
        connection.set("bootstrap.servers", cluster.bootstrap_servers());
        let producer: BaseProducer = connection.create().expect("producer");
        for (key, value) in records {
            let mut record = BaseRecord::<Vec<u8>, Vec<u8>>::to(topic)
                .partition(0)
                .key(key);
            if let Some(value) = value {
                record = record.payload(value);
            }
            producer.send(record).expect("queue record");
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
        let records = vec![(b"k".to_vec(), Some(b"v".to_vec())); 3];
        let (cluster, connection) = cluster_with("data", &records);
        let watermarks = watermark_client(&connection).unwrap();
        assert!(
            target_has_committed_records(&connection, &watermarks, "data", 0, TIMEOUT).unwrap()
        );

        records_deleted_under_the_next_fetch(&cluster);
        match target_has_committed_records(&connection, &watermarks, "data", 0, TIMEOUT) {
            Err(ResumeError::Deleted {
                topic, partition, ..
            }) => {
                assert_eq!((topic.as_str(), partition), ("data", 0))
            }
            other => panic!("expected a deletion error, got {other:?}"),
        }
    }

    /// A position of `source` as a lane commits it.
    fn position(source: &SourcePartition) -> ProgressRecord {
        ProgressRecord {
            source: source.clone(),
            lineage: crate::replication::progress::Lineage {
                source_cluster_id: "source".into(),
                source_topic_id: crate::topics::identity::TopicId([1; 16]),
                target_topic_id: crate::topics::identity::TopicId([2; 16]),
            },
            runs: Vec::new(),
            next_source_offset: 15,
            copies_end: 13,
            next_target_offset: 9,
            instance: 42,
            committed_at_ms: 1_700_000_000_000,
            begins_history: false,
        }
    }

    #[test]
    fn records_deleted_under_the_position_read_are_reported_as_deleted() {
        let source = SourcePartition::new("orders", 3);
        let record = position(&source);
        let (cluster, connection) = cluster_with(
            "positions",
            &[(ProgressRecord::key(&source), Some(record.encode()))],
        );
        let one_lane = Layout::new(1).unwrap();
        let read = || {
            read_lane_positions(
                &connection,
                "positions",
                Lane(0),
                one_lane,
                None,
                TIMEOUT,
                &|| {},
            )
        };
        let found = read().unwrap();
        assert_eq!(found.latest[&source].record, record);

        // With partitions added to the topic, orders-3 belongs to another
        // lane than the one whose partition holds its position.
        let two_lanes = Layout::new(2).unwrap();
        let lane = two_lanes.lane_of(&source);
        let other = Lane(1 - lane.0);
        match read_lane_positions(
            &connection,
            "positions",
            other,
            two_lanes,
            None,
            TIMEOUT,
            &|| {},
        ) {
            Err(e @ ResumeError::OtherLane { .. }) => assert!(e.is_permanent(), "{e}"),
            other => panic!("expected another lane's position, got {other:?}"),
        }

        records_deleted_under_the_next_fetch(&cluster);
        match read() {
            Err(ResumeError::Deleted { topic, .. }) => assert_eq!(topic, "positions"),
            other => panic!("expected a deletion error, got {other:?}"),
        }
    }

    /// A position behind the one before it, of the same topics, is a second
    /// writer's: the read stops naming both. One of another lineage (the
    /// topic started over) replaces it.
    #[test]
    fn a_position_behind_the_one_before_it_stops_the_read() {
        let source = SourcePartition::new("orders", 3);
        let ahead = position(&source);
        let behind = ProgressRecord {
            next_source_offset: ahead.next_source_offset - 5,
            copies_end: ahead.next_source_offset - 5,
            ..ahead.clone()
        };
        let mut started_over = behind.clone();
        started_over.lineage.source_topic_id = crate::topics::identity::TopicId([9; 16]);
        let key = ProgressRecord::key(&source);
        let read = |records: &[Option<&ProgressRecord>]| {
            let records: Vec<_> = records
                .iter()
                .map(|r| (key.clone(), r.map(ProgressRecord::encode)))
                .collect();
            let (_cluster, connection) = cluster_with("positions", &records);
            read_lane_positions(
                &connection,
                "positions",
                Lane(0),
                Layout::new(1).unwrap(),
                None,
                TIMEOUT,
                &|| {},
            )
        };
        match read(&[Some(&ahead), Some(&behind)]) {
            Err(e @ ResumeError::Regressed { .. }) => {
                assert!(e.is_permanent(), "{e}");
                assert!(e.to_string().contains("(next source offset 10, next target offset 9) behind the one at offset 0 (next source offset 15"), "{e}");
            }
            other => panic!("expected a regression, got {other:?}"),
        }
        let found = read(&[Some(&ahead), Some(&started_over)]).unwrap();
        assert_eq!(found.latest[&source].record, started_over);
        // After a tombstone, the partition starts again.
        let found = read(&[Some(&ahead), None, Some(&behind)]).unwrap();
        assert_eq!(found.latest[&source].record, behind);
    }

    /// A tombstone deletes its partition's position when it is in that
    /// partition's lane; one written by hand into another lane's
    /// partition deletes nothing there and stops nothing.
    #[test]
    fn tombstones_delete_only_in_the_partitions_own_lane() {
        let two_lanes = Layout::new(2).unwrap();
        let of_lane = |topic: &str, lane: u32| {
            (0..)
                .map(|p| SourcePartition::new(topic, p))
                .find(|p| two_lanes.lane_of(p) == Lane(lane))
                .unwrap()
        };
        let (own, kept, other) = (
            of_lane("orders", 0),
            of_lane("kept", 0),
            of_lane("orders", 1),
        );
        let (_cluster, connection) = cluster_with(
            "positions",
            &[
                (ProgressRecord::key(&own), Some(position(&own).encode())),
                (ProgressRecord::key(&kept), Some(position(&kept).encode())),
                (ProgressRecord::key(&own), None),
                (ProgressRecord::key(&other), None),
            ],
        );
        let found = read_lane_positions(
            &connection,
            "positions",
            Lane(0),
            two_lanes,
            None,
            TIMEOUT,
            &|| {},
        )
        .unwrap();
        assert!(!found.latest.contains_key(&own), "deleted by its tombstone");
        assert_eq!(found.latest[&kept].record, position(&kept));
        assert_eq!(found.latest.len(), 1);
    }
}

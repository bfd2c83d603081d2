//! An exactly-once checker that shares no code with eosmirror: it reads a
//! topic on the source and on the target with `read_committed` and compares
//! each partition's committed record sequence, record by record.
//!
//! A copy is exact when, for every partition, both sequences have the same
//! length and the same key, value, headers and timestamp at every position.
//! Memory is bounded: records are streamed and compared pairwise, never
//! collected.

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

/// The first way a partition's copy differs from its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// The n-th committed records differ (key, value, headers or timestamp).
    Altered {
        /// Position in the committed sequence (0 = first record).
        index: u64,
        /// Offset of the source record.
        source_offset: i64,
        /// Offset of its differing copy.
        target_offset: i64,
    },
    /// The target ends early: source records from this index on are missing.
    Missing {
        /// Position of the first missing record.
        index: u64,
        /// Its source offset.
        source_offset: i64,
    },
    /// The target has more records: from this index on they are extra
    /// (duplicates or foreign writes).
    Unexpected {
        /// Position of the first extra record.
        index: u64,
        /// Its target offset.
        target_offset: i64,
    },
}

/// Comparison of one partition.
#[derive(Debug, Clone)]
pub struct PartitionReport {
    /// Partition number (the same on both sides).
    pub partition: i32,
    /// Committed records on the source.
    pub source_records: u64,
    /// Committed records on the target.
    pub target_records: u64,
    /// Bytes of key, value and headers on the source side.
    pub source_bytes: u64,
    /// The first difference, `None` for an exact copy.
    pub first_difference: Option<Difference>,
}

/// Why a check could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A client call failed.
    #[error("{cluster}: {source}")]
    Kafka {
        /// "source" or "target".
        cluster: &'static str,
        /// The client's error.
        #[source]
        source: KafkaError,
    },
    /// The topic does not exist on that cluster.
    #[error("{cluster} has no topic {topic}")]
    NoTopic {
        /// "source" or "target".
        cluster: &'static str,
        /// The missing topic.
        topic: String,
    },
    /// `wait` gave up before the topic held enough records.
    #[error("{cluster}: {topic} holds {seen} committed records, not {wanted}, after {limit:?}")]
    TooFew {
        /// The cluster watched.
        cluster: &'static str,
        /// The topic watched.
        topic: String,
        /// Records seen.
        seen: u64,
        /// Records waited for.
        wanted: u64,
        /// How long it waited.
        limit: Duration,
    },
    /// Records were deleted (retention, DeleteRecords) under a reader, so
    /// what the topic held cannot be known.
    #[error("{cluster}: records of {topic} were deleted (retention or DeleteRecords) while the checker read them; check a topic whose records are kept")]
    Deleted {
        /// "source" or "target".
        cluster: &'static str,
        /// The topic (with the partition, when known).
        topic: String,
    },
    /// A partition could not be read to its end in time.
    #[error("{cluster}: reading {topic}-{partition} did not reach its end within {limit:?}")]
    Timeout {
        /// "source" or "target".
        cluster: &'static str,
        /// The topic read.
        topic: String,
        /// The partition read.
        partition: i32,
        /// The time allowed.
        limit: Duration,
    },
}

fn kafka(cluster: &'static str) -> impl Fn(KafkaError) -> CheckError {
    move |source| CheckError::Kafka { cluster, source }
}

/// A reader's error: a reset (its records were deleted) is named as such.
fn read_error(cluster: &'static str, topic: String, error: KafkaError) -> CheckError {
    match error {
        KafkaError::MessageConsumption(
            RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange,
        ) => CheckError::Deleted { cluster, topic },
        source => CheckError::Kafka { cluster, source },
    }
}

/// Whether a reader's error is one librdkafka recovers from by itself (a
/// lost connection, "all brokers are down"): the read goes on, and its
/// time limit ends it if the cluster stays away. eosmirror's own verify
/// once failed at once on such an error from a loaded CI machine's broker.
pub(crate) fn is_transient(error: &KafkaError) -> bool {
    matches!(
        error,
        KafkaError::MessageConsumption(
            RDKafkaErrorCode::AllBrokersDown
                | RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::RequestTimedOut
        )
    )
}

/// Settings of the checker's readers. `auto.offset.reset=error`: under
/// librdkafka's default, `latest`, a reader whose records are deleted under
/// it jumps to the end silently and the copy would look short.
fn reader_config(config: &ClientConfig) -> ClientConfig {
    let mut config = config.clone();
    config
        .set("group.id", "eosmirror-checker")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "error")
        .set("isolation.level", "read_committed");
    config
}

/// One side of the comparison.
#[derive(Debug, Clone)]
pub struct Side {
    /// "source" or "target", for messages.
    pub name: &'static str,
    /// Client settings (bootstrap servers and any others).
    pub config: ClientConfig,
}

impl Side {
    /// A side reached at `bootstrap` with default settings.
    pub fn new(name: &'static str, bootstrap: &str) -> Side {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", bootstrap);
        Side { name, config }
    }

    /// A reader for [`PartitionStream`]s, one partition at a time: one
    /// client per side for a whole topic (creating and destroying one per
    /// partition costs seconds at 1,000s of partitions).
    fn reader(&self) -> Result<BaseConsumer, CheckError> {
        reader_config(&self.config)
            .set("enable.partition.eof", "true")
            // The broker holds a fetch at the end of a partition this long
            // before it answers "nothing new", which is how a partition's
            // end is found: keep it short, partitions are read one by one.
            .set("fetch.wait.max.ms", "10")
            .create()
            .map_err(kafka(self.name))
    }

    /// Partition count of `topic`.
    pub fn partitions(&self, topic: &str) -> Result<i32, CheckError> {
        let consumer: BaseConsumer = self.config.create().map_err(kafka(self.name))?;
        let metadata = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(30))
            .map_err(kafka(self.name))?;
        match metadata.topics().first() {
            Some(t) if t.error().is_none() && !t.partitions().is_empty() => {
                Ok(t.partitions().len() as i32)
            }
            _ => Err(CheckError::NoTopic {
                cluster: self.name,
                topic: topic.to_string(),
            }),
        }
    }
}

/// Reads one partition up to its end (the last stable offset at the time
/// the reader gets there).
struct PartitionStream<'c> {
    consumer: &'c BaseConsumer,
    side: &'static str,
    topic: String,
    partition: i32,
    deadline: Instant,
    limit: Duration,
}

impl<'c> PartitionStream<'c> {
    /// Points `consumer` (from [`Side::reader`]) at the start of `partition`.
    fn open(
        side: &Side,
        consumer: &'c BaseConsumer,
        topic: &str,
        partition: i32,
        limit: Duration,
    ) -> Result<Self, CheckError> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Beginning)
            .map_err(kafka(side.name))?;
        consumer.assign(&tpl).map_err(kafka(side.name))?;
        Ok(PartitionStream {
            consumer,
            side: side.name,
            topic: topic.to_string(),
            partition,
            deadline: Instant::now() + limit,
            limit,
        })
    }

    /// The next record, or `None` at the end of the partition.
    fn next(&self) -> Result<Option<BorrowedMessage<'_>>, CheckError> {
        loop {
            if Instant::now() > self.deadline {
                return Err(CheckError::Timeout {
                    cluster: self.side,
                    topic: self.topic.clone(),
                    partition: self.partition,
                    limit: self.limit,
                });
            }
            match self.consumer.poll(Duration::from_millis(200)) {
                None => continue,
                Some(Err(KafkaError::PartitionEOF(p))) if p == self.partition => return Ok(None),
                // An end-of-partition event of the previously read partition.
                Some(Err(KafkaError::PartitionEOF(_))) => continue,
                Some(Err(e)) if is_transient(&e) => {
                    eprintln!(
                        "eosmirror-chaos: {}: reading {}-{}: {e}; still reading",
                        self.side, self.topic, self.partition
                    );
                }
                Some(Err(e)) => {
                    return Err(read_error(
                        self.side,
                        format!("{}-{}", self.topic, self.partition),
                        e,
                    ))
                }
                Some(Ok(m)) => return Ok(Some(m)),
            }
        }
    }
}

fn same_record(a: &BorrowedMessage<'_>, b: &BorrowedMessage<'_>) -> bool {
    let headers = |m: &BorrowedMessage<'_>| -> Vec<(String, Option<Vec<u8>>)> {
        m.headers()
            .map(|hs| {
                hs.iter()
                    .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default()
    };
    a.key() == b.key()
        && a.payload() == b.payload()
        && a.timestamp().to_millis() == b.timestamp().to_millis()
        && headers(a) == headers(b)
}

fn size(m: &BorrowedMessage<'_>) -> u64 {
    (m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len)) as u64
}

/// Compares one partition of `topic` on both sides, with one reader per side.
fn compare_partition(
    (source, source_reader): (&Side, &BaseConsumer),
    (target, target_reader): (&Side, &BaseConsumer),
    topics: &TopicPair,
    partition: i32,
    limit: Duration,
) -> Result<PartitionReport, CheckError> {
    let src = PartitionStream::open(source, source_reader, &topics.source, partition, limit)?;
    let tgt = PartitionStream::open(target, target_reader, &topics.target, partition, limit)?;
    let mut report = PartitionReport {
        partition,
        source_records: 0,
        target_records: 0,
        source_bytes: 0,
        first_difference: None,
    };
    let mut source_done = false;
    let mut target_done = false;
    while !(source_done && target_done) {
        let a = if source_done { None } else { src.next()? };
        let b = if target_done { None } else { tgt.next()? };
        source_done |= a.is_none();
        target_done |= b.is_none();
        let index = report.source_records.max(report.target_records);
        if let Some(a) = &a {
            report.source_records += 1;
            report.source_bytes += size(a);
        }
        if b.is_some() {
            report.target_records += 1;
        }
        if report.first_difference.is_some() {
            continue;
        }
        report.first_difference = match (&a, &b) {
            (Some(a), Some(b)) if !same_record(a, b) => Some(Difference::Altered {
                index,
                source_offset: a.offset(),
                target_offset: b.offset(),
            }),
            (Some(a), None) => Some(Difference::Missing {
                index,
                source_offset: a.offset(),
            }),
            (None, Some(b)) => Some(Difference::Unexpected {
                index,
                target_offset: b.offset(),
            }),
            _ => None,
        };
    }
    Ok(report)
}

/// A source topic and the name of its copy on the target (the same name
/// for eosmirror and MirrorMaker 1; prefixed for MirrorMaker 2's default
/// replication policy).
#[derive(Debug, Clone)]
pub struct TopicPair {
    /// The topic on the source.
    pub source: String,
    /// Its copy on the target.
    pub target: String,
}

/// Compares every partition of a topic and its copy. The target must have at
/// least the source's partitions; extra target partitions must be empty.
pub fn compare_topic(
    source: &Side,
    target: &Side,
    topics: &TopicPair,
    limit: Duration,
) -> Result<Vec<PartitionReport>, CheckError> {
    let partitions = source
        .partitions(&topics.source)?
        .max(target.partitions(&topics.target)?);
    let (source_reader, target_reader) = (source.reader()?, target.reader()?);
    (0..partitions)
        .map(|p| {
            compare_partition(
                (source, &source_reader),
                (target, &target_reader),
                topics,
                p,
                limit,
            )
        })
        .collect()
}

/// When the records a tail waited for arrived: benchmarks report the whole
/// catch-up time and, apart from it, the rate of the middle of the copy,
/// which start-up and the last stragglers do not dilute.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    /// From the start of the wait (the topic may not exist yet) to the last
    /// record.
    pub took: Duration,
    /// From the record that made 10% of them to the one that made 90%.
    pub middle: Duration,
}

impl Arrival {
    /// Records per second between the 10% and the 90% marks.
    pub fn middle_rate(&self, records: u64) -> f64 {
        (high_mark(records) - low_mark(records)) as f64 / self.middle.as_secs_f64().max(1e-3)
    }
}

/// The record whose arrival starts the middle of a wait: the 10% mark.
fn low_mark(records: u64) -> u64 {
    records / 10
}

/// The record whose arrival ends it: the 90% mark.
fn high_mark(records: u64) -> u64 {
    records - records / 10
}

/// Tails `topic` on one side until it holds at least `records` committed
/// records in total, reading each record once; returns when they arrived
/// (including waiting for the topic to exist). The broker answers each
/// fetch once `fetch_min_bytes` wait or after half a second. Read errors
/// other than deleted records are reported and waited out until `limit`.
pub fn wait_for_records(
    side: &Side,
    topic: &str,
    records: u64,
    fetch_min_bytes: u64,
    limit: Duration,
) -> Result<Arrival, CheckError> {
    let started = Instant::now();
    let deadline = started + limit;
    let partitions = loop {
        match side.partitions(topic) {
            Ok(n) => break n,
            Err(CheckError::NoTopic { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(e) => return Err(e),
        }
    };
    let consumer: BaseConsumer = reader_config(&side.config)
        .set("fetch.min.bytes", fetch_min_bytes.max(1).to_string())
        .set("fetch.wait.max.ms", "500")
        .create()
        .map_err(kafka(side.name))?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .map_err(kafka(side.name))?;
    }
    consumer.assign(&tpl).map_err(kafka(side.name))?;
    let mut seen = 0u64;
    let (mut first, mut middle) = (None, None);
    while seen < records {
        if Instant::now() > deadline {
            return Err(CheckError::TooFew {
                cluster: side.name,
                topic: topic.to_string(),
                seen,
                wanted: records,
                limit,
            });
        }
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(_)) => {
                seen += 1;
                if seen == low_mark(records) {
                    first = Some(Instant::now());
                }
                if seen == high_mark(records) {
                    middle = Some(Instant::now());
                }
            }
            // librdkafka retries a broker that is down or slow by itself (a
            // loaded single-node broker may fence itself for seconds); the
            // deadline bounds the wait. Deleted records never come back.
            Some(Err(e)) => match read_error(side.name, topic.to_string(), e) {
                deleted @ CheckError::Deleted { .. } => return Err(deleted),
                transient => eprintln!("eosmirror-chaos: {transient}; still waiting"),
            },
            None => {}
        }
    }
    let now = Instant::now();
    Ok(Arrival {
        took: now - started,
        middle: middle.unwrap_or(now) - first.unwrap_or(started),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_middle_rate_counts_the_records_between_the_marks() {
        // 1,000 records: the marks are the 100th and the 900th.
        let arrival = Arrival {
            took: Duration::from_secs(10),
            middle: Duration::from_secs(2),
        };
        assert_eq!(arrival.middle_rate(1_000), 400.0);
        // Too few records for two marks apart: no division by a zero span.
        let instant = Arrival {
            took: Duration::ZERO,
            middle: Duration::ZERO,
        };
        assert!(instant.middle_rate(5).is_finite());
    }
}

//! Streaming reads of one partition range, position-based so that
//! transaction markers and aborted records (which a reader never returns)
//! still count as progress. Blocking: callers run them on their own threads.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

pub mod record;
mod stall;

use crate::failpoints::{self, fault_argument, fault_armed};
use crate::replication::throttle::Throttle;
use crate::replication::watermarks::{self, Watermarks, WatermarksError};
use crate::topics::identity::{TopicId, TopicIdRequest};
use eosmirror_state::SourcePartition;

use record::RecordImage;
use stall::is_transient;
pub use stall::{Recovering, StallWatch};

/// Why a partition could not be read to the end of its range.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{side} {topic}-{partition}: {source}")]
    Kafka {
        side: &'static str,
        topic: String,
        partition: i32,
        #[source]
        source: KafkaError,
    },
    #[error("{side} {topic}-{partition}: no progress for {limit:?} at offset {position} (range ends at {end}); a transaction there stays open (`kafka-transactions.sh --bootstrap-server <{side}> describe-producers --topic {topic} --partition {partition}` names its producer, `find-hanging` finds one no producer will end), or the cluster stopped answering{recovering}")]
    Stalled {
        side: &'static str,
        topic: String,
        partition: i32,
        position: i64,
        end: i64,
        limit: Duration,
        recovering: Recovering,
    },
    #[error("{side}: {source}")]
    Offsets {
        side: &'static str,
        #[source]
        source: Box<WatermarksError>,
    },
    #[error("{side}: reading the ids of topics {topics}: {source}")]
    TopicIds {
        side: &'static str,
        topics: String,
        #[source]
        source: KafkaError,
    },
    #[error("{side} {topic}-{partition}: records from offset {requested} were deleted (the partition now starts at a later offset) before they were read")]
    Deleted {
        side: &'static str,
        topic: String,
        partition: i32,
        requested: i64,
    },
}

/// How long a reader whose prefetch queue was full waits before fetching
/// again (see [`reader_config`]).
const FETCH_QUEUE_BACKOFF_MS: &str = "10";

/// Settings of every reader eosmirror opens on a partition (verify, the
/// commands, resume). The group id only lets librdkafka track positions:
/// nothing joins the group or commits. `auto.offset.reset=error` because
/// librdkafka's default, `latest`, moves a reader whose next records were
/// deleted under it (retention, DeleteRecords) to the partition's end
/// without a word, and a read meant to find records would then find none.
/// Such a reader reports [`is_deleted`] instead.
///
/// A reader's prefetch queue is bounded (`queued.max.messages.kbytes`, a
/// share of the memory bound), and librdkafka postpones a partition's next
/// fetch by `fetch.queue.backoff.ms` (1 s by default) whenever it finds the
/// queue full: a reader that empties its queue faster than that then waits
/// out the rest of the second. [`FETCH_QUEUE_BACKOFF_MS`] keeps that wait
/// short.
pub fn reader_config(connection: &ClientConfig, group_id: &str, committed: bool) -> ClientConfig {
    let mut config = connection.clone();
    config
        .set("group.id", group_id)
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("auto.offset.reset", "error")
        .set("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS)
        .set("isolation.level", isolation_level(committed));
    config
}

/// Largest fetch a reader asks for per partition (`fetch.message.max.bytes`).
const MAX_FETCH_KBYTES: usize = 1024;

/// How a reader holding at most `memory_kbytes` KiB divides them:
/// (`queued.max.messages.kbytes`, `fetch.message.max.bytes`). librdkafka
/// fetches whenever the queue is below its bound, so the queue can pass it
/// by one fetch; both together stay within the share. A batch larger than
/// the fetch size still comes whole (the broker sends at least one batch).
fn reader_limits(memory_kbytes: usize) -> (usize, usize) {
    let fetch_kbytes = (memory_kbytes / 2).clamp(1, MAX_FETCH_KBYTES);
    let queue_kbytes = memory_kbytes.saturating_sub(fetch_kbytes).max(1);
    (queue_kbytes, fetch_kbytes * 1024)
}

/// Sets a reader's prefetch bounds (see [`reader_limits`]). The queue also
/// holds at most one record per KiB of its bound (`queued.min.messages`),
/// as a lane's consumer does (`BufferBudget::bound_consumer`): the byte
/// bound counts payloads only, and librdkafka spends some 340 bytes more on
/// each queued record.
pub trait ReaderLimits {
    fn set_reader_limits(&mut self, memory_kbytes: usize) -> &mut Self;
}

impl ReaderLimits for ClientConfig {
    fn set_reader_limits(&mut self, memory_kbytes: usize) -> &mut Self {
        let (queue_kbytes, fetch_bytes) = reader_limits(memory_kbytes);
        self.set("queued.max.messages.kbytes", queue_kbytes.to_string())
            .set("queued.min.messages", queue_kbytes.to_string())
            .set("fetch.message.max.bytes", fetch_bytes.to_string())
    }
}

/// librdkafka's `isolation.level` for a client that reads only committed
/// records (`true`) or all of them.
fn isolation_level(committed: bool) -> &'static str {
    match committed {
        true => "read_committed",
        false => "read_uncommitted",
    }
}

/// Whether a reader's error means the records at its position were deleted
/// (see [`reader_config`]).
pub fn is_deleted(error: &KafkaError) -> bool {
    matches!(
        error,
        KafkaError::MessageConsumption(
            RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange
        )
    )
}

/// One poll of a reader without a no-progress limit of its own (a read
/// bounded by a deadline): [`StallWatch::poll`], which passes over the
/// errors librdkafka recovers from by itself.
pub fn poll_reader(
    consumer: &BaseConsumer,
    wait: Duration,
) -> Option<KafkaResult<BorrowedMessage<'_>>> {
    StallWatch::new(Duration::MAX).poll(consumer, wait)
}

/// How long an offset query that fails with a [transient](is_transient)
/// error is asked again: longer than the broker stalls seen on this
/// project's loaded test machines (up to 14 s).
const QUERY_RETRY_LIMIT: Duration = Duration::from_secs(15);

/// The exact offset `list` holds for one partition (`None` for a logical
/// one such as "end", or a partition it does not list): positions and
/// offset-for-time answers come back in such lists.
pub(crate) fn offset_in(list: &TopicPartitionList, topic: &str, partition: i32) -> Option<i64> {
    match list.find_partition(topic, partition)?.offset() {
        Offset::Offset(o) => Some(o),
        _ => None,
    }
}

/// Where and how to read: one side's connection settings.
#[derive(Clone)]
pub struct Side {
    /// "source" or "target", for messages.
    pub name: &'static str,
    /// Connection settings only (bootstrap, security).
    pub connection: ClientConfig,
    /// Bound on what one reader holds (KiB): its prefetch queue and the
    /// fetch that may arrive past it (see [`reader_limits`]).
    pub reader_memory_kbytes: usize,
    /// Longest a read may make no progress.
    pub stall_limit: Duration,
    /// Limits on what all readers of this side read together (verify's
    /// `--throttle`); `None` = unlimited.
    pub throttle: Option<Arc<Throttle>>,
    /// Clients for offset queries, one per isolation level (librdkafka
    /// answers watermark and time queries with the asking client's level),
    /// made on first use and shared by clones: a client per query costs a
    /// connection and a metadata request, which at 1,000s of partitions
    /// took longer than reading the records.
    queries: Arc<PerIsolation<Mutex<Option<Arc<BaseConsumer>>>>>,
    /// Idle clients of finished range readers, reused by the next ones
    /// (shared by clones): at 1,000 partitions a new client per partition
    /// (its threads, connections and metadata, then its teardown) took
    /// longer than reading the records. At most [`MAX_IDLE_READERS`] per
    /// isolation level.
    readers: Arc<ReaderPool>,
}

/// Idle reader clients, one list per isolation level (see `Side::readers`).
#[derive(Default)]
struct ReaderPool(PerIsolation<Mutex<Vec<BaseConsumer>>>);

impl Drop for ReaderPool {
    /// Closes the idle clients side by side: each close waits for its
    /// threads, some 40 ms, and one after another they held up verify's
    /// report by most of a second.
    fn drop(&mut self) {
        let mut idle = Vec::new();
        for list in [&mut self.0.read_committed, &mut self.0.read_uncommitted] {
            idle.append(list.get_mut().unwrap_or_else(|e| e.into_inner()));
        }
        std::thread::scope(|scope| {
            for client in idle {
                scope.spawn(move || drop(client));
            }
        });
    }
}

/// Most idle reader clients kept per isolation level (each holds threads
/// and connections); verify's default parallelism reads with 4 per side.
const MAX_IDLE_READERS: usize = 64;

/// One `T` per isolation level: a client reads at the level it was made
/// with.
#[derive(Default)]
struct PerIsolation<T> {
    read_uncommitted: T,
    read_committed: T,
}

impl<T> PerIsolation<T> {
    fn at(&self, committed: bool) -> &T {
        match committed {
            true => &self.read_committed,
            false => &self.read_uncommitted,
        }
    }
}

impl Side {
    pub fn new(
        name: &'static str,
        connection: ClientConfig,
        reader_memory_kbytes: usize,
        stall_limit: Duration,
    ) -> Side {
        Side {
            name,
            connection,
            reader_memory_kbytes,
            stall_limit,
            throttle: None,
            queries: Arc::default(),
            readers: Arc::default(),
        }
    }

    /// The shared query client of one isolation level (see `queries`).
    fn query_client(&self, committed: bool) -> Result<Arc<BaseConsumer>, KafkaError> {
        let mut slot = self
            .queries
            .at(committed)
            .lock()
            .expect("query client lock");
        if let Some(client) = slot.as_ref() {
            return Ok(Arc::clone(client));
        }
        let client: Arc<BaseConsumer> = Arc::new(
            self.connection
                .clone()
                .set("isolation.level", isolation_level(committed))
                .create()?,
        );
        *slot = Some(Arc::clone(&client));
        Ok(client)
    }

    /// A reader of `topic`-`partition` with the given isolation, assigned at
    /// `offset`: an idle client of the pool, or a new one.
    fn consumer(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        committed: bool,
    ) -> Result<BaseConsumer, ReadError> {
        let kafka = self.kafka(topic, partition);
        let idle = self
            .readers
            .0
            .at(committed)
            .lock()
            .expect("reader pool lock")
            .pop();
        let consumer: BaseConsumer = match idle {
            Some(consumer) => consumer,
            None => reader_config(&self.connection, "__eosmirror.verify", committed)
                .set_reader_limits(self.reader_memory_kbytes)
                // A range reader stops at a known end: the broker's long
                // poll (500 ms by default) at an end only delays the next
                // range's first fetch on a reused client.
                .set("fetch.wait.max.ms", "10")
                .create()
                .map_err(&kafka)?,
        };
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(topic, partition, Offset::Offset(offset))
            .map_err(&kafka)?;
        consumer.assign(&assignment).map_err(&kafka)?;
        Ok(consumer)
    }

    fn kafka(&self, topic: &str, partition: i32) -> impl Fn(KafkaError) -> ReadError {
        let (side, topic) = (self.name, topic.to_string());
        move |source| ReadError::Kafka {
            side,
            topic: topic.clone(),
            partition,
            source,
        }
    }

    /// Partitions of `topic`; `None` if the cluster has no such topic.
    pub fn partition_count(&self, topic: &str) -> Result<Option<i32>, ReadError> {
        let metadata = self.query(topic, -1, false, |client| {
            client.fetch_metadata(Some(topic), self.stall_limit)
        })?;
        Ok(metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
            .map(|t| t.partitions().len() as i32))
    }

    /// Low watermark and last stable offset: the `read_committed` view,
    /// whose end is the first offset of the oldest transaction still open
    /// (the high watermark when none is). Everything below it is committed
    /// or aborted, so a `read_committed` read up to it never waits.
    pub fn stable_watermarks(&self, topic: &str, partition: i32) -> Result<(i64, i64), ReadError> {
        self.query(topic, partition, true, |client| {
            client.fetch_watermarks(topic, partition, self.stall_limit)
        })
    }

    /// Low watermark and high watermark of each of `partitions`: the
    /// `read_uncommitted` view, whose end counts the records of transactions
    /// still open. Two ListOffsets requests per leader for all partitions:
    /// one partition at a time took seconds at 1,000 partitions.
    pub fn watermarks_of(&self, partitions: &[SourcePartition]) -> Result<Watermarks, ReadError> {
        self.list_all(partitions, false, |client| {
            watermarks::fetch_all(client, partitions, self.stall_limit)
        })
    }

    /// [`Side::stable_watermarks`] of many partitions at once (see
    /// [`Side::watermarks_of`]).
    pub fn stable_watermarks_of(
        &self,
        partitions: &[SourcePartition],
    ) -> Result<Watermarks, ReadError> {
        self.list_all(partitions, true, |client| {
            watermarks::fetch_all(client, partitions, self.stall_limit)
        })
    }

    /// The id of each of `topics` now (`None`: no such topic), so offsets
    /// recorded for a topic deleted since are told from the new topic's.
    pub fn topic_ids(
        &self,
        topics: &[&str],
    ) -> Result<BTreeMap<String, Option<TopicId>>, ReadError> {
        let failed = |source| ReadError::TopicIds {
            side: self.name,
            topics: topics.join(", "),
            source,
        };
        let client = self.query_client(false).map_err(failed)?;
        self.retry_transient(
            || TopicIdRequest::send(client.client(), topics, self.stall_limit).wait(),
            is_transient,
        )
        .map_err(failed)
    }

    /// Asks `list` (ListOffsets requests about all of `partitions`) of the
    /// shared query client of one isolation level, again while it fails
    /// transiently.
    fn list_all<T>(
        &self,
        partitions: &[SourcePartition],
        committed: bool,
        list: impl Fn(&BaseConsumer) -> Result<T, WatermarksError>,
    ) -> Result<T, ReadError> {
        let offsets = |source| ReadError::Offsets {
            side: self.name,
            source: Box::new(source),
        };
        let client = self.query_client(committed).map_err(|source| {
            offsets(WatermarksError::Request {
                count: partitions.len(),
                source,
            })
        })?;
        self.retry_transient(|| list(&client), |e| e.kafka().is_some_and(is_transient))
            .map_err(offsets)
    }

    /// For each of `partitions`, the first offset whose timestamp is at or
    /// after `ms`; `None` where no record is. Asked `read_committed`, like
    /// every read that follows it.
    pub fn offsets_for_time(
        &self,
        partitions: &[SourcePartition],
        ms: i64,
    ) -> Result<HashMap<SourcePartition, Option<i64>>, ReadError> {
        self.list_all(partitions, true, |client| {
            watermarks::offsets_for_time(client, partitions, ms, self.stall_limit)
        })
    }

    /// Asks `ask` of the shared query client of one isolation level. A
    /// leader being elected or a broker that stalls for a moment answers
    /// with an error; the question is asked again for a while. Not for the
    /// whole stall limit: a partition that is really gone (a deleted topic
    /// still named by a consumer group) should fail its caller soon.
    fn query<T>(
        &self,
        topic: &str,
        partition: i32,
        committed: bool,
        ask: impl Fn(&BaseConsumer) -> Result<T, KafkaError>,
    ) -> Result<T, ReadError> {
        let kafka = self.kafka(topic, partition);
        let client = self.query_client(committed).map_err(&kafka)?;
        self.retry_transient(|| ask(&client), is_transient)
            .map_err(&kafka)
    }

    /// Asks again while the answer is a `transient` error, for a while (see
    /// [`Side::query`]).
    fn retry_transient<T, E>(
        &self,
        mut ask: impl FnMut() -> Result<T, E>,
        transient: impl Fn(&E) -> bool,
    ) -> Result<T, E> {
        let deadline = Instant::now() + self.stall_limit.min(QUERY_RETRY_LIMIT);
        loop {
            match ask() {
                Err(e) if transient(&e) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(200));
                }
                answer => return answer,
            }
        }
    }

    /// Waits until no transaction is open below `end` in any of
    /// `partitions` (topic, partition, end). A partition whose last stable
    /// offset reached its end has none (the usual case, and a cheap
    /// question); the others get one `read_committed` reader, assigned just
    /// below every end, whose position passes an end only once everything
    /// before it has committed or aborted. One client for all partitions,
    /// so the wait does not grow with the partition count.
    pub fn wait_until_settled(&self, partitions: &[(String, i32, i64)]) -> Result<(), ReadError> {
        let mut behind: Vec<&(String, i32, i64)> =
            partitions.iter().filter(|(_, _, end)| *end > 0).collect();
        if behind.is_empty() {
            return Ok(());
        }
        let asked: Vec<SourcePartition> = behind
            .iter()
            .map(|(topic, partition, _)| SourcePartition::new(topic, *partition))
            .collect();
        let stable = self.stable_watermarks_of(&asked)?;
        behind.retain(|(topic, partition, end)| {
            stable
                .get(&SourcePartition::new(topic, *partition))
                .is_none_or(|&(_, stable_end)| stable_end < *end)
        });
        let Some(&(topic, partition, _)) = behind.first() else {
            return Ok(());
        };
        let kafka = self.kafka(topic, *partition);
        let consumer: BaseConsumer = reader_config(&self.connection, "__eosmirror.verify", true)
            .set_reader_limits(self.reader_memory_kbytes)
            .create()
            .map_err(&kafka)?;
        let mut assignment = TopicPartitionList::new();
        for (topic, partition, end) in &behind {
            assignment
                .add_partition_offset(topic, *partition, Offset::Offset(end - 1))
                .map_err(self.kafka(topic, *partition))?;
        }
        consumer.assign(&assignment).map_err(&kafka)?;
        let mut stall = StallWatch::new(self.stall_limit);
        let mut last_check = Instant::now();
        loop {
            // Records past an end may keep coming (a mirror still running):
            // positions are checked at least every 200 ms regardless.
            match stall.poll(&consumer, Duration::from_millis(100)) {
                Some(Err(e)) => return Err(kafka(e)),
                Some(Ok(_)) if last_check.elapsed() < Duration::from_millis(200) => continue,
                _ => {}
            }
            last_check = Instant::now();
            let positions = consumer.position().map_err(&kafka)?;
            let position = |topic: &str, partition: i32| offset_in(&positions, topic, partition);
            let mut settled = TopicPartitionList::new();
            behind.retain(|(topic, partition, end)| {
                let done = position(topic, *partition).is_some_and(|at| at >= *end);
                if done {
                    settled.add_partition(topic, *partition);
                }
                !done
            });
            let Some(&(topic, partition, end)) = behind.first() else {
                return Ok(());
            };
            if settled.count() > 0 {
                // Nothing past an end is wanted: stop fetching there.
                consumer.pause(&settled).map_err(&kafka)?;
                stall.moved();
            } else if let Some(recovering) = stall.stalled() {
                return Err(ReadError::Stalled {
                    side: self.name,
                    topic: topic.clone(),
                    partition: *partition,
                    position: position(topic, *partition).unwrap_or(end - 1),
                    end: *end,
                    limit: self.stall_limit,
                    recovering,
                });
            }
        }
    }
}

/// How long a range reader's poll waits for a record before it looks at
/// its position. A range often ends in a transaction marker, which moves
/// the position while `poll` keeps waiting for a record that will not come:
/// at 1,000 partitions a 100 ms wait at every range's end took longer than
/// reading the records.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// Committed (or all) records of one partition in `[from, end)`, in order.
pub struct RangeReader {
    side: Side,
    /// `None` for an empty range, which reads nothing; back to the side's
    /// pool when the reader is dropped.
    consumer: Option<BaseConsumer>,
    /// The consumer's isolation level, which decides its pool.
    committed: bool,
    topic: String,
    partition: i32,
    from: i64,
    end: i64,
    done: bool,
    /// Offsets consumed so far, shared with the progress display.
    progress: Arc<AtomicU64>,
    last_position: i64,
    /// The side's no-progress limit on this read.
    stall: StallWatch,
}

impl RangeReader {
    pub fn open(
        side: &Side,
        topic: &str,
        partition: i32,
        from: i64,
        end: i64,
        committed: bool,
        progress: Arc<AtomicU64>,
    ) -> Result<RangeReader, ReadError> {
        let consumer = if from < end {
            Some(side.consumer(topic, partition, from, committed)?)
        } else {
            None
        };
        Ok(RangeReader {
            side: side.clone(),
            consumer,
            committed,
            topic: topic.to_string(),
            partition,
            from,
            end,
            done: from >= end,
            progress,
            last_position: from,
            stall: StallWatch::new(side.stall_limit),
        })
    }

    /// The client in `consumer` (a reader's field): only an empty range has
    /// none, and it never reads. A function of the field, not of the reader,
    /// so a poll can borrow it beside the reader's other fields.
    fn client(consumer: &Option<BaseConsumer>) -> &BaseConsumer {
        consumer
            .as_ref()
            .expect("a reader with records to read has a consumer")
    }

    fn fetch_position(&self) -> Result<i64, ReadError> {
        let position = Self::client(&self.consumer)
            .position()
            .map_err(self.side.kafka(&self.topic, self.partition))?;
        Ok(offset_in(&position, &self.topic, self.partition).unwrap_or(self.from))
    }

    fn advance_to(&mut self, position: i64) {
        if position > self.last_position {
            self.progress
                .fetch_add((position - self.last_position) as u64, Ordering::Relaxed);
            self.last_position = position;
            self.stall.moved();
        }
    }

    pub fn next_record(&mut self) -> Result<Option<RecordImage>, ReadError> {
        while !self.done {
            if let Some(throttle) = &self.side.throttle {
                throttle.wait_ready(self.side.stall_limit, &AtomicBool::new(false));
            }
            let consumer = Self::client(&self.consumer);
            let fault = fault_argument(failpoints::READ_RANGE_SIDE_AWAY)
                .is_some_and(|side| side == self.side.name)
                .then_some(failpoints::READ_RANGE_SIDE_AWAY)
                .or_else(|| {
                    fault_armed(failpoints::READ_CONNECTION_LOST)
                        .then_some(failpoints::READ_CONNECTION_LOST)
                });
            match self.stall.poll_or_fault(consumer, POLL_INTERVAL, fault) {
                // A reused client may still hand out a record fetched for
                // its previous range; this range's records come in order.
                Some(Ok(message))
                    if message.partition() != self.partition
                        || message.topic() != self.topic
                        || message.offset() < self.last_position => {}
                Some(Ok(message)) if message.offset() < self.end => {
                    let record = RecordImage::from_message(&message);
                    drop(message);
                    if let Some(throttle) = &self.side.throttle {
                        throttle.charge(record.size(), 1);
                    }
                    self.advance_to(record.offset + 1);
                    // The range's last offset: no poll needed to learn that.
                    self.done = self.last_position >= self.end;
                    return Ok(Some(record));
                }
                Some(Ok(_)) => {
                    self.advance_to(self.end);
                    self.done = true;
                }
                Some(Err(e)) if is_deleted(&e) => {
                    return Err(ReadError::Deleted {
                        side: self.side.name,
                        topic: self.topic.clone(),
                        partition: self.partition,
                        requested: self.last_position,
                    })
                }
                Some(Err(e)) => return Err(self.side.kafka(&self.topic, self.partition)(e)),
                None => {
                    // Markers and aborted records move the position without
                    // returning anything.
                    let position = self.fetch_position()?;
                    self.advance_to(position.min(self.end));
                    if position >= self.end {
                        self.done = true;
                    } else if let Some(recovering) = self.stall.stalled() {
                        return Err(ReadError::Stalled {
                            side: self.side.name,
                            topic: self.topic.clone(),
                            partition: self.partition,
                            position,
                            end: self.end,
                            limit: self.side.stall_limit,
                            recovering,
                        });
                    }
                }
            }
        }
        Ok(None)
    }
}

impl Drop for RangeReader {
    /// Gives the client back to the pool, unassigned, for the next range.
    fn drop(&mut self) {
        let Some(consumer) = self.consumer.take() else {
            return;
        };
        if consumer.unassign().is_err() {
            return;
        }
        let mut idle = self
            .side
            .readers
            .0
            .at(self.committed)
            .lock()
            .expect("reader pool lock");
        if idle.len() < MAX_IDLE_READERS {
            idle.push(consumer);
        }
    }
}

impl Iterator for RangeReader {
    type Item = Result<RecordImage, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

/// Offset of the first committed record in `[from, end)`, if any.
pub fn first_committed(
    side: &Side,
    topic: &str,
    partition: i32,
    from: i64,
    end: i64,
) -> Result<Option<i64>, ReadError> {
    first_record(side, topic, partition, from, end, true)
}

/// Offset of the `count`-th committed record before `end`, counting back
/// from it: where a range of the last `count` records starts, whatever
/// transaction markers or aborted records lie among them (`low` if the
/// partition holds fewer). Counts the records of windows back from `end`
/// that double until one holds enough, then reads that window again to the
/// record: about three times the range is read, in constant memory.
pub fn start_of_last(
    side: &Side,
    topic: &str,
    partition: i32,
    (low, end): (i64, i64),
    count: u64,
) -> Result<i64, ReadError> {
    let committed_in = |from: i64| -> Result<RangeReader, ReadError> {
        RangeReader::open(side, topic, partition, from, end, true, Arc::default())
    };
    let mut window = count.max(1);
    loop {
        let from = end
            .saturating_sub(i64::try_from(window).unwrap_or(i64::MAX))
            .max(low);
        let mut reader = committed_in(from)?;
        let mut held = 0u64;
        while reader.next_record()?.is_some() {
            held += 1;
        }
        if held >= count {
            let mut reader = committed_in(from)?;
            for _ in 0..held - count {
                reader.next_record()?;
            }
            return Ok(reader.next_record()?.map_or(end, |r| r.offset));
        }
        if from == low {
            return Ok(low);
        }
        window = window.saturating_mul(2);
    }
}

/// Offset of the first record in `[from, end)` as `committed` reads (all
/// records otherwise: those of open and aborted transactions too, but never
/// a transaction marker), if any.
pub fn first_record(
    side: &Side,
    topic: &str,
    partition: i32,
    from: i64,
    end: i64,
    committed: bool,
) -> Result<Option<i64>, ReadError> {
    let mut reader =
        RangeReader::open(side, topic, partition, from, end, committed, Arc::default())?;
    Ok(reader.next_record()?.map(|r| r.offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_and_its_next_fetch_stay_within_its_share() {
        assert_eq!(reader_limits(4096), (3072, 1 << 20));
        assert_eq!(reader_limits(1024), (512, 512 * 1024));
        assert_eq!(reader_limits(100), (50, 50 * 1024));
        for kbytes in [2, 3, 100, 1023, 1024, 2049, 1 << 20] {
            let (queue, fetch) = reader_limits(kbytes);
            assert!(queue >= 1 && fetch >= 1024, "{kbytes}");
            assert!(queue * 1024 + fetch <= kbytes * 1024, "{kbytes}");
        }
        // librdkafka's minimums, even for a share too small to hold both.
        assert_eq!(reader_limits(1), (1, 1024));
        assert_eq!(reader_limits(0), (1, 1024));
    }

    #[test]
    fn a_reader_queues_at_most_a_record_per_kib_of_its_queue() {
        let mut config = ClientConfig::new();
        config.set_reader_limits(4096);
        assert_eq!(config.get("queued.max.messages.kbytes"), Some("3072"));
        assert_eq!(config.get("queued.min.messages"), Some("3072"));
        assert_eq!(config.get("fetch.message.max.bytes"), Some("1048576"));
    }
}

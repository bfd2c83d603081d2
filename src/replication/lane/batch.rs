//! One batch of a lane session: read records of any of the lane's
//! partitions, send their copies, then one progress and one position record
//! per partition touched, and commit them in one transaction (invariants 2
//! and 3 of `mod.rs`).

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eosmirror_state::{Checkpoint, StateStore, Tail};
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedHeaders, BorrowedMessage, Headers, Message};
use rdkafka::producer::BaseRecord;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Timestamp, TopicPartitionList};

use super::session::{BatchEnd, Committed, LaneSession, Slot, Touched};
use super::METADATA_TIMEOUT;
use crate::failpoints::{self, crash_point, fault_armed};
use crate::ffi;
use crate::metrics as m;
use crate::replication::client_stats::SourceConsumer;
use crate::replication::delivery::Delivery;
use crate::replication::errors::{classify, classify_code, Disposition};
use crate::replication::failure::WorkerError;
use crate::replication::layout::Lane;
use crate::replication::limits::BatchLimits;
use crate::replication::lineage::{Change, PendingTopicIds, TopicIds};
use crate::replication::progress::{runs_from_deliveries, ProgressRecord, MAX_RUNS};
use crate::replication::transaction::TxnFailure;

/// Records a batch reads from a full queue between two checks of its
/// commit interval: about 0.1 ms of records, so a batch ends that much
/// late at most.
const RECORDS_PER_CLOCK_READ: u32 = 64;

/// Longest a wait for the next record of an open batch goes without
/// looking at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(200);

impl LaneSession<'_> {
    /// Forgets the open batch (after it was aborted).
    pub(super) fn forget_batch(&mut self) {
        self.slots.clear();
        for i in self.touched_order.drain(..) {
            self.touched[i] = None;
        }
    }

    /// Copies one batch, of any partitions of the lane, in one transaction.
    /// On success the new positions are committed on the target and cached
    /// locally.
    pub(super) fn replicate_batch(&mut self) -> Result<BatchEnd, TxnFailure> {
        let settings = Arc::clone(&self.worker.settings);
        let limits: BatchLimits = settings.limits;
        let throttle = &settings.throttle;
        // Throttled: no transaction is open yet, so waiting costs nothing
        // but time (bounded, so the session loop still checks lag).
        if !throttle.wait_ready(limits.idle_poll, &self.worker.tenure.stop) {
            // Not reading on purpose is not a silent source.
            self.source_watch.held(Instant::now());
            self.producer.serve_events();
            return Ok(BatchEnd::Throttled);
        }
        self.forget_batch();
        let lane = self.worker.lane;
        let consumer = &self.consumer;
        let Some(first) = next_record(consumer, lane, &self.last_source_warning, limits.idle_poll)?
        else {
            // Nothing to copy, but the consumer may have read past markers
            // or aborted records since the last commit: recorded once, in a
            // transaction of position records alone.
            if self.note_read_past_copies() {
                self.producer.begin()?;
                self.latency.start();
                return self.commit_batch(Instant::now(), 0);
            }
            self.producer.serve_events();
            return Ok(BatchEnd::Idle);
        };
        self.producer.begin()?;
        self.latency.start();

        let started = Instant::now();
        let mut bytes = 0usize;
        let mut message = first;
        let mut last_cursor: Option<usize> = None;
        // Records read since the commit interval was last checked.
        let mut unclocked = 0u32;
        loop {
            let cursor = match last_cursor.filter(|&c| self.cursors[c].holds(&message)) {
                // Records come in runs of one partition (a fetched batch).
                Some(same) => same,
                None => *last_cursor.insert(cursor_of(&self.index, &message)?),
            };
            let offset = message.offset();
            // Invariant: a session consumes each partition forward from its
            // committed position. Offsets skipped past it are transaction
            // markers, aborted or compacted-away records; deleted ones
            // surface as AutoOffsetReset instead (see `next_record`).
            let expected = self.touched[cursor]
                .map_or(self.cursors[cursor].committed.next_source_offset, |t| {
                    t.next_source_offset
                });
            if offset < expected {
                return Err(TxnFailure {
                    disposition: Disposition::Fatal,
                    detail: format!(
                        "{}: source returned offset {offset} below the expected position {expected}",
                        self.cursors[cursor].partition
                    ),
                    slot: None,
                });
            }
            // librdkafka counts values against its queue bound: a value
            // above the bound is refused as "queue full" for ever.
            let value_bytes = message.payload().map_or(0, <[u8]>::len);
            let queue_bytes = self.worker.budget.producer_queue_kbytes * 1024;
            if value_bytes > queue_bytes {
                return Err(self.partition_failure(WorkerError::RecordTooLarge {
                    source_partition: self.cursors[cursor].partition.clone(),
                    source_offset: offset,
                    value_bytes,
                    queue_bytes,
                    lanes: self.worker.settings.layout.lanes(),
                }));
            }
            self.latency.read(cursor, message.timestamp().to_millis());
            let headers = message.headers();
            let size = record_size(&message, headers);
            // Paid after reading: a record larger than the throttle's
            // budget leaves a debt for the next reads to wait out.
            throttle.charge(size as u64, 1);
            bytes += size;
            let slot = self.slots.len();
            self.slots.push(Slot::Copy {
                cursor,
                source_offset: offset,
            });
            let runs = match &mut self.touched[cursor] {
                Some(t) => {
                    if offset > t.next_source_offset {
                        t.runs += 1;
                    }
                    t.next_source_offset = offset + 1;
                    t.records += 1;
                    t.bytes += size as u64;
                    t.runs
                }
                none => {
                    *none = Some(Touched {
                        next_source_offset: offset + 1,
                        records: 1,
                        bytes: size as u64,
                        runs: 1,
                    });
                    self.touched_order.push(cursor);
                    1
                }
            };
            let topic = &self.cursors[cursor].partition.topic;
            self.producer
                .send(copy_of(topic, &message, headers, slot))?;
            if self.slots.len() >= limits.max_records
                || bytes >= limits.max_bytes
                || runs >= MAX_RUNS
                || self.worker.tenure.stop.load(Ordering::Relaxed)
            {
                break;
            }
            // While records wait in the queue (and nothing throttles), the
            // next is taken without a wait and the clock is read once per
            // RECORDS_PER_CLOCK_READ records: per-record clock reads were a
            // sixth of a busy lane thread's time.
            unclocked += 1;
            if unclocked < RECORDS_PER_CLOCK_READ && !throttle.is_limited() {
                if let Some(next) =
                    next_record(consumer, lane, &self.last_source_warning, Duration::ZERO)?
                {
                    message = next;
                    continue;
                }
            }
            unclocked = 0;
            // Waits for the next record until the commit interval ends, and
            // sees a stop within STOP_CHECK meanwhile: a stop commits the
            // open batch at once, not when a long interval ends.
            let next = loop {
                if self.worker.tenure.stop.load(Ordering::Relaxed) {
                    break None;
                }
                let Some(mut remaining) = limits.commit_interval.checked_sub(started.elapsed())
                else {
                    break None;
                };
                // Throttled inside a transaction: wait at most until it
                // would end anyway, then commit what it has.
                if throttle.is_limited() {
                    if !throttle.wait_ready(remaining, &self.worker.tenure.stop) {
                        break None;
                    }
                    let Some(left) = limits.commit_interval.checked_sub(started.elapsed()) else {
                        break None;
                    };
                    remaining = left;
                }
                let wait = remaining.min(STOP_CHECK);
                if let Some(m) = next_record(consumer, lane, &self.last_source_warning, wait)? {
                    break Some(m);
                }
            };
            match next {
                Some(m) => message = m,
                None => break,
            }
        }
        self.note_read_past_copies();
        self.commit_batch(started, bytes)
    }

    /// Records how far the source consumer read past each partition's last
    /// copy: the transaction markers and aborted records after it, which
    /// librdkafka reads without returning them. Without this, a partition
    /// whose last source transaction's marker was then deleted (retention,
    /// DeleteRecords) would resume before the source's first offset, a gap
    /// where no record was lost, and a group caught up at the end would
    /// translate to a re-read. A partition the batch did not touch joins it
    /// with no copies. Returns whether one did.
    fn note_read_past_copies(&mut self) -> bool {
        let Ok(fetched) = self.consumer.position() else {
            return false;
        };
        let mut joined = false;
        for (cursor, read_to) in self
            .consumer_positions(Some(&fetched))
            .into_iter()
            .enumerate()
        {
            match &mut self.touched[cursor] {
                Some(t) => t.next_source_offset = t.next_source_offset.max(read_to),
                none if read_to > self.cursors[cursor].committed.next_source_offset => {
                    *none = Some(Touched {
                        next_source_offset: read_to,
                        records: 0,
                        bytes: 0,
                        runs: 0,
                    });
                    self.touched_order.push(cursor);
                    joined = true;
                }
                _ => {}
            }
        }
        joined
    }

    /// Flushes the open batch, checks it, adds its progress and position
    /// records and commits it. `started` is when its first record was read.
    fn commit_batch(&mut self, started: Instant, bytes: usize) -> Result<BatchEnd, TxnFailure> {
        let lane = self.worker.lane;
        let ready = ffi::polled_queue_length(self.consumer.client()) > 0;
        crash_point!(failpoints::LANE_AFTER_SEND);
        let filled = Instant::now();
        let copied = self.slots.len();
        // The lineage check's requests go out after the batch's last fetch
        // and are answered while the copies flush.
        let lineage = self.request_lineage();
        // Each step below blocks for at most one call timeout, which the
        // stall limit exceeds; the steps together may not, so each that
        // returns counts as progress.
        let copies = self.collect_copies()?;
        self.worker.health.progress(lane);
        let flushed = Instant::now();
        crash_point!(failpoints::LANE_AFTER_FLUSH);
        self.check_lineage(lineage)?;
        let checked = Instant::now();
        let records = self.progress_records(copies)?;
        self.send_progress(&records)?;
        crash_point!(failpoints::LANE_AFTER_PROGRESS);
        self.worker.health.progress(lane);
        self.fence()?;
        self.worker.health.progress(lane);
        let fenced = Instant::now();
        if self.worker.tenure.stop.load(Ordering::Relaxed)
            && fault_armed(failpoints::LANE_STOP_COMMIT_FAILS)
        {
            return Err(TxnFailure {
                disposition: Disposition::AbortBatch,
                detail: format!("fault point {}", failpoints::LANE_STOP_COMMIT_FAILS),
                slot: None,
            });
        }
        let reports = self.producer.commit()?;
        crash_point!(failpoints::LANE_AFTER_COMMIT);
        let cursors = &self.cursors;
        self.latency.committed(|cursor| &cursors[cursor].latency);
        // Where a transaction's time goes, for tuning and for finding a slow
        // step (`--log eosmirror::replication=debug`).
        tracing::debug!(
            %lane,
            records = copied,
            partitions = records.len(),
            bytes,
            fill_ms = (filled - started).as_millis() as u64,
            flush_ms = (flushed - filled).as_millis() as u64,
            lineage_ms = (checked - flushed).as_millis() as u64,
            fence_ms = (fenced - checked).as_millis() as u64,
            commit_ms = fenced.elapsed().as_millis() as u64,
            "transaction committed"
        );
        self.committed(records, reports);
        if fault_armed(failpoints::LANE_SOURCE_SILENT) {
            tracing::warn!(%lane, "fault point {}: the source consumer stops fetching one partition", failpoints::LANE_SOURCE_SILENT);
            if let Ok(assignment) = self.consumer.assignment() {
                let mut one = TopicPartitionList::new();
                if let Some(first) = assignment.elements().first() {
                    one.add_partition(first.topic(), first.partition());
                }
                let _ = self.consumer.pause(&one);
            }
        }
        Ok(BatchEnd::Committed { ready })
    }

    /// Flushes the batch's copies and sorts their delivery reports into
    /// (source offset, target offset) pairs per touched cursor.
    fn collect_copies(&mut self) -> Result<HashMap<usize, Vec<(i64, i64)>>, TxnFailure> {
        let reports = self.producer.flush()?;
        // Every record sent gets exactly one delivery outcome.
        assert_eq!(
            reports.len(),
            self.slots.len(),
            "{}: delivery reports lost",
            self.worker.lane
        );
        let mut copies: HashMap<usize, Vec<(i64, i64)>> = HashMap::new();
        // A record refused for good is named, whatever failed with it (the
        // records librdkafka purged once the transaction became abortable
        // may report first): aborted and re-read, the batch would fail on
        // it again.
        let mut failed: Option<TxnFailure> = None;
        for report in reports {
            let Slot::Copy {
                cursor,
                source_offset,
            } = self.slots[report.slot]
            else {
                unreachable!("progress records are sent after the copies are flushed");
            };
            match report.outcome {
                Ok(target_offset) => copies
                    .entry(cursor)
                    .or_default()
                    .push((source_offset, target_offset)),
                Err(e) => {
                    let disposition = match e.rdkafka_error_code() {
                        Some(code) => classify_code(code),
                        None => classify(&e),
                    };
                    if failed.as_ref().is_none_or(|f| {
                        f.disposition != Disposition::Fatal && disposition == Disposition::Fatal
                    }) {
                        failed = Some(TxnFailure {
                            disposition,
                            detail: format!("{}: {e}", self.cursors[cursor].partition),
                            slot: Some(report.slot),
                        });
                    }
                }
            }
        }
        match failed {
            Some(failure) => Err(failure),
            None => Ok(copies),
        }
    }

    /// Asks both clusters for the ids of the batch's topics.
    fn request_lineage(&self) -> PendingTopicIds {
        let topics = self
            .touched_order
            .iter()
            .map(|&i| self.cursors[i].partition.topic.as_str())
            .collect();
        TopicIds::request(&self.consumer, &self.target, &topics, METADATA_TIMEOUT)
    }

    /// Before every commit, after the batch's last fetch: the batch's topics
    /// are still the ones the session resumed. A topic recreated since (its
    /// consumer may have read the new topic at the old offsets) ends the
    /// session uncommitted: with a named stop, or a new session that starts
    /// it over when `--start.over` names it. A topic deleted since ends it
    /// uncommitted too: the next session finds the topic recreated, or the
    /// refresh has taken its partitions out of the lane.
    fn check_lineage(&self, pending: PendingTopicIds) -> Result<(), TxnFailure> {
        let ids = pending.wait().map_err(|detail| TxnFailure {
            disposition: Disposition::Retriable,
            detail,
            slot: None,
        })?;
        let restart = |detail| TxnFailure {
            disposition: Disposition::RestartSession,
            detail,
            slot: None,
        };
        for &cursor in &self.touched_order {
            let c = &self.cursors[cursor];
            match ids.unchanged(&c.partition, &c.lineage) {
                Ok(()) => {}
                Err(Change::Deleted { side }) => {
                    return Err(restart(format!(
                        "the {side} topic of {} was deleted while the batch was read; nothing of the batch is committed",
                        c.partition
                    )))
                }
                Err(Change::Recreated(error)) if self.worker.starts_over(&c.partition.topic) => {
                    return Err(restart(error.to_string()))
                }
                Err(Change::Recreated(error)) => return Err(self.partition_failure(error)),
            }
        }
        Ok(())
    }

    /// One progress record per touched partition, from its copies.
    fn progress_records(
        &self,
        mut copies: HashMap<usize, Vec<(i64, i64)>>,
    ) -> Result<Vec<(usize, ProgressRecord)>, TxnFailure> {
        let settings = &*self.worker.settings;
        let mut records = Vec::with_capacity(self.touched_order.len());
        for &cursor in &self.touched_order {
            let c = &self.cursors[cursor];
            let touched = self.touched[cursor].expect("touched cursor");
            let mut pairs = copies.remove(&cursor).unwrap_or_default();
            pairs.sort_unstable_by_key(|&(source, _)| source);
            let Some(runs) = runs_from_deliveries(&pairs) else {
                return Err(self.order_violated(cursor, pairs[0].0));
            };
            if let Some(&(_, first_target)) = pairs.first() {
                // The partition's end fell below its committed copies while
                // copying (a leader elected uncleanly): the copies landed
                // where committed ones were.
                if first_target < c.committed.next_target_offset {
                    return Err(self.partition_failure(WorkerError::TargetTruncated {
                        source_partition: c.partition.clone(),
                        target_end: first_target,
                        next_target_offset: c.committed.next_target_offset,
                        position_topic: settings.internal_topics.position.clone(),
                    }));
                }
            }
            // Read past markers only: both ends of the copies stay.
            let (copies_end, next_target_offset) = pairs.last().map_or(
                (c.committed.copies_end, c.committed.next_target_offset),
                |&(source, target)| (source + 1, target + 1),
            );
            records.push((
                cursor,
                ProgressRecord {
                    source: c.partition.clone(),
                    lineage: c.lineage.clone(),
                    runs,
                    next_source_offset: touched.next_source_offset,
                    copies_end,
                    next_target_offset,
                    instance: settings.instance,
                    committed_at_ms: crate::clock::unix_millis(),
                    begins_history: false,
                },
            ));
        }
        Ok(records)
    }

    fn order_violated(&self, cursor: usize, source_offset: i64) -> TxnFailure {
        self.partition_failure(WorkerError::OrderViolated {
            source_partition: self.cursors[cursor].partition.clone(),
            source_offset,
        })
    }

    /// A batch failure caused by one partition: `error` stops that
    /// partition once the batch is given up.
    fn partition_failure(&self, error: WorkerError) -> TxnFailure {
        let failure = TxnFailure {
            disposition: Disposition::Fatal,
            detail: error.to_string(),
            slot: None,
        };
        *self.partition_error.borrow_mut() = Some(error);
        failure
    }

    /// Writes the progress and position records into the open transaction,
    /// to the lane's partition of each topic. They are flushed by the commit.
    fn send_progress(&mut self, records: &[(usize, ProgressRecord)]) -> Result<(), TxnFailure> {
        let topics = &self.worker.settings.internal_topics;
        let partition = self.worker.lane.internal_partition();
        self.slots.clear();
        for (cursor, record) in records {
            let key = ProgressRecord::key(&record.source);
            let value = record.encode();
            for (topic, slot) in [
                (&topics.progress, Slot::Progress { cursor: *cursor }),
                (&topics.position, Slot::Position { cursor: *cursor }),
            ] {
                self.send_internal(topic, partition, slot, &key, &value)?;
            }
        }
        Ok(())
    }

    /// Sends one progress or position record (`slot`) to `partition` of an
    /// internal topic, inside the open transaction.
    pub(super) fn send_internal(
        &mut self,
        topic: &str,
        partition: i32,
        slot: Slot,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), TxnFailure> {
        let index = self.slots.len();
        self.slots.push(slot);
        self.producer.send(
            BaseRecord::with_opaque_to(topic, index)
                .partition(partition)
                .key(key)
                .payload(value),
        )
    }

    /// After a successful commit: moves each touched partition's position
    /// forward, caches it, and counts it.
    fn committed(&mut self, records: Vec<(usize, ProgressRecord)>, reports: Vec<Delivery>) {
        // Every record sent gets exactly one delivery outcome, and a
        // committed transaction's records were all delivered.
        assert_eq!(reports.len(), self.slots.len(), "internal record reports");
        let mut position_offsets = HashMap::with_capacity(records.len());
        for report in &reports {
            if let (Some(&Slot::Position { cursor }), Ok(offset)) =
                (self.slots.get(report.slot), &report.outcome)
            {
                position_offsets.insert(cursor, *offset);
                self.note_position(*offset);
            }
        }
        let lane = self.worker.lane;
        for (cursor, record) in records {
            let touched = self.touched[cursor].expect("touched cursor");
            let c = &mut self.cursors[cursor];
            // Invariant: a partition's replicated position only moves
            // forward, its target position with every copy.
            assert!(
                record.next_source_offset > c.committed.next_source_offset
                    && record.next_target_offset >= c.committed.next_target_offset
                    && (touched.records == 0
                        || record.next_target_offset > c.committed.next_target_offset),
                "{}: position moved backwards",
                c.partition
            );
            // The copies end where the last one is, never past the position.
            assert!(
                record.copies_end >= c.committed.copies_end
                    && record.copies_end <= record.next_source_offset,
                "{}: copies end {} out of order (was {}, position {})",
                c.partition,
                record.copies_end,
                c.committed.copies_end,
                record.next_source_offset
            );
            let follows = Tail {
                next_source_offset: c.committed.next_source_offset,
                next_target_offset: c.committed.next_target_offset,
            };
            let position_offset = position_offsets
                .get(&cursor)
                .copied()
                .unwrap_or(c.committed.position_offset);
            c.committed = Committed {
                next_source_offset: record.next_source_offset,
                copies_end: record.copies_end,
                next_target_offset: record.next_target_offset,
                position_offset,
            };
            cache(&self.worker.state, follows, &record, position_offset);
            m::transaction_committed(&record.source, touched.records, touched.bytes);
            self.worker.health.copy_progress.committed(
                lane,
                &record.source,
                record.next_source_offset,
                touched.records,
            );
        }
        m::lane_transaction_committed(lane);
        self.committed_any = true;
        self.forget_batch();
    }
}

/// Polls the source, dealing with the events that are not records.
/// Returns `Ok(None)` when `wait` passes without a record. A free function,
/// so the record borrows only the consumer while the batch is updated.
fn next_record<'c>(
    consumer: &'c SourceConsumer,
    lane: Lane,
    last_warning: &Cell<Option<Instant>>,
    wait: Duration,
) -> Result<Option<BorrowedMessage<'c>>, TxnFailure> {
    match consumer.poll(wait) {
        None => Ok(None),
        Some(Ok(message)) => Ok(Some(message)),
        // With auto.offset.reset=error, librdkafka reports a fetch below
        // the log start as AutoOffsetReset (not OffsetOutOfRange) and
        // stops fetching the partition: only a new session (which
        // compares each position with the low watermark) can go on.
        Some(Err(KafkaError::MessageConsumption(
            RDKafkaErrorCode::OffsetOutOfRange | RDKafkaErrorCode::AutoOffsetReset,
        ))) => Err(TxnFailure {
            disposition: Disposition::RestartSession,
            detail: "source offset out of range (records deleted at the source?); re-checking the source range".into(),
            slot: None,
        }),
        // librdkafka reports a record batch it cannot read (a checksum
        // mismatch with check.crcs, a codec it lacks, a batch format
        // version it does not know: NotImplemented) and goes on past it:
        // copying on would leave its records out without a trace.
        Some(Err(KafkaError::MessageConsumption(
            code @ (RDKafkaErrorCode::BadMessage
            | RDKafkaErrorCode::BadCompression
            | RDKafkaErrorCode::NotImplemented),
        ))) => Err(TxnFailure {
            disposition: Disposition::Fatal,
            detail: format!(
                "the source consumer could not read what a source broker sent ({code}): a record batch of one of the lane's partitions that fails its checksum (check.crcs), cannot be decoded or has a format librdkafka does not know, which librdkafka would go past without its records, or a response that is not Kafka's (a bootstrap address of another service); nothing from there on was copied. librdkafka's log line above names the offset or the broker. Inspect the source partitions' logs (kafka-dump-log.sh --deep-iteration) and repair or restore them, then restart"
            ),
            slot: None,
        }),
        Some(Err(e)) => {
            // librdkafka retries by itself (reconnects, leader changes); a
            // persistent problem such as a deleted source topic is still
            // reported, at most every 30 s.
            let quiet = last_warning
                .get()
                .is_some_and(|t| t.elapsed() < Duration::from_secs(30));
            if !quiet {
                last_warning.set(Some(Instant::now()));
                tracing::warn!(%lane, error = %e, "source consumer error; retrying");
            }
            Ok(None)
        }
    }
}

/// The cursor a source record belongs to.
fn cursor_of(
    index: &HashMap<String, HashMap<i32, usize>>,
    message: &BorrowedMessage<'_>,
) -> Result<usize, TxnFailure> {
    index
        .get(message.topic())
        .and_then(|p| p.get(&message.partition()))
        .copied()
        .ok_or_else(|| TxnFailure {
            disposition: Disposition::Fatal,
            detail: format!(
                "the source consumer returned {}-{}, which this lane does not copy",
                message.topic(),
                message.partition()
            ),
            slot: None,
        })
}

/// The copy of one source record, for the same partition number of the
/// same-named target topic: key, value, headers and timestamp as they are
/// (LogAppendTime becomes CreateTime; tombstones stay tombstones). `topic`
/// is the record's topic as its cursor holds it and `headers` its headers,
/// both looked up once per record by the caller.
fn copy_of<'m>(
    topic: &'m str,
    message: &'m BorrowedMessage<'_>,
    headers: Option<&BorrowedHeaders>,
    slot: usize,
) -> BaseRecord<'m, [u8], [u8], usize> {
    let mut record: BaseRecord<'_, [u8], [u8], usize> =
        BaseRecord::with_opaque_to(topic, slot).partition(message.partition());
    if let Some(key) = message.key() {
        record = record.key(key);
    }
    if let Some(value) = message.payload() {
        record = record.payload(value);
    }
    if let Some(headers) = headers {
        record = record.headers(headers.detach());
    }
    match message.timestamp() {
        Timestamp::CreateTime(t) | Timestamp::LogAppendTime(t) => record = record.timestamp(t),
        Timestamp::NotAvailable => {}
    }
    record
}

/// Caches a committed position locally, the commit having started from
/// `follows`. The cache is only a hint, so a failure is logged, not fatal:
/// the partition's cache is forgotten, and should that fail too, the store
/// refuses every later commit until a reset succeeds (a commit missing
/// from the cache would translate as a source gap).
fn cache(state: &StateStore, follows: Tail, record: &ProgressRecord, position_offset: i64) {
    if fault_armed(failpoints::LANE_CACHE_WRITE_FAILS) {
        tracing::warn!(
            "fault point {}: source offsets {}..{} of {} not cached, nor the partition reset",
            failpoints::LANE_CACHE_WRITE_FAILS,
            follows.next_source_offset,
            record.next_source_offset,
            record.source
        );
        return;
    }
    let checkpoint = Checkpoint {
        incarnation: record.lineage.incarnation(),
        next_source_offset: record.next_source_offset,
        next_target_offset: record.next_target_offset,
        progress_offset: position_offset,
    };
    if let Err(e) = state.record_commit(&record.source, follows, &checkpoint, &record.runs) {
        tracing::warn!(partition = %record.source, error = %e, "local state not updated; it will be rebuilt from the target");
        let _ = state.reset_partition(&record.source);
    }
}

fn record_size(message: &BorrowedMessage<'_>, headers: Option<&BorrowedHeaders>) -> usize {
    message.key().map_or(0, <[u8]>::len)
        + message.payload().map_or(0, <[u8]>::len)
        + headers.map_or(0, |hs| {
            hs.iter()
                .map(|h| h.key.len() + h.value.map_or(0, <[u8]>::len))
                .sum()
        })
}

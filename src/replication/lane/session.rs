//! A running lane session: its partitions' cursors, the loop that runs
//! batches until the producer's state is uncertain, and what it does
//! between batches (ownership claim, lag, parking).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use eosmirror_state::SourcePartition;
use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::{Backoff, LaneWorker, SessionEnd, METADATA_TIMEOUT};
use crate::metrics as m;
use crate::replication::client_stats::SourceConsumer;
use crate::replication::errors::Disposition;
use crate::replication::failure::WorkerError;
use crate::replication::latency::BatchLatency;
use crate::replication::park::Parked;
use crate::replication::positions::ResumePosition;
use crate::replication::progress::{Lineage, ProgressRecord};
use crate::replication::source_watch::{self, SourceWatch, SILENCE_LIMIT};
use crate::replication::transaction::{TransactionalProducer, TxnFailure};
use crate::replication::watermarks;

/// Bounds of the wait after an aborted batch before it is read again.
const ABORT_BACKOFF_MIN: Duration = Duration::from_millis(200);
const ABORT_BACKOFF_MAX: Duration = Duration::from_secs(10);
/// How often a lane publishes its partitions' lag.
const LAG_INTERVAL: Duration = Duration::from_secs(5);

/// The last committed position of a partition, as this session knows it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Committed {
    /// The next source offset to copy.
    pub(super) next_source_offset: i64,
    /// Source offset just past the last committed copy (see
    /// [`ProgressRecord::copies_end`]).
    pub(super) copies_end: i64,
    /// One past the target offset of the last committed copy.
    pub(super) next_target_offset: i64,
    /// Offset of its latest position record (the cache's start hint).
    pub(super) position_offset: i64,
}

impl Committed {
    pub(super) fn from(r: &ResumePosition) -> Committed {
        Committed {
            next_source_offset: r.record.next_source_offset,
            copies_end: r.record.copies_end,
            next_target_offset: r.record.next_target_offset,
            position_offset: r.position_offset,
        }
    }

    /// A partition with nothing copied yet: from the source's first offset
    /// to the target partition's end (0 only for a new target partition;
    /// one emptied by retention or DeleteRecords, or one allowed to hold
    /// records already, starts further on, and a group translated to this
    /// position must land there).
    pub(super) fn fresh(source_start: i64, target_end: i64) -> Committed {
        Committed {
            next_source_offset: source_start,
            copies_end: source_start,
            next_target_offset: target_end,
            position_offset: -1,
        }
    }
}

/// One source partition of a running session.
#[derive(Debug)]
pub(super) struct Cursor {
    /// The source partition; its copy goes to the same partition number.
    pub(super) partition: SourcePartition,
    /// The topics the session resumed, which every commit checks.
    pub(super) lineage: Lineage,
    /// The partition's copy starts in this session (it has no position
    /// yet, or its topic was recreated and starts over): its claim also
    /// opens the lineage's history in the progress topic, marked as its
    /// beginning ([`ProgressRecord::begins_history`]).
    pub(super) starts_history: bool,
    /// Where the copy stands on the target, moved forward at each commit.
    pub(super) committed: Committed,
    /// Where this partition's copies' end-to-end latencies go.
    pub(super) latency: metrics::Histogram,
}

impl Cursor {
    /// Whether `message` is a record of this cursor's partition.
    pub(super) fn holds(&self, message: &BorrowedMessage<'_>) -> bool {
        self.partition.partition == message.partition() && self.partition.topic == message.topic()
    }
}

/// What a batch sent, by slot (the delivery opaque).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    /// The copy of the record at `source_offset` of cursor `cursor`.
    Copy { cursor: usize, source_offset: i64 },
    /// The progress record of cursor `cursor`.
    Progress { cursor: usize },
    /// The position record of cursor `cursor`.
    Position { cursor: usize },
}

/// What the open batch copied of one partition.
#[derive(Debug, Clone, Copy)]
pub(super) struct Touched {
    /// Next source offset once the batch commits.
    pub(super) next_source_offset: i64,
    /// Records the batch copied of the partition.
    pub(super) records: u64,
    /// Their bytes (key, value and headers).
    pub(super) bytes: u64,
    /// Offset runs the copies make (each source gap starts one): entries
    /// of the partition's progress record, bounded by `MAX_RUNS`.
    pub(super) runs: u32,
}

/// Outcome of one attempt at a batch.
pub(super) enum BatchEnd {
    /// The source delivered nothing within the idle poll.
    Idle,
    /// The throttle held the lane: records may wait.
    Throttled,
    /// The batch's transaction committed.
    Committed {
        /// Records were still waiting in the consumer's queue when the
        /// batch stopped reading: the lane copies as fast as it can.
        ready: bool,
    },
}

/// One producer lifetime of a lane, from `init_transactions` (`resume.rs`)
/// until the producer's state is uncertain: its clients, its partitions'
/// cursors and the open batch.
pub(super) struct LaneSession<'w> {
    /// The lane: settings, ownership, the local cache.
    pub(super) worker: &'w LaneWorker,
    /// The lane's transactional producer, initialised for this session.
    pub(super) producer: TransactionalProducer,
    /// The lane's source consumer, assigned every cursor's partition.
    pub(super) consumer: SourceConsumer,
    /// A plain client of the target, for topic ids.
    pub(super) target: BaseConsumer,
    /// One per source partition of the lane.
    pub(super) cursors: Vec<Cursor>,
    /// Cursor index by topic and partition, for records as they arrive.
    pub(super) index: HashMap<String, HashMap<i32, usize>>,
    /// The partition set version this session copies.
    pub(super) version: u64,
    /// Whether this session committed a batch.
    pub(super) committed_any: bool,
    /// The open batch: every record sent, and each partition touched.
    pub(super) slots: Vec<Slot>,
    /// By cursor: what the open batch copied of its partition.
    pub(super) touched: Vec<Option<Touched>>,
    /// The cursors the open batch touched, in the order it first did.
    pub(super) touched_order: Vec<usize>,
    /// The open batch's young records' timestamps, for the latency histogram.
    pub(super) latency: BatchLatency,
    /// When the partitions' lag was last published (`LAG_INTERVAL`).
    pub(super) last_lag_report: Option<Instant>,
    /// When the lane last committed or aborted a batch, was throttled, or
    /// started the session: it parks `park_after` later. After an abort
    /// the consumer re-reads from the committed positions, and parking
    /// waits until that re-reading is long done.
    pub(super) last_busy: Instant,
    /// Notices a source consumer that stopped delivering.
    pub(super) source_watch: SourceWatch,
    /// When a source consumer error was last logged (at most every 30 s).
    pub(super) last_source_warning: Cell<Option<Instant>>,
    /// The error of one partition that made the batch fail (returned as a
    /// `Fatal` failure): it stops that partition, not the lane.
    pub(super) partition_error: RefCell<Option<WorkerError>>,
}

impl<'w> LaneSession<'w> {
    pub(super) fn new(
        worker: &'w LaneWorker,
        producer: TransactionalProducer,
        consumer: SourceConsumer,
        target: BaseConsumer,
        cursors: Vec<Cursor>,
        version: u64,
    ) -> LaneSession<'w> {
        let mut index: HashMap<String, HashMap<i32, usize>> = HashMap::new();
        for (i, c) in cursors.iter().enumerate() {
            index
                .entry(c.partition.topic.clone())
                .or_default()
                .insert(c.partition.partition, i);
        }
        let touched = vec![None; cursors.len()];
        LaneSession {
            worker,
            producer,
            consumer,
            target,
            cursors,
            index,
            version,
            committed_any: false,
            slots: Vec::new(),
            touched,
            touched_order: Vec::new(),
            latency: BatchLatency::default(),
            last_lag_report: None,
            last_busy: Instant::now(),
            source_watch: SourceWatch::new(SILENCE_LIMIT, Instant::now()),
            last_source_warning: Cell::new(None),
            partition_error: RefCell::new(None),
        }
    }

    pub(super) fn run(&mut self) -> Result<SessionEnd, WorkerError> {
        let lane = self.worker.lane;
        // Asked to stop (shutdown, or the group moved the lane) while the
        // session started: no claim, which would write the lane after its
        // revocation (invariant 4).
        if self.worker.tenure.stop.load(Ordering::Relaxed) {
            tracing::info!(%lane, "the lane was asked to stop while its session started; it ends before claiming the lane");
            return Ok(SessionEnd::Shutdown);
        }
        if let Err(failure) = self.claim() {
            return match failure.disposition {
                Disposition::Fatal => Err(self.internal_record_failure(failure)),
                _ => Ok(SessionEnd::restart("claim", failure.detail)),
            };
        }
        self.assign()?;
        tracing::info!(%lane, partitions = self.cursors.len(), "lane session started");
        self.worker.health.copying(lane, true);
        let mut abort_backoff = Backoff::new(ABORT_BACKOFF_MIN, ABORT_BACKOFF_MAX);
        loop {
            self.worker.health.progress(lane);
            if self.worker.tenure.stop.load(Ordering::Relaxed) {
                return Ok(SessionEnd::Shutdown);
            }
            if self.worker.partitions.version() != self.version {
                return Ok(SessionEnd::Repartitioned);
            }
            self.report_lag();
            if let Some(detail) = self.silent_source() {
                return Ok(self.restart("source_silent", detail));
            }
            let failure = match self.replicate_batch() {
                Ok(BatchEnd::Committed { ready }) => {
                    abort_backoff.reset();
                    self.source_watch.turned(ready);
                    self.last_busy = Instant::now();
                    continue;
                }
                Ok(BatchEnd::Throttled) => {
                    self.source_watch.turned(true);
                    self.last_busy = Instant::now();
                    continue;
                }
                Ok(BatchEnd::Idle) => {
                    self.source_watch.turned(false);
                    if let Some(parked) = self.parked() {
                        return Ok(SessionEnd::Parked {
                            parked,
                            version: self.version,
                        });
                    }
                    continue;
                }
                Err(failure) => self.producer.refusal_behind(failure),
            };
            match failure.disposition {
                Disposition::AbortBatch | Disposition::Retriable => {
                    // No retry follows: the session's end aborts the
                    // transaction while the lane is still this instance's.
                    if self.worker.tenure.stop.load(Ordering::Relaxed) {
                        tracing::warn!(%lane, detail = %failure.detail, "the lane's last batch failed while it was stopping; nothing of it is committed");
                        return Ok(SessionEnd::Shutdown);
                    }
                    m::lane_transaction_aborted(lane);
                    let wait = abort_backoff.next();
                    // An abort can bump the producer epoch (librdkafka does
                    // after timed-out deliveries, KIP-360), and the broker
                    // may take a thawed zombie's bump for a retry of the new
                    // owner's: check ownership first (invariant 4).
                    if !self.worker.owned() {
                        return Ok(SessionEnd::Moved);
                    }
                    tracing::warn!(%lane, detail = %failure.detail, retry_in_ms = wait.as_millis() as u64, "aborting transaction; the batch will be re-read from the source");
                    if let Err(e) = self.producer.abort() {
                        // Whatever the abort reveals (often that we were
                        // fenced), the next session first checks who owns
                        // the lane (invariant 4).
                        return Ok(self.restart(
                            "abort_failed",
                            format!("{}; abort_transaction: {e}", failure.detail),
                        ));
                    }
                    self.forget_batch();
                    self.assign()?;
                    self.source_watch.held(Instant::now());
                    self.last_busy = Instant::now();
                    self.worker.sleep_unless_stopped(wait);
                }
                Disposition::RestartSession => {
                    return Ok(self.restart("producer_state_unknown", failure.detail))
                }
                // A takeover or our own timed-out transaction: the next
                // session's ownership check tells them apart (invariant 4).
                Disposition::Fenced => return Ok(self.restart("fenced", failure.detail)),
                Disposition::LaneLost => return Ok(self.restart("lane_lost", failure.detail)),
                Disposition::Fatal => {
                    let rejected = failure.slot.and_then(|slot| match self.slots.get(slot) {
                        Some(&Slot::Copy {
                            cursor,
                            source_offset,
                        }) => Some((cursor, source_offset)),
                        _ => None,
                    });
                    if let Some(error) = self.partition_error.take() {
                        return Err(error);
                    }
                    return Err(match rejected {
                        Some((cursor, source_offset)) => WorkerError::TargetRejected {
                            source_partition: self.cursors[cursor].partition.clone(),
                            source_offset,
                            reason: failure.detail,
                        },
                        None => self.internal_record_failure(failure),
                    });
                }
            }
        }
    }

    /// The lane's fatal error for `failure`, naming the internal topic
    /// when the target refused one of the lane's progress or position
    /// records: every partition of the lane needs them.
    fn internal_record_failure(&self, failure: TxnFailure) -> WorkerError {
        let topics = &self.worker.settings.internal_topics;
        let (kind, topic, cursor) = match failure.slot.and_then(|slot| self.slots.get(slot)) {
            Some(&Slot::Progress { cursor }) => ("progress", &topics.progress, cursor),
            Some(&Slot::Position { cursor }) => ("position", &topics.position, cursor),
            _ => return self.worker.fatal(failure.detail),
        };
        // The run ends: the session's end aborts the transaction.
        self.worker.fatal(format!(
            "the target refused the {kind} record of {} for good, in {topic} [{}]: {}. Check that topic's max.message.bytes (at least 1 MB) and eosmirror's Write permission on it; the lane's copies were not committed",
            self.cursors[cursor].partition,
            self.worker.lane.internal_partition(),
            failure.detail
        ))
    }

    fn restart(&self, reason: &'static str, detail: String) -> SessionEnd {
        SessionEnd::Restart {
            reason,
            detail,
            committed_any: self.committed_any,
        }
    }

    /// Points the source consumer at every partition's committed position.
    fn assign(&self) -> Result<(), WorkerError> {
        let mut assignment = TopicPartitionList::with_capacity(self.cursors.len());
        for c in &self.cursors {
            assignment
                .add_partition_offset(
                    &c.partition.topic,
                    c.partition.partition,
                    Offset::Offset(c.committed.next_source_offset),
                )
                .map_err(|e| self.worker.fatal(format!("assigning {}: {e}", c.partition)))?;
        }
        self.consumer.assign(&assignment).map_err(|e| {
            self.worker
                .fatal(format!("assigning the source partitions: {e}"))
        })
    }

    /// Commits this session's claim on the lane (invariant 4): a position
    /// record per partition at its resumed position, with no runs, carrying
    /// this process's instance id. Claims go to the position topic only,
    /// except for a partition whose copy starts here: its claim also goes
    /// to the progress topic, marked as the history's beginning, so that a
    /// history read from the start is known complete, and a topic started
    /// over switches lineage there before any position of the new lineage
    /// exists (what translation relies on).
    fn claim(&mut self) -> Result<(), TxnFailure> {
        let settings = &*self.worker.settings;
        let partition = self.worker.lane.internal_partition();
        self.producer.begin()?;
        let mut encoded = Vec::with_capacity(self.cursors.len());
        for (cursor, c) in self.cursors.iter().enumerate() {
            let record = ProgressRecord {
                source: c.partition.clone(),
                lineage: c.lineage.clone(),
                runs: Vec::new(),
                next_source_offset: c.committed.next_source_offset,
                copies_end: c.committed.copies_end,
                next_target_offset: c.committed.next_target_offset,
                instance: settings.instance,
                committed_at_ms: crate::clock::unix_millis(),
                begins_history: c.starts_history,
            };
            encoded.push((cursor, ProgressRecord::key(&c.partition), record.encode()));
        }
        self.slots.clear();
        let topics = &settings.internal_topics;
        for (cursor, key, value) in &encoded {
            let mut targets = vec![(&topics.position, Slot::Position { cursor: *cursor })];
            if self.cursors[*cursor].starts_history {
                targets.push((&topics.progress, Slot::Progress { cursor: *cursor }));
            }
            for (topic, slot) in targets {
                self.send_internal(topic, partition, slot, key, value)?;
            }
        }
        self.fence()?;
        let reports = self.producer.commit()?;
        for report in reports {
            if let (Some(&Slot::Position { cursor }), Ok(offset)) =
                (self.slots.get(report.slot), &report.outcome)
            {
                self.cursors[cursor].committed.position_offset = *offset;
                self.note_position(*offset);
            }
        }
        self.slots.clear();
        Ok(())
    }

    /// Adds the fleet group's offset of the lane to the open transaction
    /// (invariant 4): the commit fails if this member's generation is stale.
    pub(super) fn fence(&self) -> Result<(), TxnFailure> {
        let membership = &self.worker.tenure.membership;
        let lost = |detail: String| TxnFailure {
            disposition: Disposition::LaneLost,
            detail,
            slot: None,
        };
        let offsets = membership
            .fence_offsets(self.worker.lane, self.worker.position_end())
            .map_err(|e| TxnFailure {
                disposition: Disposition::Fatal,
                detail: format!("the fleet group's offsets: {e}"),
                slot: None,
            })?;
        let group = membership
            .group_metadata()
            .ok_or_else(|| lost("this instance is not a member of the fleet's group".into()))?;
        self.producer.send_fence(&offsets, &group)
    }

    /// Remembers that this process wrote the lane's position partition up
    /// to `offset`.
    pub(super) fn note_position(&self, offset: i64) {
        let known = self.worker.known_position.get().unwrap_or(-1);
        self.worker.known_position.set(Some(known.max(offset)));
    }

    /// Publishes each partition's lag (source high watermark as last seen
    /// by the consumer, no request) every few seconds.
    fn report_lag(&mut self) {
        if self
            .last_lag_report
            .is_some_and(|t| t.elapsed() < LAG_INTERVAL)
        {
            return;
        }
        self.last_lag_report = Some(Instant::now());
        // `None` until a watermark is known: a consumer that fetched
        // nothing yet says nothing about lag (0 would read "caught up").
        let mut lane_max = None;
        for c in &self.cursors {
            if let Some(high) = cached_high_watermark(&self.consumer, &c.partition) {
                let lag = (high - c.committed.next_source_offset).max(0);
                lane_max = Some(lane_max.unwrap_or(0).max(lag));
                m::lag(&c.partition, lag);
                self.worker.health.copy_progress.position(
                    self.worker.lane,
                    &c.partition,
                    c.committed.next_source_offset,
                    high,
                );
            }
        }
        if let Some(lane_max) = lane_max {
            m::lane_max_lag(self.worker.lane, lane_max);
        }
    }

    /// Whether the source consumer stopped delivering although committed
    /// records wait past its positions (see `source_watch.rs`); the detail
    /// names the partition if so.
    fn silent_source(&mut self) -> Option<String> {
        let now = Instant::now();
        if !self.source_watch.due(now) {
            return None;
        }
        let positions = self.consumer_positions(self.consumer.position().ok().as_ref());
        let before = self.source_watch.restart(now, positions.clone())?;
        let partitions: Vec<SourcePartition> =
            self.cursors.iter().map(|c| c.partition.clone()).collect();
        let ends = match watermarks::fetch_all(&self.consumer, &partitions, METADATA_TIMEOUT) {
            Ok(ends) => ends,
            // An outage librdkafka is still riding out, not a silent consumer.
            Err(detail) => {
                tracing::debug!(lane = %self.worker.lane, %detail, "asking the source for its ends after a minute");
                return None;
            }
        };
        let committed_ends: Vec<Option<i64>> = partitions
            .iter()
            .map(|p| ends.get(p).map(|&(_, high)| high))
            .collect();
        let stuck = source_watch::stuck(&before, &positions, &committed_ends)?;
        Some(format!(
            "{}: the source consumer delivered nothing of it for {} s although committed records wait at offsets {}..{}, while the consumer kept up with the lane's other partitions; a new session reads with a new consumer",
            partitions[stuck],
            SILENCE_LIMIT.as_secs(),
            positions[stuck],
            committed_ends[stuck].unwrap_or_default()
        ))
    }

    /// Where the lane parks, once it has had nothing to copy for
    /// `park_after` (no transaction is open between batches): each
    /// partition at its consumer's position, past any transaction marker,
    /// or at its committed position where the consumer has none yet.
    fn parked(&self) -> Option<Parked> {
        let park_after = self.worker.settings.park_after?;
        if self.last_busy.elapsed() < park_after {
            return None;
        }
        let fetched = self.consumer.position().ok()?;
        let positions = self
            .consumer_positions(Some(&fetched))
            .into_iter()
            .zip(&self.cursors)
            .map(|(position, c)| position.max(c.committed.next_source_offset))
            .collect();
        Some(Parked {
            partitions: self.cursors.iter().map(|c| c.partition.clone()).collect(),
            positions,
        })
    }

    /// Per cursor, the position `fetched` (the consumer's `position()`)
    /// gives it: past transaction markers and aborted records, which
    /// librdkafka skips; the committed position where it gives none.
    pub(super) fn consumer_positions(&self, fetched: Option<&TopicPartitionList>) -> Vec<i64> {
        let mut positions: Vec<i64> = self
            .cursors
            .iter()
            .map(|c| c.committed.next_source_offset)
            .collect();
        for element in fetched.into_iter().flat_map(|list| list.elements()) {
            let cursor = self
                .index
                .get(element.topic())
                .and_then(|partitions| partitions.get(&element.partition()));
            if let (Some(&cursor), Offset::Offset(offset)) = (cursor, element.offset()) {
                positions[cursor] = offset;
            }
        }
        positions
    }
}

/// A partition's high watermark as last seen in the consumer's fetch
/// responses: librdkafka's cached value, no request (a lane may have
/// thousands of partitions). `None` until a fetch response arrived.
fn cached_high_watermark(consumer: &SourceConsumer, partition: &SourcePartition) -> Option<i64> {
    let topic = CString::new(partition.topic.as_str()).ok()?;
    let (mut low, mut high) = (-1i64, -1i64);
    // SAFETY: the handle is valid while `consumer` lives, `topic` is a
    // NUL-terminated string that outlives the call, and the out parameters
    // are plain integers.
    let error = unsafe {
        rd::rd_kafka_get_watermark_offsets(
            consumer.client().native_ptr(),
            topic.as_ptr(),
            partition.partition,
            &mut low,
            &mut high,
        )
    };
    (error == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0).then_some(high)
}

//! One worker replicates one source partition, exactly once.
//!
//! # The invariant this file keeps
//!
//! A source record counts as replicated if and only if its copy was written
//! to the target inside a **committed** transaction together with the
//! progress record that names it. Hence:
//!
//! 1. The resume position is read from the target (committed data only) at
//!    the start of every *session* — after `init_transactions`, which fences
//!    any older producer with our transactional id and resolves its open
//!    transaction. The local cache only says where to start looking.
//! 2. A batch's data, its progress record and its position record are in
//!    one transaction. If anything fails before the commit is confirmed, the
//!    transaction is aborted (or its outcome is unknown and a new session
//!    re-reads the position): the source is re-read from the last committed
//!    position, so nothing is lost and nothing is written twice.
//! 3. A partition's replicated position only moves forward (asserted).
//! 4. Ownership changes hands only forward. Every session commits a *claim*
//!    (a position record carrying this process's instance id) right after
//!    its `init_transactions`, and before any later session of this process
//!    re-initialises, the worker reads the partition's latest position
//!    record: if another instance wrote one after ours, that instance owns
//!    the partition and this worker stops. librdkafka reports a takeover and
//!    our own timed-out transaction as the same `_FENCED` error; the claim
//!    tells them apart, whatever error ended the session. A zombie that
//!    thaws after the new owner's claim therefore never fences it; one that
//!    thaws in the instant between the new owner's `init_transactions` and
//!    its claim can fence it once, and the owner that sees the other's newer
//!    claim stops: at most one extra fence, never a loop.
//!
//! All calls here block: a worker runs on a thread of its own, so the async
//! runtime (metrics endpoint, signals, supervisor) never stalls.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use eosmirror_state::{Checkpoint, SourcePartition, StateStore};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, Timestamp, TopicPartitionList};

use super::delivery::{DeliveryLog, Sent};
use super::errors::{classify, classify_code, Disposition};
use super::failure::WorkerError;
use super::limits::{BatchLimits, BufferBudget};
use super::progress::{runs_from_deliveries, InternalTopics, ProgressRecord, PROGRESS_PARTITION};
use super::resume::{read_resume_position, target_has_committed_records, ResumePosition};
use super::throttle::Throttle;
use crate::metrics as m;

/// What to do when source records disappear before they are copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GapPolicy {
    /// Stop with an error naming the lost offsets (default).
    Fail,
    /// Continue after the gap; log it and count it in metrics.
    Skip,
}

/// Settings shared by all workers of one run.
#[derive(Debug)]
pub struct WorkerSettings {
    /// Source consumer settings (from `--consumer.config`, translated).
    pub source: ClientConfig,
    /// Target producer settings (from `--producer.config`, translated),
    /// without a transactional id.
    pub target: ClientConfig,
    /// Connection settings only, for reading positions back from the target.
    pub target_reader: ClientConfig,
    /// Names of the progress and position topics.
    pub internal_topics: InternalTopics,
    /// `<prefix>.<alias>`; a worker appends `.<topic>.<partition>`.
    pub transactional_id_base: String,
    pub limits: BatchLimits,
    pub transaction_timeout: Duration,
    pub on_source_gap: GapPolicy,
    /// Copy into target partitions that hold records eosmirror has no
    /// position for (appending after them) instead of stopping.
    pub allow_nonempty_target: bool,
    /// Random id of this process, written into every progress record.
    pub instance: u64,
    /// Bounds the source read rate of all workers together.
    pub throttle: Arc<Throttle>,
}

/// How long a blocking Kafka call may take before we treat its outcome as
/// unknown: a little more than a transaction can live.
fn call_timeout(settings: &WorkerSettings) -> Duration {
    settings.transaction_timeout + Duration::from_secs(10)
}

/// Why a session ended.
enum SessionEnd {
    /// Shutdown was requested; the open transaction (if any) is committed.
    Shutdown,
    /// Start a new session: new producer, position re-read from the target.
    Restart {
        /// Short label for the metric and log.
        reason: &'static str,
        detail: String,
        /// Whether the session committed a batch: a session that made
        /// progress resets the restart backoff.
        committed_any: bool,
    },
}

impl SessionEnd {
    /// A restart of a session that committed nothing.
    fn restart(reason: &'static str, detail: impl Into<String>) -> SessionEnd {
        SessionEnd::Restart {
            reason,
            detail: detail.into(),
            committed_any: false,
        }
    }
}

/// Bounds of the wait between two sessions of a worker.
const SESSION_BACKOFF_MIN: Duration = Duration::from_millis(100);
const SESSION_BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Bounds of the wait after an aborted batch before it is read again.
const ABORT_BACKOFF_MIN: Duration = Duration::from_millis(200);
const ABORT_BACKOFF_MAX: Duration = Duration::from_secs(10);

/// An exponential backoff between `min` and `max`, reset after success.
#[derive(Debug)]
struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    fn new(min: Duration, max: Duration) -> Backoff {
        Backoff {
            min,
            max,
            next: min,
        }
    }

    /// The wait before the next attempt; each call doubles the one after.
    fn next(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        wait
    }

    fn reset(&mut self) {
        self.next = self.min;
    }
}

/// One source partition's replication loop.
pub struct Worker {
    partition: SourcePartition,
    settings: Arc<WorkerSettings>,
    state: Arc<StateStore>,
    shutdown: Arc<AtomicBool>,
    /// This worker's share of the memory bound.
    budget: BufferBudget,
    /// Position-topic offset of the latest position record this process has
    /// read or committed for the partition (-1: there was none); `None`
    /// until a session has read it. A foreign record beyond it is a takeover.
    known_position: Cell<Option<i64>>,
}

impl Worker {
    pub fn new(
        partition: SourcePartition,
        settings: Arc<WorkerSettings>,
        state: Arc<StateStore>,
        shutdown: Arc<AtomicBool>,
        budget: BufferBudget,
    ) -> Worker {
        Worker {
            partition,
            settings,
            state,
            shutdown,
            budget,
            known_position: Cell::new(None),
        }
    }

    /// Runs sessions until shutdown or a failure that retrying cannot fix.
    pub fn run(self) -> Result<(), WorkerError> {
        let mut backoff = Backoff::new(SESSION_BACKOFF_MIN, SESSION_BACKOFF_MAX);
        loop {
            if self.shutdown.load(Ordering::Relaxed) {
                return Ok(());
            }
            // Invariant 4: no session of ours re-initialises (and so fences)
            // a partition another instance has claimed since.
            if !self.still_owned(&mut backoff)? {
                return Ok(());
            }
            match self.session()? {
                SessionEnd::Shutdown => return Ok(()),
                SessionEnd::Restart {
                    reason,
                    detail,
                    committed_any,
                } => {
                    if committed_any {
                        backoff.reset();
                    }
                    m::worker_restarted(&self.partition, reason);
                    let wait = backoff.next();
                    tracing::warn!(partition = %self.partition, reason, %detail, retry_in_ms = wait.as_millis() as u64, "restarting worker session; position will be re-read from the target");
                    self.sleep_unless_shutdown(wait);
                }
            }
        }
    }

    /// Whether this worker may start a new session: true before its first
    /// session, and afterwards while no other instance has written a
    /// position record for the partition beyond the latest one this process
    /// knows. Retries (with `backoff`) until the position topic can be read;
    /// false only when shutdown is requested meanwhile.
    fn still_owned(&self, backoff: &mut Backoff) -> Result<bool, WorkerError> {
        let Some(known) = self.known_position.get() else {
            return Ok(true);
        };
        loop {
            if self.shutdown.load(Ordering::Relaxed) {
                return Ok(false);
            }
            match self.claimed_by_another(known) {
                Ok(true) => return Err(self.taken_over()),
                Ok(false) => return Ok(true),
                Err(e) => {
                    m::worker_restarted(&self.partition, "ownership_check");
                    let wait = backoff.next();
                    tracing::warn!(partition = %self.partition, error = %e, retry_in_ms = wait.as_millis() as u64, "cannot read the partition's latest position to confirm it was not taken over; retrying before re-initialising");
                    self.sleep_unless_shutdown(wait);
                }
            }
        }
    }

    /// Whether another instance wrote a position record for the partition
    /// after the one at offset `known`.
    fn claimed_by_another(&self, known: i64) -> Result<bool, super::resume::ResumeError> {
        let latest = read_resume_position(
            &self.settings.target_reader,
            &self.settings.internal_topics.position,
            &self.partition,
            Some(known.max(0)),
            call_timeout(&self.settings),
        )?;
        Ok(latest.is_some_and(|latest| {
            latest.position_offset > known && latest.record.instance != self.settings.instance
        }))
    }

    fn taken_over(&self) -> WorkerError {
        tracing::error!(partition = %self.partition, "another instance claimed this partition after this one's last commit; stopping it without touching the partition again (re-initialising or aborting would fence the new owner)");
        WorkerError::Fenced {
            source_partition: self.partition.clone(),
        }
    }

    fn sleep_unless_shutdown(&self, duration: Duration) {
        let until = Instant::now() + duration;
        while Instant::now() < until && !self.shutdown.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn fatal(&self, message: impl Into<String>) -> WorkerError {
        WorkerError::Fatal {
            source_partition: self.partition.clone(),
            message: message.into(),
        }
    }

    fn transactional_id(&self) -> String {
        format!(
            "{}.{}.{}",
            self.settings.transactional_id_base, self.partition.topic, self.partition.partition
        )
    }

    /// One producer lifetime: init, resume, then batches until something
    /// makes the producer's state uncertain.
    fn session(&self) -> Result<SessionEnd, WorkerError> {
        let settings = &*self.settings;
        let timeout = call_timeout(settings);
        let producer: BaseProducer<DeliveryLog> = settings
            .target
            .clone()
            .set("transactional.id", self.transactional_id())
            .set(
                "transaction.timeout.ms",
                settings.transaction_timeout.as_millis().to_string(),
            )
            .set(
                "queue.buffering.max.kbytes",
                self.budget.producer_queue_kbytes.to_string(),
            )
            .create_with_context(DeliveryLog::default())
            .map_err(|e| self.fatal(format!("creating the target producer: {e}")))?;
        if let Err(e) = producer.init_transactions(timeout) {
            return match classify(&e) {
                Disposition::Fatal => Err(self.fatal(format!("init_transactions: {e}"))),
                _ => Ok(SessionEnd::restart("init_transactions", e.to_string())),
            };
        }

        let resume = match self.resume_position() {
            Ok(r) => r,
            Err(ResumeFailure::Restart(detail)) => {
                return Ok(SessionEnd::restart("resume_read", detail))
            }
            Err(ResumeFailure::Fatal(e)) => return Err(e),
        };
        self.known_position
            .set(Some(resume.as_ref().map_or(-1, |r| r.position_offset)));

        let consumer: BaseConsumer = settings
            .source
            .clone()
            .set(
                "queued.max.messages.kbytes",
                self.budget.consumer_prefetch_kbytes.to_string(),
            )
            .create()
            .map_err(|e| self.fatal(format!("creating the source consumer: {e}")))?;
        let (low, end) = match consumer.fetch_watermarks(
            &self.partition.topic,
            self.partition.partition,
            timeout,
        ) {
            Ok(w) => w,
            Err(e) => return Ok(SessionEnd::restart("source_watermarks", e.to_string())),
        };
        if resume.is_none() && !settings.allow_nonempty_target {
            match target_has_committed_records(
                &settings.target_reader,
                &self.partition.topic,
                self.partition.partition,
                timeout,
            ) {
                Ok(false) => {}
                Ok(true) => {
                    return Err(WorkerError::TargetNotEmpty {
                        source_partition: self.partition.clone(),
                        position_topic: settings.internal_topics.position.clone(),
                    })
                }
                Err(e) => return Ok(SessionEnd::restart("target_check", e.to_string())),
            }
        }
        let mut committed = match &resume {
            Some(r) => Committed::from(r),
            None => Committed::fresh(low),
        };
        if committed.next_source_offset > end {
            return Err(WorkerError::SourceRewound {
                source_partition: self.partition.clone(),
                source_end: end,
                next_source_offset: committed.next_source_offset,
            });
        }
        if low > committed.next_source_offset {
            self.source_gap(committed.next_source_offset, low)?;
            committed.next_source_offset = low;
        }
        tracing::info!(partition = %self.partition, next_source_offset = committed.next_source_offset, next_target_offset = committed.next_target_offset, source_end = end, "worker session started");
        self.assign(&consumer, committed.next_source_offset)?;

        let mut session = Session {
            worker: self,
            producer,
            consumer,
            committed,
            committed_any: false,
            last_lag_check: None,
            last_source_warning: Cell::new(None),
        };
        session.run()
    }

    /// Reads the position from the target and reconciles the local cache.
    fn resume_position(&self) -> Result<Option<ResumePosition>, ResumeFailure> {
        let cached = self
            .state
            .checkpoint(&self.partition)
            .map_err(|e| ResumeFailure::Fatal(self.fatal(format!("local state: {e}"))))?;
        let position = read_resume_position(
            &self.settings.target_reader,
            &self.settings.internal_topics.position,
            &self.partition,
            cached.as_ref().map(|c| c.progress_offset),
            call_timeout(&self.settings),
        )
        .map_err(|e| ResumeFailure::Restart(e.to_string()))?;
        if let Some(cached) = cached {
            let target_next = position.as_ref().map(|p| p.record.next_source_offset);
            if target_next.is_some_and(|t| t > cached.next_source_offset) {
                // The cache missed commits (another instance, or a lost
                // write): forget its runs so they never read as a gap.
                self.state
                    .reset_partition(&self.partition)
                    .map_err(|e| ResumeFailure::Fatal(self.fatal(format!("local state: {e}"))))?;
            }
            if target_next.is_none_or(|t| t < cached.next_source_offset) {
                return Err(ResumeFailure::Fatal(WorkerError::TargetLostData {
                    source_partition: self.partition.clone(),
                    cached_next: cached.next_source_offset,
                    target_next: target_next
                        .map_or("no position at all".to_string(), |t| t.to_string()),
                    position_topic: self.settings.internal_topics.position.clone(),
                }));
            }
        }
        Ok(position)
    }

    fn source_gap(&self, first: i64, end_exclusive: i64) -> Result<(), WorkerError> {
        match self.settings.on_source_gap {
            GapPolicy::Fail => Err(WorkerError::SourceGap {
                source_partition: self.partition.clone(),
                first,
                end_exclusive,
            }),
            GapPolicy::Skip => {
                tracing::error!(partition = %self.partition, first, end_exclusive, "source records deleted before they were copied; skipping them as --on.source.gap=skip allows");
                m::source_gap_skipped(&self.partition, (end_exclusive - first) as u64);
                Ok(())
            }
        }
    }

    fn assign(&self, consumer: &BaseConsumer, offset: i64) -> Result<(), WorkerError> {
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(
                &self.partition.topic,
                self.partition.partition,
                Offset::Offset(offset),
            )
            .and_then(|()| consumer.assign(&assignment))
            .map_err(|e| self.fatal(format!("assigning the source partition: {e}")))
    }
}

enum ResumeFailure {
    Restart(String),
    Fatal(WorkerError),
}

/// The last committed position of the partition, as this session knows it.
#[derive(Debug, Clone, Copy)]
struct Committed {
    next_source_offset: i64,
    next_target_offset: i64,
    position_offset: i64,
}

impl Committed {
    fn from(r: &ResumePosition) -> Committed {
        Committed {
            next_source_offset: r.record.next_source_offset,
            next_target_offset: r.record.next_target_offset,
            position_offset: r.position_offset,
        }
    }

    fn fresh(source_start: i64) -> Committed {
        Committed {
            next_source_offset: source_start,
            next_target_offset: 0,
            position_offset: -1,
        }
    }
}

/// Outcome of one attempt at a batch.
enum BatchEnd {
    Idle,
    Committed,
}

/// A failed batch, already classified.
struct BatchError {
    disposition: Disposition,
    detail: String,
    /// Source offset of the record the target rejected, if that is the cause.
    source_offset: Option<i64>,
}

impl BatchError {
    fn from_kafka(context: &str, e: &KafkaError) -> BatchError {
        BatchError {
            disposition: classify(e),
            detail: format!("{context}: {e}"),
            source_offset: None,
        }
    }
}

struct Session<'w> {
    worker: &'w Worker,
    producer: BaseProducer<DeliveryLog>,
    consumer: BaseConsumer,
    committed: Committed,
    /// Whether this session committed a batch.
    committed_any: bool,
    last_lag_check: Option<Instant>,
    last_source_warning: Cell<Option<Instant>>,
}

impl Session<'_> {
    fn run(&mut self) -> Result<SessionEnd, WorkerError> {
        let partition = &self.worker.partition;
        if let Err(failure) = self.claim() {
            return match failure.disposition {
                Disposition::Fatal => Err(self.worker.fatal(failure.detail)),
                _ => Ok(SessionEnd::restart("claim", failure.detail)),
            };
        }
        let mut abort_backoff = Backoff::new(ABORT_BACKOFF_MIN, ABORT_BACKOFF_MAX);
        loop {
            if self.worker.shutdown.load(Ordering::Relaxed) {
                return Ok(SessionEnd::Shutdown);
            }
            self.report_lag();
            let failure = match self.replicate_batch() {
                Ok(BatchEnd::Committed) => {
                    abort_backoff.reset();
                    continue;
                }
                Ok(BatchEnd::Idle) => continue,
                Err(failure) => failure,
            };
            match failure.disposition {
                Disposition::AbortBatch | Disposition::Retriable => {
                    m::transaction_aborted(partition);
                    let wait = abort_backoff.next();
                    // An abort can bump the producer epoch (librdkafka does
                    // after timed-out deliveries, KIP-360), and the broker
                    // may take a thawed zombie's bump for a retry of the new
                    // owner's: check ownership first (invariant 4).
                    let known = self.worker.known_position.get().unwrap_or(-1);
                    match self.worker.claimed_by_another(known) {
                        Ok(false) => {}
                        Ok(true) => return Err(self.worker.taken_over()),
                        Err(e) => {
                            return Ok(self.restart(
                                "ownership_check",
                                format!("{}; then reading the position: {e}", failure.detail),
                            ))
                        }
                    }
                    tracing::warn!(%partition, detail = %failure.detail, next_source_offset = self.committed.next_source_offset, retry_in_ms = wait.as_millis() as u64, "aborting transaction; the batch will be re-read from the source");
                    if let Err(e) = self
                        .producer
                        .abort_transaction(call_timeout(&self.worker.settings))
                    {
                        // Whatever the abort reveals (often that we were
                        // fenced), the next session first checks who owns
                        // the partition (invariant 4).
                        return Ok(self.restart(
                            "abort_failed",
                            format!("{}; abort_transaction: {e}", failure.detail),
                        ));
                    }
                    self.producer.poll(Duration::ZERO);
                    self.producer.context().drain();
                    self.worker
                        .assign(&self.consumer, self.committed.next_source_offset)?;
                    self.worker.sleep_unless_shutdown(wait);
                }
                Disposition::RestartSession => {
                    return Ok(self.restart("producer_state_unknown", failure.detail))
                }
                // A takeover or our own timed-out transaction: the next
                // session's ownership check tells them apart (invariant 4).
                Disposition::Fenced => return Ok(self.restart("fenced", failure.detail)),
                Disposition::Fatal => {
                    return Err(match failure.source_offset {
                        Some(source_offset) => WorkerError::TargetRejected {
                            source_partition: partition.clone(),
                            source_offset,
                            reason: failure.detail,
                        },
                        None => self.worker.fatal(failure.detail),
                    })
                }
            }
        }
    }

    fn restart(&self, reason: &'static str, detail: String) -> SessionEnd {
        SessionEnd::Restart {
            reason,
            detail,
            committed_any: self.committed_any,
        }
    }

    /// Commits this session's claim on the partition (invariant 4): a
    /// position record at the resumed position, with no runs, carrying this
    /// process's instance id. It goes to the position topic only; the
    /// progress topic's history is not changed by a claim.
    fn claim(&mut self) -> Result<(), BatchError> {
        let settings = &*self.worker.settings;
        let record = ProgressRecord {
            source: self.worker.partition.clone(),
            runs: Vec::new(),
            next_source_offset: self.committed.next_source_offset,
            next_target_offset: self.committed.next_target_offset,
            instance: settings.instance,
            committed_at_ms: now_ms(),
        };
        self.producer
            .begin_transaction()
            .map_err(|e| BatchError::from_kafka("begin_transaction (claim)", &e))?;
        self.send(
            BaseRecord::with_opaque_to(
                &settings.internal_topics.position,
                Sent::Position.to_opaque(),
            )
            .partition(PROGRESS_PARTITION)
            .key(ProgressRecord::key(&record.source).as_slice())
            .payload(record.encode().as_slice()),
        )?;
        self.commit(call_timeout(settings))?;
        if let Some(position_offset) = self.delivered_position_offset(1) {
            self.committed.position_offset = position_offset;
            self.worker.known_position.set(Some(position_offset));
        }
        Ok(())
    }

    /// Lag = source end (last stable offset) − replicated position, refreshed
    /// every few seconds.
    fn report_lag(&mut self) {
        if self
            .last_lag_check
            .is_some_and(|t| t.elapsed() < Duration::from_secs(5))
        {
            return;
        }
        self.last_lag_check = Some(Instant::now());
        let p = &self.worker.partition;
        if let Ok((_, end)) =
            self.consumer
                .fetch_watermarks(&p.topic, p.partition, Duration::from_secs(5))
        {
            m::lag(p, (end - self.committed.next_source_offset).max(0));
        }
    }

    /// Polls the source, dealing with the events that are not records.
    /// Returns `Ok(None)` when `wait` passes without a record.
    fn next_record(&self, wait: Duration) -> Result<Option<BorrowedMessage<'_>>, BatchError> {
        match self.consumer.poll(wait) {
            None => Ok(None),
            Some(Ok(message)) => Ok(Some(message)),
            // With auto.offset.reset=error, librdkafka reports a fetch below
            // the log start as AutoOffsetReset (not OffsetOutOfRange) and
            // stops fetching the partition: only a new session (which
            // compares the position with the low watermark) can go on.
            Some(Err(KafkaError::MessageConsumption(
                RDKafkaErrorCode::OffsetOutOfRange | RDKafkaErrorCode::AutoOffsetReset,
            ))) => {
                Err(BatchError {
                    disposition: Disposition::RestartSession,
                    detail: "source offset out of range (records deleted at the source?); re-checking the source range".into(),
                    source_offset: None,
                })
            }
            Some(Err(e)) => {
                // librdkafka retries by itself (reconnects, leader changes);
                // a persistent problem such as a deleted source topic is
                // still reported, at most every 30 s.
                let quiet = self
                    .last_source_warning
                    .get()
                    .is_some_and(|t| t.elapsed() < Duration::from_secs(30));
                if !quiet {
                    self.last_source_warning.set(Some(Instant::now()));
                    tracing::warn!(partition = %self.worker.partition, error = %e, "source consumer error; retrying");
                }
                Ok(None)
            }
        }
    }

    /// Copies one batch in one transaction. On success the new position is
    /// committed on the target and cached locally.
    fn replicate_batch(&mut self) -> Result<BatchEnd, BatchError> {
        let settings = &*self.worker.settings;
        let limits = settings.limits;
        let partition = &self.worker.partition;
        let throttle = &settings.throttle;
        // Throttled: no transaction is open yet, so waiting costs nothing
        // but time (bounded, so the session loop still checks lag).
        if !throttle.wait_ready(limits.idle_poll, &self.worker.shutdown) {
            return Ok(BatchEnd::Idle);
        }
        let Some(first) = self.next_record(limits.idle_poll)? else {
            return Ok(BatchEnd::Idle);
        };
        let first_offset = first.offset();
        // Invariant: a session consumes forward from the committed position.
        if first_offset < self.committed.next_source_offset {
            return Err(BatchError {
                disposition: Disposition::Fatal,
                detail: format!(
                    "source returned offset {first_offset} below the committed position {}",
                    self.committed.next_source_offset
                ),
                source_offset: None,
            });
        }
        // Offsets the consumer skips past the committed position are
        // transaction markers, aborted or compacted-away records. Deleted
        // ones surface as AutoOffsetReset instead (see `next_record`).
        self.producer
            .begin_transaction()
            .map_err(|e| BatchError::from_kafka("begin_transaction", &e))?;

        let started = Instant::now();
        let mut sent = 0usize;
        let mut bytes = 0usize;
        let mut next_source_offset;
        let mut message = first;
        loop {
            let size = record_size(&message);
            // Paid after reading: a record larger than the throttle's
            // budget leaves a debt for the next reads to wait out.
            throttle.charge(size as u64, 1);
            bytes += size;
            next_source_offset = message.offset() + 1;
            self.send_copy(&message)?;
            sent += 1;
            if sent >= limits.max_records
                || bytes >= limits.max_bytes
                || self.worker.shutdown.load(Ordering::Relaxed)
            {
                break;
            }
            let Some(remaining) = limits.commit_interval.checked_sub(started.elapsed()) else {
                break;
            };
            // Throttled inside a transaction: wait at most until it would
            // end anyway, then commit what it has.
            if !throttle.wait_ready(remaining, &self.worker.shutdown) {
                break;
            }
            let Some(remaining) = limits.commit_interval.checked_sub(started.elapsed()) else {
                break;
            };
            match self.next_record(remaining)? {
                Some(m) => message = m,
                None => break,
            }
        }

        let timeout = call_timeout(settings);
        self.producer
            .flush(timeout)
            .map_err(|e| BatchError::from_kafka("flushing copies", &e))?;
        let mut copies = Vec::with_capacity(sent);
        for delivery in self.producer.context().drain() {
            let Sent::Data { source_offset } = delivery.sent else {
                unreachable!("progress records are sent after the copies are flushed");
            };
            match delivery.outcome {
                Ok(target_offset) => copies.push((source_offset, target_offset)),
                Err(e) => {
                    let disposition = match e.rdkafka_error_code() {
                        Some(code) => classify_code(code),
                        None => classify(&e),
                    };
                    return Err(BatchError {
                        disposition,
                        detail: e.to_string(),
                        source_offset: Some(source_offset),
                    });
                }
            }
        }
        // Every record sent gets exactly one delivery outcome.
        assert_eq!(copies.len(), sent, "{partition}: delivery reports lost");
        copies.sort_unstable_by_key(|&(source, _)| source);
        let runs = runs_from_deliveries(&copies).ok_or_else(|| BatchError {
            disposition: Disposition::Fatal,
            detail: "order violated".into(),
            source_offset: None,
        })?;
        if copies[0].1 < self.committed.next_target_offset {
            return Err(BatchError {
                disposition: Disposition::Fatal,
                detail: format!(
                    "copies landed at target offset {} below the committed target position {}: another writer or a truncated target",
                    copies[0].1, self.committed.next_target_offset
                ),
                source_offset: Some(copies[0].0),
            });
        }
        let next_target_offset = copies.last().expect("batch has a record").1 + 1;

        let record = ProgressRecord {
            source: partition.clone(),
            runs,
            next_source_offset,
            next_target_offset,
            instance: settings.instance,
            committed_at_ms: now_ms(),
        };
        self.send_progress(&record)?;
        self.commit(timeout)?;
        let position_offset = self
            .delivered_position_offset(2)
            .unwrap_or(self.committed.position_offset);

        // Invariant: the replicated position only moves forward.
        assert!(
            record.next_source_offset > self.committed.next_source_offset
                && record.next_target_offset > self.committed.next_target_offset,
            "{partition}: position moved backwards"
        );
        self.committed = Committed {
            next_source_offset: record.next_source_offset,
            next_target_offset: record.next_target_offset,
            position_offset,
        };
        self.committed_any = true;
        self.worker.known_position.set(Some(position_offset));
        self.cache(&record, position_offset);
        m::transaction_committed(partition, sent as u64, bytes as u64);
        Ok(BatchEnd::Committed)
    }

    /// Sends the copy of one source record to the same partition number of
    /// the same-named target topic: key, value, headers and timestamp as they
    /// are (LogAppendTime becomes CreateTime; tombstones stay tombstones).
    fn send_copy(&self, message: &BorrowedMessage<'_>) -> Result<(), BatchError> {
        let mut record: BaseRecord<'_, [u8], [u8], usize> = BaseRecord::with_opaque_to(
            message.topic(),
            Sent::Data {
                source_offset: message.offset(),
            }
            .to_opaque(),
        )
        .partition(message.partition());
        if let Some(key) = message.key() {
            record = record.key(key);
        }
        if let Some(value) = message.payload() {
            record = record.payload(value);
        }
        if let Some(headers) = message.headers() {
            record = record.headers(headers.detach());
        }
        match message.timestamp() {
            Timestamp::CreateTime(t) | Timestamp::LogAppendTime(t) => record = record.timestamp(t),
            Timestamp::NotAvailable => {}
        }
        self.send(record).map_err(|e| BatchError {
            source_offset: Some(message.offset()),
            ..e
        })
    }

    fn send(&self, mut record: BaseRecord<'_, [u8], [u8], usize>) -> Result<(), BatchError> {
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    // The producer queue is bounded: wait for deliveries.
                    self.producer.poll(Duration::from_millis(10));
                    record = back;
                }
                Err((e, _)) => return Err(self.producer_error("sending to the target", &e)),
            }
        }
    }

    /// Classifies a failed producer call. A call refused because the
    /// producer already raised a fatal error (`Local: Fatal error`) is
    /// classified by that fatal error (e.g. fenced), not as a failed record.
    fn producer_error(&self, context: &str, e: &KafkaError) -> BatchError {
        match (e.rdkafka_error_code(), self.producer.client().fatal_error()) {
            (Some(RDKafkaErrorCode::Fatal), Some((code, reason))) => BatchError {
                disposition: match classify_code(code) {
                    Disposition::AbortBatch => Disposition::RestartSession,
                    other => other,
                },
                detail: format!("{context}: {e}: {reason}"),
                source_offset: None,
            },
            _ => BatchError::from_kafka(context, e),
        }
    }

    /// Writes the progress and position records into the open transaction.
    /// They are flushed by the commit.
    fn send_progress(&self, record: &ProgressRecord) -> Result<(), BatchError> {
        let topics = &self.worker.settings.internal_topics;
        let key = ProgressRecord::key(&record.source);
        let value = record.encode();
        for (topic, sent) in [
            (&topics.progress, Sent::Progress),
            (&topics.position, Sent::Position),
        ] {
            self.send(
                BaseRecord::with_opaque_to(topic, sent.to_opaque())
                    .partition(PROGRESS_PARTITION)
                    .key(key.as_slice())
                    .payload(value.as_slice()),
            )?;
        }
        Ok(())
    }

    /// After a successful commit of `sent` internal records: where the
    /// position record landed (the next resume's start hint). Its delivery
    /// report arrived during the commit's flush.
    fn delivered_position_offset(&self, sent: usize) -> Option<i64> {
        self.producer.poll(Duration::ZERO);
        let reports = self.producer.context().drain();
        // Every record sent gets exactly one delivery outcome, and a
        // committed transaction's records were all delivered.
        debug_assert_eq!(reports.len(), sent, "internal record reports");
        debug_assert!(reports.iter().all(|r| r.outcome.is_ok()));
        reports
            .into_iter()
            .find(|r| r.sent == Sent::Position)
            .and_then(|r| r.outcome.ok())
    }

    /// Commits, retrying while librdkafka says the commit may be retried.
    fn commit(&self, timeout: Duration) -> Result<(), BatchError> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.producer.commit_transaction(timeout) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    let error = BatchError::from_kafka("commit_transaction", &e);
                    if error.disposition == Disposition::Retriable && Instant::now() < deadline {
                        tracing::warn!(partition = %self.worker.partition, error = %e, "commit not confirmed; retrying");
                        continue;
                    }
                    if error.disposition == Disposition::Retriable {
                        // Outcome unknown: only a new session can tell.
                        return Err(BatchError {
                            disposition: Disposition::RestartSession,
                            ..error
                        });
                    }
                    return Err(error);
                }
            }
        }
    }

    /// Caches the committed position locally. The cache is only a hint, so a
    /// failure is logged, not fatal.
    fn cache(&self, record: &ProgressRecord, position_offset: i64) {
        let checkpoint = Checkpoint {
            next_source_offset: record.next_source_offset,
            next_target_offset: record.next_target_offset,
            progress_offset: position_offset,
        };
        if let Err(e) = self
            .worker
            .state
            .record_commit(&record.source, &checkpoint, &record.runs)
        {
            tracing::warn!(partition = %record.source, error = %e, "local state not updated; it will be rebuilt from the target");
            let _ = self.worker.state.reset_partition(&record.source);
        }
    }
}

fn record_size(message: &BorrowedMessage<'_>) -> usize {
    message.key().map_or(0, <[u8]>::len)
        + message.payload().map_or(0, <[u8]>::len)
        + message.headers().map_or(0, |hs| {
            hs.iter()
                .map(|h| h.key.len() + h.value.map_or(0, <[u8]>::len))
                .sum()
        })
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

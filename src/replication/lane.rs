//! One lane copies its source partitions, exactly once.
//!
//! # The invariant this file keeps
//!
//! A source record counts as replicated if and only if its copy was written
//! to the target inside a **committed** transaction together with the
//! progress record that names it. Hence:
//!
//! 1. The resume position of every partition of the lane is read from the
//!    target (committed data only) at the start of every *session* — after
//!    `init_transactions`, which fences any older producer with the lane's
//!    transactional id and resolves its open transaction. The local cache
//!    only says where to start looking.
//! 2. A batch's copies (of any partitions of the lane), and one progress and
//!    one position record per partition touched, are in one transaction. If
//!    anything fails before the commit is confirmed, the transaction is
//!    aborted (or its outcome is unknown and a new session re-reads the
//!    positions): every partition is re-read from its last committed
//!    position, so nothing is lost and nothing is written twice.
//! 3. A partition's replicated position only moves forward, and its copies
//!    keep the source order (both asserted per partition).
//! 4. A lane is only written by the instance the fleet's group assigned it
//!    to (see `membership.rs`): every session first has the group coordinator
//!    confirm the lane is this instance's before `init_transactions` (which
//!    fences any other holder of the transactional id), and every
//!    transaction carries an offset commit the coordinator refuses from a
//!    stale member. A fenced lane that the group no longer gives this
//!    instance stops without touching the lane again; one that the group
//!    confirms (its own transaction timed out) re-initialises.
//!
//! All calls here block: a lane runs on a thread of its own, so the async
//! runtime (metrics endpoint, signals, supervisor) never stalls.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eosmirror_state::{Checkpoint, SourcePartition, StateStore};
use rdkafka::bindings as rd;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedHeaders, BorrowedMessage, Headers, Message};
use rdkafka::producer::BaseRecord;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, Timestamp, TopicPartitionList};

use super::client_stats::{ClientStats, SourceConsumer, StatsContext};
use super::errors::{classify, classify_code, Disposition};
use super::failure::WorkerError;
use super::latency::BatchLatency;
use super::layout::{Lane, Layout};
use super::limits::{fetch_queue_backoff, BatchLimits, BufferBudget};
use super::lineage::{self, Continuity, PendingTopicIds, TopicIds};
use super::membership::{Confirmation, Tenure};
use super::park::{self, Parked, SourceEnds, Wake};
use super::positions::{
    read_lane_positions, target_has_committed_records, watermark_client, LanePositions,
    ResumePosition,
};
use super::progress::{runs_from_deliveries, InternalTopics, Lineage, ProgressRecord};
use super::source_watch::{self, SourceWatch, SILENCE_LIMIT};
use super::throttle::Throttle;
use super::transaction::{TransactionalProducer, TxnFailure};
use super::watermarks::{self, Watermarks};
use crate::failpoints::{self, crash_point, fault_armed};
use crate::ffi;
use crate::health::Health;
use crate::malloc;
use crate::metrics as m;
use crate::topics::filter::TopicFilter;

/// What to do when source records disappear before they are copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapPolicy {
    /// Stop with an error naming the lost offsets (default).
    Fail,
    /// Continue after the gap; log it and count it in metrics.
    Skip,
}

/// Settings shared by all lanes of one run.
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
    /// The deployment's lane count.
    pub layout: Layout,
    /// `<prefix>.<alias>`; a lane appends `.lane-<k>`.
    pub transactional_id_base: String,
    pub limits: BatchLimits,
    pub transaction_timeout: Duration,
    pub on_source_gap: GapPolicy,
    /// Copy into target partitions that hold records eosmirror has no
    /// position for (appending after them) instead of stopping.
    pub allow_nonempty_target: bool,
    /// Random id of this process, written into every progress record.
    pub instance: u64,
    /// The source cluster's id as the run's start-up check read it: every
    /// position records it, and a position of another cluster stops the run.
    pub source_cluster_id: String,
    /// Bounds the source read rate of all lanes together.
    pub throttle: Arc<Throttle>,
    /// How often the lanes' clients report librdkafka statistics to
    /// `/metrics`; `None` when nothing serves them.
    pub statistics_interval: Option<Duration>,
    /// How long a lane finds nothing to copy before it parks (`park.rs`);
    /// `None`: never.
    pub park_after: Option<Duration>,
    /// The one client parked lanes share to watch the source.
    pub source_ends: SourceEnds,
    /// Topics the operator allows to start over from the source's first
    /// record when the source or target topic was deleted and recreated
    /// (`--start.over`); any other recreated topic stops the run.
    pub start_over: Option<TopicFilter>,
}

/// How long a blocking Kafka call may take before we treat its outcome as
/// unknown: a little more than a transaction can live. Reads of the target
/// fail after this long without progress.
fn call_timeout(settings: &WorkerSettings) -> Duration {
    settings.transaction_timeout + Duration::from_secs(10)
}

/// How long a metadata answer (watermarks, topic ids) may take before the
/// session starts over: short, so a partition whose leader is being elected
/// (a broker restart, a new topic) delays its lane by seconds, not by a
/// transaction timeout.
const METADATA_TIMEOUT: Duration = Duration::from_secs(15);

/// Bounds of the wait between two sessions of a lane.
const SESSION_BACKOFF_MIN: Duration = Duration::from_millis(100);
const SESSION_BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Bounds of the wait after an aborted batch before it is read again.
const ABORT_BACKOFF_MIN: Duration = Duration::from_millis(200);
const ABORT_BACKOFF_MAX: Duration = Duration::from_secs(10);
/// How often a lane publishes its partitions' lag.
const LAG_INTERVAL: Duration = Duration::from_secs(5);
/// Records a batch reads from a full queue between two checks of its
/// commit interval: about 0.1 ms of records, so a batch ends that much
/// late at most.
const RECORDS_PER_CLOCK_READ: u32 = 64;

/// The source partitions of one lane, shared between the supervisor (which
/// discovers partitions) and the lane (which copies them). A change takes
/// effect at the lane's next batch boundary, with a new session.
#[derive(Debug, Default)]
pub struct LanePartitions {
    partitions: Mutex<Vec<SourcePartition>>,
    version: AtomicU64,
}

impl LanePartitions {
    /// Sets the lane's partitions; returns whether they changed.
    pub fn replace(&self, mut partitions: Vec<SourcePartition>) -> bool {
        partitions.sort();
        let mut current = self.partitions.lock().expect("lane partitions poisoned");
        if *current == partitions {
            return false;
        }
        *current = partitions;
        self.version.fetch_add(1, Ordering::Release);
        true
    }

    fn snapshot(&self) -> (u64, Vec<SourcePartition>) {
        let current = self.partitions.lock().expect("lane partitions poisoned");
        (self.version.load(Ordering::Acquire), current.clone())
    }

    fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}

/// Why a session ended.
enum SessionEnd {
    /// Shutdown was requested; the open transaction (if any) is committed.
    Shutdown,
    /// The lane is no longer this instance's: the open transaction is left
    /// to the new owner's `init_transactions`, which aborts it.
    Moved,
    /// The lane's partitions changed: start a session that includes them.
    Repartitioned,
    /// Every partition of the lane was stopped at session start (each
    /// already reported): copy again only if partitions join.
    AllStopped,
    /// The lane found nothing to copy for `park_after`: its clients are
    /// closed until the source moves (`park.rs`).
    Parked {
        parked: Parked,
        /// The partition set version the session copied.
        version: u64,
    },
    /// Start a new session: new producer, positions re-read from the target.
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

/// One lane's replication loop.
pub struct LaneWorker {
    lane: Lane,
    partitions: Arc<LanePartitions>,
    settings: Arc<WorkerSettings>,
    state: Arc<StateStore>,
    /// The fleet's group, which confirms the lane is this instance's
    /// (invariant 4), and the stop flag set at shutdown or when the group
    /// takes the lane away: the lane commits its open transaction and
    /// returns.
    tenure: Tenure,
    /// This lane's share of the memory bound.
    budget: BufferBudget,
    /// The run's health: this lane's progress, and the partitions stopped
    /// by their own errors (of any lane), never copied again by this run.
    health: Arc<Health>,
    /// Offset in the lane's position partition up to which this process
    /// knows every record: what its session read at start, then its own
    /// commits; `None` until a session has read it. Committed as the fleet
    /// group's offset of the lane.
    known_position: Cell<Option<i64>>,
}

impl LaneWorker {
    pub fn new(
        lane: Lane,
        partitions: Arc<LanePartitions>,
        settings: Arc<WorkerSettings>,
        state: Arc<StateStore>,
        tenure: Tenure,
        budget: BufferBudget,
        health: Arc<Health>,
    ) -> LaneWorker {
        LaneWorker {
            lane,
            partitions,
            settings,
            state,
            tenure,
            budget,
            health,
            known_position: Cell::new(None),
        }
    }

    /// Runs sessions until shutdown, the lane moves to another instance,
    /// every partition of the lane is stopped, or a failure of the lane that
    /// retrying cannot fix. A failure of one partition stops that partition;
    /// the next session copies the others.
    pub fn run(self) -> Result<(), WorkerError> {
        let lane = self.lane;
        let health = Arc::clone(&self.health);
        health.copy_progress.lane_started(lane);
        let result = self.run_sessions();
        // Its partitions' lag and progress are no longer this lane's to
        // report (they are stopped, gone, or copied by the lane's next owner).
        m::lane_max_lag(lane, 0);
        health.copy_progress.lane_ended(lane);
        result
    }

    fn run_sessions(self) -> Result<(), WorkerError> {
        let mut backoff = Backoff::new(SESSION_BACKOFF_MIN, SESSION_BACKOFF_MAX);
        loop {
            self.health.progress(self.lane);
            if self.tenure.stop.load(Ordering::Relaxed) || self.to_copy().1.is_empty() {
                return Ok(());
            }
            // Invariant 4: no session of ours initialises (and so fences) a
            // lane the group has given to another instance.
            if !self.owned() {
                return Ok(());
            }
            let end = self.session();
            self.health.copying(self.lane, false);
            let end = match end {
                Ok(end) => end,
                // Its batch, if one was open, is aborted by the next
                // session's init_transactions.
                Err(error) => match self.stop_partition(error) {
                    Ok(()) => continue,
                    Err(error) => return Err(error),
                },
            };
            match end {
                SessionEnd::Shutdown | SessionEnd::Moved => return Ok(()),
                SessionEnd::AllStopped => {}
                SessionEnd::Parked { parked, version } => {
                    backoff.reset();
                    self.park(&parked, version);
                }
                SessionEnd::Repartitioned => {
                    tracing::info!(lane = %self.lane, "the lane's partitions changed; starting a session with all of them")
                }
                SessionEnd::Restart {
                    reason,
                    detail,
                    committed_any,
                } => {
                    if committed_any {
                        backoff.reset();
                    }
                    m::lane_restarted(self.lane, reason);
                    let wait = backoff.next();
                    tracing::warn!(lane = %self.lane, reason, %detail, retry_in_ms = wait.as_millis() as u64, "restarting lane session; positions will be re-read from the target");
                    self.sleep_unless_stopped(wait);
                }
            }
        }
    }

    /// Waits without clients of its own until the source's ends move from
    /// where the lane parked, its partitions change from `version`, or it
    /// must stop.
    fn park(&self, parked: &Parked, version: u64) {
        // Caught up, not starting: ready and live while parked.
        self.health.copying(self.lane, true);
        m::lane_parked(self.lane, true);
        // Nothing it can read waits (a marker or aborted records at a
        // partition's end still count in that partition's lag).
        m::lane_max_lag(self.lane, 0);
        tracing::info!(lane = %self.lane, partitions = parked.partitions.len(), "lane parked: nothing to copy; its clients are closed until the source receives records");
        let settings = &self.settings;
        let wake = park::wait(
            parked,
            park::Watch::default(),
            |parked| settings.source_ends.ends(parked, park::QUESTION_TIMEOUT),
            || {
                self.health.progress(self.lane);
                self.tenure.stop.load(Ordering::Relaxed) || self.partitions.version() != version
            },
        );
        m::lane_parked(self.lane, false);
        match wake {
            Wake::Moved(partition) => {
                tracing::info!(lane = %self.lane, %partition, "lane woke: the source moved")
            }
            Wake::Unanswered(detail) => {
                tracing::warn!(lane = %self.lane, %detail, "lane woke: the source did not answer while it was parked")
            }
            Wake::Interrupted => {}
        }
    }

    /// Stops the partition `error` is about (the lane copies the others);
    /// gives back an error that is not about one partition.
    fn stop_partition(&self, error: WorkerError) -> Result<(), WorkerError> {
        match error.stopped_partition() {
            Some(partition) => {
                self.health.stopped.stop(partition, &error);
                self.health.copy_progress.forget(self.lane, partition);
                Ok(())
            }
            None => Err(error),
        }
    }

    /// Whether this lane may (re)initialise: the group confirms it is this
    /// instance's (invariant 4). False when it moved, or on stop.
    fn owned(&self) -> bool {
        match self.tenure.membership.confirm(
            self.lane,
            self.position_end(),
            &self.tenure.stop,
            &|| self.health.progress(self.lane),
        ) {
            Confirmation::Owned => true,
            Confirmation::NotOwned => {
                tracing::info!(lane = %self.lane, "the fleet's group gave this lane to another instance; this one stops touching it");
                false
            }
            Confirmation::Stopping => false,
        }
    }

    /// The end of the lane's position partition as this process knows it:
    /// the fleet group's offset of the lane.
    fn position_end(&self) -> i64 {
        self.known_position.get().map_or(0, |k| k + 1)
    }

    fn read_positions(
        &self,
        start_hint: Option<i64>,
    ) -> Result<LanePositions, super::positions::ResumeError> {
        read_lane_positions(
            &self.settings.target_reader,
            &self.settings.internal_topics.position,
            self.lane.internal_partition(),
            start_hint,
            call_timeout(&self.settings),
            &|| self.health.progress(self.lane),
        )
    }

    fn sleep_unless_stopped(&self, duration: Duration) {
        let until = Instant::now() + duration;
        while Instant::now() < until && !self.tenure.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn fatal(&self, message: impl Into<String>) -> WorkerError {
        WorkerError::LaneFatal {
            lane: self.lane,
            message: message.into(),
        }
    }

    fn kafka_client(&self, cluster: &'static str) -> m::KafkaClient {
        m::KafkaClient {
            cluster,
            lane: self.lane,
        }
    }

    fn transactional_id(&self) -> String {
        format!("{}.{}", self.settings.transactional_id_base, self.lane)
    }

    /// One producer lifetime: init, resume every partition, claim, then
    /// batches until something makes the producer's state uncertain.
    fn session(&self) -> Result<SessionEnd, WorkerError> {
        let settings = &*self.settings;
        let timeout = call_timeout(settings);
        let (version, partitions) = self.to_copy();
        let mut target = settings.target.clone();
        let stats = ClientStats::enable(
            &mut target,
            self.kafka_client("target"),
            settings.statistics_interval,
        );
        let producer = TransactionalProducer::create(
            &target,
            &self.transactional_id(),
            settings.transaction_timeout,
            self.budget.producer_queue_kbytes,
            timeout,
            stats,
        )
        .map_err(|e| self.fatal(format!("creating the target producer: {e}")))?;
        if let Err(e) = producer.init() {
            return match classify(&e) {
                Disposition::Fatal => Err(self.fatal(format!("init_transactions: {e}"))),
                _ => Ok(SessionEnd::restart("init_transactions", e.to_string())),
            };
        }
        crash_point!(failpoints::LANE_AFTER_INIT);

        let found = match self.resume_positions(&partitions) {
            Ok(found) => found,
            Err(ResumeFailure::Restart(detail)) => {
                return Ok(SessionEnd::restart("resume_read", detail))
            }
            Err(ResumeFailure::Fatal(e)) => return Err(e),
        };
        // Everything below the high watermark read was written before this
        // session's init: a foreign record from there on is a takeover.
        self.known_position.set(Some(found.high_watermark - 1));

        let mut source = settings.source.clone();
        self.budget.bound_consumer(&mut source);
        malloc::fit_to_lane(partitions.len(), settings.layout.lanes());
        if source.get("fetch.queue.backoff.ms").is_none() {
            let backoff = fetch_queue_backoff(partitions.len());
            source.set("fetch.queue.backoff.ms", backoff.as_millis().to_string());
        }
        let stats = ClientStats::enable(
            &mut source,
            self.kafka_client("source"),
            settings.statistics_interval,
        );
        let consumer: SourceConsumer = source
            .create_with_context(StatsContext(stats))
            .map_err(|e| self.fatal(format!("creating the source consumer: {e}")))?;
        let target_watermarks = watermark_client(&settings.target_reader)
            .map_err(|e| self.fatal(format!("creating a target reader: {e}")))?;
        let topics = partitions.iter().map(|p| p.topic.as_str()).collect();
        let ids = match TopicIds::request(&consumer, &target_watermarks, &topics, METADATA_TIMEOUT)
            .wait()
        {
            Ok(ids) => ids,
            Err(detail) => return Ok(SessionEnd::restart("topic_ids", detail)),
        };
        let source_ends = match watermarks::fetch_all(&consumer, &partitions, METADATA_TIMEOUT) {
            Ok(ends) => ends,
            Err(e) => return Ok(SessionEnd::restart("source_watermarks", e.to_string())),
        };
        // A partition without a position may only be copied into an empty
        // target partition: one batch of watermarks clears the empty ones.
        let unrecorded: Vec<SourcePartition> = partitions
            .iter()
            .filter(|p| !found.latest.contains_key(*p))
            .cloned()
            .collect();
        let target_ends = match settings.allow_nonempty_target {
            true => Watermarks::new(),
            false => match watermarks::fetch_all(&target_watermarks, &unrecorded, METADATA_TIMEOUT)
            {
                Ok(ends) => ends,
                Err(e) => return Ok(SessionEnd::restart("target_check", e.to_string())),
            },
        };
        let mut cursors = Vec::with_capacity(partitions.len());
        for partition in partitions {
            // Thousands of partitions may take a while to open.
            self.health.progress(self.lane);
            let lineage = match ids.lineage(&partition.topic, &settings.source_cluster_id) {
                Ok(lineage) => lineage,
                Err(detail) => return Ok(SessionEnd::restart("topic_ids", detail)),
            };
            let ends = Ends {
                source: source_ends[&partition],
                target_empty: target_ends
                    .get(&partition)
                    .is_some_and(|&(low, high)| high <= low),
            };
            let resume = found.latest.get(&partition);
            match self.open_cursor(&target_watermarks, partition, lineage, resume, ends) {
                Ok(Ok(cursor)) => cursors.push(cursor),
                Ok(Err(end)) => return Ok(end),
                // Stopped here, so one session start reports every bad
                // partition (a non-empty target, a gap) instead of one each.
                Err(error) => self.stop_partition(error)?,
            }
        }
        self.health
            .copy_progress
            .positions_read(self.lane, cursors.iter().map(|c| &c.partition));
        if cursors.is_empty() {
            return Ok(SessionEnd::AllStopped);
        }

        let mut session = LaneSession::new(
            self,
            producer,
            consumer,
            target_watermarks,
            cursors,
            version,
        );
        session.run()
    }

    /// The lane's partitions without the stopped ones, and their version.
    fn to_copy(&self) -> (u64, Vec<SourcePartition>) {
        let (version, mut partitions) = self.partitions.snapshot();
        partitions.retain(|p| !self.health.stopped.contains(p));
        (version, partitions)
    }

    /// Whether the operator let `topic` start over when recreated.
    fn starts_over(&self, topic: &str) -> bool {
        self.settings
            .start_over
            .as_ref()
            .is_some_and(|f| f.matches(topic))
    }

    /// Reads the lane's positions from the target and reconciles the local
    /// cache with them.
    fn resume_positions(
        &self,
        partitions: &[SourcePartition],
    ) -> Result<LanePositions, ResumeFailure> {
        let local = |e: eosmirror_state::StateError| {
            ResumeFailure::Fatal(self.fatal(format!("local state: {e}")))
        };
        let mut cached = HashMap::with_capacity(partitions.len());
        for partition in partitions {
            if let Some(c) = self.state.checkpoint(partition).map_err(local)? {
                cached.insert(partition.clone(), c);
            }
        }
        // Where to start reading: the oldest cached hint, if every partition
        // has one (a partition without one may be anywhere in the topic).
        let hint = if cached.len() == partitions.len() {
            cached.values().map(|c| c.progress_offset).min()
        } else {
            None
        };
        let found = self
            .read_positions(hint)
            .map_err(|e| match e.is_permanent() {
                true => ResumeFailure::Fatal(self.fatal(e.to_string())),
                false => ResumeFailure::Restart(e.to_string()),
            })?;
        for (partition, cached) in &cached {
            let target_next = found
                .latest
                .get(partition)
                .map(|p| p.record.next_source_offset);
            if target_next.is_some_and(|t| t > cached.next_source_offset) {
                // The cache missed commits (another instance, or a lost
                // write): forget its runs so they never read as a gap.
                self.state.reset_partition(partition).map_err(local)?;
            }
            if target_next.is_none_or(|t| t < cached.next_source_offset) {
                return Err(ResumeFailure::Fatal(WorkerError::TargetLostData {
                    source_partition: partition.clone(),
                    cached_next: cached.next_source_offset,
                    target_next: target_next
                        .map_or("no position at all".to_string(), |t| t.to_string()),
                    position_topic: self.settings.internal_topics.position.clone(),
                }));
            }
        }
        Ok(found)
    }

    /// Checks one partition's resume position against the source and the
    /// target (which must still be the topics it was recorded for);
    /// `Err(end)` when the session has to end first.
    fn open_cursor(
        &self,
        target_watermarks: &BaseConsumer,
        partition: SourcePartition,
        lineage: Lineage,
        resume: Option<&ResumePosition>,
        ends: Ends,
    ) -> Result<Result<Cursor, SessionEnd>, WorkerError> {
        let settings = &*self.settings;
        let timeout = call_timeout(settings);
        let mut started_over = false;
        let resume = match resume {
            Some(r) => match lineage::compare(
                &partition,
                &r.record.lineage,
                &lineage,
                self.starts_over(&partition.topic),
            )? {
                Continuity::Same => Some(r),
                Continuity::StartOver => {
                    tracing::warn!(lane = %self.lane, %partition, recorded = ?r.record.lineage, now = ?lineage, "the topic was recreated; starting it over from the source's first record as --start.over allows (its old positions and history are superseded)");
                    self.state.reset_partition(&partition).map_err(|e| {
                        self.fatal(format!("local state: forgetting {partition}: {e}"))
                    })?;
                    started_over = true;
                    None
                }
            },
            None => None,
        };
        let (low, end) = ends.source;
        if resume.is_none() && !settings.allow_nonempty_target && !ends.target_empty {
            match target_has_committed_records(
                &settings.target_reader,
                target_watermarks,
                &partition.topic,
                partition.partition,
                timeout,
            ) {
                Ok(false) => {}
                Ok(true) => {
                    return Err(WorkerError::TargetNotEmpty {
                        source_partition: partition,
                        position_topic: settings.internal_topics.position.clone(),
                    })
                }
                Err(e) => return Ok(Err(SessionEnd::restart("target_check", e.to_string()))),
            }
        }
        let mut committed = match resume {
            Some(r) => Committed::from(r),
            None => Committed::fresh(low),
        };
        if committed.next_source_offset > end {
            return Err(WorkerError::SourceRewound {
                source_partition: partition,
                source_end: end,
                next_source_offset: committed.next_source_offset,
            });
        }
        if low > committed.next_source_offset {
            self.source_gap(&partition, committed.next_source_offset, low)?;
            committed.next_source_offset = low;
        }
        tracing::debug!(lane = %self.lane, %partition, next_source_offset = committed.next_source_offset, next_target_offset = committed.next_target_offset, source_end = end, "partition resumed");
        self.health.copy_progress.position(
            self.lane,
            &partition,
            committed.next_source_offset,
            end,
        );
        Ok(Ok(Cursor {
            latency: m::replication_latency(&partition.topic),
            partition,
            lineage,
            started_over,
            committed,
        }))
    }

    fn source_gap(
        &self,
        partition: &SourcePartition,
        first: i64,
        end_exclusive: i64,
    ) -> Result<(), WorkerError> {
        match self.settings.on_source_gap {
            GapPolicy::Fail => Err(WorkerError::SourceGap {
                source_partition: partition.clone(),
                first,
                end_exclusive,
            }),
            GapPolicy::Skip => {
                tracing::error!(%partition, first, end_exclusive, "source records deleted before they were copied; skipping them as --on.source.gap=skip allows");
                m::source_gap_skipped(partition, (end_exclusive - first) as u64);
                Ok(())
            }
        }
    }
}

/// What a session learnt of a partition's ends before opening its cursor.
#[derive(Debug, Clone, Copy)]
struct Ends {
    /// The source's low and high (last stable) watermarks.
    source: (i64, i64),
    /// The target partition holds no record at all (so nothing committed).
    target_empty: bool,
}

enum ResumeFailure {
    Restart(String),
    Fatal(WorkerError),
}

/// The last committed position of a partition, as this session knows it.
#[derive(Debug, Clone, Copy)]
struct Committed {
    next_source_offset: i64,
    next_target_offset: i64,
    /// Offset of its latest position record (the cache's start hint).
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

/// One source partition of a running session.
#[derive(Debug)]
struct Cursor {
    partition: SourcePartition,
    /// The topics the session resumed, which every commit checks.
    lineage: Lineage,
    /// The topic was recreated and starts over in this session: its claim
    /// also opens the new lineage's history in the progress topic.
    started_over: bool,
    committed: Committed,
    /// Where this partition's copies' end-to-end latencies go.
    latency: metrics::Histogram,
}

impl Cursor {
    /// Whether `message` is a record of this cursor's partition.
    fn holds(&self, message: &BorrowedMessage<'_>) -> bool {
        self.partition.partition == message.partition() && self.partition.topic == message.topic()
    }
}

/// What a batch sent, by slot (the delivery opaque).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// The copy of the record at `source_offset` of cursor `cursor`.
    Copy { cursor: usize, source_offset: i64 },
    /// The progress record of cursor `cursor`.
    Progress { cursor: usize },
    /// The position record of cursor `cursor`.
    Position { cursor: usize },
}

/// What the open batch copied of one partition.
#[derive(Debug, Clone, Copy)]
struct Touched {
    /// Next source offset once the batch commits.
    next_source_offset: i64,
    records: u64,
    bytes: u64,
}

/// Outcome of one attempt at a batch.
enum BatchEnd {
    /// The source delivered nothing within the idle poll.
    Idle,
    /// The throttle held the lane: records may wait.
    Throttled,
    Committed {
        /// Records were still waiting in the consumer's queue when the
        /// batch stopped reading: the lane copies as fast as it can.
        ready: bool,
    },
}

struct LaneSession<'w> {
    worker: &'w LaneWorker,
    producer: TransactionalProducer,
    consumer: SourceConsumer,
    /// A plain client of the target, for topic ids.
    target: BaseConsumer,
    cursors: Vec<Cursor>,
    /// Cursor index by topic and partition, for records as they arrive.
    index: HashMap<String, HashMap<i32, usize>>,
    /// The partition set version this session copies.
    version: u64,
    /// Whether this session committed a batch.
    committed_any: bool,
    /// The open batch: every record sent, and each partition touched.
    slots: Vec<Slot>,
    touched: Vec<Option<Touched>>,
    touched_order: Vec<usize>,
    /// The open batch's young records' timestamps, for the latency histogram.
    latency: BatchLatency,
    last_lag_report: Option<Instant>,
    /// When the lane last committed or aborted a batch, was throttled, or
    /// started the session: it parks `park_after` later. After an abort
    /// the consumer re-reads from the committed positions, and parking
    /// waits until that re-reading is long done.
    last_busy: Instant,
    /// Notices a source consumer that stopped delivering.
    source_watch: SourceWatch,
    last_source_warning: Cell<Option<Instant>>,
    /// The error of one partition that made the batch fail (returned as a
    /// `Fatal` failure): it stops that partition, not the lane.
    partition_error: RefCell<Option<WorkerError>>,
}

impl<'w> LaneSession<'w> {
    fn new(
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

    fn run(&mut self) -> Result<SessionEnd, WorkerError> {
        let lane = self.worker.lane;
        if let Err(failure) = self.claim() {
            return match failure.disposition {
                Disposition::Fatal => Err(self.worker.fatal(failure.detail)),
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
                Err(failure) => failure,
            };
            match failure.disposition {
                Disposition::AbortBatch | Disposition::Retriable => {
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
                        None => self.worker.fatal(failure.detail),
                    });
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
    /// except for a partition that starts over: its claim also goes to the
    /// progress topic, so the history switches lineage before any position
    /// of the new lineage exists (what translation relies on).
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
                next_target_offset: c.committed.next_target_offset,
                instance: settings.instance,
                committed_at_ms: crate::clock::unix_millis(),
            };
            encoded.push((cursor, ProgressRecord::key(&c.partition), record.encode()));
        }
        self.slots.clear();
        let topics = &settings.internal_topics;
        for (cursor, key, value) in &encoded {
            let mut targets = vec![(&topics.position, Slot::Position { cursor: *cursor })];
            if self.cursors[*cursor].started_over {
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
    fn fence(&self) -> Result<(), TxnFailure> {
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
    fn note_position(&self, offset: i64) {
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
    fn consumer_positions(&self, fetched: Option<&TopicPartitionList>) -> Vec<i64> {
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

    /// Forgets the open batch (after it was aborted).
    fn forget_batch(&mut self) {
        self.slots.clear();
        for i in self.touched_order.drain(..) {
            self.touched[i] = None;
        }
    }

    /// Copies one batch, of any partitions of the lane, in one transaction.
    /// On success the new positions are committed on the target and cached
    /// locally.
    fn replicate_batch(&mut self) -> Result<BatchEnd, TxnFailure> {
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
            match &mut self.touched[cursor] {
                Some(t) => {
                    t.next_source_offset = offset + 1;
                    t.records += 1;
                    t.bytes += size as u64;
                }
                none => {
                    *none = Some(Touched {
                        next_source_offset: offset + 1,
                        records: 1,
                        bytes: size as u64,
                    });
                    self.touched_order.push(cursor);
                }
            }
            let topic = &self.cursors[cursor].partition.topic;
            self.producer
                .send(copy_of(topic, &message, headers, slot))?;
            if self.slots.len() >= limits.max_records
                || bytes >= limits.max_bytes
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
            let Some(mut remaining) = limits.commit_interval.checked_sub(started.elapsed()) else {
                break;
            };
            // Throttled inside a transaction: wait at most until it would
            // end anyway, then commit what it has.
            if throttle.is_limited() {
                if !throttle.wait_ready(remaining, &self.worker.tenure.stop) {
                    break;
                }
                let Some(left) = limits.commit_interval.checked_sub(started.elapsed()) else {
                    break;
                };
                remaining = left;
            }
            match next_record(consumer, lane, &self.last_source_warning, remaining)? {
                Some(m) => message = m,
                None => break,
            }
        }

        let ready = ffi::polled_queue_length(self.consumer.client()) > 0;
        crash_point!(failpoints::LANE_AFTER_SEND);
        let filled = Instant::now();
        let copied = self.slots.len();
        // The lineage check's requests go out after the batch's last fetch
        // and are answered while the copies flush.
        let lineage = self.request_lineage();
        let copies = self.collect_copies()?;
        let flushed = Instant::now();
        crash_point!(failpoints::LANE_AFTER_FLUSH);
        self.check_lineage(lineage)?;
        let checked = Instant::now();
        let records = self.progress_records(copies)?;
        self.send_progress(&records)?;
        crash_point!(failpoints::LANE_AFTER_PROGRESS);
        self.fence()?;
        let fenced = Instant::now();
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
                    return Err(TxnFailure {
                        disposition,
                        detail: format!("{}: {e}", self.cursors[cursor].partition),
                        slot: Some(report.slot),
                    });
                }
            }
        }
        Ok(copies)
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
    /// it over when `--start.over` names it.
    fn check_lineage(&self, pending: PendingTopicIds) -> Result<(), TxnFailure> {
        let ids = pending.wait().map_err(|detail| TxnFailure {
            disposition: Disposition::Retriable,
            detail,
            slot: None,
        })?;
        for &cursor in &self.touched_order {
            let c = &self.cursors[cursor];
            if let Err(error) = ids.unchanged(&c.partition, &c.lineage) {
                if self.worker.starts_over(&c.partition.topic) {
                    return Err(TxnFailure {
                        disposition: Disposition::RestartSession,
                        detail: error.to_string(),
                        slot: None,
                    });
                }
                return Err(self.partition_failure(error));
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
            let (first_source, first_target) = pairs[0];
            if first_target < c.committed.next_target_offset {
                return Err(TxnFailure {
                    disposition: Disposition::Fatal,
                    detail: format!(
                        "{}: copies landed at target offset {first_target} below the committed target position {}: another writer or a truncated target",
                        c.partition, c.committed.next_target_offset
                    ),
                    slot: self.slot_of(cursor, first_source),
                });
            }
            let next_target_offset = pairs.last().expect("touched cursor has a copy").1 + 1;
            records.push((
                cursor,
                ProgressRecord {
                    source: c.partition.clone(),
                    lineage: c.lineage.clone(),
                    runs,
                    next_source_offset: touched.next_source_offset,
                    next_target_offset,
                    instance: settings.instance,
                    committed_at_ms: crate::clock::unix_millis(),
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

    fn slot_of(&self, cursor: usize, source_offset: i64) -> Option<usize> {
        self.slots.iter().position(|s| {
            *s == Slot::Copy {
                cursor,
                source_offset,
            }
        })
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
    fn send_internal(
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
    fn committed(
        &mut self,
        records: Vec<(usize, ProgressRecord)>,
        reports: Vec<super::delivery::Delivery>,
    ) {
        // Every record sent gets exactly one delivery outcome, and a
        // committed transaction's records were all delivered.
        debug_assert_eq!(reports.len(), self.slots.len(), "internal record reports");
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
            // Invariant: a partition's replicated position only moves forward.
            assert!(
                record.next_source_offset > c.committed.next_source_offset
                    && record.next_target_offset > c.committed.next_target_offset,
                "{}: position moved backwards",
                c.partition
            );
            let position_offset = position_offsets
                .get(&cursor)
                .copied()
                .unwrap_or(c.committed.position_offset);
            c.committed = Committed {
                next_source_offset: record.next_source_offset,
                next_target_offset: record.next_target_offset,
                position_offset,
            };
            cache(&self.worker.state, &record, position_offset);
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

/// Caches a committed position locally. The cache is only a hint, so a
/// failure is logged, not fatal.
fn cache(state: &StateStore, record: &ProgressRecord, position_offset: i64) {
    let checkpoint = Checkpoint {
        next_source_offset: record.next_source_offset,
        next_target_offset: record.next_target_offset,
        progress_offset: position_offset,
    };
    if let Err(e) = state.record_commit(&record.source, &checkpoint, &record.runs) {
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

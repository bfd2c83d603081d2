//! One lane copies its source partitions, exactly once.
//!
//! # The invariant this module keeps
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
//! # Where each part lives
//!
//! - `mod.rs`: the lane's worker, which runs sessions one after another:
//!   the group's confirmation before each (invariant 4), backoff, parking
//!   an idle lane, stopping a failed partition.
//! - `resume.rs`: a session's start, invariant 1.
//! - `siblings.rs`: whether a partition without a position may start (its
//!   topic may be recorded as another incarnation).
//! - `session.rs`: a running session: its cursors, the loop over batches,
//!   what a failed batch leads to, the claim and the fence every
//!   transaction carries (invariant 4), lag and parking decisions.
//! - `batch.rs`: one batch in one transaction, invariants 2 and 3.
//! - `../transaction.rs`: the transaction protocol with the target
//!   (begin, send, flush, commit, abort), classified failures.
//!
//! All calls here block: a lane runs on a thread of its own, so the async
//! runtime (metrics endpoint, signals, supervisor) never stalls.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eosmirror_state::{SourcePartition, StateStore};
use rdkafka::config::ClientConfig;

use super::client_settings::batch_bytes_within;
use super::failure::WorkerError;
use super::layout::{Lane, Layout};
use super::limits::{BatchLimits, BufferBudget};
use super::membership::{Confirmation, Tenure};
use super::park::{self, Parked, SourceEnds, Wake};
use super::positions::{read_lane_positions, LanePositions};
use super::progress::InternalTopics;
use super::throttle::Throttle;
use crate::health::Health;
use crate::metrics as m;
use crate::read::ReaderLimits;
use crate::topics::filter::TopicFilter;

mod batch;
mod cache_check;
mod resume;
mod session;
mod siblings;

pub use resume::forget_uncopied;

/// What to do when source records disappear before they are copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapPolicy {
    /// Stop with an error naming the lost offsets (default).
    Fail,
    /// Continue after the gap; log it and count it in metrics.
    Skip,
}

/// Settings shared by all lanes of one run. No `Debug`: its client
/// settings hold what rdkafka's own `Debug` does not hide (a private key
/// decrypted from a key store, OAuth settings).
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

/// Longest a lane that ends with a transaction open waits for its abort:
/// short, as the run may be stopping (`--shutdown.timeout.ms`); past it the
/// target ends the transaction at its timeout.
const LEFT_OPEN_ABORT_WAIT: Duration = Duration::from_secs(10);

/// Bounds of the wait between two sessions of a lane.
const SESSION_BACKOFF_MIN: Duration = Duration::from_millis(100);
const SESSION_BACKOFF_MAX: Duration = Duration::from_secs(10);

/// What one lane copies, as the latest topic refresh found it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LaneWork {
    /// The lane's source partitions, sorted.
    pub partitions: Vec<SourcePartition>,
    /// A `batch.size` below the producer's own, for target topics whose
    /// `max.message.bytes` would refuse its batches (see
    /// [`batch_bytes_within`]).
    pub batch_bytes: Option<usize>,
}

impl LaneWork {
    /// `partitions`, with a batch size that fits the smallest of their
    /// target topics' `limits` when `configured` would not.
    pub fn new(
        mut partitions: Vec<SourcePartition>,
        limits: &BTreeMap<String, usize>,
        configured: usize,
    ) -> Self {
        partitions.sort();
        let batch_bytes = partitions
            .iter()
            .filter_map(|p| limits.get(&p.topic).copied())
            .min()
            .map(batch_bytes_within)
            .filter(|&fitting| fitting < configured);
        LaneWork {
            partitions,
            batch_bytes,
        }
    }
}

/// A lane's work, shared between the supervisor (which discovers
/// partitions) and the lane (which copies them). A change takes effect at
/// the lane's next batch boundary, with a new session.
#[derive(Debug, Default)]
pub struct LanePartitions {
    current: Mutex<LaneWork>,
    version: AtomicU64,
}

impl LanePartitions {
    /// Sets the lane's work; returns whether it changed.
    pub fn replace(&self, work: LaneWork) -> bool {
        let mut current = self.current.lock().expect("lane partitions poisoned");
        if *current == work {
            return false;
        }
        *current = work;
        self.version.fetch_add(1, Ordering::Release);
        true
    }

    fn snapshot(&self) -> (u64, LaneWork) {
        let current = self.current.lock().expect("lane partitions poisoned");
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
    /// The lane's partitions as last seen: one that leaves (its topic
    /// deleted, or no longer selected) has its local cache forgotten by the
    /// lane, its only writer, between sessions.
    last_partitions: RefCell<Vec<SourcePartition>>,
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
            last_partitions: RefCell::new(Vec::new()),
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
            if self.tenure.stop.load(Ordering::Relaxed) || self.to_copy().1.partitions.is_empty() {
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
                    tracing::info!(lane = %self.lane, "the lane's partitions (or the batch size its topics allow) changed; starting a new session")
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
        // Nothing it can read waits: its positions include the markers and
        // aborted records read past before it parked.
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

    /// Reads `lane`'s positions: this lane's own at a session start, or
    /// another lane's for a topic this lane's positions do not name.
    fn read_lane(
        &self,
        lane: Lane,
        start_hint: Option<i64>,
    ) -> Result<LanePositions, super::positions::ResumeError> {
        read_lane_positions(
            &self.target_reader(),
            &self.settings.internal_topics.position,
            lane,
            self.settings.layout,
            start_hint,
            call_timeout(&self.settings),
            &|| self.health.progress(self.lane),
        )
    }

    /// Settings of the lane's readers of the target (its positions, a
    /// target partition's records), within the lane's consumer share of the
    /// memory bound: a session reads them before its source consumer
    /// fetches anything. librdkafka's default prefetch, 64 MiB a reader,
    /// came on top of the bound at every session start.
    fn target_reader(&self) -> ClientConfig {
        let mut reader = self.settings.target_reader.clone();
        reader.set_reader_limits(self.budget.consumer_kbytes());
        reader
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_fits_the_smallest_limit_of_its_topics_when_it_must() {
        let limits = BTreeMap::from([
            ("small".to_string(), 20_000),
            ("big".to_string(), 2_000_000),
        ]);
        let batch = |topics: &[&str], configured| {
            let partitions = topics.iter().map(|t| SourcePartition::new(*t, 0)).collect();
            LaneWork::new(partitions, &limits, configured).batch_bytes
        };
        assert_eq!(batch(&["big", "small", "unknown"], 1_000_000), Some(19_375));
        assert_eq!(batch(&["small"], 16_384), None);
        assert_eq!(batch(&["big"], 1_000_000), None);
        assert_eq!(batch(&["unknown"], 1_000_000), None);
    }
}

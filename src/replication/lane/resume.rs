//! A lane session's start: fence older producers, read every partition's
//! resume position from the target, and open a cursor per partition
//! (invariant 1 of `mod.rs`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use eosmirror_state::{Checkpoint, SourcePartition, StateStore};
use rdkafka::consumer::BaseConsumer;

use super::cache_check::{check_cache, CacheCheck};
use super::session::{Committed, Cursor, LaneSession};
use super::siblings::RecordedTopics;
use super::{
    call_timeout, GapPolicy, LaneWork, LaneWorker, SessionEnd, LEFT_OPEN_ABORT_WAIT,
    METADATA_TIMEOUT,
};
use crate::failpoints::{self, crash_point};
use crate::malloc;
use crate::metrics as m;
use crate::replication::client_stats::{ClientStats, SourceConsumer, StatsContext};
use crate::replication::errors::{classify, Disposition};
use crate::replication::failure::WorkerError;
use crate::replication::lineage::{self, Continuity, TopicIds};
use crate::replication::positions::{
    target_has_committed_records, watermark_client, LanePositions, ResumePosition,
};
use crate::replication::progress::Lineage;
use crate::replication::transaction::TransactionalProducer;
use crate::replication::watermarks;

impl LaneWorker {
    /// One producer lifetime: init, resume every partition, claim, then
    /// batches until something makes the producer's state uncertain.
    pub(super) fn session(&self) -> Result<SessionEnd, WorkerError> {
        let settings = &*self.settings;
        let timeout = call_timeout(settings);
        let (version, work) = self.to_copy();
        let partitions = work.partitions;
        let mut target = settings.target.clone();
        if let Some(bytes) = work.batch_bytes {
            target.set("batch.size", bytes.to_string());
        }
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
        // A slow init (or one delivered after a freeze) may return after
        // the lane was revoked: it may have fenced the new owner once, and
        // does nothing more.
        if self.tenure.stop.load(Ordering::Relaxed) {
            tracing::info!(lane = %self.lane, "the lane was asked to stop while init_transactions ran; the session ends before reading positions");
            return Ok(SessionEnd::Shutdown);
        }

        let (found, cached) = match self.resume_positions(&partitions) {
            Ok(read) => read,
            Err(ResumeFailure::Restart(detail)) => {
                return Ok(SessionEnd::restart("resume_read", detail))
            }
            Err(ResumeFailure::Fatal(e)) => return Err(e),
        };
        // Everything below the high watermark read was written before this
        // session's init: a foreign record from there on is a takeover.
        self.known_position.set(Some(found.high_watermark - 1));

        let mut source = self
            .budget
            .lane_consumer(&settings.source, partitions.len());
        malloc::fit_to_lane(partitions.len(), settings.layout.lanes());
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
        // A partition that starts (no position, or a topic started over)
        // may only be copied into an empty target partition, unless
        // allowed, and its first copy lands at the target partition's end:
        // one batch of watermarks for all.
        let target_ends =
            match watermarks::fetch_all(&target_watermarks, &partitions, METADATA_TIMEOUT) {
                Ok(ends) => ends,
                Err(e) => return Ok(SessionEnd::restart("target_check", e.to_string())),
            };
        let mut recorded_topics = RecordedTopics::new(&found.latest);
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
                target: target_ends[&partition],
            };
            let resume = found.latest.get(&partition);
            if let Some(cached) = cached.get(&partition) {
                if let Err(error) = self.reconcile_cache(&partition, cached, &lineage, resume) {
                    self.stop_partition(error)?;
                    continue;
                }
            }
            let opened = self.open_cursor(
                &target_watermarks,
                partition,
                lineage,
                resume,
                ends,
                &mut recorded_topics,
            );
            match opened {
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
        let end = session.run();
        // No next session resolves the transaction (the lane stops, or
        // the run ends): aborted here, or the target's read_committed
        // readers of every partition it wrote wait for its timeout.
        if session.producer.in_transaction()
            && (end.is_err() || self.tenure.stop.load(Ordering::Relaxed))
        {
            self.abort_left_open(&session.producer);
        }
        end
    }

    /// Aborts the transaction a session ends with, only while the group
    /// confirms the lane is this instance's (invariant 4: an abort can bump
    /// the producer epoch), within [`LEFT_OPEN_ABORT_WAIT`].
    fn abort_left_open(&self, producer: &TransactionalProducer) {
        let lane = self.lane;
        if !self
            .tenure
            .membership
            .confirm_once(lane, self.position_end())
        {
            tracing::info!(%lane, "the lane ends with a transaction open and the fleet's group did not confirm it is this instance's: not aborted (the lane's next owner resolves it, or the target after the transaction timeout)");
            return;
        }
        match producer.abort_within(LEFT_OPEN_ABORT_WAIT) {
            Ok(()) => tracing::info!(%lane, "aborted the transaction the lane ended with"),
            Err(e) => {
                tracing::warn!(%lane, "aborting the transaction the lane ended with: {e} (the target ends it after the transaction timeout)")
            }
        }
    }

    /// The lane's work without the stopped partitions, and its version.
    /// Called between sessions, when no batch of the lane is open: forgets
    /// the local cache of partitions that left the lane.
    pub(super) fn to_copy(&self) -> (u64, LaneWork) {
        let (version, mut work) = self.partitions.snapshot();
        self.forget_left(&work.partitions);
        work.partitions.retain(|p| !self.health.stopped.contains(p));
        (version, work)
    }

    /// Forgets the local cache of the partitions last seen but not in `now`
    /// (sorted), so the cache holds what is copied, not all ever copied.
    /// Only a hint is lost: a partition that comes back resumes from the
    /// target. A stopped partition (which the refresh also takes out) keeps
    /// its cache: it may be the evidence of its stop (`TargetLostData`),
    /// which a restart has to find again.
    fn forget_left(&self, now: &[SourcePartition]) {
        let mut last = self.last_partitions.borrow_mut();
        let left: Vec<&SourcePartition> = last
            .iter()
            .filter(|p| now.binary_search(p).is_err() && !self.health.stopped.contains(p))
            .collect();
        forget_uncopied(&self.state, &left);
        *last = now.to_vec();
    }

    /// Whether the operator let `topic` start over when recreated.
    pub(super) fn starts_over(&self, topic: &str) -> bool {
        self.settings
            .start_over
            .as_ref()
            .is_some_and(|f| f.matches(topic))
    }

    /// Reads the lane's positions from the target, starting where the local
    /// cache says the oldest is; also returns the cache, to be checked
    /// against them once the topics' ids are known.
    fn resume_positions(
        &self,
        partitions: &[SourcePartition],
    ) -> Result<(LanePositions, HashMap<SourcePartition, Checkpoint>), ResumeFailure> {
        let mut cached = HashMap::with_capacity(partitions.len());
        for partition in partitions {
            let checkpoint = self
                .state
                .checkpoint(partition)
                .map_err(|e| ResumeFailure::Fatal(self.fatal(format!("local state: {e}"))))?;
            if let Some(c) = checkpoint {
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
            .read_lane(self.lane, hint)
            .map_err(|e| match e.is_permanent() {
                true => ResumeFailure::Fatal(self.fatal(e.to_string())),
                false => ResumeFailure::Restart(e.to_string()),
            })?;
        Ok((found, cached))
    }

    /// Keeps or forgets a partition's cached checkpoint, or stops the
    /// partition when the cache holds commits the target lost (see
    /// [`check_cache`]).
    fn reconcile_cache(
        &self,
        partition: &SourcePartition,
        cached: &Checkpoint,
        lineage: &Lineage,
        target: Option<&ResumePosition>,
    ) -> Result<(), WorkerError> {
        match check_cache(cached, lineage, target.map(|r| &r.record)) {
            CacheCheck::Agrees => Ok(()),
            CacheCheck::Forget => self
                .state
                .reset_partition(partition)
                .map_err(|e| self.fatal(format!("local state: forgetting {partition}: {e}"))),
            CacheCheck::TargetLost { target_next } => Err(WorkerError::TargetLostData {
                source_partition: partition.clone(),
                cached_next: cached.next_source_offset,
                target_says: match target_next {
                    Some(next) => format!("the target's position is {next}"),
                    None => "the target has no position for these topics".to_string(),
                },
                position_topic: self.settings.internal_topics.position.clone(),
            }),
        }
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
        recorded_topics: &mut RecordedTopics,
    ) -> Result<Result<Cursor, SessionEnd>, WorkerError> {
        let settings = &*self.settings;
        let timeout = call_timeout(settings);
        let starts_over = self.starts_over(&partition.topic);
        let resume = match resume {
            Some(r) => {
                match lineage::compare(&partition, &r.record.lineage, &lineage, starts_over)? {
                    Continuity::Same => Some(r),
                    Continuity::StartOver => {
                        tracing::warn!(lane = %self.lane, %partition, recorded = ?r.record.lineage, now = ?lineage, "the topic was recreated; starting it over from the source's first record as --start.over allows (its old positions and history are superseded)");
                        self.state.reset_partition(&partition).map_err(|e| {
                            self.fatal(format!("local state: forgetting {partition}: {e}"))
                        })?;
                        None
                    }
                }
            }
            // A new partition, unless its topic's other partitions record
            // another incarnation of the topic (see `siblings.rs`).
            None => {
                let objection = match recorded_topics.objection(self, &partition.topic, &lineage) {
                    Ok(objection) => objection,
                    Err(e) => {
                        let detail = format!("reading the positions of the lane of {}-0 for {partition}, which has no position of its own: {e}", partition.topic);
                        return match e.is_permanent() {
                            true => Err(self.fatal(detail)),
                            false => Ok(Err(SessionEnd::restart("sibling_positions", detail))),
                        };
                    }
                };
                if let Some(recorded) = objection {
                    // Same only for identical lineages, which are no objection.
                    let continuity =
                        lineage::compare(&partition, &recorded, &lineage, starts_over)?;
                    assert_eq!(continuity, Continuity::StartOver);
                    tracing::warn!(lane = %self.lane, %partition, recorded = ?recorded, now = ?lineage, "the topic was recreated; its new partition starts from the source's first record as --start.over allows");
                }
                None
            }
        };
        let (low, end) = ends.source;
        let (target_low, target_end) = ends.target;
        if resume.is_none() && !settings.allow_nonempty_target && target_end > target_low {
            match target_has_committed_records(
                &self.target_reader(),
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
            None => Committed::fresh(low, target_end),
        };
        // Copies committed into the target partition sit below its end (its
        // high watermark, above their commit marker): an end below them is
        // a target that lost them, never a position to copy after.
        if committed.next_target_offset > target_end {
            return Err(WorkerError::TargetTruncated {
                source_partition: partition,
                target_end,
                next_target_offset: committed.next_target_offset,
                position_topic: settings.internal_topics.position.clone(),
            });
        }
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
            starts_history: resume.is_none(),
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

/// Forgets the local cache of `partitions`, no longer copied: by the
/// supervisor before any lane runs, and by a lane for those that left it.
/// Only a hint is lost: a partition that comes back resumes from the
/// target.
pub fn forget_uncopied(state: &StateStore, partitions: &[&SourcePartition]) {
    for partition in partitions {
        if let Err(e) = state.reset_partition(partition) {
            tracing::warn!(%partition, error = %e, "forgetting the local cache of a partition no longer copied failed; it is only a cache");
        }
    }
    if !partitions.is_empty() {
        tracing::info!(
            "forgot the local cache of {} partition(s) no longer copied",
            partitions.len()
        );
    }
}

/// What a session learnt of a partition's ends before opening its cursor.
#[derive(Debug, Clone, Copy)]
struct Ends {
    /// The source's low and high (last stable) watermarks.
    source: (i64, i64),
    /// The target partition's low and high watermarks: where a partition
    /// that starts lands its first copy, and whether it holds any record.
    target: (i64, i64),
}

/// Why reading the resume positions failed.
enum ResumeFailure {
    /// Transient (e.g. the target did not answer in time): a new session retries.
    Restart(String),
    /// The positions cannot be trusted or used: the lane stops, named.
    Fatal(WorkerError),
}

//! The supervisor: discovers source partitions, prepares the target, hands
//! each partition to its lane, joins the fleet's group, runs one thread per
//! lane that the group assigned to this instance and that has partitions,
//! and owns shutdown.
//!
//! It is the only async part of replication. Metadata calls block, so they
//! run on the blocking pool; lanes run on threads of their own.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use eosmirror_state::{SourcePartition, StateStore};
use rdkafka::config::ClientConfig;
use tokio::sync::mpsc;

use super::client_settings;
use super::copy_progress::{self, Report};
use super::failure::WorkerError;
use super::lane::{self, LanePartitions, LaneWork, LaneWorker, WorkerSettings};
use super::layout::{Lane, Layout};
use super::limits::BufferBudget;
use super::membership::{FleetSettings, LaneOwnership, Membership, MembershipError, Tenure};
use super::positions::watermark_client;
use super::selection::{self, SelectionDiffers};
use super::status_topic::{self, Identity, StatusPublisher};
use super::watermarks;
use crate::health::Health;
use crate::metrics as m;
use crate::shutdown::Shutdown;
use crate::topics::clients::DiscoveryClients;
use crate::topics::filter::TopicFilter;
use crate::topics::internal::Finding;
use crate::topics::target::{
    decide, prepare_target, select, RefusedTopic, SourceTopic, TargetTopicOptions, TopicError,
};

/// More new partitions than this in one refresh (a start at thousands of
/// partitions) are logged as one line, each partition at debug level.
const JOIN_LOG_LIMIT: usize = 64;

/// Longest a refresh waits for the target to answer for partitions it
/// created (4 s for 1,000 and 20 s for 5,000 on the local clusters).
const NEW_PARTITIONS_WAIT: Duration = Duration::from_secs(60);

/// How often the run checks that no lane is stuck (see [`RunError::Stalled`]).
const STALL_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// Everything the supervisor needs besides the worker settings. No
/// `Debug`, for the secrets its client settings hold (see
/// [`WorkerSettings`]).
pub struct SupervisorSettings {
    /// Client settings for metadata and admin calls on the source.
    pub source_admin: ClientConfig,
    /// Client settings for metadata and admin calls on the target.
    pub target_admin: ClientConfig,
    pub filter: TopicFilter,
    pub target_topics: TargetTopicOptions,
    /// How often new topics and partitions are looked for.
    pub refresh_interval: Duration,
    /// Bound on librdkafka buffers across all lanes.
    pub memory_limit_bytes: usize,
    /// How long shutdown waits for lanes to commit and stop.
    pub shutdown_timeout: Duration,
    /// Timeout of metadata requests.
    pub metadata_timeout: Duration,
    /// How often a backfill logs its progress.
    pub progress_interval: Duration,
    /// The fleet's group, which decides the lanes this instance copies.
    pub fleet: FleetSettings,
}

/// Why a run ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Topics(#[from] TopicError),
    #[error("replication stopped")]
    Worker(#[from] WorkerError),
    #[error("{0} lane(s) did not stop within {1:?} after shutdown was requested; their open transactions will be aborted by the next start")]
    ShutdownTimeout(usize, Duration),
    #[error("every source partition of this run is stopped by an error of its own, nothing is left to copy. {0}")]
    AllPartitionsStopped(String),
    #[error("{0}. The other partitions were copied until shutdown")]
    PartitionsStopped(String),
    #[error(transparent)]
    Join(#[from] MembershipError),
    #[error(transparent)]
    Selection(#[from] SelectionDiffers),
    #[error("{0}")]
    Membership(String),
    #[error("{0}: a call into librdkafka has not returned (it can wait without end for a lost transaction coordinator, librdkafka #5456). Stopping, so that a restart resumes every lane from the target's committed positions")]
    Stalled(String),
}

/// Runs replication until shutdown is requested, a lane fails for good, or
/// every partition is stopped by an error of its own. A run that stopped
/// partitions ends with an error naming them, even at a clean shutdown.
/// `group_sync`, the group sync task if the run has one, ends before this
/// instance leaves the fleet's group.
pub async fn run(
    settings: SupervisorSettings,
    workers: Arc<WorkerSettings>,
    state: Arc<StateStore>,
    health: Arc<Health>,
    ownership: Arc<LaneOwnership>,
    shutdown: Shutdown,
    group_sync: Option<tokio::task::JoinHandle<()>>,
) -> Result<(), RunError> {
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    let layout = workers.layout;
    // Each lane's share of the memory bound depends on the lane count only,
    // never on how many partitions discovery finds.
    let budget = BufferBudget::split(settings.memory_limit_bytes, layout.lanes() as usize);
    let mut membership: Option<(Arc<Membership>, JoinHandle<()>)> = None;
    // Each running lane thread's partitions, replaced at every refresh.
    let mut running: HashMap<Lane, Arc<LanePartitions>> = HashMap::new();
    // The latest refresh's partitions to copy, by lane.
    let mut by_lane: BTreeMap<Lane, Vec<SourcePartition>> = BTreeMap::new();
    // The target topics' batch limits (`max.message.bytes`) as last read:
    // a refresh that could not read them keeps them (a lane's batch size
    // changing back and forth would restart its sessions).
    let mut batch_limits: BTreeMap<String, usize> = BTreeMap::new();
    let configured_batch_bytes = client_settings::batch_bytes(&workers.target);
    let mut known: HashSet<SourcePartition> = HashSet::new();
    // Partitions the latest refresh did not find, kept for one refresh.
    let mut missed_once: HashSet<SourcePartition> = HashSet::new();
    let mut first_error: Option<RunError> = None;
    let mut first_refresh = true;
    let mut next_refresh = tokio::time::Instant::now();
    // Internal-topic warnings already logged: each once per process, not at
    // every refresh.
    let mut warned: HashSet<Finding> = HashSet::new();
    // Topics selected but left out as internal, each told once.
    let mut told_left_out: HashSet<String> = HashSet::new();
    // Members that got past the start's selection check (see
    // `selection`): the watch says when this instance must leave.
    let (differs_tx, mut selection_differs) = mpsc::channel(1);
    tokio::spawn(selection::watch(
        settings.fleet.selection_check(),
        settings.refresh_interval,
        shutdown.clone(),
        differs_tx,
    ));
    // Topics the target refused at the latest refresh, each told once
    // while it stays refused.
    let mut refused_before: HashSet<RefusedTopic> = HashSet::new();
    let stopped = &health.stopped;
    tokio::spawn(report_progress(
        Arc::clone(&health),
        settings.progress_interval,
        shutdown.clone(),
    ));

    // What only this process knows (stopped partitions, rates), published
    // outside the transactions for `eosmirror status`.
    let publisher = StatusPublisher::new(
        &settings.fleet.target,
        workers.internal_topics.status.clone(),
        layout,
        Identity::of_this_process(workers.instance),
        Arc::clone(&health),
        Arc::clone(&ownership),
    )
    .map(Arc::new);
    if let Some(publisher) = &publisher {
        tokio::spawn(Arc::clone(publisher).run(status_topic::PUBLISH_INTERVAL, shutdown.clone()));
    }

    let clients = Arc::new(DiscoveryClients::new(
        &settings.source_admin,
        &settings.target_admin,
    )?);
    let (stall_tx, mut stalled) = mpsc::channel(1);
    tokio::spawn(watch_stalls(
        Arc::clone(&health),
        shutdown.clone(),
        stall_tx,
    ));
    while !shutdown.requested() {
        if tokio::time::Instant::now() >= next_refresh {
            next_refresh = tokio::time::Instant::now() + settings.refresh_interval;
            // A refresh can take minutes (metadata and admin calls against a
            // cluster that does not answer, thousands of new partitions);
            // shutdown does not wait for it while the lanes copy on.
            let refreshed = tokio::select! {
                refreshed = refresh(&settings, &workers, &clients) => refreshed,
                _ = shutdown.wait() => break,
            };
            match refreshed {
                Ok(Refreshed {
                    partitions,
                    warnings,
                    left_out,
                    refused,
                    max_message_bytes,
                }) => {
                    batch_limits.extend(max_message_bytes);
                    // Not fatal, not even at start: a restart of a fleet
                    // copying the other topics must go on copying them.
                    for topic in &refused {
                        if !refused_before.contains(topic) {
                            tracing::warn!("{topic}; the other topics are copied on, and the target is asked again at every refresh");
                        }
                    }
                    m::topics_refused(refused.len());
                    refused_before = refused.into_iter().collect();
                    for warning in warnings {
                        if !warned.contains(&warning) {
                            tracing::warn!("{warning}");
                            warned.insert(warning);
                        }
                    }
                    for topic in left_out {
                        if !told_left_out.contains(&topic) {
                            tracing::warn!(%topic, "the topic matches --include/--exclude but is not copied: a name starting with __ marks an internal topic (MirrorMaker 2 leaves them out by default too)");
                            told_left_out.insert(topic);
                        }
                    }
                    by_lane.clear();
                    let mut current: HashSet<SourcePartition> = partitions.into_iter().collect();
                    // A partition missing from one answer may be a blip of
                    // the metadata (a broker that just restarted): it
                    // leaves after two refreshes without it.
                    let missing: HashSet<SourcePartition> =
                        known.difference(&current).cloned().collect();
                    let first_miss: HashSet<SourcePartition> =
                        missing.difference(&missed_once).cloned().collect();
                    current.extend(first_miss.iter().cloned());
                    missed_once = first_miss;
                    log_changes(&known, &current, layout);
                    if first_refresh {
                        forget_cached_uncopied(&state, &current);
                    }
                    // Limits of the topics still copied (a partition
                    // missing from one answer included).
                    let topics: HashSet<&str> = current.iter().map(|p| p.topic.as_str()).collect();
                    batch_limits.retain(|topic, _| topics.contains(topic.as_str()));
                    // A partition that left (its topic deleted, or no
                    // longer matched) leaves its lane at the lane's next
                    // batch boundary, as a new one joins.
                    known = current;
                    for partition in &known {
                        if !stopped.contains(partition) {
                            by_lane
                                .entry(layout.lane_of(partition))
                                .or_default()
                                .push(partition.clone());
                        }
                    }
                    m::partitions_running(known.len());
                    health.discovered();
                    // The group is joined once the position topic, whose
                    // partitions are the lanes, surely exists.
                    if membership.is_none() {
                        match Membership::join(
                            settings.fleet.clone(),
                            Arc::clone(&ownership),
                            Arc::clone(&health),
                        ) {
                            Ok(joined) => membership = Some(joined),
                            Err(e) => {
                                first_error = Some(e.into());
                                break;
                            }
                        }
                    }
                }
                // At start-up a bad topic setup is the user's to fix now;
                // later it is just as wrong, so both stop the run.
                Err(
                    e @ RunError::Topics(
                        TopicError::TooFewPartitions(_)
                        | TopicError::LogAppendTime { .. }
                        | TopicError::Layout { .. }
                        | TopicError::LayoutRaced { .. }
                        | TopicError::InternalTopics(_)
                        | TopicError::InternalTopicsNotDescribable { .. },
                    ),
                ) => {
                    first_error = Some(e);
                    break;
                }
                Err(e) if first_refresh => {
                    first_error = Some(e);
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "refreshing topics failed; retrying at the next refresh")
                }
            }
            first_refresh = false;
        }
        if let Some(reason) = ownership.failure() {
            first_error = Some(RunError::Membership(reason));
            break;
        }
        if let Some((member, _)) = &membership {
            // A running lane none of whose partitions is left to copy ends
            // at its next batch boundary.
            for (lane, shared) in &running {
                if !by_lane.contains_key(lane) {
                    shared.replace(LaneWork::default());
                }
            }
            for (lane, partitions) in &by_lane {
                let work = LaneWork::new(partitions.clone(), &batch_limits, configured_batch_bytes);
                if let Some(shared) = running.get(lane) {
                    shared.replace(work);
                    continue;
                }
                // Its partitions stopped since the refresh: a lane started
                // for them would end at once, again and again.
                if stopped.all(partitions.iter()) {
                    continue;
                }
                let stop = Arc::new(AtomicBool::new(false));
                // Only lanes the group assigned to this instance run.
                if !ownership.try_start(*lane, Arc::clone(&stop)) {
                    continue;
                }
                let shared = Arc::new(LanePartitions::default());
                shared.replace(work);
                let worker = LaneWorker::new(
                    *lane,
                    Arc::clone(&shared),
                    workers.clone(),
                    state.clone(),
                    Tenure {
                        membership: Arc::clone(member),
                        stop,
                    },
                    budget,
                    Arc::clone(&health),
                );
                let done = done_tx.clone();
                let lanes = Arc::clone(&ownership);
                let lane = *lane;
                running.insert(lane, shared);
                health.lane_started(lane);
                std::thread::Builder::new()
                    .name(format!("eosmirror {lane}"))
                    .spawn(move || {
                        // A panic ends the run like a fatal error (a restart
                        // fences the lane and resumes from the target),
                        // instead of leaving the lane owned and dead.
                        let result = std::panic::catch_unwind(AssertUnwindSafe(|| worker.run()))
                            .unwrap_or_else(|panic| {
                                Err(WorkerError::panicked(lane, panic.as_ref()))
                            });
                        lanes.ended(lane);
                        let _ = done.send((lane, result));
                    })
                    .expect("spawning a lane thread");
            }
        }

        tokio::select! {
            _ = tokio::time::sleep_until(next_refresh) => {}
            Some(stuck) = stalled.recv() => {
                first_error = Some(RunError::Stalled(stuck));
                break;
            }
            Some(differs) = selection_differs.recv() => {
                first_error = Some(differs.into());
                break;
            }
            _ = shutdown.wait() => {}
            _ = ownership.changed() => {}
            Some((lane, result)) = done_rx.recv() => {
                running.remove(&lane);
                health.lane_ended(lane);
                if let Err(e) = result {
                    tracing::error!(%lane, error = %e, "lane failed");
                    first_error = Some(e.into());
                    break;
                }
                // A lane ends by itself when its partitions are all stopped.
                if stopped.all(known.iter()) {
                    first_error = Some(RunError::AllPartitionsStopped(stopped.summary()));
                    break;
                }
            }
        }
    }

    // Stop every lane: each commits its open transaction and returns.
    shutdown.trigger();
    ownership.stop_all();
    let deadline = Instant::now() + settings.shutdown_timeout;
    while !running.is_empty() {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(remaining, done_rx.recv()).await {
            Ok(Some((lane, result))) => {
                running.remove(&lane);
                health.lane_ended(lane);
                if let Err(e) = result {
                    tracing::error!(%lane, error = %e, "lane failed");
                    first_error.get_or_insert(e.into());
                }
            }
            Ok(None) => break,
            Err(_) => {
                first_error.get_or_insert(RunError::ShutdownTimeout(
                    running.len(),
                    settings.shutdown_timeout,
                ));
                break;
            }
        }
    }
    // A group sync round still running would commit target groups after
    // lane 0 (and with it group sync) moved to another instance, undoing
    // that instance's newer rounds: it ends before this one leaves.
    if let Some(sync) = group_sync {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if tokio::time::timeout(remaining, sync).await.is_err() {
            tracing::warn!("a group sync round did not end within --shutdown.timeout.ms; leaving the fleet's group anyway");
        }
    }
    // Leaving the group hands this instance's lanes to the others at once,
    // instead of after the session timeout.
    if let Some((member, thread)) = membership {
        // The lanes are still this instance's in the group: its last status
        // records land before the next owner's first.
        if let Some(publisher) = publisher {
            let _ = tokio::task::spawn_blocking(move || {
                publisher.publish_final(Duration::from_secs(5))
            })
            .await;
        }
        member.leave();
        tokio::task::spawn_blocking(move || {
            let _ = thread.join();
            drop(member);
        })
        .await
        .expect("leaving the fleet's group panicked");
    }
    if let Err(e) = state.flush() {
        tracing::warn!(error = %e, "flushing local state failed; it is only a cache");
    }
    match first_error {
        Some(e) => Err(e),
        None if !stopped.is_empty() => Err(RunError::PartitionsStopped(stopped.summary())),
        None => Ok(()),
    }
}

/// The watchdog behind `/healthz`, for runs no orchestrator probes: names
/// the lanes stuck past the stall limit (longer than any Kafka call may
/// take), so that the run ends, which is safe at any instant. Ends at
/// shutdown.
async fn watch_stalls(health: Arc<Health>, shutdown: Shutdown, stalled: mpsc::Sender<String>) {
    let mut checked = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(STALL_CHECK_INTERVAL) => {}
            _ = shutdown.wait() => return,
        }
        let now = Instant::now();
        // A process frozen (SIGSTOP, a paused VM) or starved for a while
        // gave its lanes no chance either: their stall clocks restart.
        if now.duration_since(checked) > STALL_CHECK_INTERVAL * 3 {
            health.resumed_after_pause(now);
        }
        checked = now;
        let live = health.liveness(now);
        if !live.healthy {
            let _ = stalled.send(live.text.trim_end().replace('\n', "; ")).await;
            return;
        }
    }
}

/// Logs the backfill's progress every `interval` (see
/// [`copy_progress::report`]) until shutdown.
async fn report_progress(health: Arc<Health>, interval: Duration, shutdown: Shutdown) {
    let mut before = health.copy_progress.snapshot();
    let mut in_backfill = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.wait() => return,
        }
        let now = health.copy_progress.snapshot();
        match copy_progress::report(before, now, interval, &mut in_backfill) {
            Some(
                report @ Report::Backfill {
                    copied,
                    total,
                    remaining,
                    records_per_sec,
                    eta,
                    lanes_reading,
                },
            ) => {
                tracing::info!(
                    copied,
                    total,
                    remaining,
                    records_per_sec = records_per_sec.round() as u64,
                    eta_secs = eta.map(|e| e.as_secs()),
                    lanes_reading,
                    "{report}"
                );
            }
            Some(report @ Report::CaughtUp { copied, remaining }) => {
                tracing::info!(copied, remaining, "{report}")
            }
            None => {}
        }
        before = now;
    }
}

/// At the first refresh, before any lane runs: forgets the local cache of
/// partitions a previous run cached and this one does not copy (their
/// topics deleted or no longer selected since). Later, each lane forgets
/// the partitions that leave it (`LaneWorker::forget_left`), being their
/// cache's only writer.
fn forget_cached_uncopied(state: &StateStore, current: &HashSet<SourcePartition>) {
    match state.cached_partitions() {
        Ok(cached) => {
            let gone: Vec<&SourcePartition> =
                cached.iter().filter(|p| !current.contains(*p)).collect();
            lane::forget_uncopied(state, &gone);
        }
        Err(e) => {
            tracing::warn!(error = %e, "listing the local cache's partitions failed; it is only a cache")
        }
    }
}

/// Logs the partitions that join their lanes and those that leave
/// discovery: one line each, or a summary when there are many.
fn log_changes(
    known: &HashSet<SourcePartition>,
    current: &HashSet<SourcePartition>,
    layout: Layout,
) {
    let mut joined: Vec<&SourcePartition> = current.difference(known).collect();
    let mut left: Vec<&SourcePartition> = known.difference(current).collect();
    joined.sort();
    left.sort();
    for (partitions, many, one) in [
        (
            joined,
            "partitions join their lanes",
            "partition joins its lane",
        ),
        (
            left,
            "partitions leave their lanes: their topics were deleted or no longer match --include/--exclude",
            "partition leaves its lane: its topic was deleted or no longer matches --include/--exclude",
        ),
    ] {
        let summarised = partitions.len() > JOIN_LOG_LIMIT;
        if summarised {
            tracing::info!(
                partitions = partitions.len(),
                lanes = layout.lanes(),
                "{many} (one line each at debug level)"
            );
        }
        for partition in partitions {
            let lane = layout.lane_of(partition);
            if summarised {
                tracing::debug!(%partition, %lane, "{one}");
            } else {
                tracing::info!(%partition, %lane, "{one}");
            }
        }
    }
}

/// What a refresh found.
struct Refreshed {
    /// The source partitions to copy.
    partitions: Vec<SourcePartition>,
    /// About the existing internal topics.
    warnings: Vec<Finding>,
    /// Source topics the patterns select but that are not copied (see
    /// [`TopicFilter::left_out_as_internal`]).
    left_out: Vec<String>,
    /// Topics the target refused to create or grow: their partitions
    /// without a copy are left out of `partitions`.
    refused: Vec<RefusedTopic>,
    /// The target topics' `max.message.bytes`, where known.
    max_message_bytes: BTreeMap<String, usize>,
}

/// Lists source partitions to replicate and makes the target ready for
/// them.
async fn refresh(
    settings: &SupervisorSettings,
    workers: &WorkerSettings,
    clients: &Arc<DiscoveryClients>,
) -> Result<Refreshed, RunError> {
    let timeout = settings.metadata_timeout;
    let asked = Arc::clone(clients);
    let (source_counts, target_metadata) = tokio::task::spawn_blocking(move || {
        Ok::<_, TopicError>((
            asked.source.partition_counts(timeout)?,
            asked.target.metadata(timeout)?,
        ))
    })
    .await
    .expect("metadata task panicked")?;
    let topics = select(&source_counts, &settings.filter);
    let left_out: Vec<String> = source_counts
        .keys()
        .filter(|t| settings.filter.left_out_as_internal(t))
        .cloned()
        .collect();
    if topics.is_empty() {
        tracing::warn!("no source topic matches --include/--exclude yet");
    }
    let prepared = prepare_target(
        clients.source.admin(),
        clients.target.admin(),
        &topics,
        &target_metadata,
        &workers.internal_topics,
        &settings.target_topics,
    )
    .await?;
    if !prepared.created_meanwhile.is_empty() {
        decide_again(
            settings,
            workers,
            clients,
            &topics,
            prepared.created_meanwhile,
        )
        .await?;
    }
    if !prepared.new_partitions.is_empty() {
        let reader = workers.target_reader.clone();
        let new_partitions = prepared.new_partitions;
        tokio::task::spawn_blocking(move || await_new_partitions(&reader, &new_partitions))
            .await
            .expect("readiness task panicked");
    }
    let refused = prepared.refused;
    let partitions = topics
        .iter()
        .flat_map(|t| {
            let copyable = refused
                .iter()
                .find(|r| r.topic == t.name)
                .map_or(t.partitions, |r| r.copyable.min(t.partitions));
            (0..copyable).map(move |p| SourcePartition::new(&t.name, p))
        })
        .collect();
    Ok(Refreshed {
        partitions,
        warnings: prepared.warnings,
        left_out,
        refused,
        max_message_bytes: prepared.max_message_bytes,
    })
}

/// Decides again, on fresh metadata, after another instance created topics
/// or added partitions this refresh was about to: one started at the same
/// time with another `--lanes` made the internal topics, and its refusal
/// has to come before any lane copies; one with `--target.add.partitions`
/// grew a topic, which is fine once the target lists the partitions.
async fn decide_again(
    settings: &SupervisorSettings,
    workers: &WorkerSettings,
    clients: &Arc<DiscoveryClients>,
    topics: &[SourceTopic],
    created_meanwhile: Vec<String>,
) -> Result<(), RunError> {
    let timeout = settings.metadata_timeout;
    let asked = Arc::clone(clients);
    let awaited = created_meanwhile.clone();
    let now = tokio::task::spawn_blocking(move || {
        // The broker answering may list the topics a moment after the
        // controller refused to create them again.
        let deadline = Instant::now() + timeout;
        loop {
            let now = asked.target.metadata(timeout)?;
            if awaited.iter().all(|t| now.topics.contains_key(t)) {
                return Ok(now);
            }
            if Instant::now() >= deadline {
                return Err(TopicError::CreatedUnlisted {
                    topics: awaited.join(", "),
                    waited_secs: timeout.as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    })
    .await
    .expect("metadata task panicked")?;
    let decision = decide(
        topics,
        &now,
        &workers.internal_topics,
        &settings.target_topics,
    );
    match decision.refusals().into_iter().next() {
        Some(TopicError::Layout {
            topic,
            partitions,
            lanes,
        }) => Err(TopicError::LayoutRaced {
            topic,
            partitions,
            lanes,
        }
        .into()),
        Some(refusal) => Err(refusal.into()),
        // A topic grown meanwhile has every source partition now, unless
        // the target refused the growth for another reason.
        None => match decision
            .too_few
            .iter()
            .find(|(topic, _, _)| created_meanwhile.contains(topic))
        {
            Some((topic, source, target)) => Err(TopicError::Admin {
                operation: "add partitions",
                topic: topic.clone(),
                cluster: "target",
                reason: format!(
                    "the target refused it (InvalidPartitions) and lists {target} partition(s), {source} on the source"
                ),
            }
            .into()),
            None => Ok(()),
        },
    }
}

/// Waits (bounded) until the target answers for the partitions this refresh
/// created, so lanes do not start against them and restart in a loop. Past
/// the bound the lanes start anyway and retry as for any transient error.
fn await_new_partitions(reader: &ClientConfig, partitions: &[SourcePartition]) {
    let started = Instant::now();
    let outcome = watermark_client(reader)
        .map_err(|e| e.to_string())
        .and_then(|client| {
            watermarks::wait_until_listed(&client, partitions, NEW_PARTITIONS_WAIT)
                .map_err(|e| e.to_string())
        });
    match outcome {
        Ok(()) => tracing::info!(
            partitions = partitions.len(),
            waited_ms = started.elapsed().as_millis() as u64,
            "the target answers for the partitions just created"
        ),
        Err(detail) => tracing::warn!(
            partitions = partitions.len(),
            %detail,
            "the target does not answer yet for some partitions just created; lanes start anyway and retry"
        ),
    }
}

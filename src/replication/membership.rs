//! The fleet: which lanes this instance owns, decided by Kafka's group
//! coordinator on the target, never by this process alone.
//!
//! Every instance of a deployment (same `--transactional.id.prefix` and
//! `--source.alias`) joins one consumer group on the target, named like the
//! lanes' transactional ids (`<prefix>.<alias>`), subscribed to the position
//! topic: its partitions are the lanes, so partition `k` assigned means lane
//! `k` owned. The consumer never reads; it only takes part in the group.
//!
//! # The invariant this file keeps
//!
//! At no moment may producers of two instances both be able to commit for
//! the same lane. Three things hold it together:
//!
//! 1. **Two-phase moves.** The assignment is cooperative-sticky: a lane that
//!    moves is revoked from its owner in one generation and assigned to the
//!    new owner only in the next, which the owner joins after its revoke
//!    callback returned — and that callback stops the lane's thread (which
//!    commits or aborts its open transaction) before it returns.
//! 2. **Generation-checked commits (KIP-447).** Every lane transaction also
//!    commits an offset of the lane's partition for this group with the
//!    member's group metadata. The coordinator refuses it from a member whose
//!    generation is stale (a frozen process, a partitioned network), so such a
//!    transaction can only abort; and the new owner's `init_transactions`
//!    fences the old producer anyway.
//! 3. **Confirmed ownership before every (re)initialisation.** librdkafka
//!    reports a takeover and our own timed-out transaction as the same
//!    `_FENCED` error. Before a lane session initialises its producer (which
//!    fences whoever else holds the transactional id), [`Membership::confirm`]
//!    requires the lane in the local assignment *and* a synchronous offset
//!    commit accepted by the coordinator for the current generation. A lane
//!    that moved stops touching it; a lane whose own transaction timed out
//!    re-initialises. Two instances never fence each other back and forth.
//!
//! # Staying in the group
//!
//! librdkafka rejoins by itself after its session times out; under long
//! target stalls one consumer was seen never to (issue reports of such
//! stuck consumers exist for several librdkafka versions), leaving an
//! instance that owned nothing and copied nothing for minutes. So the
//! membership checks once a second that the group counts it as a member
//! (librdkafka holds a member id), and after [`REJOIN_AFTER_SESSIONS`]
//! session timeouts outside it stops every lane it still owned, closes the
//! consumer and joins again with a new one. The new member's lanes come
//! through the coordinator like any others, so invariants 1–3 hold as for
//! a new instance. Meanwhile `/readyz` says the instance is outside.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, ConsumerGroupMetadata, Rebalance,
};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::layout::Lane;
use super::member_id::fleet_client_id;
use super::selection::{Selection, SelectionCheck};
use crate::clusters::Cluster;
use crate::failpoints::{self, fault_armed};
use crate::health::Health;
use crate::metrics as m;

/// How long the membership thread's poll blocks; bounds how late a
/// rebalance callback or a shutdown request is served.
const POLL_WAIT: Duration = Duration::from_millis(200);

/// Pause between attempts to confirm ownership while the group rebalances.
const CONFIRM_RETRY: Duration = Duration::from_millis(500);

/// How often the membership checks that the group counts it as a member.
const MEMBER_CHECK: Duration = Duration::from_secs(1);

/// How many session timeouts outside the group the membership waits for
/// librdkafka to rejoin by itself before it rejoins with a new consumer:
/// a rejoin normally takes one round trip to the coordinator, and a
/// coordinator that is away longer is not brought back by a new consumer.
const REJOIN_AFTER_SESSIONS: u32 = 3;

/// Settings of the fleet's group membership. No `Debug`, for the secrets
/// its client settings hold (see [`super::lane::WorkerSettings`]).
#[derive(Clone)]
pub struct FleetSettings {
    /// Connection settings of the target (no producer or consumer tuning).
    pub target: ClientConfig,
    /// This process's instance id (as in its position records); named in
    /// the member's client id, so `eosmirror status` can tell which
    /// instance the group gave each lane.
    pub instance: u64,
    /// The fingerprint of the topics this instance copies, also in the
    /// member's client id: every member must have the same (see
    /// [`super::selection`]).
    pub selection: Selection,
    /// The group: the lanes' transactional-id base, `<prefix>.<alias>`.
    pub group_id: String,
    /// The position topic, whose partitions are the lanes.
    pub position_topic: String,
    /// How long the coordinator waits for a silent member (a killed or
    /// frozen instance) before its lanes move to another instance.
    pub session_timeout: Duration,
    /// How long a revoke waits for the lane to commit and stop before it
    /// lets the lane go anyway (the new owner's init then fences it).
    pub revoke_wait: Duration,
}

impl FleetSettings {
    /// The comparison of this instance's shared options with the other
    /// members' (see [`super::selection`]).
    pub fn selection_check(&self) -> SelectionCheck {
        SelectionCheck::new(
            &Cluster {
                name: "target",
                connection: self.target.clone(),
            },
            &self.group_id,
            self.session_timeout,
            self.instance,
            &self.selection,
        )
    }
}

/// A failure of the membership itself: the run cannot own any lane.
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    #[error("joining the fleet's group {group} on the target: {source}")]
    Create {
        group: String,
        #[source]
        source: KafkaError,
    },
    #[error("the target refused the fleet's group {group}: {reason}. Every eosmirror instance joins the consumer group named like its transactional ids (`<transactional.id.prefix>.<source.alias>`) to share the lanes; {fix}")]
    Refused {
        group: String,
        reason: String,
        fix: String,
    },
}

/// Lanes owned and lanes running, shared by the membership thread (which
/// changes ownership in rebalance callbacks), the supervisor (which starts
/// lanes) and the lanes (which end).
#[derive(Default)]
pub struct LaneOwnership {
    state: Mutex<OwnershipState>,
    /// Signalled when a lane thread ends (a revoke waits for it).
    lane_ended: Condvar,
    /// Woken when the set of owned lanes changes or membership fails.
    changed: tokio::sync::Notify,
}

#[derive(Default)]
struct OwnershipState {
    owned: BTreeSet<Lane>,
    /// Running lanes and the flag that asks each to stop.
    running: HashMap<Lane, Arc<AtomicBool>>,
    /// Why membership failed for good, if it did.
    failed: Option<String>,
}

impl LaneOwnership {
    fn state(&self) -> MutexGuard<'_, OwnershipState> {
        self.state.lock().expect("lane ownership poisoned")
    }

    pub fn is_owned(&self, lane: Lane) -> bool {
        self.state().owned.contains(&lane)
    }

    /// The lanes the group assigned to this instance now.
    pub fn owned(&self) -> Vec<Lane> {
        self.state().owned.iter().copied().collect()
    }

    /// Registers `lane` as running with its stop flag, if it is owned and
    /// not running already; under the same lock as a revoke, so a revoke
    /// never misses a lane that starts.
    pub fn try_start(&self, lane: Lane, stop: Arc<AtomicBool>) -> bool {
        let mut state = self.state();
        if !state.owned.contains(&lane) || state.running.contains_key(&lane) {
            return false;
        }
        state.running.insert(lane, stop);
        true
    }

    /// The lane's thread is about to end.
    pub fn ended(&self, lane: Lane) {
        self.state().running.remove(&lane);
        self.lane_ended.notify_all();
    }

    /// Asks every running lane to stop (shutdown).
    pub fn stop_all(&self) {
        for stop in self.state().running.values() {
            stop.store(true, Ordering::SeqCst);
        }
    }

    /// Why membership failed for good, if it did.
    pub fn failure(&self) -> Option<String> {
        self.state().failed.clone()
    }

    /// Resolves at the next change of ownership (or failure) after the last
    /// call; a change in between is not lost.
    pub async fn changed(&self) {
        self.changed.notified().await
    }

    fn assigned(&self, lanes: &[Lane]) {
        if lanes.is_empty() {
            return;
        }
        let mut state = self.state();
        for &lane in lanes {
            state.owned.insert(lane);
            m::lane_owned(lane, true);
        }
        tracing::info!(lanes = ?lanes, owned = ?state.owned, "the fleet's group assigned lanes to this instance");
        drop(state);
        self.changed.notify_one();
    }

    /// Takes `lanes` away and waits (up to `wait`) for their threads to end:
    /// invariant 1, the new owner starts only after this returns.
    fn revoked(&self, lanes: &[Lane], lost: bool, wait: Duration) {
        if lanes.is_empty() {
            return;
        }
        let deadline = Instant::now() + wait;
        let mut state = self.state();
        for lane in lanes {
            state.owned.remove(lane);
            m::lane_owned(*lane, false);
            if let Some(stop) = state.running.get(lane) {
                stop.store(true, Ordering::SeqCst);
            }
        }
        tracing::info!(lanes = ?lanes, lost, owned = ?state.owned, "the fleet's group took lanes from this instance; stopping them");
        while lanes.iter().any(|l| state.running.contains_key(l)) {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                tracing::warn!(lanes = ?lanes, waited = ?wait, "revoked lanes did not stop in time; letting them go (the new owner's init_transactions fences them)");
                break;
            }
            state = self
                .lane_ended
                .wait_timeout(state, remaining)
                .expect("lane ownership poisoned")
                .0;
        }
        drop(state);
        self.changed.notify_one();
    }

    fn fail(&self, reason: String) {
        self.state().failed.get_or_insert(reason);
        self.changed.notify_one();
    }
}

/// The consumer's context: rebalance callbacks change the ownership.
struct FleetContext {
    ownership: Arc<LaneOwnership>,
    revoke_wait: Duration,
}

impl ClientContext for FleetContext {}

impl ConsumerContext for FleetContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(list) = rebalance {
            self.ownership
                .revoked(&lanes_of(list), assignment_lost(consumer), self.revoke_wait);
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(list) => {
                // The consumer only takes part in the group: it never fetches.
                if let Err(e) = consumer.pause(list) {
                    tracing::warn!(error = %e, "pausing the fleet group's partitions");
                }
                self.ownership.assigned(&lanes_of(list));
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(e) => tracing::warn!(error = %e, "fleet group rebalance failed"),
        }
    }
}

/// Whether librdkafka considers the current assignment lost (the member was
/// evicted), rather than handed over in a rebalance.
fn assignment_lost(consumer: &BaseConsumer<FleetContext>) -> bool {
    // SAFETY: the pointer is the live client of `consumer`.
    unsafe { rdkafka::bindings::rd_kafka_assignment_lost(consumer.client().native_ptr()) != 0 }
}

fn lanes_of(list: &TopicPartitionList) -> Vec<Lane> {
    list.elements()
        .iter()
        .filter_map(|e| u32::try_from(e.partition()).ok().map(Lane))
        .collect()
}

/// Whether the group counts `consumer` as a member: librdkafka holds the
/// member id the coordinator gave it (it forgets it when the session times
/// out or the member leaves).
fn is_member(consumer: &BaseConsumer<FleetContext>) -> bool {
    member_id(consumer).is_some()
}

/// The member id the coordinator gave `consumer`, if it holds one.
fn member_id(consumer: &BaseConsumer<FleetContext>) -> Option<String> {
    let client = consumer.client().native_ptr();
    // SAFETY: `client` is the live client of `consumer`; the returned copy
    // of the member id is freed once, with the client's allocator.
    unsafe {
        let id = rdkafka::bindings::rd_kafka_memberid(client);
        if id.is_null() {
            return None;
        }
        let member = std::ffi::CStr::from_ptr(id).to_string_lossy().into_owned();
        rdkafka::bindings::rd_kafka_mem_free(client, id.cast());
        (!member.is_empty()).then_some(member)
    }
}

/// How long the group has left this instance out, and when to stop waiting
/// for librdkafka to rejoin by itself.
#[derive(Debug)]
struct Presence {
    rejoin_after: Duration,
    /// Since when the instance has been outside (across rejoins).
    outside_since: Option<Instant>,
    /// Since when the current consumer has been outside.
    waiting_since: Option<Instant>,
}

impl Presence {
    fn new(rejoin_after: Duration) -> Presence {
        Presence {
            rejoin_after,
            outside_since: None,
            waiting_since: None,
        }
    }

    /// Takes one check's answer; true when the current consumer has been
    /// outside for longer than `rejoin_after`.
    fn observe(&mut self, member: bool, now: Instant) -> bool {
        if member {
            self.outside_since = None;
            self.waiting_since = None;
            return false;
        }
        self.outside_since.get_or_insert(now);
        let waiting = *self.waiting_since.get_or_insert(now);
        now.saturating_duration_since(waiting) > self.rejoin_after
    }

    /// A new consumer joins: it gets its own `rejoin_after`.
    fn rejoined(&mut self, now: Instant) {
        self.waiting_since = Some(now);
    }

    fn outside_since(&self) -> Option<Instant> {
        self.outside_since
    }
}

/// A consumer of the fleet's group, not subscribed yet.
fn new_consumer(
    settings: &FleetSettings,
    ownership: &Arc<LaneOwnership>,
) -> Result<BaseConsumer<FleetContext>, MembershipError> {
    let session_ms = settings.session_timeout.as_millis();
    settings
        .target
        .clone()
        .set("group.id", &settings.group_id)
        .set(
            "client.id",
            fleet_client_id(
                settings.target.get("client.id"),
                settings.selection.as_str(),
                settings.instance,
            ),
        )
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "latest")
        .set("session.timeout.ms", session_ms.to_string())
        .set(
            "heartbeat.interval.ms",
            (session_ms / 5).max(100).to_string(),
        )
        .set("enable.partition.eof", "false")
        .create_with_context(FleetContext {
            ownership: Arc::clone(ownership),
            revoke_wait: settings.revoke_wait,
        })
        .map_err(|source| MembershipError::Create {
            group: settings.group_id.clone(),
            source,
        })
}

/// Joins the group: the consumer takes part from its next poll on.
fn subscribe(
    consumer: &BaseConsumer<FleetContext>,
    settings: &FleetSettings,
) -> Result<(), MembershipError> {
    consumer
        .subscribe(&[&settings.position_topic])
        .map_err(|source| MembershipError::Create {
            group: settings.group_id.clone(),
            source,
        })
}

/// What to change when the target refuses this group for good (`None`:
/// an error retrying may get past).
fn refusal_fix(code: RDKafkaErrorCode, position_topic: &str) -> Option<String> {
    use RDKafkaErrorCode::*;
    match code {
        GroupAuthorizationFailed | TopicAuthorizationFailed => Some(format!(
            "grant the principal READ and DESCRIBE on that group and READ on topic {position_topic}"
        )),
        InvalidSessionTimeout => Some(
            "set --fleet.session.timeout.ms within the target's group.min.session.timeout.ms and group.max.session.timeout.ms".into(),
        ),
        InvalidGroupId => Some("choose a --transactional.id.prefix and --source.alias the target accepts as a group id".into()),
        _ => None,
    }
}

/// This instance's membership in the fleet's group.
pub struct Membership {
    /// Replaced by a new consumer when the group has left this instance out
    /// for too long (see "Staying in the group" above).
    consumer: RwLock<BaseConsumer<FleetContext>>,
    ownership: Arc<LaneOwnership>,
    settings: FleetSettings,
    /// Told whether the instance is in the group (readiness).
    health: Arc<Health>,
    stop: AtomicBool,
}

/// A lane's tenure in this instance: the membership that confirms the lane
/// is this instance's, and the flag a revoke (or shutdown) sets to end it.
#[derive(Clone)]
pub struct Tenure {
    pub membership: Arc<Membership>,
    pub stop: Arc<AtomicBool>,
}

/// Whether a lane may be (re)initialised by this instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    /// The coordinator accepted this member's current generation and the
    /// lane is in its assignment.
    Owned,
    /// The lane is not this instance's (any more): stop touching it.
    NotOwned,
    /// Shutdown, or the lane was asked to stop, before ownership was known.
    Stopping,
}

impl Membership {
    /// Joins the group and starts the thread that serves it.
    pub fn join(
        settings: FleetSettings,
        ownership: Arc<LaneOwnership>,
        health: Arc<Health>,
    ) -> Result<(Arc<Membership>, JoinHandle<()>), MembershipError> {
        let consumer = new_consumer(&settings, &ownership)?;
        subscribe(&consumer, &settings)?;
        tracing::info!(group = %settings.group_id, "joining the fleet's group on the target; lanes start once it assigns them");
        health.outside_fleet(Some(Instant::now()));
        let membership = Arc::new(Membership {
            consumer: RwLock::new(consumer),
            ownership,
            settings,
            health,
            stop: AtomicBool::new(false),
        });
        let serving = Arc::clone(&membership);
        let thread = std::thread::Builder::new()
            .name("eosmirror fleet".into())
            .spawn(move || serving.serve())
            .expect("spawning the fleet membership thread");
        Ok((membership, thread))
    }

    fn consumer(&self) -> RwLockReadGuard<'_, BaseConsumer<FleetContext>> {
        self.consumer.read().expect("fleet consumer poisoned")
    }

    /// Polls the group (heartbeats, rebalance callbacks) until
    /// [`Membership::leave`].
    fn serve(&self) {
        let mut presence = Presence::new(self.settings.session_timeout * REJOIN_AFTER_SESSIONS);
        let mut next_check = Instant::now();
        while !self.stop.load(Ordering::SeqCst) {
            if let Some(Err(e)) = self.consumer().poll(POLL_WAIT) {
                self.on_error(&e);
            }
            let now = Instant::now();
            if now < next_check {
                continue;
            }
            next_check = now + MEMBER_CHECK;
            if !self.ownership.owned().is_empty() && fault_armed(failpoints::FLEET_DROP_OUT) {
                tracing::warn!(
                    "fault point {}: the fleet's consumer leaves the group and stays out",
                    failpoints::FLEET_DROP_OUT
                );
                self.consumer().unsubscribe();
            }
            let member = is_member(&self.consumer());
            m::fleet_member(member);
            let rejoin = presence.observe(member, now);
            self.health.outside_fleet(presence.outside_since());
            if rejoin {
                self.rejoin(now.saturating_duration_since(presence.outside_since().unwrap_or(now)));
                presence.rejoined(Instant::now());
            }
        }
    }

    /// Stops every lane this instance still owns, closes the consumer that
    /// stayed outside the group and joins with a new one.
    fn rejoin(&self, outside: Duration) {
        tracing::warn!(
            group = %self.settings.group_id,
            outside_secs = outside.as_secs(),
            "this instance's consumer has been outside the fleet's group for {} session timeouts; rejoining with a new consumer",
            REJOIN_AFTER_SESSIONS
        );
        m::fleet_rejoined();
        let owned = self.ownership.owned();
        self.ownership
            .revoked(&owned, true, self.settings.revoke_wait);
        let fresh = match new_consumer(&self.settings, &self.ownership) {
            Ok(fresh) => fresh,
            Err(e) => {
                tracing::warn!(error = %e, "rejoining the fleet's group; trying again later");
                return;
            }
        };
        // The old consumer is closed (its revoke callbacks served) before
        // the new one subscribes: no callback of the old member can take a
        // lane the new member was given.
        let old = std::mem::replace(
            &mut *self.consumer.write().expect("fleet consumer poisoned"),
            fresh,
        );
        drop(old);
        if let Err(e) = subscribe(&self.consumer(), &self.settings) {
            tracing::warn!(error = %e, "rejoining the fleet's group; trying again later");
        }
    }

    /// Fails the membership for good if the target refuses the group;
    /// returns whether it did.
    fn on_error(&self, error: &KafkaError) -> bool {
        let fix = error
            .rdkafka_error_code()
            .and_then(|code| refusal_fix(code, &self.settings.position_topic));
        match fix {
            Some(fix) => {
                let failure = MembershipError::Refused {
                    group: self.settings.group_id.clone(),
                    reason: error.to_string(),
                    fix,
                };
                self.ownership.fail(failure.to_string());
                true
            }
            None => {
                tracing::warn!(group = %self.settings.group_id, error = %error, "fleet group");
                false
            }
        }
    }

    /// Stops serving the group; the caller joins the thread, then drops the
    /// membership to leave the group (all lanes must have stopped first).
    pub fn leave(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// The group metadata to commit with a lane transaction (invariant 2),
    /// only while the coordinator counts this instance as a member: the
    /// metadata of a consumer without a member id (never joined, or its
    /// membership reset) carries generation -1, and a coordinator skips the
    /// generation check of a transactional commit with that, so the
    /// commit would pass the fence. Checked before and after the copy is
    /// taken: the same member id both times, so the copy holds it (a reset
    /// and a new id in between would leave a copy without one).
    pub fn group_metadata(&self) -> Option<ConsumerGroupMetadata> {
        let consumer = self.consumer();
        let before = member_id(&consumer)?;
        let metadata = consumer.group_metadata()?;
        (member_id(&consumer)? == before).then_some(metadata)
    }

    /// The offset a lane transaction commits for its partition of the
    /// group: the position partition's end as the lane knows it.
    pub fn fence_offsets(&self, lane: Lane, position_end: i64) -> KafkaResult<TopicPartitionList> {
        let mut list = TopicPartitionList::with_capacity(1);
        list.add_partition_offset(
            &self.settings.position_topic,
            lane.internal_partition(),
            Offset::Offset(position_end.max(0)),
        )?;
        Ok(list)
    }

    /// Whether `lane` is this instance's, in one question to the
    /// coordinator and whatever the stop flags say: for a lane ending with
    /// a transaction open, whose abort must not touch a lane another
    /// instance was given (invariant 4), nor wait out a rebalance.
    pub fn confirm_once(&self, lane: Lane, position_end: i64) -> bool {
        self.ownership.is_owned(lane)
            && self
                .fence_offsets(lane, position_end)
                .and_then(|list| self.consumer().commit(&list, CommitMode::Sync))
                .is_ok()
            && self.ownership.is_owned(lane)
    }

    /// Invariant 3: whether `lane` is this instance's, confirmed by the
    /// coordinator. Waits out rebalances (until `stop` is set), calling
    /// `retrying` after each refused attempt.
    pub fn confirm(
        &self,
        lane: Lane,
        position_end: i64,
        stop: &AtomicBool,
        retrying: &dyn Fn(),
    ) -> Confirmation {
        let mut last_warning: Option<Instant> = None;
        loop {
            if stop.load(Ordering::SeqCst) || self.stop.load(Ordering::SeqCst) {
                return Confirmation::Stopping;
            }
            if !self.ownership.is_owned(lane) {
                return Confirmation::NotOwned;
            }
            let result = self
                .fence_offsets(lane, position_end)
                .and_then(|list| self.consumer().commit(&list, CommitMode::Sync));
            let error = match result {
                Ok(()) => {
                    // Revoked while the commit was in flight: the commit
                    // proves membership, not this lane.
                    if self.ownership.is_owned(lane) {
                        return Confirmation::Owned;
                    }
                    return Confirmation::NotOwned;
                }
                Err(e) => e,
            };
            // Anything else (a rebalance, a stale generation, an unreachable
            // coordinator) resolves in the group: its callbacks either take
            // the lane away or a later commit succeeds.
            if self.on_error(&error) {
                return Confirmation::Stopping;
            }
            if last_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                last_warning = Some(Instant::now());
                tracing::info!(%lane, error = %error, "waiting for the fleet's group to confirm this instance still owns the lane");
            }
            // Waiting out an unreachable coordinator is not a stuck lane.
            retrying();
            std::thread::sleep(CONFIRM_RETRY);
        }
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::mocking::MockCluster;

    use super::*;

    /// A consumer that has not joined (or whose membership was reset) has
    /// no member id and generation -1, which a coordinator does not check
    /// on a transactional commit: no metadata to fence a lane with until
    /// the coordinator has made this instance a member.
    #[test]
    fn no_fence_metadata_before_the_coordinator_counts_this_instance() {
        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic("position", 2, 1).expect("mock topic");
        let mut target = ClientConfig::new();
        target.set("bootstrap.servers", cluster.bootstrap_servers());
        let settings = FleetSettings {
            target,
            instance: 1,
            selection: Selection::of(&[]),
            group_id: "fleet".into(),
            position_topic: "position".into(),
            session_timeout: Duration::from_secs(6),
            revoke_wait: Duration::from_secs(1),
        };
        let health = Arc::new(Health::new(
            Duration::from_secs(60),
            Duration::from_secs(60),
        ));
        // Every request takes a round trip of 300 ms: the join (coordinator
        // lookup, two JoinGroups, SyncGroup) is still under way when asked.
        cluster
            .broker_round_trip_time(1, Duration::from_millis(300))
            .expect("mock round trip");
        let (membership, thread) =
            Membership::join(settings, Arc::default(), health).expect("join");
        assert!(
            membership.group_metadata().is_none(),
            "metadata to fence with before the group answered the join"
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while membership.group_metadata().is_none() {
            assert!(Instant::now() < deadline, "never became a member");
            std::thread::sleep(Duration::from_millis(50));
        }
        membership.leave();
        thread.join().expect("membership thread");
    }

    #[test]
    fn a_member_left_out_for_longer_than_the_limit_rejoins_once_per_limit() {
        let limit = Duration::from_secs(30);
        let mut presence = Presence::new(limit);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert!(!presence.observe(true, at(0)));
        assert_eq!(presence.outside_since(), None);
        assert!(!presence.observe(false, at(1)));
        assert!(!presence.observe(false, at(31)));
        assert!(presence.observe(false, at(32)));
        presence.rejoined(at(32));
        // The new consumer gets its own limit; the time outside goes on.
        assert!(!presence.observe(false, at(62)));
        assert!(presence.observe(false, at(63)));
        assert_eq!(presence.outside_since(), Some(at(1)));
        assert!(!presence.observe(true, at(64)));
        assert_eq!(presence.outside_since(), None);
        assert!(!presence.observe(false, at(65)));
        assert_eq!(presence.outside_since(), Some(at(65)));
    }
}

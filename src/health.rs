//! What a running `eosmirror run` knows about its own health, for the
//! orchestrator's probes (`/healthz`, `/readyz` on the metrics address).
//!
//! Liveness and readiness answer different questions, and mixing them up
//! makes orchestrators restart a process into a loop:
//!
//! - **live**: every lane thread keeps making progress (a loop turn, a
//!   batch, a session restart). A lane stuck longer than the stall limit in
//!   one call is a process worth restarting. A partition stopped by its own
//!   error is *not*: restarting would stop it again.
//! - **ready**: everything this instance owns is being copied: topics were
//!   discovered, every lane's session is copying (not restarting) and turned
//!   its loop within the ready window (not waiting on an unreachable target
//!   inside a batch), no partition is stopped by an error, and the
//!   instance is a member of the fleet's group (outside it, it owns nothing
//!   and copies nothing).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::replication::copy_progress::CopyProgress;
use crate::replication::layout::Lane;
use crate::replication::stopped::StoppedPartitions;

/// The run's health, shared by the supervisor, the lanes and the endpoint.
#[derive(Debug)]
pub struct Health {
    /// How long a lane may go without progress before the process is not
    /// live: longer than the longest blocking Kafka call.
    stall_limit: Duration,
    /// How long a copying lane may take for one batch and still count as
    /// copying now.
    ready_window: Duration,
    /// Partitions stopped by their own errors (they make the run not
    /// ready, never not live).
    pub stopped: StoppedPartitions,
    /// Records copied and still to copy, for the backfill progress line.
    pub copy_progress: CopyProgress,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The supervisor listed the source topics at least once.
    discovered: bool,
    lanes: BTreeMap<Lane, LaneState>,
    /// Since when the fleet's group has not counted this instance as a
    /// member (`None`: a member, or not joined yet).
    outside_fleet_since: Option<Instant>,
}

#[derive(Debug, Clone, Copy)]
struct LaneState {
    last_progress: Instant,
    /// Its session claimed the lane and copies its partitions.
    copying: bool,
}

/// A probe's answer: healthy, or why not (one line per reason).
#[derive(Debug, PartialEq, Eq)]
pub struct Verdict {
    pub healthy: bool,
    pub text: String,
}

impl Health {
    pub fn new(stall_limit: Duration, ready_window: Duration) -> Health {
        Health {
            stall_limit,
            ready_window,
            stopped: StoppedPartitions::default(),
            copy_progress: CopyProgress::default(),
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("health state poisoned")
    }

    /// The source topics were listed and handed to lanes.
    pub fn discovered(&self) {
        self.state().discovered = true;
    }

    /// A lane thread started (not copying yet).
    pub fn lane_started(&self, lane: Lane) {
        self.state().lanes.insert(
            lane,
            LaneState {
                last_progress: Instant::now(),
                copying: false,
            },
        );
    }

    /// A lane thread ended (shutdown, or all its partitions stopped).
    pub fn lane_ended(&self, lane: Lane) {
        self.state().lanes.remove(&lane);
    }

    /// The lane's loop turned: it is not stuck.
    pub fn progress(&self, lane: Lane) {
        self.progress_at(lane, Instant::now());
    }

    fn progress_at(&self, lane: Lane, at: Instant) {
        if let Some(l) = self.state().lanes.get_mut(&lane) {
            l.last_progress = at;
        }
    }

    /// The process did not run until `now` (frozen, or starved): no lane
    /// could make progress, so every lane's stall clock restarts at `now`.
    pub fn resumed_after_pause(&self, now: Instant) {
        for l in self.state().lanes.values_mut() {
            l.last_progress = l.last_progress.max(now);
        }
    }

    /// Whether the fleet's group counts this instance as a member now, and
    /// since when it has not.
    pub fn outside_fleet(&self, since: Option<Instant>) {
        self.state().outside_fleet_since = since;
    }

    /// The lane's session started (`true`) or stopped (`false`) copying.
    pub fn copying(&self, lane: Lane, copying: bool) {
        if let Some(l) = self.state().lanes.get_mut(&lane) {
            l.copying = copying;
            l.last_progress = Instant::now();
        }
    }

    /// Whether a session of `lane` runs (or parked) in this process, past
    /// its start: the local cache then holds the lane's positions as read
    /// from the target and as committed since. Not while a lane that came
    /// back starts: its cache may still be from before it left.
    pub fn copies(&self, lane: Lane) -> bool {
        self.state().lanes.get(&lane).is_some_and(|l| l.copying)
    }

    /// `/healthz`: every lane made progress within the stall limit.
    pub fn liveness(&self, now: Instant) -> Verdict {
        let mut text = String::new();
        for (lane, l) in &self.state().lanes {
            let idle = now.saturating_duration_since(l.last_progress);
            if idle > self.stall_limit {
                let _ = writeln!(
                    text,
                    "{lane} made no progress for {} s (limit {} s, --health.stall.ms)",
                    idle.as_secs(),
                    self.stall_limit.as_secs()
                );
            }
        }
        Verdict::from(text, "live")
    }

    /// `/readyz`: live, topics discovered, a member of the fleet, every lane
    /// copying, no partition stopped by an error.
    pub fn readiness(&self, now: Instant) -> Verdict {
        let live = self.liveness(now);
        let mut text = if live.healthy {
            String::new()
        } else {
            live.text
        };
        {
            let state = self.state();
            if !state.discovered {
                text.push_str("the source topics were not listed yet\n");
            }
            if let Some(since) = state.outside_fleet_since {
                let _ = writeln!(
                    text,
                    "this instance has not been a member of the fleet's group for {} s (it owns no lane until the group takes it in; the log says why)",
                    now.saturating_duration_since(since).as_secs()
                );
            }
            for (lane, l) in &state.lanes {
                let busy = now.saturating_duration_since(l.last_progress);
                if !l.copying {
                    let _ = writeln!(
                        text,
                        "{lane} is not copying (its session is starting or restarting; the log says why)"
                    );
                } else if busy > self.ready_window {
                    let _ = writeln!(
                        text,
                        "{lane} has been in one batch for {} s (waiting on a cluster; the log says which)",
                        busy.as_secs()
                    );
                }
            }
        }
        if !self.stopped.is_empty() {
            let _ = writeln!(text, "{}", self.stopped.summary());
        }
        Verdict::from(text, "ready")
    }
}

impl Verdict {
    fn from(problems: String, good: &str) -> Verdict {
        match problems.is_empty() {
            true => Verdict {
                healthy: true,
                text: format!("{good}\n"),
            },
            false => Verdict {
                healthy: false,
                text: problems,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::failure::WorkerError;
    use eosmirror_state::SourcePartition;

    fn lanes() -> (Lane, Lane) {
        (Lane(0), Lane(1))
    }

    #[test]
    fn a_stalled_lane_fails_liveness_and_readiness() {
        let health = Health::new(Duration::from_secs(60), Duration::from_secs(10));
        let (a, b) = lanes();
        health.discovered();
        health.lane_started(a);
        health.lane_started(b);
        health.copying(a, true);
        health.copying(b, true);
        let now = Instant::now();
        assert!(health.liveness(now).healthy);
        assert!(health.readiness(now).healthy);
        let later = now + Duration::from_secs(61);
        health.progress_at(a, later);
        let live = health.liveness(later + Duration::from_secs(1));
        assert!(!live.healthy);
        assert!(
            live.text.contains(&format!("{b} made no progress")),
            "{}",
            live.text
        );
        assert!(!live.text.contains(&format!("{a} made")), "{}", live.text);
        assert!(!health.readiness(later + Duration::from_secs(1)).healthy);
    }

    #[test]
    fn a_pause_of_the_whole_process_restarts_the_stall_clocks() {
        let health = Health::new(Duration::from_secs(60), Duration::from_secs(10));
        let (a, _) = lanes();
        health.lane_started(a);
        let thawed = Instant::now() + Duration::from_secs(300);
        assert!(!health.liveness(thawed).healthy);
        health.resumed_after_pause(thawed);
        assert!(health.liveness(thawed + Duration::from_secs(60)).healthy);
        assert!(!health.liveness(thawed + Duration::from_secs(61)).healthy);
    }

    #[test]
    fn a_stopped_partition_is_not_ready_but_live() {
        let health = Health::new(Duration::from_secs(60), Duration::from_secs(10));
        let (a, _) = lanes();
        health.discovered();
        health.lane_started(a);
        health.copying(a, true);
        let p = SourcePartition::new("orders", 3);
        health.stopped.stop(
            &p,
            &WorkerError::SourceGap {
                source_partition: p.clone(),
                first: 5,
                end_exclusive: 9,
            },
        );
        let now = Instant::now();
        assert!(health.liveness(now).healthy);
        let ready = health.readiness(now);
        assert!(!ready.healthy);
        assert!(
            ready
                .text
                .contains("orders-3: source records at offsets 5..9"),
            "{}",
            ready.text
        );
    }

    #[test]
    fn not_ready_before_discovery_or_while_a_lane_restarts() {
        let health = Health::new(Duration::from_secs(60), Duration::from_secs(10));
        let (a, _) = lanes();
        let now = Instant::now();
        assert!(health.readiness(now).text.contains("not listed yet"));
        health.discovered();
        health.lane_started(a);
        let ready = health.readiness(now);
        assert!(
            !ready.healthy && ready.text.contains("is not copying"),
            "{}",
            ready.text
        );
        health.copying(a, true);
        assert!(health.readiness(Instant::now()).healthy);
        let busy = health.readiness(Instant::now() + Duration::from_secs(11));
        assert!(
            !busy.healthy && busy.text.contains("in one batch for 11 s"),
            "{}",
            busy.text
        );
        assert!(
            health
                .liveness(Instant::now() + Duration::from_secs(11))
                .healthy
        );
        health.lane_ended(a);
        assert!(health.readiness(Instant::now()).healthy);
    }

    #[test]
    fn a_lane_copies_here_from_its_sessions_start_until_its_thread_ends() {
        let health = Health::new(Duration::from_secs(60), Duration::from_secs(10));
        let (a, b) = lanes();
        assert!(!health.copies(a));
        health.lane_started(a);
        assert!(!health.copies(a), "started, its session not past its start");
        health.copying(a, true);
        assert!(health.copies(a) && !health.copies(b));
        health.copying(a, false);
        assert!(!health.copies(a), "between two sessions");
        health.copying(a, true);
        health.lane_ended(a);
        assert!(!health.copies(a), "moved to another instance");
    }

    #[test]
    fn not_ready_outside_the_fleets_group_but_live() {
        let health = Health::new(Duration::from_secs(60), Duration::from_secs(10));
        health.discovered();
        let since = Instant::now();
        health.outside_fleet(Some(since));
        let later = since + Duration::from_secs(600);
        assert!(health.liveness(later).healthy);
        let ready = health.readiness(later);
        assert!(
            !ready.healthy
                && ready
                    .text
                    .contains("not been a member of the fleet's group for 600 s"),
            "{}",
            ready.text
        );
        health.outside_fleet(None);
        assert!(health.readiness(later).healthy);
    }
}

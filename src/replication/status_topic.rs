//! The status topic, `__eosmirror.status.<alias>`: what only a running
//! instance knows, published for `eosmirror status`.
//!
//! Positions, lag and last commits can be read from the target and the
//! source by anyone; a partition stopped by an error (and why), the rate a
//! lane copies at and a backfill's ETA live only in the process. Every few
//! seconds each instance writes one record per lane it owns (key
//! `lane-<k>`, JSON value) to a compacted topic of one partition, so the
//! topic holds about one record per lane whoever owns it now.
//!
//! The producer is a plain one, outside the lanes' transactions, on
//! purpose: exactly-once does not depend on it (nothing reads it to decide
//! anything), a status must get out while transactions abort or a lane
//! restarts (that is when a stopped partition's reason matters), and
//! transactions carry no extra partition or round trip for it. A record
//! lost or written twice only makes the status a few seconds older.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eosmirror_state::SourcePartition;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, DefaultProducerContext, Producer};
use serde::{Deserialize, Serialize};

use super::layout::{Lane, Layout};
use super::membership::LaneOwnership;
use crate::health::Health;
use crate::shutdown::Shutdown;

/// How often a running instance publishes its lanes' status.
pub const PUBLISH_INTERVAL: Duration = Duration::from_secs(5);

/// Stopped partitions listed by name in one lane's record; more are
/// counted (a record must stay far below the target's message size limit).
const MAX_LISTED_STOPPED: usize = 500;

/// Longest reason kept per stopped partition.
const MAX_REASON_CHARS: usize = 2000;

/// One lane's status as its owner last published it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaneStatus {
    pub lane: u32,
    /// The publishing instance's id (as in the position records).
    pub instance: u64,
    pub host: String,
    pub pid: u32,
    /// When this record was written (ms since the epoch); `status` calls a
    /// record older than its `--status.max.age.ms` stale.
    pub published_at_ms: i64,
    /// False in the last record an instance writes when it stops.
    pub running: bool,
    /// Source offsets the lane's partitions advanced per second over the
    /// last interval (records, plus any transaction markers passed).
    pub records_per_sec: f64,
    /// Records between the lane's committed positions and the source ends
    /// it last saw.
    pub remaining: u64,
    /// `remaining / records_per_sec`, when the lane copies.
    pub eta_secs: Option<u64>,
    /// Partitions of this lane stopped by an error of their own, and why.
    pub stopped: Vec<StoppedPartition>,
    /// Stopped partitions beyond those listed.
    pub stopped_unlisted: usize,
}

/// A partition stopped by its own error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoppedPartition {
    pub topic: String,
    pub partition: i32,
    pub reason: String,
}

impl LaneStatus {
    /// The record key: one compacted record per lane.
    pub fn key(lane: u32) -> String {
        format!("lane-{lane}")
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a status record always serializes")
    }

    pub fn decode(bytes: &[u8]) -> Result<LaneStatus, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

/// Builds the records of the owned lanes from what the process knows.
/// `before` holds each partition's next offset at the previous publish
/// (updated here), `elapsed` the time since.
#[allow(clippy::too_many_arguments)]
pub fn lane_records(
    owned: &[Lane],
    layout: Layout,
    stopped: &[(SourcePartition, String)],
    progress: &[(SourcePartition, i64, i64)],
    before: &mut HashMap<SourcePartition, i64>,
    elapsed: Duration,
    identity: &Identity,
    running: bool,
    now_ms: i64,
) -> Vec<LaneStatus> {
    let mut lanes: BTreeMap<Lane, LaneStatus> = owned
        .iter()
        .map(|&lane| {
            (
                lane,
                LaneStatus {
                    lane: lane.0,
                    instance: identity.instance,
                    host: identity.host.clone(),
                    pid: identity.pid,
                    published_at_ms: now_ms,
                    running,
                    records_per_sec: 0.0,
                    remaining: 0,
                    eta_secs: None,
                    stopped: Vec::new(),
                    stopped_unlisted: 0,
                },
            )
        })
        .collect();
    let seconds = elapsed.as_secs_f64();
    for (partition, next, end) in progress {
        let previous = before.insert(partition.clone(), *next);
        let Some(status) = lanes.get_mut(&layout.lane_of(partition)) else {
            continue;
        };
        status.remaining += (end - next).max(0) as u64;
        if let Some(previous) = previous {
            if seconds > 0.0 && *next > previous {
                status.records_per_sec += (next - previous) as f64 / seconds;
            }
        }
    }
    for (partition, reason) in stopped {
        let Some(status) = lanes.get_mut(&layout.lane_of(partition)) else {
            continue;
        };
        if status.stopped.len() < MAX_LISTED_STOPPED {
            status.stopped.push(StoppedPartition {
                topic: partition.topic.clone(),
                partition: partition.partition,
                reason: reason.chars().take(MAX_REASON_CHARS).collect(),
            });
        } else {
            status.stopped_unlisted += 1;
        }
    }
    for status in lanes.values_mut() {
        if status.records_per_sec >= 0.5 && status.remaining > 0 {
            status.eta_secs =
                Some((status.remaining as f64 / status.records_per_sec).ceil() as u64);
        }
    }
    lanes.into_values().collect()
}

/// Who publishes.
#[derive(Debug, Clone)]
pub struct Identity {
    pub instance: u64,
    pub host: String,
    pub pid: u32,
}

impl Identity {
    pub fn of_this_process(instance: u64) -> Identity {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_default()
            .trim()
            .to_string();
        Identity {
            instance,
            host,
            pid: std::process::id(),
        }
    }
}

/// Publishes the owned lanes' status to the status topic.
pub struct StatusPublisher {
    /// Polled by [`StatusPublisher::publish`] itself, not by a thread of its
    /// own: rust-rdkafka's `ThreadedProducer` polls in 100 ms rounds whose
    /// last millisecond spins (a wait under 1 ms rounds to 0 ms), about 1%
    /// of a core on an idle instance.
    producer: BaseProducer<DefaultProducerContext>,
    topic: String,
    layout: Layout,
    identity: Identity,
    health: Arc<Health>,
    ownership: Arc<LaneOwnership>,
    before: std::sync::Mutex<(HashMap<SourcePartition, i64>, Instant)>,
}

impl StatusPublisher {
    /// A publisher with its own plain producer (`target`: connection
    /// settings only). A failure to create it is logged and leaves the run
    /// without status: nothing else depends on it.
    pub fn new(
        target: &ClientConfig,
        topic: String,
        layout: Layout,
        identity: Identity,
        health: Arc<Health>,
        ownership: Arc<LaneOwnership>,
    ) -> Option<StatusPublisher> {
        let producer = target
            .clone()
            // The topic is created compacted with the other internal
            // topics; a broker's auto-creation would make it with its
            // defaults (deletion by retention) if a record came first.
            .set("allow.auto.create.topics", "false")
            .set("linger.ms", "20")
            .set("message.timeout.ms", "30000")
            .set("queue.buffering.max.messages", "10000")
            .create();
        match producer {
            Ok(producer) => Some(StatusPublisher {
                producer,
                topic,
                layout,
                identity,
                health,
                ownership,
                before: std::sync::Mutex::new((HashMap::new(), Instant::now())),
            }),
            Err(e) => {
                tracing::warn!(error = %e, "cannot create the status topic's producer; `eosmirror status` will not see this instance's stopped partitions or rates");
                None
            }
        }
    }

    /// Sends one record per owned lane (never waits for the broker), and
    /// serves the delivery reports of the records sent before.
    pub fn publish(&self, running: bool) {
        self.producer.poll(Duration::ZERO);
        let owned = self.ownership.owned();
        let stopped = self.health.stopped.entries();
        let progress = self.health.copy_progress.partitions();
        let records = {
            let mut before = self.before.lock().expect("status publisher poisoned");
            let elapsed = before.1.elapsed();
            before.1 = Instant::now();
            lane_records(
                &owned,
                self.layout,
                &stopped,
                &progress,
                &mut before.0,
                elapsed,
                &self.identity,
                running,
                crate::clock::unix_millis(),
            )
        };
        for record in records {
            let key = LaneStatus::key(record.lane);
            let value = record.encode();
            if let Err((e, _)) = self.producer.send(
                BaseRecord::to(&self.topic)
                    .partition(0)
                    .key(&key)
                    .payload(&value),
            ) {
                tracing::debug!(error = %e, topic = %self.topic, "status record not sent");
            }
        }
    }

    /// Publishes every `interval` until shutdown.
    pub async fn run(self: Arc<Self>, interval: Duration, shutdown: Shutdown) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = shutdown.wait() => return,
            }
            self.publish(true);
        }
    }

    /// The last records of a stopping instance (its lanes stopped, still
    /// its own in the group), delivered before it leaves the group so that
    /// the next owner's records come after them.
    pub fn publish_final(&self, wait: Duration) {
        self.publish(false);
        if let Err(e) = self.producer.flush(wait) {
            tracing::debug!(error = %e, "the last status records were not delivered");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity {
            instance: 7,
            host: "h".into(),
            pid: 1,
        }
    }

    #[test]
    fn records_cover_owned_lanes_only_with_their_stopped_partitions_and_rates() {
        let layout = Layout::new(2).unwrap();
        let a = SourcePartition::new("t", 0);
        let b = SourcePartition::new("t", 1);
        let (lane_a, lane_b) = (layout.lane_of(&a), layout.lane_of(&b));
        assert_ne!(lane_a, lane_b);
        let mut before = HashMap::new();
        let progress = vec![(a.clone(), 100, 300), (b.clone(), 10, 10)];
        let first = lane_records(
            &[lane_a],
            layout,
            &[(a.clone(), "gap".into()), (b.clone(), "other".into())],
            &progress,
            &mut before,
            Duration::from_secs(5),
            &identity(),
            true,
            1000,
        );
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].lane, lane_a.0);
        assert_eq!(first[0].remaining, 200);
        assert_eq!(first[0].records_per_sec, 0.0, "no earlier sample yet");
        assert_eq!(
            first[0].stopped,
            vec![StoppedPartition {
                topic: "t".into(),
                partition: 0,
                reason: "gap".into()
            }]
        );
        let progress = vec![(a.clone(), 200, 300)];
        let second = lane_records(
            &[lane_a, lane_b],
            layout,
            &[],
            &progress,
            &mut before,
            Duration::from_secs(10),
            &identity(),
            false,
            2000,
        );
        assert_eq!(second.len(), 2);
        let a_status = second.iter().find(|s| s.lane == lane_a.0).unwrap();
        assert_eq!(a_status.records_per_sec, 10.0);
        assert_eq!(a_status.eta_secs, Some(10));
        assert!(!a_status.running);
        let decoded = LaneStatus::decode(&a_status.encode()).unwrap();
        assert_eq!(&decoded, a_status);
    }
}

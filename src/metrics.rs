//! Prometheus metrics: names and labels in one place, so dashboards and the
//! code agree. Served at `/metrics` by metrics-exporter-prometheus.

use eosmirror_state::SourcePartition;

use crate::replication::layout::Lane;
use metrics::{counter, gauge, histogram, Histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

const REPLICATION_LATENCY: &str = "eosmirror_replication_latency_seconds";

/// Bucket bounds of [`REPLICATION_LATENCY`] (seconds): fine around the
/// default 200 ms commit interval, coarse up to the one-minute age limit.
const LATENCY_BUCKETS: [f64; 17] = [
    0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 5.0, 10.0, 30.0, 60.0,
];

/// The recorder's settings: histograms with buckets (Prometheus can
/// aggregate those across instances; summaries it cannot).
fn builder() -> PrometheusBuilder {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(REPLICATION_LATENCY.into()), &LATENCY_BUCKETS)
        .expect("latency buckets are not empty")
}

/// Installs the Prometheus recorder; [`crate::endpoint`] serves what it
/// records at `/metrics`.
pub fn install() -> anyhow::Result<PrometheusHandle> {
    let handle = builder()
        .install_recorder()
        .map_err(|e| anyhow::anyhow!("installing the metrics recorder: {e}"))?;
    started();
    Ok(handle)
}

/// When this process started (seconds since the epoch): a change tells a
/// restart (the exporter has no process metrics of its own).
fn started() {
    gauge!("eosmirror_start_time_seconds").set(crate::clock::unix_millis() as f64 / 1000.0);
}

fn labels(p: &SourcePartition) -> [(&'static str, String); 2] {
    [
        ("topic", p.topic.clone()),
        ("partition", p.partition.to_string()),
    ]
}

/// A transaction with `records` copies (`bytes` of key, value and headers) committed.
pub fn transaction_committed(p: &SourcePartition, records: u64, bytes: u64) {
    counter!("eosmirror_transactions_committed_total", &labels(p)).increment(1);
    counter!("eosmirror_records_replicated_total", &labels(p)).increment(records);
    counter!("eosmirror_bytes_replicated_total", &labels(p)).increment(bytes);
}

/// Seconds from a source record's timestamp to the commit of its copy
/// (records younger than a minute when read; see
/// [`crate::replication::latency`]), per topic.
pub fn replication_latency(topic: &str) -> Histogram {
    histogram!(REPLICATION_LATENCY, "topic" => topic.to_string())
}

/// Source end offset minus replicated position.
pub fn lag(p: &SourcePartition, records: i64) {
    gauge!("eosmirror_lag_records", &labels(p)).set(records as f64);
}

/// A lane committed a transaction (of one or more partitions).
pub fn lane_transaction_committed(lane: Lane) {
    counter!("eosmirror_lane_transactions_committed_total", "lane" => lane.to_string())
        .increment(1);
}

pub fn lane_transaction_aborted(lane: Lane) {
    counter!("eosmirror_lane_transactions_aborted_total", "lane" => lane.to_string()).increment(1);
}

/// Every `reason` [`lane_restarted`] is given: why a lane ended a session
/// and starts a new one (`fenced`: the target fenced its producer, a
/// takeover or its own timed-out transaction; `lane_lost`: the fleet's
/// group refused its commit; `source_silent`: its source consumer delivered
/// nothing of a partition for a minute while records waited; the others name the step
/// that failed).
pub const RESTART_REASONS: &[&str] = &[
    "init_transactions",
    "resume_read",
    "topic_ids",
    "sibling_positions",
    "source_watermarks",
    "target_check",
    "claim",
    "abort_failed",
    "producer_state_unknown",
    "fenced",
    "lane_lost",
    "source_silent",
];

pub fn lane_restarted(lane: Lane, reason: &'static str) {
    debug_assert!(
        RESTART_REASONS.contains(&reason),
        "restart reason {reason} missing from RESTART_REASONS"
    );
    counter!(
        "eosmirror_lane_restarts_total",
        "lane" => lane.to_string(),
        "reason" => reason
    )
    .increment(1);
}

/// The lanes this instance runs (1) or stopped running (0). An owned
/// lane's counters exist from then on (at 0): Prometheus' `increase()`
/// cannot see a counter's first increment when that creates the series.
pub fn lane_owned(lane: Lane, owned: bool) {
    let name = lane.to_string();
    gauge!("eosmirror_lane_owned", "lane" => name.clone()).set(if owned { 1.0 } else { 0.0 });
    if owned {
        counter!("eosmirror_lane_transactions_committed_total", "lane" => name.clone())
            .increment(0);
        counter!("eosmirror_lane_transactions_aborted_total", "lane" => name.clone()).increment(0);
        for &reason in RESTART_REASONS {
            counter!("eosmirror_lane_restarts_total", "lane" => name.clone(), "reason" => reason)
                .increment(0);
        }
    }
}

/// Whether the fleet's group counts this instance as a member (1) or not
/// (0). Outside the group an instance owns no lane and copies nothing.
pub fn fleet_member(member: bool) {
    gauge!("eosmirror_fleet_member").set(if member { 1.0 } else { 0.0 });
    // Exists from the first check on (see `lane_owned`).
    counter!("eosmirror_fleet_rejoins_total").increment(0);
}

/// The membership gave up waiting for librdkafka to rejoin the fleet's
/// group by itself and rejoined with a new consumer.
pub fn fleet_rejoined() {
    counter!("eosmirror_fleet_rejoins_total").increment(1);
}

/// The lane is parked (1): nothing to copy, its clients closed until the
/// source receives records.
pub fn lane_parked(lane: Lane, parked: bool) {
    gauge!("eosmirror_lane_parked", "lane" => lane.to_string()).set(if parked { 1.0 } else { 0.0 });
}

/// The largest [`lag`] among the partitions of a lane's session, at its
/// last lag report; 0 once the lane ended. Lag is per partition and carries
/// no lane: this is what tells which lane has records waiting.
pub fn lane_max_lag(lane: Lane, records: i64) {
    gauge!("eosmirror_lane_max_lag_records", "lane" => lane.to_string()).set(records as f64);
}

/// Source offsets deleted before they were copied and skipped by opt-in.
pub fn source_gap_skipped(p: &SourcePartition, offsets: u64) {
    counter!("eosmirror_source_gap_offsets_total", &labels(p)).increment(offsets);
}

/// A source partition stopped by an error of its own (1); its lane copies
/// the others.
pub fn partition_stopped(p: &SourcePartition) {
    gauge!("eosmirror_partition_stopped", &labels(p)).set(1.0);
}

/// Source partitions stopped by errors, over all lanes.
pub fn partitions_stopped(count: usize) {
    gauge!("eosmirror_partitions_stopped").set(count as f64);
}

/// Source partitions being copied, over all lanes.
pub fn partitions_running(count: usize) {
    gauge!("eosmirror_partitions").set(count as f64);
}

/// Source topics the target refused to create or grow while running:
/// their records (or those of the partitions it lacks) are not copied.
pub fn topics_refused(count: usize) {
    gauge!("eosmirror_topics_refused").set(count as f64);
}

/// The throttle's limits; 0 = unlimited.
pub fn throttle_limits(bytes_per_sec: Option<u64>, records_per_sec: Option<u64>) {
    gauge!("eosmirror_throttle_bytes_per_second").set(bytes_per_sec.unwrap_or(0) as f64);
    gauge!("eosmirror_throttle_records_per_second").set(records_per_sec.unwrap_or(0) as f64);
    // Exists (at 0) before the first wait, so its rate starts from the start.
    counter!("eosmirror_throttle_wait_ms_total").increment(0);
}

/// Time a worker spent waiting for the throttle (summed over workers).
pub fn throttle_waited(waited: std::time::Duration) {
    use std::sync::atomic::{AtomicU64, Ordering};
    // Waits are often well under a millisecond: sum nanoseconds, publish ms.
    static TOTAL_NANOS: AtomicU64 = AtomicU64::new(0);
    let nanos = waited.as_nanos() as u64;
    let total = TOTAL_NANOS.fetch_add(nanos, Ordering::Relaxed) + nanos;
    counter!("eosmirror_throttle_wait_ms_total").absolute(total / 1_000_000);
}

/// A group sync round translated `group`'s offsets: how many
/// already-consumed source offsets a consumer at the replicated tail would
/// read again (0 once caught up; the translation never skips a record).
pub fn group_rereads(group: &str, rereads: i64) {
    gauge!("eosmirror_group_rereads", "group" => group.to_string()).set(rereads as f64);
}

/// Seconds since `group`'s translation was last committed on the target
/// (or could have been, when nothing changed); infinite before that.
/// Published after every round, failed ones too, so the age keeps growing
/// while rounds fail and an alert on it fires.
pub fn group_translation_age(group: &str, age_seconds: f64) {
    gauge!("eosmirror_group_translation_age_seconds", "group" => group.to_string())
        .set(age_seconds);
}

/// `group` is no longer synced (gone from the source, or no longer
/// matched): its series read NaN, which no alert threshold matches. The
/// exporter cannot remove a series, and its last value (an infinite age,
/// say) would keep an alert firing for a group that no longer exists.
pub fn group_removed(group: &str) {
    gauge!("eosmirror_group_translation_age_seconds", "group" => group.to_string()).set(f64::NAN);
    gauge!("eosmirror_group_rereads", "group" => group.to_string()).set(f64::NAN);
}

/// Which of a lane's Kafka clients a librdkafka statistics report is from.
#[derive(Debug, Clone, Copy)]
pub struct KafkaClient {
    /// `"source"` (the lane's consumer) or `"target"` (its transactional producer).
    pub cluster: &'static str,
    pub lane: Lane,
}

impl KafkaClient {
    fn labels(&self) -> [(&'static str, String); 2] {
        [
            ("cluster", self.cluster.into()),
            ("lane", self.lane.to_string()),
        ]
    }

    fn broker_labels(&self, broker: i32) -> [(&'static str, String); 3] {
        let [cluster, lane] = self.labels();
        [cluster, lane, ("broker", broker.to_string())]
    }
}

/// One broker connection of a client, as its last statistics report saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BrokerGauges {
    /// Whether the connection is up (librdkafka state `UP`).
    pub up: bool,
    /// Request round trips of the report's window, in seconds.
    pub rtt_p50: f64,
    pub rtt_p99: f64,
    /// Requests waiting to be sent, and sent ones waiting for their response.
    pub requests_queued: u64,
    pub requests_in_flight: u64,
}

pub fn kafka_broker(client: KafkaClient, broker: i32, gauges: &BrokerGauges) {
    let labels = client.broker_labels(broker);
    gauge!("eosmirror_kafka_broker_up", &labels).set(if gauges.up { 1.0 } else { 0.0 });
    for (quantile, seconds) in [("0.5", gauges.rtt_p50), ("0.99", gauges.rtt_p99)] {
        let [cluster, lane, broker] = labels.clone();
        let labels = [cluster, lane, broker, ("quantile", quantile.to_string())];
        gauge!("eosmirror_kafka_broker_rtt_seconds", &labels).set(seconds);
    }
    for (queue, requests) in [
        ("queued", gauges.requests_queued),
        ("in_flight", gauges.requests_in_flight),
    ] {
        let [cluster, lane, broker] = labels.clone();
        let labels = [cluster, lane, broker, ("queue", queue.to_string())];
        gauge!("eosmirror_kafka_broker_requests", &labels).set(requests as f64);
    }
}

/// Connection errors since the previous report, by `kind`: `send`,
/// `receive`, `timeout` (a request timed out) or `disconnect`.
pub fn kafka_broker_errors(client: KafkaClient, broker: i32, kind: &'static str, count: u64) {
    let [cluster, lane, broker] = client.broker_labels(broker);
    let labels = [cluster, lane, broker, ("kind", kind.to_string())];
    counter!("eosmirror_kafka_broker_errors_total", &labels).increment(count);
}

/// Bytes a client holds in its queues: records waiting to be produced
/// (target) or fetched and not yet copied (source).
pub fn kafka_queue_bytes(client: KafkaClient, bytes: u64) {
    gauge!("eosmirror_kafka_queue_bytes", &client.labels()).set(bytes as f64);
}

/// The transaction states librdkafka reports (`rd_kafka_txn_state_names`).
const TRANSACTION_STATES: [&str; 13] = [
    "Init",
    "WaitPID",
    "ReadyNotAcked",
    "Ready",
    "InTransaction",
    "BeginCommit",
    "CommittingTransaction",
    "CommitNotAcked",
    "BeginAbort",
    "AbortingTransaction",
    "AbortedNotAcked",
    "AbortableError",
    "FatalError",
];

/// A lane producer's transaction state: 1 for `state`, 0 for the others,
/// so the series of a replaced producer do not stay 1.
pub fn kafka_transaction_state(lane: Lane, state: &str) {
    let states = TRANSACTION_STATES.iter().copied();
    for known in states.chain((!TRANSACTION_STATES.contains(&state)).then_some(state)) {
        let labels = [("lane", lane.to_string()), ("state", known.to_string())];
        let value = if known == state { 1.0 } else { 0.0 };
        gauge!("eosmirror_kafka_transaction_state", &labels).set(value);
    }
}

/// How long the lane's most held source partition has had its last stable
/// offset stand still below records already written: an open source
/// transaction that does not end (0 when none is held).
pub fn kafka_source_held(lane: Lane, held: std::time::Duration) {
    gauge!("eosmirror_kafka_source_held_seconds", "lane" => lane.to_string())
        .set(held.as_secs_f64());
}

/// Producer ids (or epochs) the target assigned to a lane since the
/// previous report: one per session; more mean fencing or epoch bumps.
pub fn kafka_producer_id_assignments(lane: Lane, count: u64) {
    counter!("eosmirror_kafka_producer_id_assignments_total", "lane" => lane.to_string())
        .increment(count);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the exporter serves after `record` ran against a fresh recorder.
    fn rendered(record: impl FnOnce()) -> String {
        let recorder = builder().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, record);
        handle.render()
    }

    #[test]
    fn latency_is_a_histogram_with_buckets_per_topic() {
        let text = rendered(|| {
            replication_latency("orders").record(0.12);
            replication_latency("orders").record(0.7);
        });
        for line in [
            "eosmirror_replication_latency_seconds_bucket{topic=\"orders\",le=\"0.1\"} 0",
            "eosmirror_replication_latency_seconds_bucket{topic=\"orders\",le=\"0.15\"} 1",
            "eosmirror_replication_latency_seconds_bucket{topic=\"orders\",le=\"0.75\"} 2",
            "eosmirror_replication_latency_seconds_count{topic=\"orders\"} 2",
        ] {
            assert!(text.contains(line), "{line} missing in {text}");
        }
    }

    #[test]
    fn an_owned_lane_serves_its_counters_before_they_move() {
        let text = rendered(|| lane_owned(Lane(2), true));
        assert!(
            text.contains("eosmirror_lane_owned{lane=\"lane-2\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("eosmirror_lane_transactions_committed_total{lane=\"lane-2\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("eosmirror_lane_transactions_aborted_total{lane=\"lane-2\"} 0"),
            "{text}"
        );
        for reason in RESTART_REASONS {
            let series =
                format!("eosmirror_lane_restarts_total{{lane=\"lane-2\",reason=\"{reason}\"}} 0");
            assert!(text.contains(&series), "{series} missing in {text}");
        }
    }

    #[test]
    fn lane_lag_start_time_and_throttle_wait_are_served() {
        let text = rendered(|| {
            started();
            lane_max_lag(Lane(1), 42);
            throttle_limits(None, Some(10));
        });
        assert!(
            text.contains("eosmirror_lane_max_lag_records{lane=\"lane-1\"} 42"),
            "{text}"
        );
        assert!(
            text.contains("eosmirror_throttle_wait_ms_total 0"),
            "{text}"
        );
        let start = text
            .lines()
            .find_map(|l| l.strip_prefix("eosmirror_start_time_seconds "))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no start time in {text}"));
        // After 2020 and not in the future.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(start > 1.5e9 && start <= now, "{start}");
    }

    /// The lanes' restart reasons are string literals at their call sites;
    /// a new one must be listed (alerts select on them).
    #[test]
    fn every_restart_reason_in_the_lane_is_listed() {
        // Every file of the lane, read as it is, so a new file is covered.
        let lane_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/replication/lane");
        let sources: Vec<String> = std::fs::read_dir(lane_dir)
            .unwrap()
            .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
            .collect();
        let call = regex::Regex::new(r#"restart\(\s*"([a-z_]+)""#).unwrap();
        let used: Vec<&str> = sources
            .iter()
            .flat_map(|source| call.captures_iter(source))
            .map(|c| c.get(1).unwrap().as_str())
            .collect();
        assert!(
            used.contains(&"fenced") && used.contains(&"lane_lost"),
            "{used:?}"
        );
        for reason in &used {
            assert!(
                RESTART_REASONS.contains(reason),
                "{reason} not in RESTART_REASONS"
            );
        }
        for reason in RESTART_REASONS {
            assert!(used.contains(reason), "{reason} is listed but never used");
        }
    }
}

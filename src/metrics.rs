//! Prometheus metrics: names and labels in one place, so dashboards and the
//! code agree. Served at `/metrics` by metrics-exporter-prometheus.

use eosmirror_state::SourcePartition;

use crate::replication::layout::Lane;
use metrics::{counter, gauge};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Installs the Prometheus recorder; [`crate::endpoint`] serves what it
/// records at `/metrics`.
pub fn install() -> anyhow::Result<PrometheusHandle> {
    PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| anyhow::anyhow!("installing the metrics recorder: {e}"))
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

pub fn lane_restarted(lane: Lane, reason: &'static str) {
    counter!(
        "eosmirror_lane_restarts_total",
        "lane" => lane.to_string(),
        "reason" => reason
    )
    .increment(1);
}

/// The lanes this instance runs (1) or stopped running (0).
pub fn lane_owned(lane: Lane, owned: bool) {
    gauge!("eosmirror_lane_owned", "lane" => lane.to_string()).set(if owned { 1.0 } else { 0.0 });
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

/// The throttle's limits; 0 = unlimited.
pub fn throttle_limits(bytes_per_sec: Option<u64>, records_per_sec: Option<u64>) {
    gauge!("eosmirror_throttle_bytes_per_second").set(bytes_per_sec.unwrap_or(0) as f64);
    gauge!("eosmirror_throttle_records_per_second").set(records_per_sec.unwrap_or(0) as f64);
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

/// A group sync round translated `group`'s offsets: seconds since its
/// translation was last committed on the target (or could have been, when
/// nothing changed), and how many already-consumed source offsets a
/// consumer at the replicated tail would read again (0 once caught up;
/// the translation never skips a record).
pub fn group_synced(group: &str, age_seconds: f64, rereads: i64) {
    let labels = [("group", group.to_string())];
    gauge!("eosmirror_group_translation_age_seconds", &labels).set(age_seconds);
    gauge!("eosmirror_group_rereads", &labels).set(rereads as f64);
}

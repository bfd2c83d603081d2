//! Prometheus metrics: names and labels in one place, so dashboards and the
//! code agree. Served at `/metrics` by metrics-exporter-prometheus.

use std::net::SocketAddr;

use eosmirror_state::SourcePartition;
use metrics::{counter, gauge};
use metrics_exporter_prometheus::PrometheusBuilder;

/// Starts the HTTP listener that serves `/metrics`. Must run inside a tokio
/// runtime.
pub fn install(address: SocketAddr) -> anyhow::Result<()> {
    PrometheusBuilder::new()
        .with_http_listener(address)
        .install()
        .map_err(|e| anyhow::anyhow!("starting the metrics endpoint on {address}: {e}"))
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

pub fn transaction_aborted(p: &SourcePartition) {
    counter!("eosmirror_transactions_aborted_total", &labels(p)).increment(1);
}

/// Source end offset minus replicated position.
pub fn lag(p: &SourcePartition, records: i64) {
    gauge!("eosmirror_lag_records", &labels(p)).set(records as f64);
}

pub fn worker_restarted(p: &SourcePartition, reason: &'static str) {
    let [topic, partition] = labels(p);
    counter!(
        "eosmirror_worker_restarts_total",
        &[topic, partition, ("reason", reason.to_string())]
    )
    .increment(1);
}

/// Source offsets deleted before they were copied and skipped by opt-in.
pub fn source_gap_skipped(p: &SourcePartition, offsets: u64) {
    counter!("eosmirror_source_gap_offsets_total", &labels(p)).increment(offsets);
}

pub fn workers_running(count: usize) {
    gauge!("eosmirror_workers").set(count as f64);
}

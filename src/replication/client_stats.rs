//! librdkafka's statistics of a lane's clients, exported as Prometheus
//! metrics at broker and transaction level.
//!
//! librdkafka reports a JSON document per client every
//! `statistics.interval.ms`, with an object per partition: megabytes at
//! thousands of partitions. So the interval has a floor (15 s, enforced by
//! `--statistics.interval.ms`), only broker- and client-level fields are
//! read (serde skips the rest), and no per-partition series is exported.
//! Reports arrive through the client's own poll: a lane blocked in one
//! Kafka call reports nothing until it returns, and the gauges keep the
//! last report meanwhile (`/healthz` is what notices a stuck lane).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, ConsumerContext};
use serde::Deserialize;

use crate::metrics::{self, BrokerGauges, KafkaClient};

/// Turns a client's reports into metrics. One per client: the counters are
/// exported as differences from the client's previous report, so a new
/// client (a lane's next session) continues them instead of resetting them.
#[derive(Debug)]
pub struct ClientStats {
    client: KafkaClient,
    memory: Mutex<Memory>,
}

/// What a client's next report is compared with.
#[derive(Debug, Default)]
struct Memory {
    previous: Totals,
    held: HeldPartitions,
}

/// Source partitions whose last stable offset stands still below records
/// already written: an open transaction of a source producer holds them,
/// and read_committed copies nothing past it until it ends. A busy
/// transactional source has records above its last stable offset most of
/// the time, so what tells a held partition is how long that offset has
/// not moved.
#[derive(Debug, Default)]
struct HeldPartitions {
    /// Partition → its last stable offset and when it was first seen there
    /// with records above it.
    since: HashMap<(String, i32), (i64, Instant)>,
}

impl HeldPartitions {
    /// Takes a report's partitions (topic, partition, high watermark, last
    /// stable offset) and returns the longest a partition has been held.
    fn update<'r>(
        &mut self,
        partitions: impl Iterator<Item = (&'r str, i32, i64, i64)>,
        now: Instant,
    ) -> Duration {
        let mut held = HashMap::new();
        for (topic, partition, high, stable) in partitions {
            if partition < 0 || stable < 0 || high <= stable {
                continue;
            }
            let key = (topic.to_string(), partition);
            let since = match self.since.get(&key) {
                Some(&(offset, since)) if offset == stable => since,
                _ => now,
            };
            held.insert(key, (stable, since));
        }
        self.since = held;
        self.since
            .values()
            .map(|&(_, since)| now.saturating_duration_since(since))
            .max()
            .unwrap_or_default()
    }
}

/// A client's cumulative counts at its previous report.
#[derive(Debug, Default, Clone, PartialEq)]
struct Totals {
    broker_errors: HashMap<(i32, &'static str), u64>,
    producer_id_assignments: u64,
}

impl ClientStats {
    /// Statistics for `client` when `interval` is set: sets it on `config`.
    pub fn enable(
        config: &mut ClientConfig,
        client: KafkaClient,
        interval: Option<Duration>,
    ) -> Option<ClientStats> {
        let interval = interval?;
        config.set("statistics.interval.ms", interval.as_millis().to_string());
        Some(ClientStats {
            client,
            memory: Mutex::default(),
        })
    }

    /// Exports one report (librdkafka's `stats_cb` JSON).
    pub fn record(&self, json: &[u8]) {
        let report: Report = match serde_json::from_slice(json) {
            Ok(report) => report,
            Err(e) => {
                tracing::debug!(lane = %self.client.lane, "unreadable librdkafka statistics: {e}");
                return;
            }
        };
        for (broker, gauges) in report.broker_gauges() {
            metrics::kafka_broker(self.client, broker, &gauges);
        }
        metrics::kafka_queue_bytes(self.client, report.queue_bytes());
        if let Some(state) = report.eos.as_ref().map(|eos| eos.txn_state.as_str()) {
            metrics::kafka_transaction_state(self.client.lane, state);
        }
        let totals = report.totals();
        let mut memory = self.memory.lock().expect("statistics memory poisoned");
        if self.client.cluster == "source" {
            let held = memory.held.update(report.partitions(), Instant::now());
            metrics::kafka_source_held(self.client.lane, held);
        }
        let previous = &mut memory.previous;
        for (&(broker, kind), &count) in &totals.broker_errors {
            let before = previous.broker_errors.get(&(broker, kind)).copied();
            let new = count.saturating_sub(before.unwrap_or(0));
            if new > 0 || before.is_none() {
                metrics::kafka_broker_errors(self.client, broker, kind, new);
            }
        }
        let new_ids = totals
            .producer_id_assignments
            .saturating_sub(previous.producer_id_assignments);
        if report.eos.is_some() {
            metrics::kafka_producer_id_assignments(self.client.lane, new_ids);
        }
        *previous = totals;
    }
}

/// The context of a lane's source consumer: statistics, when enabled.
pub struct StatsContext(pub Option<ClientStats>);

/// A lane's source consumer.
pub type SourceConsumer = BaseConsumer<StatsContext>;

impl ClientContext for StatsContext {
    fn stats_raw(&self, json: &[u8]) {
        if let Some(stats) = &self.0 {
            stats.record(json);
        }
    }
}

impl ConsumerContext for StatsContext {}

/// The fields of a report that are exported (librdkafka's STATISTICS.md).
#[derive(Debug, Deserialize)]
struct Report {
    /// Bytes of records waiting in the producer's queues.
    #[serde(default)]
    msg_size: u64,
    #[serde(default)]
    brokers: HashMap<String, BrokerReport>,
    #[serde(default)]
    topics: HashMap<String, TopicReport>,
    /// Present for idempotent and transactional producers.
    eos: Option<EosReport>,
}

#[derive(Debug, Deserialize)]
struct BrokerReport {
    /// -1 for bootstrap and logical brokers (coordinators), which are
    /// aliases of real ones.
    nodeid: i32,
    state: String,
    outbuf_cnt: u64,
    waitresp_cnt: u64,
    txerrs: u64,
    rxerrs: u64,
    req_timeouts: u64,
    disconnects: u64,
    /// Microseconds.
    rtt: Window,
}

#[derive(Debug, Deserialize)]
struct Window {
    p50: u64,
    p99: u64,
}

#[derive(Debug, Deserialize)]
struct TopicReport {
    #[serde(default)]
    partitions: HashMap<String, PartitionReport>,
}

#[derive(Debug, Deserialize)]
struct PartitionReport {
    partition: i32,
    /// Bytes fetched and not yet consumed.
    #[serde(default)]
    fetchq_size: u64,
    /// The broker's high watermark and last stable offset as last fetched
    /// (-1: not known).
    #[serde(default = "unknown_offset")]
    hi_offset: i64,
    #[serde(default = "unknown_offset")]
    ls_offset: i64,
}

fn unknown_offset() -> i64 {
    -1
}

#[derive(Debug, Deserialize)]
struct EosReport {
    txn_state: String,
    /// Producer ids (or epochs) assigned to this client so far.
    epoch_cnt: u64,
}

impl Report {
    fn brokers(&self) -> impl Iterator<Item = &BrokerReport> {
        self.brokers.values().filter(|b| b.nodeid >= 0)
    }

    fn broker_gauges(&self) -> impl Iterator<Item = (i32, BrokerGauges)> + '_ {
        self.brokers().map(|b| {
            let gauges = BrokerGauges {
                up: b.state == "UP",
                rtt_p50: b.rtt.p50 as f64 / 1e6,
                rtt_p99: b.rtt.p99 as f64 / 1e6,
                requests_queued: b.outbuf_cnt,
                requests_in_flight: b.waitresp_cnt,
            };
            (b.nodeid, gauges)
        })
    }

    /// The producer queue plus the fetch queues of every partition (the
    /// unassigned partition "-1" holds none).
    fn queue_bytes(&self) -> u64 {
        let fetched: u64 = self
            .topics
            .values()
            .flat_map(|t| t.partitions.values())
            .map(|p| p.fetchq_size)
            .sum();
        self.msg_size + fetched
    }

    fn partitions(&self) -> impl Iterator<Item = (&str, i32, i64, i64)> {
        self.topics.iter().flat_map(|(topic, t)| {
            t.partitions
                .values()
                .map(move |p| (topic.as_str(), p.partition, p.hi_offset, p.ls_offset))
        })
    }

    fn totals(&self) -> Totals {
        let mut broker_errors = HashMap::new();
        for b in self.brokers() {
            for (kind, count) in [
                ("send", b.txerrs),
                ("receive", b.rxerrs),
                ("timeout", b.req_timeouts),
                ("disconnect", b.disconnects),
            ] {
                broker_errors.insert((b.nodeid, kind), count);
            }
        }
        Totals {
            broker_errors,
            producer_id_assignments: self.eos.as_ref().map_or(0, |eos| eos.epoch_cnt),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transactional producer's report in librdkafka's format
    /// (STATISTICS.md), cut down to the fields read and a few that are
    /// skipped.
    const PRODUCER_REPORT: &str = r#"{
        "name": "rdkafka#producer-3", "type": "producer", "ts": 1, "time": 2,
        "msg_cnt": 12, "msg_size": 2400,
        "brokers": {
            "127.0.0.1:29092/bootstrap": {"nodeid": -1, "state": "UP", "outbuf_cnt": 0,
                "waitresp_cnt": 0, "txerrs": 0, "rxerrs": 0, "req_timeouts": 0,
                "disconnects": 0, "rtt": {"p50": 0, "p99": 0}},
            "127.0.0.1:29092/1": {"nodeid": 1, "state": "UP", "outbuf_cnt": 2,
                "waitresp_cnt": 5, "txerrs": 1, "rxerrs": 0, "req_timeouts": 3,
                "disconnects": 1, "rtt": {"min": 100, "p50": 1500, "p99": 20000},
                "toppars": {"t-0": {"topic": "t", "partition": 0}}},
            "TxnCoordinator": {"nodeid": -1, "state": "UP", "outbuf_cnt": 0,
                "waitresp_cnt": 0, "txerrs": 0, "rxerrs": 0, "req_timeouts": 0,
                "disconnects": 0, "rtt": {"p50": 0, "p99": 0}}
        },
        "topics": {"t": {"topic": "t", "partitions": {
            "0": {"partition": 0, "fetchq_size": 0, "hi_offset": 12, "ls_offset": 12},
            "-1": {"partition": -1, "fetchq_size": 0}}}},
        "eos": {"idemp_state": "Assigned", "txn_state": "InTransaction",
            "txn_may_enq": true, "producer_id": 7, "producer_epoch": 2, "epoch_cnt": 1}
    }"#;

    /// A consumer's report: no `eos`, records waiting in fetch queues.
    const CONSUMER_REPORT: &str = r#"{
        "type": "consumer", "msg_cnt": 0, "msg_size": 0,
        "brokers": {"127.0.0.1:19092/1": {"nodeid": 1, "state": "CONNECT",
            "outbuf_cnt": 0, "waitresp_cnt": 1, "txerrs": 0, "rxerrs": 2,
            "req_timeouts": 0, "disconnects": 4, "rtt": {"p50": 800, "p99": 900}}},
        "topics": {"a": {"partitions": {"0": {"partition": 0, "fetchq_size": 1000},
            "1": {"partition": 1, "fetchq_size": 24}}},
            "b": {"partitions": {"0": {"partition": 0, "fetchq_size": 1}}}}
    }"#;

    fn parse(json: &str) -> Report {
        serde_json::from_str(json).expect("report parses")
    }

    #[test]
    fn only_real_brokers_are_reported_with_round_trips_in_seconds() {
        let gauges: Vec<_> = parse(PRODUCER_REPORT).broker_gauges().collect();
        assert_eq!(
            gauges,
            [(
                1,
                BrokerGauges {
                    up: true,
                    rtt_p50: 0.0015,
                    rtt_p99: 0.02,
                    requests_queued: 2,
                    requests_in_flight: 5,
                }
            )]
        );
        let consumer: Vec<_> = parse(CONSUMER_REPORT).broker_gauges().collect();
        assert!(!consumer[0].1.up, "state CONNECT is not up");
    }

    #[test]
    fn queue_bytes_are_the_producer_queue_or_the_fetch_queues() {
        assert_eq!(parse(PRODUCER_REPORT).queue_bytes(), 2400);
        assert_eq!(parse(CONSUMER_REPORT).queue_bytes(), 1025);
    }

    #[test]
    fn totals_count_errors_per_broker_and_producer_ids() {
        let totals = parse(PRODUCER_REPORT).totals();
        assert_eq!(totals.broker_errors.len(), 4, "{totals:?}");
        assert_eq!(totals.broker_errors[&(1, "send")], 1);
        assert_eq!(totals.broker_errors[&(1, "timeout")], 3);
        assert_eq!(totals.broker_errors[&(1, "disconnect")], 1);
        assert_eq!(totals.producer_id_assignments, 1);
        let consumer = parse(CONSUMER_REPORT);
        assert!(consumer.eos.is_none());
        assert_eq!(consumer.totals().broker_errors[&(1, "receive")], 2);
    }

    #[test]
    fn a_partition_is_held_while_its_stable_offset_stands_below_new_records() {
        let mut held = HeldPartitions::default();
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        // An open transaction at 10, records up to 20; the other partition stable.
        let report = [("t", 0, 20, 10), ("t", 1, 5, 5), ("t", -1, -1, -1)];
        assert_eq!(held.update(report.into_iter(), at(0)), Duration::ZERO);
        let more = [("t", 0, 30, 10), ("t", 1, 5, 5)];
        assert_eq!(held.update(more.into_iter(), at(30)), at(30) - at(0));
        // A busy transactional source: the stable offset moves, the clock restarts.
        let moved = [("t", 0, 40, 31), ("t", 1, 5, 5)];
        assert_eq!(held.update(moved.into_iter(), at(60)), Duration::ZERO);
        assert_eq!(held.update(moved.into_iter(), at(90)), at(90) - at(60));
        // The transaction ended: nothing above the stable offset.
        let ended = [("t", 0, 40, 40), ("t", 1, 5, 5)];
        assert_eq!(held.update(ended.into_iter(), at(120)), Duration::ZERO);
        assert!(held.since.is_empty());
    }

    #[test]
    fn the_partitions_of_a_report_carry_their_offsets() {
        let report = parse(
            r#"{"topics": {"t": {"partitions": {
                "0": {"partition": 0, "hi_offset": 20, "ls_offset": 10},
                "-1": {"partition": -1}}}}}"#,
        );
        let mut partitions: Vec<_> = report.partitions().collect();
        partitions.sort();
        assert_eq!(partitions, [("t", -1, -1, -1), ("t", 0, 20, 10)]);
    }

    #[test]
    fn enabling_sets_the_interval_and_nothing_without_one() {
        let client = KafkaClient {
            cluster: "target",
            lane: crate::replication::layout::Lane(0),
        };
        let mut config = ClientConfig::new();
        assert!(ClientStats::enable(&mut config, client, None).is_none());
        assert_eq!(config.get("statistics.interval.ms"), None);
        let interval = Some(Duration::from_secs(15));
        let stats = ClientStats::enable(&mut config, client, interval).expect("enabled");
        assert_eq!(config.get("statistics.interval.ms"), Some("15000"));
        stats.record(PRODUCER_REPORT.as_bytes());
        let previous = stats.memory.lock().unwrap().previous.clone();
        assert_eq!(previous, parse(PRODUCER_REPORT).totals());
        stats.record(b"not json");
        let after = stats.memory.lock().unwrap().previous.clone();
        assert_eq!(after, previous, "a bad report changes nothing");
    }
}

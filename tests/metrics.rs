//! What `/metrics` tells an operator about the lanes' Kafka clients:
//! librdkafka's statistics at broker and transaction level, from a real copy.

mod support;

use std::time::{Duration, Instant};

use support::mirror::{assert_exact_copy, wait_for_copy, MirrorSetup};
use support::{bed, free_local_address, scrape_metrics, TestRecord};

const COPY_LIMIT: Duration = Duration::from_secs(120);
const EXIT_LIMIT: Duration = Duration::from_secs(60);
/// The shortest statistics interval eosmirror accepts, plus time for the
/// lanes' clients to be polled after a report.
const FIRST_REPORT_LIMIT: Duration = Duration::from_secs(60);
/// Two reports (the first sees the hold begin), and polling.
const HELD_LIMIT: Duration = Duration::from_secs(90);

/// Every series of `name`: its labels (as written) and value.
fn series<'m>(metrics: &'m str, name: &str) -> Vec<(&'m str, f64)> {
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix(name)?.strip_prefix('{'))
        .filter_map(|rest| {
            let (labels, value) = rest.rsplit_once("} ")?;
            Some((labels, value.parse().ok()?))
        })
        .collect()
}

/// The value of `label` in a series' labels.
fn label<'l>(labels: &'l str, label: &str) -> Option<&'l str> {
    let start = labels.find(&format!("{label}=\""))? + label.len() + 2;
    labels[start..].split('"').next()
}

/// Two partitions copied with statistics every 15 s: both clusters' brokers
/// show up with round trips, the lanes that copied show one transaction
/// state each and the producer ids they were given; a source transaction
/// left open shows as a held partition until it commits; the copy is exact.
#[test]
fn lane_clients_export_broker_and_transaction_statistics() {
    let bed = bed();
    let topic = bed.source.create_topic("statistics", 2);
    for partition in 0..2 {
        let records: Vec<_> = (0..500)
            .map(|i| TestRecord::new(partition, &format!("k{i}"), &format!("v{i}")))
            .collect();
        bed.source.produce(&topic, &records);
    }
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let metrics_address = free_local_address();
    let mut mirror = setup.start(
        &topic,
        &[
            "--metrics.address",
            &metrics_address,
            "--statistics.interval.ms",
            "15000",
        ],
    );
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    // Taken before the transaction opens: it is held from some instant
    // inside `open_transaction`, never before this one.
    let held_from = Instant::now();
    let open = bed
        .source
        .open_transaction(&topic, &[TestRecord::new(0, "held", "open")]);

    // Reports reach a producer when it is polled: after the first interval
    // and the next idle turn or commit of its lane.
    let deadline = Instant::now() + FIRST_REPORT_LIMIT;
    let metrics = loop {
        let metrics = scrape_metrics(&metrics_address);
        let states = series(&metrics, "eosmirror_kafka_transaction_state");
        let clusters: Vec<_> = series(&metrics, "eosmirror_kafka_broker_up")
            .into_iter()
            .filter_map(|(labels, _)| label(labels, "cluster"))
            .collect();
        if !states.is_empty() && clusters.contains(&"source") && clusters.contains(&"target") {
            break metrics;
        }
        assert!(
            Instant::now() < deadline && mirror.is_running(),
            "no statistics after {FIRST_REPORT_LIMIT:?}:\n{metrics}\n{}",
            mirror.output()
        );
        std::thread::sleep(Duration::from_secs(1));
    };
    let held = loop {
        let metrics = scrape_metrics(&metrics_address);
        let held = series(&metrics, "eosmirror_kafka_source_held_seconds");
        if let Some(&(lane, seconds)) = held.iter().find(|(_, seconds)| *seconds > 0.0) {
            break (lane.to_string(), seconds);
        }
        assert!(
            held_from.elapsed() < HELD_LIMIT && mirror.is_running(),
            "the open transaction does not show as held: {held:?}\n{metrics}"
        );
        std::thread::sleep(Duration::from_secs(1));
    };
    assert!(
        held.1 <= held_from.elapsed().as_secs_f64(),
        "held {held:?} for longer than the transaction is open"
    );
    open.commit();
    wait_for_copy(&bed.source, &bed.target, &topic, COPY_LIMIT, &mut mirror);
    let code = mirror.stop(EXIT_LIMIT);
    assert_eq!(
        code,
        0,
        "eosmirror did not stop cleanly:\n{}",
        mirror.output()
    );
    assert_exact_copy(&bed.source, &bed.target, &topic);

    for (labels, up) in series(&metrics, "eosmirror_kafka_broker_up") {
        assert_eq!(
            up, 1.0,
            "a broker of a healthy local cluster is down: {labels}"
        );
        assert!(
            label(labels, "broker").is_some_and(|b| b != "-1"),
            "{labels}"
        );
    }
    let round_trips = series(&metrics, "eosmirror_kafka_broker_rtt_seconds");
    assert!(
        round_trips.iter().any(|(labels, seconds)| {
            label(labels, "cluster") == Some("target")
                && label(labels, "quantile") == Some("0.99")
                && *seconds > 0.0
                && *seconds < 60.0
        }),
        "no target round trip measured:\n{metrics}"
    );
    let in_flight = series(&metrics, "eosmirror_kafka_broker_requests");
    assert!(
        in_flight.iter().all(|(_, requests)| *requests >= 0.0) && !in_flight.is_empty(),
        "{metrics}"
    );

    // Exactly one state per lane producer that reported.
    let states = series(&metrics, "eosmirror_kafka_transaction_state");
    let mut lanes: Vec<_> = states
        .iter()
        .filter_map(|(l, _)| label(l, "lane"))
        .collect();
    lanes.sort();
    lanes.dedup();
    for lane in &lanes {
        let current: Vec<_> = states
            .iter()
            .filter(|(l, value)| label(l, "lane") == Some(lane) && *value == 1.0)
            .map(|(l, _)| label(l, "state").unwrap_or("?"))
            .collect();
        assert_eq!(current.len(), 1, "{lane}: states {current:?}\n{metrics}");
        assert!(
            [
                "Ready",
                "InTransaction",
                "BeginCommit",
                "CommittingTransaction"
            ]
            .contains(&current[0]),
            "{lane} in state {} during a healthy copy",
            current[0]
        );
    }
    let ids = series(&metrics, "eosmirror_kafka_producer_id_assignments_total");
    for lane in &lanes {
        let assigned = ids
            .iter()
            .find(|(l, _)| label(l, "lane") == Some(lane))
            .map(|(_, n)| *n);
        assert!(
            assigned.is_some_and(|n| n >= 1.0),
            "{lane}: producer ids {assigned:?}\n{metrics}"
        );
    }
    let errors = series(&metrics, "eosmirror_kafka_broker_errors_total");
    assert!(
        errors
            .iter()
            .any(|(l, _)| label(l, "kind") == Some("timeout")),
        "no request time-out series to alert on:\n{metrics}"
    );
}

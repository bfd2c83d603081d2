//! End-to-end latency of a running copy, measured from outside: a producer
//! writes to the source at a fixed rate, each record stamped with its
//! creation time; a `read_committed` reader of the copy on the target notes
//! when each record becomes visible. Both run in this process, on one clock.
//!
//! The reader is a consumer as any downstream application would run it,
//! except for `fetch.wait.max.ms`: the broker holds a fetch that long when
//! nothing new is readable, and how soon it answers once a transaction
//! commits is part of what a consumer sees, so it is a parameter.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// What to measure.
#[derive(Debug, Clone)]
pub struct LatencyProbe {
    /// Source and target bootstrap servers.
    pub source: String,
    /// See [`LatencyProbe::source`].
    pub target: String,
    /// Source topic (its copy on the target has the same name and must exist).
    pub topic: String,
    /// Records per second written to the source, spread over its partitions.
    pub rate: u64,
    /// Value bytes per record.
    pub record_size: usize,
    /// Records written in the first `warmup` are not measured.
    pub warmup: Duration,
    /// How long records are written and measured after the warm-up.
    pub duration: Duration,
    /// The target reader's `fetch.wait.max.ms`.
    pub reader_fetch_wait_ms: u32,
}

/// Latencies of the records written after the warm-up.
#[derive(Debug, Clone)]
pub struct LatencyReport {
    /// Records written after the warm-up, and how many of them were seen
    /// on the target before the reader gave up.
    pub measured: usize,
    /// See [`LatencyReport::measured`].
    pub seen: usize,
    /// The achieved write rate over the measured window (records/s).
    pub achieved_rate: f64,
    /// Sorted latencies in milliseconds.
    latencies_ms: Vec<i64>,
}

impl LatencyReport {
    /// The `q` quantile (0..=1) in milliseconds (nearest rank).
    pub fn quantile_ms(&self, q: f64) -> i64 {
        if self.latencies_ms.is_empty() {
            return 0;
        }
        let rank = ((q * self.latencies_ms.len() as f64).ceil() as usize).max(1);
        self.latencies_ms[rank.min(self.latencies_ms.len()) - 1]
    }
}

/// How long the reader keeps reading after the last record was written.
const DRAIN: Duration = Duration::from_secs(20);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Runs the probe: blocks for warm-up + duration + at most [`DRAIN`].
pub fn measure(probe: &LatencyProbe) -> Result<LatencyReport> {
    if probe.rate == 0 {
        bail!("--rate must be above 0");
    }
    let reader = target_reader(probe)?;
    let partitions = partitions_of(&reader, &probe.topic, "target")?;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let probe = probe.clone();
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || write(&probe, partitions, &stop))
    };
    // Creation time (ms) of a measured record → when it became visible.
    let mut visible: HashMap<(i32, i64), i64> = HashMap::new();
    let mut deadline = None;
    let outcome = loop {
        if writer.is_finished() && deadline.is_none() {
            deadline = Some(Instant::now() + DRAIN);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break writer.join().map_err(|_| anyhow!("the writer panicked"))?;
        }
        let Some(message) = reader.poll(Duration::from_millis(50)) else {
            continue;
        };
        // Transient client errors (a connection the broker closed) are
        // retried by librdkafka; a record that never shows up is what fails.
        let message = match message {
            Ok(message) => message,
            Err(e) => {
                eprintln!("eosmirror-chaos: latency: reading the copy: {e} (retrying)");
                continue;
            }
        };
        let seen_at = now_ms();
        let Some(index) = message
            .key()
            .and_then(|k| std::str::from_utf8(k).ok())
            .and_then(|k| k.parse::<i64>().ok())
        else {
            continue;
        };
        visible.insert((message.partition(), index), seen_at);
    };
    stop.store(true, Ordering::Relaxed);
    let written = outcome?;
    let mut latencies_ms = Vec::with_capacity(written.measured.len());
    for (key, created) in &written.measured {
        if let Some(seen) = visible.get(key) {
            latencies_ms.push(seen - created);
        }
    }
    latencies_ms.sort_unstable();
    Ok(LatencyReport {
        measured: written.measured.len(),
        seen: latencies_ms.len(),
        achieved_rate: written.measured.len() as f64 / written.window.as_secs_f64(),
        latencies_ms,
    })
}

/// A reader of the copy positioned at its current end, so it sees only
/// what is written from now on.
fn target_reader(probe: &LatencyProbe) -> Result<BaseConsumer> {
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &probe.target)
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("group.id", format!("eosmirror-latency-{}", now_ms()))
        .set("fetch.wait.max.ms", probe.reader_fetch_wait_ms.to_string())
        .create()
        .context("creating the target reader")?;
    let count = partitions_of(&reader, &probe.topic, "target")?;
    let mut assignment = TopicPartitionList::new();
    for p in 0..count {
        let (_, high) = reader
            .fetch_watermarks(&probe.topic, p, Duration::from_secs(10))
            .with_context(|| format!("target {}-{p}: watermarks", probe.topic))?;
        assignment.add_partition_offset(&probe.topic, p, Offset::Offset(high))?;
    }
    reader.assign(&assignment)?;
    Ok(reader)
}

fn partitions_of(client: &BaseConsumer, topic: &str, side: &str) -> Result<i32> {
    let metadata = client
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .with_context(|| format!("{side} metadata of {topic}"))?;
    match metadata.topics().first().map(|t| t.partitions().len()) {
        Some(n) if n > 0 => Ok(n as i32),
        _ => bail!("{topic} does not exist on the {side}"),
    }
}

/// What the writer wrote after the warm-up.
struct Written {
    /// (partition, index) → creation time in ms.
    measured: HashMap<(i32, i64), i64>,
    window: Duration,
}

/// Writes record `i` at `start + i / rate`, to partition `i % partitions`,
/// keyed by `i` and timestamped with its creation time.
fn write(probe: &LatencyProbe, partitions: i32, stop: &AtomicBool) -> Result<Written> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &probe.source)
        .set("enable.idempotence", "true")
        // librdkafka's default batching (5 ms) counts in the latency: with
        // none, a partition's idempotent requests reach their cap of five in
        // flight and the client's broker thread spins until one returns.
        .set("linger.ms", "5")
        .create()
        .context("creating the source producer")?;
    let value = vec![b'x'; probe.record_size];
    let start = Instant::now();
    let end = probe.warmup + probe.duration;
    let mut measured = HashMap::new();
    let mut measured_from = None;
    for i in 0i64.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let due = Duration::from_secs_f64(i as f64 / probe.rate as f64);
        if due >= end {
            break;
        }
        // A sleep, not `poll` with a timeout, which spins through its last
        // millisecond (and at 2,000 records/s every wait is under one).
        std::thread::sleep(due.saturating_sub(start.elapsed()));
        let created = now_ms();
        let key = i.to_string();
        let partition = (i % i64::from(partitions)) as i32;
        let mut record = BaseRecord::to(&probe.topic)
            .partition(partition)
            .key(&key)
            .payload(&value)
            .timestamp(created);
        // Faster than the source takes: wait for room (the achieved rate
        // is reported).
        while let Err((e, back)) = producer.send(record) {
            if e != KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull) {
                bail!("writing to the source: {e}");
            }
            producer.poll(Duration::from_millis(5));
            record = back;
        }
        if due >= probe.warmup {
            measured_from.get_or_insert_with(Instant::now);
            measured.insert((partition, i), created);
        }
        producer.poll(Duration::ZERO);
    }
    let window = measured_from.map_or(Duration::ZERO, |from| from.elapsed());
    producer
        .flush(Duration::from_secs(30))
        .context("flushing the source producer")?;
    Ok(Written { measured, window })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let report = LatencyReport {
            measured: 4,
            seen: 4,
            achieved_rate: 1.0,
            latencies_ms: vec![10, 20, 30, 400],
        };
        assert_eq!(report.quantile_ms(0.5), 20);
        assert_eq!(report.quantile_ms(0.75), 30);
        assert_eq!(report.quantile_ms(0.99), 400);
        assert_eq!(report.quantile_ms(0.0), 10);
    }
}

//! Reading back: every record of a topic with full fidelity under either
//! isolation level, and partitions' watermarks.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::broker::{is_transient, BROKER_TIMEOUT};
use super::clusters::{unique_name, Cluster};
use super::records::ReadRecord;

/// Which records a reader sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    ReadCommitted,
    ReadUncommitted,
}

impl Isolation {
    fn as_config(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read_committed",
            Isolation::ReadUncommitted => "read_uncommitted",
        }
    }
}

/// Reading a whole topic back, and the watermarks its end is taken from.
impl Cluster {
    /// Reads every partition of `topic` from the beginning up to its high
    /// watermark taken when the read starts, as seen by `isolation`, in
    /// partition then offset order. A fixed end keeps a read of a topic that
    /// is still being written from chasing it; under `read_committed`,
    /// transactions open at that moment are waited for.
    pub fn read_all(&self, topic: &str, isolation: Isolation) -> Vec<ReadRecord> {
        let partitions = self
            .partition_count(topic)
            .unwrap_or_else(|| panic!("{}: no topic {topic} to read", self.name));
        let mut watermarks = self.watermark_client();
        let ranges: BTreeMap<i32, (i64, i64)> = (0..partitions)
            .map(|p| (p, self.watermarks_with(&mut watermarks, topic, p)))
            .collect();
        let consumer: BaseConsumer = self
            .client_config()
            // A group id lets librdkafka report positions; nothing is committed.
            .set("group.id", unique_name("testbed-reader"))
            .set("enable.auto.commit", "false")
            .set("isolation.level", isolation.as_config())
            .create()
            .expect("create consumer");
        let mut assignment = TopicPartitionList::new();
        // Explicit start offsets: librdkafka resolves `Beginning` with one
        // request per partition, which takes minutes for 1,000 partitions.
        for (&p, &(low, _)) in &ranges {
            assignment
                .add_partition_offset(topic, p, Offset::Offset(low))
                .expect("add partition");
        }
        consumer.assign(&assignment).expect("assign");

        let mut by_partition: BTreeMap<i32, Vec<ReadRecord>> = BTreeMap::new();
        let deadline = Instant::now() + BROKER_TIMEOUT;
        let mut last_check = Instant::now();
        loop {
            // Positions are checked when nothing more arrives, or every
            // 200 ms: a position query lists every partition (1,000s), far
            // too much to do per record.
            match consumer.poll(Duration::from_millis(100)) {
                None => {}
                // librdkafka reconnects by itself; the deadline still holds.
                Some(Err(e)) if is_transient(&e) => {
                    eprintln!("{}: reading {topic}: {e}; still reading", self.name)
                }
                Some(Err(e)) => panic!("{}: reading {topic}: {e}", self.name),
                Some(Ok(m)) => {
                    by_partition
                        .entry(m.partition())
                        .or_default()
                        .push(ReadRecord::from_message(&m));
                    if last_check.elapsed() < Duration::from_millis(200) {
                        continue;
                    }
                }
            }
            last_check = Instant::now();
            // The position moves past transaction markers and aborted
            // records too, which are never returned as messages.
            let positions = consumer.position().expect("positions");
            let behind: Vec<i32> = ranges
                .iter()
                .filter(|(&p, &(low, end))| {
                    // No position before a first fetch: still at the start,
                    // which is the end of a partition retention emptied.
                    let at = match positions.find_partition(topic, p).map(|e| e.offset()) {
                        Some(Offset::Offset(o)) => o,
                        _ => low,
                    };
                    at < end
                })
                .map(|(&p, _)| p)
                .collect();
            if behind.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{}: reading {topic} did not reach the end of partitions {behind:?}",
                self.name,
            );
        }
        by_partition.into_values().flatten().collect()
    }

    /// Low and high watermark of `topic`/`partition`.
    pub fn watermarks(&self, topic: &str, partition: i32) -> (i64, i64) {
        self.watermarks_with(&mut self.watermark_client(), topic, partition)
    }

    fn watermark_client(&self) -> BaseConsumer {
        self.client_config()
            .set("isolation.level", "read_uncommitted")
            .create()
            .expect("create consumer")
    }

    /// Watermarks through `client`, retried while the broker answers with
    /// an error (a partition whose leader is still being elected, e.g. just
    /// created, or after another test restarted the broker), up to
    /// [`BROKER_TIMEOUT`]. After a failure the next try uses a new client,
    /// so metadata the old one cached while the broker stalled cannot make
    /// every try fail.
    fn watermarks_with(
        &self,
        client: &mut BaseConsumer,
        topic: &str,
        partition: i32,
    ) -> (i64, i64) {
        let deadline = Instant::now() + BROKER_TIMEOUT;
        loop {
            match client.fetch_watermarks(topic, partition, BROKER_TIMEOUT) {
                Ok(range) => return range,
                Err(e) if Instant::now() < deadline => {
                    eprintln!(
                        "{}: watermarks of {topic}-{partition}: {e}; retrying",
                        self.name
                    );
                    std::thread::sleep(Duration::from_millis(500));
                    *client = self.watermark_client();
                }
                Err(e) => panic!("{}: watermarks of {topic}-{partition}: {e}", self.name),
            }
        }
    }
}

//! Explicit bounds on every batch and on memory.

use std::time::Duration;

use rdkafka::config::ClientConfig;

/// Limits of one transaction. A batch ends at whichever limit comes first.
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    /// Most source records copied in one transaction.
    pub max_records: usize,
    /// Most key + value + header bytes copied in one transaction.
    pub max_bytes: usize,
    /// Longest a transaction collects records after its first one; the
    /// replication latency a user sees is about this plus the commit.
    pub commit_interval: Duration,
    /// How long an idle worker waits for a first record before it checks
    /// for shutdown and lag again.
    pub idle_poll: Duration,
}

/// Per-worker librdkafka buffer sizes derived from the process-wide memory
/// bound, so memory depends on configuration, never on input size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferBudget {
    /// Consumer prefetch queue (`queued.max.messages.kbytes`).
    pub consumer_prefetch_kbytes: usize,
    /// Largest fetch response the consumer asks a broker for
    /// (`fetch.max.bytes`). librdkafka fetches while the queue is below its
    /// bound, so a response can pass the bound by this much: the queue and
    /// one fetch together make the consumer's share.
    pub consumer_fetch_bytes: usize,
    /// Producer queue (`queue.buffering.max.kbytes`).
    pub producer_queue_kbytes: usize,
}

/// Smallest fetch a lane asks for: librdkafka refuses a `fetch.max.bytes`
/// below `message.max.bytes` (1,000,000 by default).
const MIN_FETCH_KBYTES: usize = 1024;

/// Largest fetch a lane asks for: librdkafka's own default (50 MiB).
const MAX_FETCH_KBYTES: usize = 50 * 1024;

impl BufferBudget {
    /// Splits `memory_limit_bytes` evenly across `workers`, three quarters
    /// for the consumer and one for the producer queue, with a floor of
    /// 1 MiB each so a single large record still fits. A quarter of the
    /// consumer's part is the largest fetch, the rest its prefetch queue.
    ///
    /// The prefetch carries a lane through its flush and commit, when it
    /// reads nothing; the producer queue only holds records between their
    /// send and their acknowledgement. Measured at 1 KB × 8 partitions and
    /// 128 MiB: 120k records/s split 3:1 against 91k split evenly. Without
    /// the fetch bound a lane of many partitions fetched as much as its
    /// whole queue again (librdkafka caps `fetch.max.bytes` at the queue
    /// size): 1M × 200 B over 1,000 partitions peaked at 485–541 MB RSS
    /// at 256 MiB, 405 MB with 8 MiB fetches.
    pub fn split(memory_limit_bytes: usize, workers: usize) -> BufferBudget {
        let per_worker_kbytes = memory_limit_bytes / 1024 / workers.max(1);
        let producer = per_worker_kbytes / 4;
        let consumer = per_worker_kbytes - producer;
        let fetch = (consumer / 4).clamp(MIN_FETCH_KBYTES, MAX_FETCH_KBYTES);
        BufferBudget {
            consumer_prefetch_kbytes: consumer.saturating_sub(fetch).max(1024),
            consumer_fetch_bytes: fetch * 1024,
            producer_queue_kbytes: producer.max(1024),
        }
    }

    /// The smallest `--max.memory.bytes`, in whole MiB, whose split over
    /// `lanes` gives each lane a producer queue that holds a value of
    /// `value_bytes` (librdkafka counts values against the queue).
    pub fn memory_mib_for_value(value_bytes: usize, lanes: usize) -> usize {
        // split() rounds down to KiB per lane, then per quarter.
        (value_bytes.div_ceil(1024) * 4 * lanes.max(1)).div_ceil(1024)
    }

    /// The consumer's whole share, prefetch and one fetch (KiB). A lane's
    /// session reads its positions and checks target partitions before its
    /// source consumer fetches anything, with readers bounded by this.
    pub fn consumer_kbytes(&self) -> usize {
        self.consumer_prefetch_kbytes + self.consumer_fetch_bytes / 1024
    }

    /// A lane's source consumer settings for `partitions` partitions: the
    /// user's `source` settings, bounded (`bound_consumer`), with the fetch
    /// backoff for that many partitions unless the consumer file sets one.
    /// `run` creates a client from them before it writes anything, so it
    /// refuses what a lane would.
    pub fn lane_consumer(&self, source: &ClientConfig, partitions: usize) -> ClientConfig {
        let mut config = source.clone();
        self.bound_consumer(&mut config);
        if config.get("fetch.queue.backoff.ms").is_none() {
            let backoff = fetch_queue_backoff(partitions);
            config.set("fetch.queue.backoff.ms", backoff.as_millis().to_string());
        }
        config
    }

    /// Sets a lane consumer's prefetch bounds. The queue holds at most one
    /// record per KiB of its bound (`queued.min.messages`, which librdkafka
    /// compares with the whole queue's length): its byte bound counts
    /// payloads only, and each queued record also costs librdkafka about
    /// 340 bytes, so 200 B records took half again their payload (1M × 200 B
    /// over 1,000 partitions: 430–444 MB peak RSS, 287–289 MB with the
    /// count bound, same speed). A `fetch.max.bytes` or `queued.min.messages`
    /// from the consumer file wins (trading memory for speed is the user's
    /// call); the fetch is never below `message.max.bytes`, which librdkafka
    /// requires.
    fn bound_consumer(&self, config: &mut ClientConfig) {
        config.set(
            "queued.max.messages.kbytes",
            self.consumer_prefetch_kbytes.to_string(),
        );
        if config.get("queued.min.messages").is_none() {
            config.set(
                "queued.min.messages",
                self.consumer_prefetch_kbytes.to_string(),
            );
        }
        if config.get("fetch.max.bytes").is_none() {
            let floor = config
                .get("message.max.bytes")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            config.set(
                "fetch.max.bytes",
                self.consumer_fetch_bytes.max(floor).to_string(),
            );
        }
    }
}

/// How long a lane's source consumer waits to fetch a partition again after
/// finding its prefetch queue full, unless the consumer file says
/// (`fetch.queue.backoff.ms`). The queue fills while the lane flushes and
/// commits. librdkafka's default, 1 s, left a lane of a few partitions with
/// nothing to copy once it had drained its queue, so such a lane waits
/// 10 ms. But every wake-up of the consumer's broker thread decides again
/// for each of the lane's partitions whether to fetch it, so a short wait
/// costs in proportion to the partitions: with 10 ms, 1,250 partitions per
/// lane (5,000 over 4 lanes) spent most of the copy's CPU there and copied
/// 1M records in 111 s with 40 CPU-seconds; with 500 ms, in 75 s with 21.
/// So the wait grows with the lane's partitions, within 10–500 ms.
fn fetch_queue_backoff(partitions: usize) -> Duration {
    Duration::from_millis((partitions as u64 / 2).clamp(10, 500))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fetch_backoff_grows_with_the_lane_partitions_within_bounds() {
        assert_eq!(fetch_queue_backoff(2), Duration::from_millis(10));
        assert_eq!(fetch_queue_backoff(250), Duration::from_millis(125));
        assert_eq!(fetch_queue_backoff(1_250), Duration::from_millis(500));
        assert_eq!(fetch_queue_backoff(100_000), Duration::from_millis(500));
    }

    #[test]
    fn budget_splits_and_keeps_a_floor() {
        let b = BufferBudget::split(128 << 20, 8);
        assert_eq!(b.consumer_prefetch_kbytes, 9 * 1024);
        assert_eq!(b.consumer_fetch_bytes, 3 << 20);
        assert_eq!(b.producer_queue_kbytes, 4 * 1024);
        // A session's target readers take the consumer's whole share: with
        // the producer's, the lane's share of the bound.
        assert_eq!(b.consumer_kbytes(), 12 * 1024);
        assert_eq!(b.consumer_kbytes() + b.producer_queue_kbytes, 16 * 1024);
        let tiny = BufferBudget::split(1 << 20, 100);
        assert_eq!(tiny.consumer_prefetch_kbytes, 1024);
        assert_eq!(tiny.consumer_fetch_bytes, 1 << 20);
        assert_eq!(tiny.producer_queue_kbytes, 1024);
        // A huge bound still asks for no more than librdkafka's default fetch.
        let huge = BufferBudget::split(64 << 30, 1);
        assert_eq!(huge.consumer_fetch_bytes, 50 << 20);
        assert_eq!(
            huge.consumer_prefetch_kbytes
                + huge.consumer_fetch_bytes / 1024
                + huge.producer_queue_kbytes,
            (64 << 30) / 1024
        );
    }

    #[test]
    fn the_memory_named_for_a_large_value_fits_it() {
        for lanes in 1..=8 {
            for value in [
                1,
                1023,
                1025,
                1_135_957,
                3_000_000,
                16 << 20,
                (16 << 20) + 1,
            ] {
                let mib = BufferBudget::memory_mib_for_value(value, lanes);
                let queue = BufferBudget::split(mib << 20, lanes).producer_queue_kbytes * 1024;
                assert!(queue >= value, "{lanes} lanes, {value} B: {mib} MiB");
            }
        }
        assert_eq!(BufferBudget::memory_mib_for_value(3_000_000, 1), 12);
    }

    #[test]
    fn a_consumer_queues_and_fetches_at_most_its_share_unless_the_file_says() {
        let budget = BufferBudget::split(256 << 20, 4);
        let mut config = ClientConfig::new();
        budget.bound_consumer(&mut config);
        assert_eq!(config.get("queued.max.messages.kbytes"), Some("36864"));
        assert_eq!(config.get("queued.min.messages"), Some("36864"));
        assert_eq!(config.get("fetch.max.bytes"), Some("12582912"));

        let mut large_records = ClientConfig::new();
        large_records.set("message.max.bytes", "20000000");
        budget.bound_consumer(&mut large_records);
        assert_eq!(large_records.get("fetch.max.bytes"), Some("20000000"));

        let mut chosen = ClientConfig::new();
        chosen.set("fetch.max.bytes", "52428800");
        chosen.set("queued.min.messages", "100000");
        budget.bound_consumer(&mut chosen);
        assert_eq!(chosen.get("fetch.max.bytes"), Some("52428800"));
        assert_eq!(chosen.get("queued.min.messages"), Some("100000"));
    }
}

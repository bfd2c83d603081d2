//! The settings a lane's clients are created with: the properties files'
//! own, with what exactly-once needs over them, and the check that
//! librdkafka takes them before anything is written (`run` stops on it;
//! `plan` reports it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::anyhow;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use rdkafka::producer::BaseProducer;

use crate::replication::limits::BufferBudget;
use crate::replication::transaction::TransactionalProducer;

/// Settings eosmirror always sets on the source consumer: exactly-once needs
/// committed data only, positions come from the target (never from source
/// group offsets), and a deleted range must surface as an error.
const SOURCE_OVERRIDES: &[(&str, &str)] = &[
    ("isolation.level", "read_committed"),
    ("enable.auto.commit", "false"),
    ("enable.auto.offset.store", "false"),
    ("auto.offset.reset", "error"),
    ("enable.partition.eof", "false"),
];

/// Settings eosmirror always sets on the target producer. A target topic
/// deleted while running must not come back by auto-creation with the
/// broker's defaults (its partition count, no copied settings): the next
/// topic refresh creates it as eosmirror would, and the lanes report it.
const TARGET_OVERRIDES: &[(&str, &str)] = &[
    ("enable.idempotence", "true"),
    ("acks", "all"),
    ("allow.auto.create.topics", "false"),
];

/// Largest produce request the target producer may send unless the
/// producer file says otherwise.
const TARGET_MAX_REQUEST_BYTES: usize = 100 << 20;

/// Puts eosmirror's own settings over the files' `source` (consumer) and
/// `target` (producer) settings, as every lane's clients get them: a
/// default group id under `alias`, the overrides above, the delivery
/// timeout within `transaction_timeout_ms`, and a produce request size.
pub fn for_lanes(
    source: &mut ClientConfig,
    target: &mut ClientConfig,
    alias: &str,
    transaction_timeout_ms: u64,
    producer_file: &Path,
) {
    if source.get("group.id").is_none() {
        source.set("group.id", format!("eosmirror.{alias}"));
    }
    for (k, v) in SOURCE_OVERRIDES {
        source.set(*k, *v);
    }
    for (k, v) in TARGET_OVERRIDES {
        target.set(*k, *v);
    }
    fit_delivery_timeout(target, transaction_timeout_ms, producer_file);
    if target.get("message.max.bytes").is_none() {
        // librdkafka's default (1 MB) is below what topics commonly allow;
        // the target broker enforces each topic's real limit.
        target.set("message.max.bytes", TARGET_MAX_REQUEST_BYTES.to_string());
    }
}

/// librdkafka's default `batch.size`.
const LIBRDKAFKA_BATCH_BYTES: usize = 1_000_000;

/// The `batch.size` a producer with `target`'s settings fills batches to.
pub fn batch_bytes(target: &ClientConfig) -> usize {
    target
        .get("batch.size")
        .and_then(|v| v.parse().ok())
        .unwrap_or(LIBRDKAFKA_BATCH_BYTES)
}

/// The largest `batch.size` whose batches a topic of `max_message_bytes`
/// takes. A topic refuses a larger batch whole, and librdkafka, unlike
/// Java's producer, does not split it: the copies would be refused although
/// each record fits. `batch.size` counts a batch before compression, whose
/// framing can grow incompressible data a little, hence the 1/32 margin.
pub fn batch_bytes_within(max_message_bytes: usize) -> usize {
    (max_message_bytes - max_message_bytes / 32).max(1)
}

/// What [`LaneCheck::refuse_unusable`] builds a lane's clients with,
/// besides their settings.
pub struct LaneCheck {
    /// `<--transactional.id.prefix>.<alias>`: the check's producer gets an
    /// id under it that no lane has.
    pub transactional_id_base: String,
    /// `--transaction.timeout.ms`.
    pub transaction_timeout: Duration,
    /// A lane's share of `--max.memory.bytes`.
    pub budget: BufferBudget,
    /// The consumer file the source settings come from, named in a refusal.
    pub consumer_file: PathBuf,
    /// The producer file the target settings come from, likewise.
    pub producer_file: PathBuf,
}

impl LaneCheck {
    /// Creates, and drops, a lane's producer and consumer from their whole
    /// settings (`source` and `target` as [`for_lanes`] left them):
    /// librdkafka refuses some combinations only when a client is created
    /// (more than 5 requests in flight or `retries=0` with idempotence,
    /// `max.poll.interval.ms` below `session.timeout.ms`), and a lane
    /// creates its clients only after the first refresh has created topics.
    /// Neither client writes anything (both may fetch metadata meanwhile):
    /// the producer's transactional id is never initialised (and is none of
    /// the lanes'), the consumer never subscribes. Blocking.
    pub fn refuse_unusable(
        &self,
        source: &ClientConfig,
        target: &ClientConfig,
    ) -> anyhow::Result<()> {
        let producer = TransactionalProducer::config(
            target,
            &format!("{}.settings-check", self.transactional_id_base),
            self.transaction_timeout,
            self.budget.producer_queue_kbytes,
        );
        let consumer = self.budget.lane_consumer(source, 1);
        let refused = |file: &Path, e: KafkaError| {
            anyhow!(
                "librdkafka refuses the settings in {} as a lane uses them (with eosmirror's own: idempotent, transactional producers; read_committed consumers in a group): {e}. Change or remove the setting it names (librdkafka's name for it; e.g. max.in.flight is max.in.flight.requests.per.connection); nothing was written",
                file.display()
            )
        };
        drop(
            producer
                .create::<BaseProducer>()
                .map_err(|e| refused(&self.producer_file, e))?,
        );
        drop(
            consumer
                .create::<BaseConsumer>()
                .map_err(|e| refused(&self.consumer_file, e))?,
        );
        Ok(())
    }

    /// Why the consumer file lets a lane hold more than its share of
    /// `--max.memory.bytes`, if it does: a `fetch.max.bytes` of its own wins
    /// over the lane's fetch share (trading memory for speed is the user's
    /// call), so the bound no longer holds and the user is told by how much.
    pub fn memory_beyond_bound(&self, source: &ClientConfig, lanes: u32) -> Option<String> {
        let fetch = source.get("fetch.max.bytes")?.parse::<usize>().ok()?;
        let share = self.budget.consumer_fetch_bytes;
        let beyond = fetch.checked_sub(share).filter(|&b| b > 0)?;
        Some(format!(
            "fetch.max.bytes={fetch} in {} is above a lane's fetch share of --max.memory.bytes ({share} bytes): each lane may hold up to {beyond} bytes more, {} in all over {lanes} lane(s). Remove the line to keep memory within --max.memory.bytes, or raise --max.memory.bytes",
            self.consumer_file.display(),
            beyond.saturating_mul(lanes as usize),
        ))
    }
}

/// Caps the lanes' delivery timeout at the transaction timeout. librdkafka
/// refuses a transactional producer whose records may outlive their
/// transaction, and Java files often spell out Java's default
/// `delivery.timeout.ms=120000`, above the default transaction timeout; a
/// record undelivered when its transaction times out is sent again in the
/// next one, so the cap changes nothing a lane relies on.
fn fit_delivery_timeout(target: &mut ClientConfig, transaction_timeout_ms: u64, file: &Path) {
    for key in ["delivery.timeout.ms", "message.timeout.ms"] {
        let Some(ms) = target.get(key).and_then(|v| v.parse::<u64>().ok()) else {
            continue;
        };
        if ms > transaction_timeout_ms {
            tracing::warn!(
                "{key}={ms} in {} is longer than --transaction.timeout.ms {transaction_timeout_ms}; the lanes' producers use {transaction_timeout_ms} (librdkafka requires a record's timeout within its transaction's)",
                file.display()
            );
            target.set(key, transaction_timeout_ms.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_fit_a_topic_limit_with_room_for_compression_framing() {
        assert_eq!(batch_bytes_within(20_000), 19_375);
        // The broker default (1 MB and 12 bytes) takes librdkafka's default.
        assert!(batch_bytes_within(1_048_588) > batch_bytes(&ClientConfig::new()));
        let mut file = ClientConfig::new();
        file.set("batch.size", "16384");
        assert_eq!(batch_bytes(&file), 16_384);
    }

    #[test]
    fn a_consumer_fetch_above_the_lane_share_is_named_with_its_cost() {
        let check = LaneCheck {
            transactional_id_base: "eosmirror.source".into(),
            transaction_timeout: Duration::from_secs(60),
            budget: BufferBudget::split(256 << 20, 4),
            consumer_file: PathBuf::from("consumer.properties"),
            producer_file: PathBuf::from("producer.properties"),
        };
        let share = check.budget.consumer_fetch_bytes;
        let mut source = ClientConfig::new();
        assert_eq!(check.memory_beyond_bound(&source, 4), None);
        source.set("fetch.max.bytes", share.to_string());
        assert_eq!(check.memory_beyond_bound(&source, 4), None);
        source.set("fetch.max.bytes", (share + 1000).to_string());
        let warning = check.memory_beyond_bound(&source, 4).unwrap();
        assert!(
            warning.contains("consumer.properties")
                && warning.contains("up to 1000 bytes more, 4000 in all over 4 lane(s)"),
            "{warning}"
        );
    }

    #[test]
    fn a_delivery_timeout_past_the_transaction_timeout_is_capped() {
        let file = Path::new("producer.properties");
        let mut target = ClientConfig::new();
        target.set("delivery.timeout.ms", "120000");
        fit_delivery_timeout(&mut target, 60_000, file);
        assert_eq!(target.get("delivery.timeout.ms"), Some("60000"));

        let mut target = ClientConfig::new();
        target.set("message.timeout.ms", "30000");
        fit_delivery_timeout(&mut target, 60_000, file);
        assert_eq!(target.get("message.timeout.ms"), Some("30000"));
        assert_eq!(target.get("delivery.timeout.ms"), None);
    }
}

//! The transaction protocol with the target, in one type.
//!
//! [`TransactionalProducer`] owns the begin / send / flush / commit / abort
//! sequence and turns every failure into a [`TxnFailure`] classified once
//! (see [`super::errors`]); the lane decides what to copy, this type how a
//! transaction is carried out. Every call blocks: lanes run on threads of
//! their own, so the async runtime never stalls on librdkafka.

use std::cell::Cell;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::ConsumerGroupMetadata;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, PurgeConfig};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::TopicPartitionList;

use super::client_stats::ClientStats;
use super::delivery::{Delivery, DeliveryLog};
use super::errors::{classify, classify_code, Disposition};
use crate::failpoints::{self, crash_point};

/// A failed transactional step, already classified.
#[derive(Debug)]
pub struct TxnFailure {
    pub disposition: Disposition,
    pub detail: String,
    /// The batch slot of the record the target rejected, if that is the cause.
    pub slot: Option<usize>,
}

impl TxnFailure {
    pub fn from_kafka(context: &str, e: &KafkaError) -> TxnFailure {
        TxnFailure {
            disposition: classify(e),
            detail: format!("{context}: {e}"),
            slot: None,
        }
    }
}

/// How long a commit's flush lets the broker threads send what lingers
/// right away: they wake within a fraction of this.
const FLUSH_WINDOW_MS: i32 = 5;

/// Pause while draining when no delivery report was waiting.
const DRAIN_PAUSE: Duration = Duration::from_millis(1);

/// Longest an abort waits for purged records' reports before aborting anyway.
const PURGE_WAIT: Duration = Duration::from_secs(5);

/// How long copies wait to fill a produce request unless the producer file
/// says otherwise. Commits flush at once, so waiting costs no latency; at
/// librdkafka's 5 ms the broker threads woke for small requests and took
/// more CPU than the copying (measured at 200 B × 8 partitions: 4.5 instead
/// of 9.2 CPU-seconds per 2M records, 260k instead of 201k records/s).
const DEFAULT_LINGER_MS: &str = "50";

/// Produce requests a lane producer keeps in flight per broker connection
/// unless the producer file says otherwise: one.
///
/// librdkafka 2.12's idempotent producer counts a partition's in-flight
/// *messages* against its limit of five *requests*, so each partition has
/// one request in flight at a time. While that request is out, a ready next
/// batch of the partition (`linger.ms` passed, or `batch.size` reached) sets
/// the broker thread's next wake-up to "now" unless another request waits
/// in the connection's output queue, and the thread busy-loops for the
/// whole round trip, scanning every partition it knows each time. With one
/// request per connection, the next partition's request always waits.
/// Measured with five (librdkafka's idempotent maximum) against one:
/// 1 M × 1 KB over 8 partitions, 34.9k records/s with 41.8 CPU-seconds, or
/// a target so slow that the fleet's session timed out, against 62.8k and
/// 94.4k with 8.5 and 6.1; 1 M × 1 KB over 100 partitions, alike (138.7k
/// against 139.6k); 12 M × 200 B over 1,000 partitions, 26–30 s and
/// 26.0–27.2 CPU-seconds against 25 s and 23.2–24.1, and with `--lanes 8`
/// 101 s and 142 CPU-seconds, or target brokers starved into multi-second
/// pauses and a stalled copy, against 28 s and 27.6; 4 M × 200 B over 5,000
/// partitions, alike (41 s, 25 CPU-seconds).
const DEFAULT_MAX_IN_FLIGHT: &str = "1";

/// A transactional producer of one lane.
pub struct TransactionalProducer {
    producer: BaseProducer<DeliveryLog>,
    /// Bound on each blocking call: past it the outcome counts as unknown.
    call_timeout: Duration,
    /// Whether a transaction was begun and has not been committed or
    /// aborted: a lane that ends with one open aborts it while the lane is
    /// still its own, or the target's readers wait for its timeout.
    open: Cell<bool>,
}

impl TransactionalProducer {
    /// Creates the producer; `init` still has to fence older owners.
    pub fn create(
        config: &ClientConfig,
        transactional_id: &str,
        transaction_timeout: Duration,
        queue_kbytes: usize,
        call_timeout: Duration,
        stats: Option<ClientStats>,
    ) -> Result<TransactionalProducer, KafkaError> {
        let producer = Self::config(config, transactional_id, transaction_timeout, queue_kbytes)
            .create_with_context(DeliveryLog::new(stats))?;
        Ok(TransactionalProducer {
            producer,
            call_timeout,
            open: Cell::new(false),
        })
    }

    /// The settings a lane's producer is created with: `config` (the
    /// producer file with eosmirror's overrides), the lane's defaults and
    /// its transaction. `run` creates (and drops) a client from them before
    /// writing anything, since librdkafka refuses some combinations (more
    /// than 5 requests in flight with idempotence, `retries=0`) only then.
    pub fn config(
        config: &ClientConfig,
        transactional_id: &str,
        transaction_timeout: Duration,
        queue_kbytes: usize,
    ) -> ClientConfig {
        let mut config = config.clone();
        if config.get("linger.ms").is_none() && config.get("queue.buffering.max.ms").is_none() {
            config.set("linger.ms", DEFAULT_LINGER_MS);
        }
        if config
            .get("max.in.flight.requests.per.connection")
            .is_none()
            && config.get("max.in.flight").is_none()
        {
            config.set(
                "max.in.flight.requests.per.connection",
                DEFAULT_MAX_IN_FLIGHT,
            );
        }
        config
            .set("transactional.id", transactional_id)
            .set(
                "transaction.timeout.ms",
                transaction_timeout.as_millis().to_string(),
            )
            .set("queue.buffering.max.kbytes", queue_kbytes.to_string());
        config
    }

    /// `init_transactions`: fences every older producer with the same
    /// transactional id and resolves its open transaction.
    pub fn init(&self) -> Result<(), KafkaError> {
        self.producer.init_transactions(self.call_timeout)
    }

    pub fn begin(&self) -> Result<(), TxnFailure> {
        self.producer
            .begin_transaction()
            .map_err(|e| TxnFailure::from_kafka("begin_transaction", &e))?;
        self.open.set(true);
        Ok(())
    }

    /// Whether a transaction is open (begun, neither committed nor aborted).
    pub fn in_transaction(&self) -> bool {
        self.open.get()
    }

    /// Serves what the producer queued for the application (statistics,
    /// errors) while the lane is idle: between transactions nothing else
    /// polls it, and its queue would grow with every report.
    pub fn serve_events(&self) {
        self.producer.poll(Duration::ZERO);
    }

    /// Sends one record of the open transaction; waits (serving delivery
    /// reports) while the bounded producer queue is full.
    pub fn send(&self, mut record: BaseRecord<'_, [u8], [u8], usize>) -> Result<(), TxnFailure> {
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    self.producer.poll(Duration::from_millis(10));
                    record = back;
                }
                Err((e, back)) => {
                    let mut failure = self.producer_error("sending to the target", &e);
                    failure.slot = Some(back.delivery_opaque);
                    return Err(failure);
                }
            }
        }
    }

    /// Waits until every record sent so far has its delivery report, and
    /// takes the reports.
    pub fn flush(&self) -> Result<Vec<Delivery>, TxnFailure> {
        self.drain_in_flight(self.call_timeout)
            .map_err(|e| TxnFailure::from_kafka("flushing copies", &e))?;
        Ok(self.producer.context().drain())
    }

    /// Adds the fleet group's offsets to the open transaction (KIP-447): the
    /// coordinator refuses them, and so the commit, from a stale member.
    pub fn send_fence(
        &self,
        offsets: &TopicPartitionList,
        group: &ConsumerGroupMetadata,
    ) -> Result<(), TxnFailure> {
        self.producer
            .send_offsets_to_transaction(offsets, group, self.call_timeout)
            .map_err(|e| TxnFailure::from_kafka("send_offsets_to_transaction", &e))
    }

    /// Sends what lingers and serves delivery reports until no record is
    /// outstanding. Not rust-rdkafka's `flush`, which waits for reports in
    /// slices of 100 ms that never end early (measured at 8 partitions: 200
    /// of a 230 ms transaction), nor its `poll` with a short timeout, which
    /// spins through the last millisecond of every slice. Gives up after
    /// `limit`.
    fn drain_in_flight(&self, limit: Duration) -> Result<(), KafkaError> {
        let deadline = Instant::now() + limit;
        if self.producer.in_flight_count() == 0 {
            return Ok(());
        }
        // librdkafka sends lingering batches at once only while a flush
        // call is in progress when a broker thread looks; rust-rdkafka's
        // `flush` makes the call with no time to wait, which usually ends
        // first, and the batches then wait out `linger.ms` (up to 50 ms per
        // commit). So one call held open for FLUSH_WINDOW_MS (it cannot
        // finish earlier: the reports are events only `poll` serves). Once:
        // every wake-up makes each broker thread scan all its partitions.
        // SAFETY: the pointer is this live producer's handle.
        unsafe {
            rdkafka::bindings::rd_kafka_flush(self.producer.client().native_ptr(), FLUSH_WINDOW_MS)
        };
        loop {
            // Records not yet reported, and reports not yet served.
            let outstanding = self.producer.in_flight_count();
            if outstanding == 0 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut));
            }
            self.producer.poll(Duration::ZERO);
            if self.producer.in_flight_count() == outstanding {
                std::thread::sleep(DRAIN_PAUSE);
            }
        }
    }

    /// Commits, retrying while librdkafka says the commit may be retried;
    /// returns the reports of the records flushed by the commit.
    pub fn commit(&self) -> Result<Vec<Delivery>, TxnFailure> {
        let deadline = Instant::now() + self.call_timeout;
        loop {
            crash_point!(failpoints::TXN_BEFORE_COMMIT);
            // Retries share the one call's time: the health watchdog's
            // stall limit is judged against a single call.
            let left = deadline.saturating_duration_since(Instant::now());
            // Drained first, so rust-rdkafka's own flush inside
            // `commit_transaction` finds nothing to wait for.
            let committed = self
                .drain_in_flight(left)
                .and_then(|()| self.producer.commit_transaction(left));
            match committed {
                Ok(()) => {
                    self.open.set(false);
                    self.producer.poll(Duration::ZERO);
                    return Ok(self.producer.context().drain());
                }
                Err(e) => {
                    // A record refused for good (an internal record over its
                    // topic's max.message.bytes, Write on it revoked, a
                    // policy) fails every commit of the batch as abortable:
                    // named, never aborted and retried for ever.
                    if let Some(refused) = self.producer.context().first_refused() {
                        return Err(refusal(&format!("commit_transaction: {e}"), refused));
                    }
                    let failure = TxnFailure::from_kafka("commit_transaction", &e);
                    if failure.disposition == Disposition::Retriable {
                        if Instant::now() < deadline {
                            tracing::warn!(error = %e, "commit not confirmed; retrying");
                            continue;
                        }
                        // Outcome unknown: only a new session can tell.
                        return Err(TxnFailure {
                            disposition: Disposition::RestartSession,
                            ..failure
                        });
                    }
                    return Err(failure);
                }
            }
        }
    }

    /// The record the target refused for good behind a failed batch, if
    /// any, as the failure to stop on (`failure` otherwise). Once the
    /// target refuses one record, librdkafka makes the transaction
    /// abortable, fails the records queued with it and refuses every later
    /// send (`_STATE`), so a batch still sending fails on those first;
    /// aborted and re-read, it would fail the same way for ever. Purges
    /// what is queued or in flight (a batch failed so is aborted anyway)
    /// and serves their reports, so the refusal is among those looked at.
    /// Other failures (fenced, lane lost, outcome unknown) pass unchanged.
    pub fn refusal_behind(&self, failure: TxnFailure) -> TxnFailure {
        if !matches!(
            failure.disposition,
            Disposition::AbortBatch | Disposition::Retriable
        ) {
            return failure;
        }
        self.producer
            .purge(PurgeConfig::default().queue().inflight());
        let _ = self.drain_in_flight(PURGE_WAIT.min(self.call_timeout));
        match self.producer.context().first_refused() {
            Some(refused) => refusal(&failure.detail, refused),
            None => failure,
        }
    }

    /// Aborts the open transaction. Records still queued or in flight are
    /// purged first and their reports served, so the abort never waits for
    /// deliveries that nobody polls for.
    pub fn abort(&self) -> Result<(), KafkaError> {
        self.abort_within(self.call_timeout)
    }

    /// [`TransactionalProducer::abort`], waiting at most `limit` for the
    /// target's answer.
    pub fn abort_within(&self, limit: Duration) -> Result<(), KafkaError> {
        self.producer
            .purge(PurgeConfig::default().queue().inflight());
        // Past the wait the abort itself waits out what is left.
        let _ = self.drain_in_flight(PURGE_WAIT.min(limit));
        self.producer.context().drain();
        self.producer.abort_transaction(limit)?;
        self.open.set(false);
        Ok(())
    }

    /// Classifies a failed producer call. A call refused because the
    /// producer already raised a fatal error (`Local: Fatal error`) is
    /// classified by that fatal error (e.g. fenced), not as a failed record.
    fn producer_error(&self, context: &str, e: &KafkaError) -> TxnFailure {
        match (e.rdkafka_error_code(), self.producer.client().fatal_error()) {
            (Some(RDKafkaErrorCode::Fatal), Some((code, reason))) => TxnFailure {
                disposition: match classify_code(code) {
                    Disposition::AbortBatch => Disposition::RestartSession,
                    other => other,
                },
                detail: format!("{context}: {e}: {reason}"),
                slot: None,
            },
            _ => TxnFailure::from_kafka(context, e),
        }
    }
}

/// The failure of a batch holding `refused`, a record the target refused
/// for good: fatal, naming the record's slot so its partition stops.
fn refusal(context: &str, refused: Delivery) -> TxnFailure {
    let reason = refused.outcome.err().map(|e| e.to_string());
    TxnFailure {
        disposition: Disposition::Fatal,
        detail: format!(
            "{context}: a record of the transaction was refused: {}",
            reason.unwrap_or_default()
        ),
        slot: Some(refused.slot),
    }
}

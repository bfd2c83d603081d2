//! A read's no-progress limit. Every reader loop of eosmirror (verify's
//! range readers and settle wait, resume's position reads, `status`) goes
//! on through the errors librdkafka recovers from by itself and ends only
//! once it has not moved for a while; the limit, and what the client saw
//! meanwhile, live here once.

use std::time::{Duration, Instant};

use rdkafka::consumer::BaseConsumer;
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::BorrowedMessage;
use rdkafka::types::RDKafkaErrorCode;

use crate::failpoints::{self, fault_armed};

/// Watches one read: when it last moved, and the last error its client
/// recovered from since then.
#[derive(Debug)]
pub struct StallWatch {
    /// Longest the read may go without moving.
    limit: Duration,
    /// When the read last moved (or started).
    last_progress: Instant,
    /// Named when the read stalls, so that "the cluster stopped answering"
    /// comes with what the client saw.
    recovering: Recovering,
}

impl StallWatch {
    /// A read that starts now and may go `limit` without moving.
    pub fn new(limit: Duration) -> StallWatch {
        StallWatch {
            limit,
            last_progress: Instant::now(),
            recovering: Recovering::default(),
        }
    }

    /// The limit, for messages.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// One poll of `consumer`, with the errors librdkafka recovers from by
    /// itself ([transient](is_transient): a lost connection, "all brokers
    /// are down", a leader election, a request that timed out) passed over
    /// as a poll that found nothing and kept for the stall message.
    /// librdkafka reports them and goes on reconnecting and fetching, so the
    /// read goes on too, and the limit decides when a cluster that stays
    /// away ends it.
    pub fn poll<'c>(
        &mut self,
        consumer: &'c BaseConsumer,
        wait: Duration,
    ) -> Option<KafkaResult<BorrowedMessage<'c>>> {
        let fault = fault_armed(failpoints::READ_CONNECTION_LOST)
            .then_some(failpoints::READ_CONNECTION_LOST);
        self.poll_or_fault(consumer, wait, fault)
    }

    /// [`StallWatch::poll`], or with `fault` (a fault point's name) the
    /// poll of a cluster whose brokers are all down.
    pub fn poll_or_fault<'c>(
        &mut self,
        consumer: &'c BaseConsumer,
        wait: Duration,
        fault: Option<&'static str>,
    ) -> Option<KafkaResult<BorrowedMessage<'c>>> {
        let polled = if let Some(fault) = fault {
            tracing::warn!("fault point {fault}: the reader's poll reports all brokers down");
            // As long as the poll would have waited: a reader that keeps
            // hitting the point logs a line per wait, not a line per spin.
            std::thread::sleep(wait);
            Some(Err(KafkaError::MessageConsumption(
                RDKafkaErrorCode::AllBrokersDown,
            )))
        } else {
            consumer.poll(wait)
        };
        match polled {
            Some(Err(error @ KafkaError::MessageConsumption(_))) if is_transient(&error) => {
                tracing::debug!(%error, "reader: librdkafka reconnects by itself; reading on");
                self.recovering = Recovering(Some(Box::new(error)));
                None
            }
            other => other,
        }
    }

    /// The read moved: the limit starts again, and an error recovered from
    /// before now no longer explains a stall (an open transaction is not
    /// blamed on an old reconnect).
    pub fn moved(&mut self) {
        self.last_progress = Instant::now();
        self.recovering = Recovering::default();
    }

    /// Once the read has not moved for the limit: the last error its client
    /// recovered from meanwhile, for the caller's stall error.
    pub fn stalled(&mut self) -> Option<Recovering> {
        (self.last_progress.elapsed() >= self.limit).then(|| std::mem::take(&mut self.recovering))
    }
}

/// The last error a reader's client reported and recovered from by itself
/// since the read last moved, if any (see [`StallWatch`]). Displays as a
/// suffix of a stall message: nothing, or " (the client's last error: …)".
#[derive(Debug, Default)]
pub struct Recovering(Option<Box<KafkaError>>);

impl Recovering {
    /// Whether the client last saw every broker of the cluster down: not a
    /// partition's trouble (a leader being elected, a transaction held
    /// open) but the cluster's.
    pub fn all_brokers_down(&self) -> bool {
        self.0.as_ref().and_then(|e| e.rdkafka_error_code())
            == Some(RDKafkaErrorCode::AllBrokersDown)
    }
}

impl std::fmt::Display for Recovering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(error) => write!(f, " (the client's last error: {error})"),
            None => Ok(()),
        }
    }
}

/// Whether a query's or a read's error is one a working cluster recovers
/// from by itself: a partition whose leader is not known yet, a lost
/// connection, a request that timed out.
pub(super) fn is_transient(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::UnknownPartition
                | RDKafkaErrorCode::LeaderNotAvailable
                | RDKafkaErrorCode::NotLeaderForPartition
                | RDKafkaErrorCode::AllBrokersDown
                | RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::OperationTimedOut
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_brokers_down() -> KafkaError {
        KafkaError::MessageConsumption(RDKafkaErrorCode::AllBrokersDown)
    }

    #[test]
    fn a_read_stalls_only_after_the_limit_without_moving() {
        let mut watch = StallWatch::new(Duration::from_secs(60));
        assert!(watch.stalled().is_none());
        // Last moved 61 s ago, without sleeping through it.
        watch.last_progress = Instant::now() - Duration::from_secs(61);
        assert!(watch.stalled().is_some());
        watch.moved();
        assert!(watch.stalled().is_none());
    }

    #[test]
    fn a_stall_names_only_what_the_client_recovered_from_since_the_read_moved() {
        let mut watch = StallWatch::new(Duration::ZERO);
        watch.recovering = Recovering(Some(Box::new(all_brokers_down())));
        let named = watch.stalled().expect("a zero limit is reached at once");
        assert!(
            named.to_string().starts_with(" (the client's last error: "),
            "{named}"
        );
        assert!(named.to_string().contains("AllBrokersDown"), "{named}");

        watch.recovering = Recovering(Some(Box::new(all_brokers_down())));
        watch.moved();
        assert_eq!(watch.stalled().expect("stalled").to_string(), "");
    }

    #[test]
    fn only_errors_a_cluster_recovers_from_are_transient() {
        assert!(is_transient(&all_brokers_down()));
        assert!(is_transient(&KafkaError::MessageConsumption(
            RDKafkaErrorCode::BrokerTransportFailure
        )));
        assert!(!is_transient(&KafkaError::MessageConsumption(
            RDKafkaErrorCode::OffsetOutOfRange
        )));
        assert!(!is_transient(&KafkaError::MessageConsumption(
            RDKafkaErrorCode::TopicAuthorizationFailed
        )));
    }
}

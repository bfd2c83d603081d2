//! Delivery reports of the transactional producer, collected per batch.
//!
//! Every record a lane sends in a transaction is a *slot* of the batch (its
//! index, carried as the delivery opaque), so a report is matched to the
//! source record or internal record it belongs to without a lookup table.
//! Invariant (asserted by the lane): every slot gets exactly one delivery
//! outcome before the transaction is committed.

use std::sync::Mutex;

use rdkafka::client::ClientContext;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{DeliveryResult, ProducerContext};

use super::client_stats::ClientStats;
use super::errors::{classify_code, Disposition};

/// One delivery report: where the record of `slot` landed, or why it did not.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub slot: usize,
    pub outcome: Result<i64, KafkaError>,
}

/// Producer context that records delivery reports for the lane thread to
/// drain after each flush.
pub struct DeliveryLog {
    reports: Mutex<Vec<Delivery>>,
    /// The producer's librdkafka statistics, when they are exported.
    stats: Option<ClientStats>,
}

impl DeliveryLog {
    pub fn new(stats: Option<ClientStats>) -> DeliveryLog {
        DeliveryLog {
            reports: Mutex::default(),
            stats,
        }
    }

    /// The first report received so far of a record the target refused for
    /// good (see [`classify_code`]), left in the log: a transaction holding
    /// one can never commit.
    pub fn first_refused(&self) -> Option<Delivery> {
        self.reports
            .lock()
            .expect("delivery log poisoned")
            .iter()
            .find(|d| match &d.outcome {
                Err(e) => e.rdkafka_error_code().map(classify_code) == Some(Disposition::Fatal),
                Ok(_) => false,
            })
            .cloned()
    }

    /// Takes all reports received so far.
    pub fn drain(&self) -> Vec<Delivery> {
        std::mem::take(&mut *self.reports.lock().expect("delivery log poisoned"))
    }
}

impl ClientContext for DeliveryLog {
    fn stats_raw(&self, json: &[u8]) {
        if let Some(stats) = &self.stats {
            stats.record(json);
        }
    }
}

impl ProducerContext for DeliveryLog {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, slot: usize) {
        let outcome = match result {
            Ok(message) => Ok(message.offset()),
            Err((error, _)) => Err(error.clone()),
        };
        self.reports
            .lock()
            .expect("delivery log poisoned")
            .push(Delivery { slot, outcome });
    }
}

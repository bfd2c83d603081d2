//! Delivery reports of the transactional producer, collected per batch.
//!
//! Invariant (asserted by the worker): every record sent in a transaction
//! gets exactly one delivery outcome before the transaction is committed.

use std::sync::Mutex;

use rdkafka::client::ClientContext;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{DeliveryResult, ProducerContext};

/// What a record sent to the target is, carried as the delivery opaque so the
/// report can be matched to the source record without a lookup table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// A copy of the source record at this offset.
    Data { source_offset: i64 },
    /// The progress record of the transaction.
    Progress,
    /// The position record of the transaction.
    Position,
}

impl Sent {
    /// Offsets are non-negative, so the two top values are free for markers.
    pub fn to_opaque(self) -> usize {
        match self {
            Sent::Data { source_offset } => {
                debug_assert!(source_offset >= 0);
                source_offset as usize
            }
            Sent::Progress => usize::MAX,
            Sent::Position => usize::MAX - 1,
        }
    }

    fn from_opaque(opaque: usize) -> Sent {
        match opaque {
            usize::MAX => Sent::Progress,
            x if x == usize::MAX - 1 => Sent::Position,
            x => Sent::Data {
                source_offset: x as i64,
            },
        }
    }
}

/// One delivery report: where the record landed, or why it did not.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub sent: Sent,
    pub outcome: Result<i64, KafkaError>,
}

/// Producer context that records delivery reports for the worker thread to
/// drain after each flush.
#[derive(Default)]
pub struct DeliveryLog {
    reports: Mutex<Vec<Delivery>>,
}

impl DeliveryLog {
    /// Takes all reports received so far.
    pub fn drain(&self) -> Vec<Delivery> {
        std::mem::take(&mut *self.reports.lock().expect("delivery log poisoned"))
    }
}

impl ClientContext for DeliveryLog {}

impl ProducerContext for DeliveryLog {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: usize) {
        let outcome = match result {
            Ok(message) => Ok(message.offset()),
            Err((error, _)) => Err(error.clone()),
        };
        self.reports
            .lock()
            .expect("delivery log poisoned")
            .push(Delivery {
                sent: Sent::from_opaque(opaque),
                outcome,
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opaque_round_trips() {
        for sent in [
            Sent::Data { source_offset: 0 },
            Sent::Data {
                source_offset: i64::MAX,
            },
            Sent::Progress,
            Sent::Position,
        ] {
            assert_eq!(Sent::from_opaque(sent.to_opaque()), sent);
        }
    }
}

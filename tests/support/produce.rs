//! Writing test records: plain idempotent producers, transactions that
//! commit or abort, and a transaction left open.

use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;

use super::broker::BROKER_TIMEOUT;
use super::clusters::{unique_name, Cluster};
use super::records::TestRecord;

/// What happens to a producer transaction at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnOutcome {
    Commit,
    Abort,
}

/// A producer transaction left open by [`Cluster::open_transaction`].
pub struct OpenTransaction {
    producer: ThreadedProducer<DefaultProducerContext>,
}

impl OpenTransaction {
    pub fn commit(self) {
        self.producer
            .commit_transaction(BROKER_TIMEOUT)
            .expect("commit the open transaction");
    }
}

/// Writing records: plainly, in a transaction, or in one left open.
impl Cluster {
    /// Writes records with a plain idempotent producer and waits until all are acknowledged.
    pub fn produce(&self, topic: &str, records: &[TestRecord]) {
        self.produce_with(topic, records, &[]);
    }

    /// Like [`Cluster::produce`], with extra producer settings (e.g. a
    /// compression codec).
    pub fn produce_with(&self, topic: &str, records: &[TestRecord], settings: &[(&str, &str)]) {
        let mut config = self.client_config();
        config.set("enable.idempotence", "true");
        for (k, v) in settings {
            config.set(*k, *v);
        }
        let producer: ThreadedProducer<DefaultProducerContext> =
            config.create().expect("create producer");
        send_all(&producer, topic, records);
        producer.flush(BROKER_TIMEOUT).expect("flush producer");
    }

    /// Writes records in one transaction that ends as `outcome` says.
    pub fn produce_transaction(&self, topic: &str, records: &[TestRecord], outcome: TxnOutcome) {
        let mut config = self.client_config();
        config.set("transactional.id", unique_name("testbed-txn"));
        let producer: ThreadedProducer<DefaultProducerContext> =
            config.create().expect("create transactional producer");
        producer
            .init_transactions(BROKER_TIMEOUT)
            .expect("init_transactions");
        producer.begin_transaction().expect("begin_transaction");
        send_all(&producer, topic, records);
        match outcome {
            TxnOutcome::Commit => producer.commit_transaction(BROKER_TIMEOUT).expect("commit"),
            TxnOutcome::Abort => {
                // Flush first so the aborted records really reach the log.
                producer.flush(BROKER_TIMEOUT).expect("flush before abort");
                producer.abort_transaction(BROKER_TIMEOUT).expect("abort")
            }
        }
    }

    /// Begins a transaction, writes `records` in it (flushed: they are in
    /// the log, past the last stable offset) and leaves it open, as a
    /// two-phase-commit sink between checkpoints does. Dropping the handle
    /// without [`OpenTransaction::commit`] leaves it to the broker's
    /// transaction timeout (5 minutes).
    pub fn open_transaction(&self, topic: &str, records: &[TestRecord]) -> OpenTransaction {
        let mut config = self.client_config();
        config
            .set("transactional.id", unique_name("testbed-open-txn"))
            .set("transaction.timeout.ms", "300000");
        let producer: ThreadedProducer<DefaultProducerContext> =
            config.create().expect("create transactional producer");
        producer
            .init_transactions(BROKER_TIMEOUT)
            .expect("init_transactions");
        producer.begin_transaction().expect("begin_transaction");
        send_all(&producer, topic, records);
        producer
            .flush(BROKER_TIMEOUT)
            .expect("flush the open transaction");
        OpenTransaction { producer }
    }
}

fn send_all(
    producer: &ThreadedProducer<DefaultProducerContext>,
    topic: &str,
    records: &[TestRecord],
) {
    for r in records {
        let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
        for (key, value) in &r.headers {
            headers = headers.insert(Header {
                key,
                value: value.as_deref(),
            });
        }
        let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic)
            .partition(r.partition)
            .headers(headers);
        if let Some(key) = &r.key {
            record = record.key(key.as_slice());
        }
        if let Some(value) = &r.value {
            record = record.payload(value.as_slice());
        }
        if let Some(ts) = r.timestamp {
            record = record.timestamp(ts);
        }
        let mut pending = record;
        loop {
            match producer.send(pending) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    std::thread::sleep(Duration::from_millis(10));
                    pending = back;
                }
                Err((e, _)) => panic!("produce to {topic}: {e}"),
            }
        }
    }
}

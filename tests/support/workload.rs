//! A steady producer on the source while a fault happens.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;

use super::Cluster;

/// Writes numbered records round-robin to every partition of a topic from a
/// thread of its own until stopped.
pub struct Workload {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Workload {
    /// About 100 records a second, each with a key, a value, a header and a
    /// producer timestamp.
    pub fn start(cluster: &Cluster, topic: &str, partitions: i32) -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let producer: ThreadedProducer<DefaultProducerContext> = cluster
            .client_config()
            .set("enable.idempotence", "true")
            .set("linger.ms", "10")
            .create()
            .expect("create workload producer");
        let topic = topic.to_string();
        let thread = {
            let (stop, sent) = (stop.clone(), sent.clone());
            std::thread::spawn(move || {
                let mut seq: u64 = 0;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..5 {
                        let key = format!("k{seq}");
                        let value = format!("v{seq}-").repeat(1 + (seq % 13) as usize);
                        let seq_text = seq.to_string();
                        let headers = OwnedHeaders::new().insert(Header {
                            key: "seq",
                            value: Some(seq_text.as_bytes()),
                        });
                        let mut record: BaseRecord<'_, str, str> = BaseRecord::to(&topic)
                            .partition((seq % partitions as u64) as i32)
                            .key(key.as_str())
                            .payload(value.as_str())
                            .headers(headers);
                        loop {
                            match producer.send(record) {
                                Ok(()) => break,
                                Err((
                                    KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull),
                                    back,
                                )) => {
                                    std::thread::sleep(Duration::from_millis(10));
                                    record = back;
                                }
                                Err((e, _)) => panic!("workload: produce to {topic}: {e}"),
                            }
                        }
                        seq += 1;
                        sent.store(seq, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                producer
                    .flush(Duration::from_secs(60))
                    .expect("workload: flush");
            })
        };
        Workload {
            stop,
            sent,
            thread: Some(thread),
        }
    }

    /// Records handed to the producer so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Stops writing and waits until every record is acknowledged.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
        self.sent()
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

//! Records as a test writes them and as it reads them back, with every
//! field Kafka carries, and where a source record's copy is.

use rdkafka::message::{Headers, Message};
use rdkafka::Timestamp;

/// A record to write, with every field Kafka carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRecord {
    pub partition: i32,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// In order; duplicates and null values allowed.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Explicit CreateTime in ms; `None` lets the producer stamp it.
    pub timestamp: Option<i64>,
}

impl TestRecord {
    /// A record with a key and value and nothing else.
    pub fn new(partition: i32, key: &str, value: &str) -> TestRecord {
        TestRecord {
            partition,
            key: Some(key.as_bytes().to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: Vec::new(),
            timestamp: None,
        }
    }
}

/// A record as read back, with its position and timestamp type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: Timestamp,
}

impl ReadRecord {
    /// Everything a consumer was given for one record.
    pub fn from_message<M: Message>(m: &M) -> ReadRecord {
        ReadRecord {
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
            headers: m
                .headers()
                .map(|hs| {
                    hs.iter()
                        .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                        .collect()
                })
                .unwrap_or_default(),
            timestamp: m.timestamp(),
        }
    }

    /// The timestamp in ms whatever its type: a copy carries a source
    /// LogAppendTime as CreateTime.
    pub fn timestamp_ms(&self) -> Option<i64> {
        self.timestamp.to_millis()
    }

    /// Whether this is the stored form of `sent` (same content; a sent record
    /// without explicit timestamp matches any CreateTime).
    pub fn matches(&self, sent: &TestRecord) -> bool {
        let timestamp_ok = match sent.timestamp {
            Some(ms) => self.timestamp == Timestamp::CreateTime(ms),
            None => matches!(self.timestamp, Timestamp::CreateTime(_)),
        };
        self.partition == sent.partition
            && self.key == sent.key
            && self.value == sent.value
            && self.headers == sent.headers
            && timestamp_ok
    }
}

/// The target offset holding the copy of the first committed source record
/// at or after `offset` (found by content); past the last record, the offset
/// after the last copy (where the next copy will be found).
pub fn copy_offset(
    source: &[ReadRecord],
    target: &[ReadRecord],
    partition: i32,
    offset: i64,
) -> i64 {
    match source
        .iter()
        .find(|r| r.partition == partition && r.offset >= offset)
    {
        Some(s) => {
            target
                .iter()
                .find(|t| t.partition == partition && t.key == s.key && t.value == s.value)
                .expect("copied")
                .offset
        }
        None => target
            .iter()
            .filter(|t| t.partition == partition)
            .map(|t| t.offset + 1)
            .max()
            .unwrap(),
    }
}

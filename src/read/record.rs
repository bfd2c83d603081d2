//! One record as verify compares it: everything a copy must preserve.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use rdkafka::message::{BorrowedMessage, Headers, Message};
use serde::Serialize;

/// A committed record read from one side, owned so it can wait in a
/// bounded window while its counterpart is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordImage {
    /// Offset in its own partition (source or target).
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// In order, duplicates kept: Kafka headers are a list, not a map.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Milliseconds; copies keep the source timestamp.
    pub timestamp: Option<i64>,
}

/// A part of a record that differs between a source record and its copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Field {
    Key,
    Value,
    Headers,
    Timestamp,
}

impl RecordImage {
    pub fn from_message(message: &BorrowedMessage<'_>) -> RecordImage {
        RecordImage {
            offset: message.offset(),
            key: message.key().map(<[u8]>::to_vec),
            value: message.payload().map(<[u8]>::to_vec),
            headers: message
                .headers()
                .map(|hs| {
                    hs.iter()
                        .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                        .collect()
                })
                .unwrap_or_default(),
            timestamp: message.timestamp().to_millis(),
        }
    }

    /// Key, value and header bytes: what throughput is reported in.
    pub fn size(&self) -> u64 {
        let headers: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
            .sum();
        (self.key.as_ref().map_or(0, Vec::len) + self.value.as_ref().map_or(0, Vec::len) + headers)
            as u64
    }

    /// The fields in which `copy` differs from `self` (empty: identical).
    pub fn differences(&self, copy: &RecordImage) -> Vec<Field> {
        let mut fields = Vec::new();
        if self.key != copy.key {
            fields.push(Field::Key);
        }
        if self.value != copy.value {
            fields.push(Field::Value);
        }
        if self.headers != copy.headers {
            fields.push(Field::Headers);
        }
        if self.timestamp != copy.timestamp {
            fields.push(Field::Timestamp);
        }
        fields
    }

    /// Fingerprint of the content (not the offset), used to recognise a
    /// record met at an unexpected place: a duplicate, a reordered record,
    /// a leaked aborted record. Equal content always gives equal digests;
    /// a collision can only turn "unexpected" into a more specific class,
    /// never hide a difference.
    pub fn digest(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        self.key.hash(&mut hasher);
        self.value.hash(&mut hasher);
        self.headers.hash(&mut hasher);
        self.timestamp.hash(&mut hasher);
        hasher.finish()
    }
}

#[cfg(test)]
pub(crate) fn image(offset: i64, value: &str) -> RecordImage {
    RecordImage {
        offset,
        key: Some(b"k".to_vec()),
        value: Some(value.as_bytes().to_vec()),
        headers: vec![("h".to_string(), Some(b"1".to_vec()))],
        timestamp: Some(1_700_000_000_000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_each_field_and_digest_ignores_offsets() {
        let a = image(5, "v");
        let mut b = image(9, "v");
        assert!(a.differences(&b).is_empty());
        assert_eq!(a.digest(), b.digest());
        b.headers.push(("h".to_string(), None));
        b.timestamp = Some(1);
        assert_eq!(a.differences(&b), vec![Field::Headers, Field::Timestamp]);
        assert_ne!(a.digest(), b.digest());
        assert_eq!(a.size(), 1 + 1 + 2);
    }
}

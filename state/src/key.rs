//! Source partitions and their byte keys.
//!
//! sled orders keys bytewise, so every integer in a key is written big-endian
//! with its sign bit flipped: byte order then equals numeric order, including
//! Kafka's negative sentinel offsets. That is what lets range queries find
//! "the run at or before offset N" without scanning.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Ends the topic name inside a key. Kafka topic names never contain NUL, so
/// a topic can never be a prefix of another topic's key: `a` and `a.b`
/// encode as `a\0…` and `a.b\0…` and never interleave.
const TOPIC_END: u8 = 0x00;

/// One partition of a source topic: the unit a worker replicates and the unit
/// every checkpoint and offset run belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SourcePartition {
    /// Source topic name.
    pub topic: String,
    /// Partition number within the topic (the target uses the same number).
    pub partition: i32,
}

impl SourcePartition {
    /// Names a source partition.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        SourcePartition {
            topic: topic.into(),
            partition,
        }
    }

    /// Key of this partition's checkpoint, and the common prefix of all its
    /// run keys: `topic ++ 0x00 ++ partition` (fixed 4 bytes).
    pub(crate) fn key(&self) -> Vec<u8> {
        debug_assert!(
            !self.topic.as_bytes().contains(&TOPIC_END),
            "topic names never contain NUL: {:?}",
            self.topic
        );
        let mut key = Vec::with_capacity(self.topic.len() + 1 + 4 + 8);
        key.extend_from_slice(self.topic.as_bytes());
        key.push(TOPIC_END);
        key.extend_from_slice(&ordered_i32(self.partition));
        key
    }

    /// The partition whose checkpoint key is `key` (see [`Self::key`]).
    pub(crate) fn from_key(key: &[u8]) -> Option<SourcePartition> {
        let end = key.iter().position(|&b| b == TOPIC_END)?;
        let topic = std::str::from_utf8(&key[..end]).ok()?;
        let partition: [u8; 4] = key.get(end + 1..)?.try_into().ok()?;
        Some(SourcePartition::new(
            topic,
            (u32::from_be_bytes(partition) ^ (1 << 31)) as i32,
        ))
    }

    /// Key of the offset run of this partition starting at `source_offset`:
    /// the partition key followed by the offset (fixed 8 bytes), so one
    /// partition's runs are contiguous and sorted by source offset.
    pub(crate) fn run_key(&self, source_offset: i64) -> Vec<u8> {
        let mut key = self.key();
        key.extend_from_slice(&ordered_i64(source_offset));
        key
    }
}

impl fmt::Display for SourcePartition {
    /// Kafka's usual `topic-partition` spelling, as seen in broker logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Big-endian with the sign bit flipped: bytewise order equals numeric order.
fn ordered_i32(value: i32) -> [u8; 4] {
    ((value as u32) ^ (1 << 31)).to_be_bytes()
}

/// Big-endian with the sign bit flipped: bytewise order equals numeric order.
fn ordered_i64(value: i64) -> [u8; 8] {
    ((value as u64) ^ (1 << 63)).to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_encoding_preserves_order() {
        let offsets = [i64::MIN, -2, -1, 0, 1, 255, 256, 65_536, i64::MAX];
        for pair in offsets.windows(2) {
            assert!(ordered_i64(pair[0]) < ordered_i64(pair[1]), "{pair:?}");
        }
        let partitions = [i32::MIN, -1, 0, 1, 255, 256, i32::MAX];
        for pair in partitions.windows(2) {
            assert!(ordered_i32(pair[0]) < ordered_i32(pair[1]), "{pair:?}");
        }
    }

    #[test]
    fn a_checkpoint_key_names_its_partition() {
        for sp in [
            SourcePartition::new("orders", 0),
            SourcePartition::new("a.b", 256),
            SourcePartition::new("x", i32::MAX),
        ] {
            assert_eq!(SourcePartition::from_key(&sp.key()), Some(sp.clone()));
        }
        assert_eq!(SourcePartition::from_key(b"no-end"), None);
        assert_eq!(
            SourcePartition::from_key(&SourcePartition::new("t", 1).run_key(5)),
            None
        );
    }

    #[test]
    fn run_keys_sort_by_offset_within_a_partition() {
        let sp = SourcePartition::new("orders", 3);
        assert!(sp.run_key(-1) < sp.run_key(0));
        assert!(sp.run_key(9) < sp.run_key(10));
        assert!(sp.run_key(255) < sp.run_key(256));
        assert!(sp.run_key(i64::MAX).starts_with(&sp.key()));
    }

    #[test]
    fn partitions_never_share_a_prefix() {
        let parts = [
            SourcePartition::new("a", 1),
            SourcePartition::new("a", 256),
            SourcePartition::new("a.b", 1),
            SourcePartition::new("ab", 1),
        ];
        for x in &parts {
            for y in &parts {
                if x != y {
                    assert!(!y.run_key(0).starts_with(&x.key()), "{x} vs {y}");
                    assert!(!y.key().starts_with(&x.key()), "{x} vs {y}");
                }
            }
        }
    }

    #[test]
    fn displays_like_kafka() {
        assert_eq!(SourcePartition::new("orders", 7).to_string(), "orders-7");
    }
}

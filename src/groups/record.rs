//! What group sync records on the target (`__eosmirror.groups.<alias>`,
//! compacted): each synced group's latest source offsets, and the latest
//! observed source ends. Failover works from these alone when the source
//! cluster and eosmirror's host are both gone.

use std::collections::BTreeMap;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::read::{RangeReader, Side};
use crate::replication::progress::{decode_body, encode_with_version, DecodeError};
use crate::topics::identity::TopicId;

/// A source group's committed offsets, as last observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupOffsetsRecord {
    pub group: String,
    /// (topic, partition, committed source offset).
    pub offsets: Vec<(String, i32, i64)>,
    /// (topic, its id on the source when the offsets were read): failover
    /// cannot ask the source, and a topic deleted and created again under
    /// its name has offsets that the old copy's mapping must not translate.
    pub source_topic_ids: Vec<(String, TopicId)>,
    /// When they were read from the source (ms since the epoch).
    pub observed_at_ms: i64,
}

/// Source end offsets and replicated positions, as last observed: the
/// recovery point a failover reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceEndsRecord {
    /// (topic, partition, source end offset, replicated position).
    pub partitions: Vec<(String, i32, i64, i64)>,
    /// (topic, its id on the source when the ends were read): a position
    /// on the target of a topic recreated since is the old topic's.
    pub source_topic_ids: Vec<(String, TopicId)>,
    pub observed_at_ms: i64,
}

const GROUP_KEY_PREFIX: &str = "group:";

/// A record of the groups topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupsTopicRecord {
    Group(GroupOffsetsRecord),
    SourceEnds(SourceEndsRecord),
}

impl GroupsTopicRecord {
    /// Compaction key: one record per group, one for the source ends.
    pub fn key(&self) -> Vec<u8> {
        match self {
            GroupsTopicRecord::Group(g) => Self::group_key(&g.group),
            GroupsTopicRecord::SourceEnds(_) => b"source-ends".to_vec(),
        }
    }

    /// The key of `group`'s record; a tombstone (no value) under it removes
    /// the group, so failover leaves it out.
    pub fn group_key(group: &str) -> Vec<u8> {
        format!("{GROUP_KEY_PREFIX}{group}").into_bytes()
    }

    /// The group whose record `key` is (see [`GroupsTopicRecord::group_key`]).
    pub fn group_of_key(key: &[u8]) -> Option<String> {
        let key = std::str::from_utf8(key).ok()?;
        key.strip_prefix(GROUP_KEY_PREFIX).map(str::to_string)
    }

    pub fn encode(&self) -> Vec<u8> {
        encode_with_version(GROUPS_FORMAT_VERSION, self)
    }

    /// Reads a record of this version or of the one before (which named no
    /// topic ids: read with none, they check nothing).
    pub fn decode(bytes: &[u8]) -> Result<GroupsTopicRecord, DecodeError> {
        let (&version, body) = bytes.split_first().ok_or(DecodeError::Empty)?;
        match version {
            GROUPS_FORMAT_VERSION => decode_body(body),
            WITHOUT_TOPIC_IDS => {
                decode_body::<without_ids::GroupsTopicRecord>(body).map(Into::into)
            }
            other => Err(DecodeError::UnknownVersion {
                record: "groups",
                found: other,
                understood: &[GROUPS_FORMAT_VERSION, WITHOUT_TOPIC_IDS],
            }),
        }
    }
}

/// The groups topic's format version: the internal topics' one (3) until
/// its records named their source topic ids. Its own, so that change left
/// the progress and position topics, the copy's whole history, readable.
const GROUPS_FORMAT_VERSION: u8 = 4;

/// The version of the records written before, without topic ids.
const WITHOUT_TOPIC_IDS: u8 = 3;

/// The groups topic's records as version 3 wrote them.
mod without_ids {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    pub struct GroupOffsetsRecord {
        pub group: String,
        pub offsets: Vec<(String, i32, i64)>,
        pub observed_at_ms: i64,
    }

    #[derive(Serialize, Deserialize)]
    pub struct SourceEndsRecord {
        pub partitions: Vec<(String, i32, i64, i64)>,
        pub observed_at_ms: i64,
    }

    #[derive(Serialize, Deserialize)]
    pub enum GroupsTopicRecord {
        Group(GroupOffsetsRecord),
        SourceEnds(SourceEndsRecord),
    }

    impl From<GroupsTopicRecord> for super::GroupsTopicRecord {
        fn from(record: GroupsTopicRecord) -> Self {
            match record {
                GroupsTopicRecord::Group(g) => {
                    super::GroupsTopicRecord::Group(super::GroupOffsetsRecord {
                        group: g.group,
                        offsets: g.offsets,
                        source_topic_ids: Vec::new(),
                        observed_at_ms: g.observed_at_ms,
                    })
                }
                GroupsTopicRecord::SourceEnds(e) => {
                    super::GroupsTopicRecord::SourceEnds(super::SourceEndsRecord {
                        partitions: e.partitions,
                        source_topic_ids: Vec::new(),
                        observed_at_ms: e.observed_at_ms,
                    })
                }
            }
        }
    }
}

/// The latest record of every key in the groups topic, as far as read.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    pub groups: BTreeMap<String, GroupOffsetsRecord>,
    pub source_ends: Option<SourceEndsRecord>,
    /// The offset read up to: [`Recorded::catch_up`] goes on from there.
    end: i64,
}

impl Recorded {
    /// Reads the groups topic to its end (committed records only, up to the
    /// last stable offset: an open transaction is not waited for).
    pub fn read(target: &Side, topic: &str) -> anyhow::Result<Recorded> {
        let mut recorded = Recorded::default();
        recorded.catch_up(target, topic)?;
        Ok(recorded)
    }

    /// Applies the records written since the last read: a sync's own, and
    /// another instance's while that one synced. A topic that ends before
    /// the last read was recreated: it is read again from its start.
    pub fn catch_up(&mut self, target: &Side, topic: &str) -> anyhow::Result<()> {
        let (low, high) = target
            .stable_watermarks(topic, 0)
            .with_context(|| format!("reading {topic}: does the target hold group offsets recorded by `eosmirror run --groups.sync`?"))?;
        if high < self.end {
            *self = Recorded::default();
        }
        let reader = RangeReader::open(
            target,
            topic,
            0,
            self.end.max(low),
            high,
            true,
            Default::default(),
        )?;
        for record in reader {
            let record = record?;
            let unreadable = || format!("{topic} offset {} is unreadable", record.offset);
            let Some(value) = record.value.as_deref() else {
                let key = record.key.as_deref().unwrap_or_default();
                let group = std::str::from_utf8(key)
                    .ok()
                    .and_then(|k| k.strip_prefix(GROUP_KEY_PREFIX))
                    .with_context(|| format!("{}: a tombstone of no group", unreadable()))?;
                self.groups.remove(group);
                continue;
            };
            match GroupsTopicRecord::decode(value).with_context(unreadable)? {
                GroupsTopicRecord::Group(g) => {
                    self.groups.insert(g.group.clone(), g);
                }
                GroupsTopicRecord::SourceEnds(e) => self.source_ends = Some(e),
            }
        }
        self.end = high;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_distinct_keys() {
        let g = GroupsTopicRecord::Group(GroupOffsetsRecord {
            group: "billing".into(),
            offsets: vec![("orders".into(), 2, 41)],
            source_topic_ids: vec![("orders".into(), TopicId([7; 16]))],
            observed_at_ms: 5,
        });
        let e = GroupsTopicRecord::SourceEnds(SourceEndsRecord {
            partitions: vec![("orders".into(), 2, 50, 45)],
            source_topic_ids: vec![("orders".into(), TopicId([7; 16]))],
            observed_at_ms: 6,
        });
        assert_eq!(GroupsTopicRecord::decode(&g.encode()).unwrap(), g);
        assert_eq!(GroupsTopicRecord::decode(&e.encode()).unwrap(), e);
        assert_ne!(g.key(), e.key());
    }

    #[test]
    fn records_written_before_topic_ids_read_with_none() {
        let old = without_ids::GroupsTopicRecord::Group(without_ids::GroupOffsetsRecord {
            group: "billing".into(),
            offsets: vec![("orders".into(), 2, 41)],
            observed_at_ms: 5,
        });
        let read = GroupsTopicRecord::decode(&encode_with_version(3, &old)).unwrap();
        assert_eq!(
            read,
            GroupsTopicRecord::Group(GroupOffsetsRecord {
                group: "billing".into(),
                offsets: vec![("orders".into(), 2, 41)],
                source_topic_ids: vec![],
                observed_at_ms: 5,
            })
        );
        let unknown = GroupsTopicRecord::decode(&[9, 0]).unwrap_err();
        assert!(
            unknown.to_string().starts_with(&format!(
                "groups record has format version 9; this eosmirror understands versions {GROUPS_FORMAT_VERSION} and {WITHOUT_TOPIC_IDS} only"
            )),
            "{unknown}"
        );
    }
}

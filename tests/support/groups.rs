//! Consumer-group offsets, committed and read without joining the group.

use std::collections::BTreeMap;

use rdkafka::admin::AdminOptions;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::broker::{block_on, BROKER_TIMEOUT};
use super::clusters::Cluster;

/// Consumer-group offsets, as a stopped consumer group leaves them.
impl Cluster {
    /// Commits `offsets` (topic, partition, offset) for `group` without
    /// joining it.
    pub fn commit_group(&self, group: &str, offsets: &[(&str, i32, i64)]) {
        let consumer: BaseConsumer = self
            .client_config()
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("create consumer");
        let mut list = TopicPartitionList::new();
        for (topic, partition, offset) in offsets {
            list.add_partition_offset(topic, *partition, Offset::Offset(*offset))
                .expect("add partition");
        }
        consumer
            .commit(&list, rdkafka::consumer::CommitMode::Sync)
            .unwrap_or_else(|e| panic!("{}: commit offsets of {group}: {e}", self.name));
    }

    /// Deletes `group` (it must have no members), as
    /// `kafka-consumer-groups.sh --delete` does.
    pub fn delete_group(&self, group: &str) {
        let options = AdminOptions::new().operation_timeout(Some(BROKER_TIMEOUT));
        let results = block_on(self.admin().delete_groups(&[group], &options))
            .unwrap_or_else(|e| panic!("{}: delete group {group}: {e}", self.name));
        for result in results {
            if let Err((group, code)) = result {
                panic!("{}: delete group {group}: {code}", self.name);
            }
        }
    }

    /// `group`'s committed offsets for partitions `0..partitions` of
    /// `topic` (partitions without one are left out).
    pub fn group_offsets(&self, group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
        let consumer: BaseConsumer = self
            .client_config()
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("create consumer");
        let mut list = TopicPartitionList::new();
        for p in 0..partitions {
            list.add_partition(topic, p);
        }
        consumer
            .committed_offsets(list, BROKER_TIMEOUT)
            .unwrap_or_else(|e| panic!("{}: offsets of {group}: {e}", self.name))
            .elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(o) => Some((e.partition(), o)),
                _ => None,
            })
            .collect()
    }
}

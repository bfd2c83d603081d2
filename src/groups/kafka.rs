//! Group reads and writes on one cluster. Blocking librdkafka calls: run
//! them off the async runtime.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use super::admin::{GroupAdmin, PerGroup};
use super::TopicPartition;

/// A group operation failed; names the cluster, the group and what was done.
#[derive(Debug, thiserror::Error)]
#[error("{operation} of group {group:?} on the {cluster} cluster: {source}")]
pub struct GroupError {
    pub cluster: &'static str,
    pub group: String,
    pub operation: &'static str,
    /// Boxed: Kafka errors are large and this travels in `Result`s.
    #[source]
    pub source: Box<KafkaError>,
}

/// Who is in a group right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMembership {
    /// Broker's group state (`Empty`, `Stable`, `Dead`, ...).
    pub state: String,
    /// `client_id@host` of each active member.
    pub members: Vec<String>,
}

/// One cluster, seen through a group's eyes.
#[derive(Clone)]
pub struct GroupClient {
    /// "source" or "target", for messages.
    pub cluster: &'static str,
    /// Connection settings only.
    pub connection: ClientConfig,
    pub timeout: Duration,
}

impl GroupClient {
    /// An admin client for one call.
    fn admin(&self, group: &str) -> Result<GroupAdmin, GroupError> {
        GroupAdmin::new(self.cluster, &self.connection, self.timeout).map_err(|mut e| {
            e.group = group.to_string();
            e
        })
    }

    /// The outcome for `group` of a batch of one.
    fn only<T>(&self, group: &str, mut outcome: PerGroup<T>) -> Result<T, GroupError> {
        outcome.remove(group).unwrap_or_else(|| {
            Err(GroupError {
                cluster: self.cluster,
                group: group.to_string(),
                operation: "reading the broker's answer",
                source: Box::new(KafkaError::AdminOp(RDKafkaErrorCode::Fail)),
            })
        })
    }

    /// Names of all consumer groups on the cluster.
    pub fn list_groups(&self) -> Result<Vec<String>, GroupError> {
        self.admin("*")?.list()
    }

    /// The group's state and active members.
    pub fn membership(&self, group: &str) -> Result<GroupMembership, GroupError> {
        let names = [group.to_string()];
        let outcome = self.admin(group)?.describe(&names);
        self.only(group, outcome)
    }

    /// Committed offsets of `group` for `partitions`; partitions without a
    /// committed offset are left out.
    pub fn committed(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, i64>, GroupError> {
        if partitions.is_empty() {
            return Ok(BTreeMap::new());
        }
        let names = [group.to_string()];
        let outcome = self.admin(group)?.committed(&names, partitions);
        self.only(group, outcome)
    }

    /// Commits `offsets` for `group` in one request. The broker refuses it
    /// if the group has active members, which backs up the membership check
    /// callers make first.
    pub fn commit(
        &self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), GroupError> {
        let commits = BTreeMap::from([(group.to_string(), offsets.clone())]);
        let outcome = self.admin(group)?.commit(&commits);
        self.only(group, outcome)
    }
}

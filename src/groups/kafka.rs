//! Group reads and writes on one cluster. Blocking librdkafka calls: run
//! them off the async runtime.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use super::admin::{GroupAdmin, PerGroup};
use super::{GroupError, GroupMembership, TopicPartition};
use crate::failpoints::{self, fault_armed};

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

    /// Runs a batch of one, again while the group's coordinator is not
    /// ready (a broker just restarted and is loading offsets, or the
    /// coordinator moved): errors the broker asks clients to retry.
    fn retrying<T>(
        &self,
        group: &str,
        mut request: impl FnMut(&GroupAdmin) -> PerGroup<T>,
    ) -> Result<T, GroupError> {
        let admin = self.admin(group)?;
        let mut attempt = 1;
        loop {
            match self.only(group, request(&admin)) {
                Err(e) if attempt < COORDINATOR_ATTEMPTS && is_retriable(&e) => {
                    std::thread::sleep(Duration::from_millis(500 * u64::from(attempt)));
                    attempt += 1;
                }
                result => return result,
            }
        }
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

    /// Names of all consumer groups on the cluster. A broker leaves out,
    /// without an error, the groups of an offsets partition it cannot lead
    /// (offline, or its leadership moving): a group missing here may exist.
    pub fn list_groups(&self) -> Result<Vec<String>, GroupError> {
        let groups = self.admin("*")?.list()?;
        if fault_armed(failpoints::GROUPS_LISTING_EMPTY) {
            tracing::warn!(
                "fault point {}: the listing holds no group",
                failpoints::GROUPS_LISTING_EMPTY
            );
            return Ok(Vec::new());
        }
        Ok(groups)
    }

    /// The group's state and active members.
    pub fn membership(&self, group: &str) -> Result<GroupMembership, GroupError> {
        let names = [group.to_string()];
        self.retrying(group, |admin| admin.describe(&names))
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
        self.retrying(group, |admin| admin.committed(&names, partitions))
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
        self.retrying(group, |admin| admin.commit(&commits))
    }
}

/// Attempts of a group request while its coordinator loads or moves
/// (about 20 s in all).
const COORDINATOR_ATTEMPTS: u32 = 8;

fn is_retriable(error: &GroupError) -> bool {
    matches!(
        error.source.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::CoordinatorLoadInProgress
                | RDKafkaErrorCode::CoordinatorNotAvailable
                | RDKafkaErrorCode::NotCoordinator
                | RDKafkaErrorCode::UnstableOffsetCommit
                | RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::OperationTimedOut
        )
    )
}

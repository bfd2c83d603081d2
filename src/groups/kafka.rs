//! Group reads and writes on one cluster. Blocking librdkafka calls: run
//! them off the async runtime.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::config::ClientConfig;

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
    /// An admin client for one call; `group` names the group (or `*`) in
    /// its error.
    fn admin(&self, group: &str) -> Result<GroupAdmin, GroupError> {
        GroupAdmin::new(self.cluster, &self.connection, self.timeout).map_err(|mut e| {
            e.group = group.to_string();
            e
        })
    }

    /// Runs `request` for `groups` on an admin client, asking again the
    /// groups whose coordinator is not ready (a broker just restarted and
    /// is loading offsets, or the coordinator moved): errors the broker
    /// asks clients to retry. Every group gets an answer. Each retry gets
    /// a new client: a timed-out coordinator request stays queued on its
    /// client, and librdkafka aborts the process when the coordinator
    /// answers it later (see `selection::watch`).
    fn retrying<T>(
        &self,
        groups: &[String],
        mut request: impl FnMut(&GroupAdmin, &[String]) -> PerGroup<T>,
    ) -> Result<PerGroup<T>, GroupError> {
        if groups.is_empty() {
            return Ok(PerGroup::new());
        }
        let named = match groups {
            [one] => one,
            _ => "*",
        };
        let mut answers = PerGroup::new();
        let mut asking = groups.to_vec();
        for attempt in 1..=COORDINATOR_ATTEMPTS {
            let last = attempt == COORDINATOR_ATTEMPTS;
            let admin = match self.admin(named) {
                Ok(admin) => admin,
                Err(e) if attempt == 1 => return Err(e),
                // The groups asked again stay unanswered, those answered
                // keep their answers.
                Err(_) => break,
            };
            let mut again = Vec::new();
            for (group, answer) in request(&admin, &asking) {
                match answer {
                    Err(e) if !last && e.is_retriable() => again.push(group),
                    answer => {
                        answers.insert(group, answer);
                    }
                }
            }
            if again.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(500 * u64::from(attempt)));
            asking = again;
        }
        for group in groups {
            if !answers.contains_key(group) {
                answers.insert(
                    group.clone(),
                    Err(GroupError::unanswered(self.cluster, group)),
                );
            }
        }
        Ok(answers)
    }

    /// The outcome for `group` of a batch of one.
    fn only<T>(&self, group: &str, mut outcome: PerGroup<T>) -> Result<T, GroupError> {
        outcome
            .remove(group)
            .unwrap_or_else(|| Err(GroupError::unanswered(self.cluster, group)))
    }

    /// Names of all consumer groups on the cluster. A broker leaves out,
    /// without an error, the groups of an offsets partition it cannot lead
    /// (offline, or its leadership moving): a group missing here may exist.
    pub fn list_groups(&self) -> Result<Vec<String>, GroupError> {
        let groups = self.only("*", self.admin("*")?.list())?;
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
        let answers = self.retrying(&[group.to_string()], |admin, names| admin.describe(names))?;
        self.only(group, answers)
    }

    /// Committed offsets of `group` for `partitions`; partitions without a
    /// committed offset are left out.
    pub fn committed(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, i64>, GroupError> {
        let answers = self.committed_each(&[group.to_string()], partitions)?;
        self.only(group, answers)
    }

    /// Committed offsets of each of `groups` for `partitions`, every
    /// group's request in flight at once; partitions without a committed
    /// offset are left out.
    pub fn committed_each(
        &self,
        groups: &[String],
        partitions: &[TopicPartition],
    ) -> Result<PerGroup<BTreeMap<TopicPartition, i64>>, GroupError> {
        self.retrying(groups, |admin, names| admin.committed(names, partitions))
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
        let answers = self.retrying(&[group.to_string()], |admin, _| admin.commit(&commits))?;
        self.only(group, answers)
    }
}

/// Attempts of a group request while its coordinator loads or moves
/// (about 20 s in all).
const COORDINATOR_ATTEMPTS: u32 = 8;

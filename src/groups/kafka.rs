//! Group reads and writes on one cluster. Blocking librdkafka calls: run
//! them off the async runtime.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

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
    fn error(&self, group: &str, operation: &'static str) -> impl Fn(KafkaError) -> GroupError {
        let (cluster, group) = (self.cluster, group.to_string());
        move |source| GroupError {
            cluster,
            group: group.clone(),
            operation,
            source: Box::new(source),
        }
    }

    /// A client acting for `group` that never joins it: it only fetches and
    /// commits offsets, so it cannot trigger a rebalance.
    fn for_group(&self, group: &str) -> Result<BaseConsumer, GroupError> {
        self.connection
            .clone()
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .map_err(self.error(group, "creating a client"))
    }

    /// Names of all consumer groups on the cluster.
    pub fn list_groups(&self) -> Result<Vec<String>, GroupError> {
        let client: BaseConsumer = self
            .connection
            .create()
            .map_err(self.error("*", "creating a client"))?;
        let list = client
            .fetch_group_list(None, self.timeout)
            .map_err(self.error("*", "listing groups"))?;
        Ok(list.groups().iter().map(|g| g.name().to_string()).collect())
    }

    /// The group's state and active members.
    pub fn membership(&self, group: &str) -> Result<GroupMembership, GroupError> {
        let client: BaseConsumer = self
            .connection
            .create()
            .map_err(self.error(group, "creating a client"))?;
        let list = client
            .fetch_group_list(Some(group), self.timeout)
            .map_err(self.error(group, "describing"))?;
        Ok(match list.groups().first() {
            Some(g) => GroupMembership {
                state: g.state().to_string(),
                members: g
                    .members()
                    .iter()
                    .map(|m| {
                        format!(
                            "{}@{}",
                            m.client_id(),
                            m.client_host().trim_start_matches('/')
                        )
                    })
                    .collect(),
            },
            None => GroupMembership {
                state: "Dead".to_string(),
                members: Vec::new(),
            },
        })
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
        let client = self.for_group(group)?;
        let mut query = TopicPartitionList::new();
        for (topic, partition) in partitions {
            query.add_partition(topic, *partition);
        }
        let answer = retry_coordinator(|| client.committed_offsets(query.clone(), self.timeout))
            .map_err(self.error(group, "fetching committed offsets"))?;
        Ok(answer
            .elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(o) if o >= 0 => Some(((e.topic().to_string(), e.partition()), o)),
                _ => None,
            })
            .collect())
    }

    /// Commits `offsets` for `group` in one request. The broker refuses it
    /// if the group has active members (the request carries no generation),
    /// which backs up the membership check callers make first.
    pub fn commit(
        &self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), GroupError> {
        let client = self.for_group(group)?;
        let mut list = TopicPartitionList::new();
        for ((topic, partition), offset) in offsets {
            list.add_partition_offset(topic, *partition, Offset::Offset(*offset))
                .map_err(self.error(group, "preparing the commit"))?;
        }
        client
            .commit(&list, CommitMode::Sync)
            .map_err(self.error(group, "committing offsets"))
    }
}

/// Attempts of a group request while its coordinator moves or loads.
const COORDINATOR_ATTEMPTS: u32 = 10;

/// Runs `request` again while the group coordinator is not ready (a new
/// group's coordinator is being chosen, or a broker just restarted and is
/// loading offsets): errors the broker asks clients to retry.
fn retry_coordinator<T>(
    mut request: impl FnMut() -> Result<T, KafkaError>,
) -> Result<T, KafkaError> {
    let mut attempt = 1;
    loop {
        match request() {
            Err(e)
                if attempt < COORDINATOR_ATTEMPTS
                    && matches!(
                        e.rdkafka_error_code(),
                        Some(
                            RDKafkaErrorCode::NotCoordinator
                                | RDKafkaErrorCode::CoordinatorLoadInProgress
                                | RDKafkaErrorCode::CoordinatorNotAvailable
                        )
                    ) =>
            {
                std::thread::sleep(Duration::from_millis(200 * u64::from(attempt)));
                attempt += 1;
            }
            result => return result,
        }
    }
}

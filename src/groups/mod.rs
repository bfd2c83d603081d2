//! Consumer groups across the two clusters: reading a source group's
//! committed offsets, translating them exactly through the offset mapping,
//! and committing the translations to the same group on the target.

pub mod admin;
pub mod apply;
pub mod kafka;
pub mod record;
pub mod sync;
pub mod translate;
pub mod translation;

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

/// A partition of a topic, as groups commit offsets for it.
pub type TopicPartition = (String, i32);

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

impl GroupError {
    /// A group the broker's answer left out: never read as "nothing there".
    pub fn unanswered(cluster: &'static str, group: &str) -> GroupError {
        GroupError {
            cluster,
            group: group.to_string(),
            operation: "reading the broker's answer",
            source: Box::new(KafkaError::AdminOp(RDKafkaErrorCode::Fail)),
        }
    }

    /// Whether the broker asks the client to try again: the group's
    /// coordinator is loading its offsets (a broker just restarted) or
    /// moved, or the request timed out.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self.source.rdkafka_error_code(),
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

    /// Whether the cluster refused eosmirror's principal the group.
    pub fn is_authorization(&self) -> bool {
        self.source.rdkafka_error_code() == Some(RDKafkaErrorCode::GroupAuthorizationFailed)
    }
}

/// Who is in a group right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMembership {
    /// Broker's group state (`Empty`, `Stable`, `Dead`, ...).
    pub state: String,
    /// `client_id@host` of each active member.
    pub members: Vec<String>,
    /// Each active member with the partitions assigned to it.
    pub assignments: Vec<MemberAssignment>,
}

/// An active member of a group and its assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberAssignment {
    pub client_id: String,
    pub host: String,
    pub partitions: Vec<(String, i32)>,
}

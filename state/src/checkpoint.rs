//! Where a partition's replication stands after its last recorded commit.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Tail;

/// The replicated position of one source partition, as of the last Kafka
/// transaction recorded in the cache.
///
/// It is a hint: on start a worker still confirms the position against the
/// progress topic on the target, but the hint tells it where to look, so a
/// restart does not have to search the progress topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The topics the offsets below are offsets of. A checkpoint of other
    /// topics than today's (one started over since) says nothing about
    /// today's position and must not be compared with it.
    pub incarnation: TopicIncarnation,
    /// The next source offset to copy: everything below it is replicated.
    pub next_source_offset: i64,
    /// The target offset the next copied record will land at (after the
    /// commit marker of the last transaction).
    pub next_target_offset: i64,
    /// Offset in the progress topic of the last progress record seen for
    /// this partition: where a resuming worker starts reading.
    pub progress_offset: i64,
}

/// Which incarnation of a source topic and of its target copy a position
/// belongs to: their Kafka topic ids. A topic deleted and created again
/// keeps its name but gets a new id, and its offsets start over. (The
/// source cluster is the store's, see [`crate::ClusterIdentity`].)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicIncarnation {
    /// The source topic's id.
    pub source_topic_id: [u8; 16],
    /// The target topic's id.
    pub target_topic_id: [u8; 16],
}

impl Checkpoint {
    /// Whether moving from `self` to `next` would take either replicated
    /// position backwards. Equal positions are fine (an idle partition
    /// re-emitting its position).
    pub(crate) fn would_regress_to(&self, next: &Checkpoint) -> bool {
        next.next_source_offset < self.next_source_offset
            || next.next_target_offset < self.next_target_offset
    }

    /// Whether `next`, a commit that started from `follows`, takes up where
    /// `self` ends: same topics, and nothing copied in between. The source
    /// position may have moved without a commit (a worker resuming past
    /// records the source deleted): offsets that copied nothing translate
    /// to the next copy, recorded or not.
    pub(crate) fn is_followed_by(&self, follows: Tail, next: &Checkpoint) -> bool {
        self.incarnation == next.incarnation
            && self.next_source_offset <= follows.next_source_offset
            && self.next_target_offset == follows.next_target_offset
    }
}

impl fmt::Display for Checkpoint {
    /// Compact form for error messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "next source offset {}, next target offset {} (progress offset {})",
            self.next_source_offset, self.next_target_offset, self.progress_offset
        )
    }
}

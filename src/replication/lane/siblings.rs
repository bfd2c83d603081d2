//! Which incarnation of a topic the target's positions record, for a
//! partition that starts without a position of its own.
//!
//! A partition without a position is usually new: one added to its topic,
//! or a topic seen for the first time. But a topic deleted and created
//! again with more partitions has such partitions too, while the positions
//! of its other partitions record the old topic. Copying them would put the
//! new topic's records into the old copy, which `--start.over` alone may
//! allow. So a partition without a position is judged by its topic's other
//! partitions: those of this lane, or else those in the lane of the topic's
//! partition 0, which every topic has.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use eosmirror_state::SourcePartition;

use super::LaneWorker;
use crate::replication::layout::Lane;
use crate::replication::positions::{ResumeError, ResumePosition};
use crate::replication::progress::Lineage;

/// The lineages the target records for each topic, from the positions of
/// this lane and of the other lanes read so far this session.
pub(super) struct RecordedTopics {
    /// The lane's own positions' lineages, by topic.
    own: Lineages,
    /// Lanes read for a topic the lane's own positions do not name, kept
    /// for the session start so each is read at most once.
    others: HashMap<Lane, Lineages>,
}

/// Recorded lineages by topic.
type Lineages = HashMap<String, Vec<Lineage>>;

impl RecordedTopics {
    pub(super) fn new(own: &HashMap<SourcePartition, ResumePosition>) -> Self {
        RecordedTopics {
            own: by_topic(own),
            others: HashMap::new(),
        }
    }

    /// The recorded lineage a new partition of `topic` must be compared
    /// with, given `current`: none when the target records no position of
    /// the topic, or one under the current lineage (its copy already goes
    /// on, so the partition joins it).
    pub(super) fn objection(
        &mut self,
        worker: &LaneWorker,
        topic: &str,
        current: &Lineage,
    ) -> Result<Option<Lineage>, ResumeError> {
        let recorded = match self.own.get(topic) {
            Some(recorded) => recorded,
            None => {
                let lane = worker
                    .settings
                    .layout
                    .lane_of(&SourcePartition::new(topic, 0));
                if lane == worker.lane {
                    return Ok(None);
                }
                let read = match self.others.entry(lane) {
                    Entry::Occupied(read) => read.into_mut(),
                    Entry::Vacant(unread) => {
                        unread.insert(by_topic(&worker.read_lane(lane, None)?.latest))
                    }
                };
                match read.get(topic) {
                    Some(recorded) => recorded,
                    None => return Ok(None),
                }
            }
        };
        Ok(objection(recorded, current).cloned())
    }
}

/// The lineages `positions` record, by topic.
fn by_topic(positions: &HashMap<SourcePartition, ResumePosition>) -> Lineages {
    let mut by_topic = Lineages::new();
    for (partition, position) in positions {
        by_topic
            .entry(partition.topic.clone())
            .or_default()
            .push(position.record.lineage.clone());
    }
    by_topic
}

/// A recorded lineage other than `current`, unless one is `current`.
fn objection<'l>(recorded: &'l [Lineage], current: &Lineage) -> Option<&'l Lineage> {
    if recorded.contains(current) {
        return None;
    }
    recorded.first()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topics::identity::TopicId;

    fn lineage(source: u8) -> Lineage {
        Lineage {
            source_cluster_id: "c".into(),
            source_topic_id: TopicId([source; 16]),
            target_topic_id: TopicId([9; 16]),
        }
    }

    #[test]
    fn a_new_partition_of_a_topic_recorded_only_before_it_was_recreated_is_objected_to() {
        let old = lineage(1);
        let recorded = [old.clone(), old.clone()];
        assert_eq!(objection(&recorded, &lineage(2)), Some(&old));
    }

    #[test]
    fn a_new_partition_joins_a_copy_of_its_topic_as_it_is_now() {
        let (old, now) = (lineage(1), lineage(2));
        // Partly started over: one sibling already records the new topic.
        assert_eq!(objection(&[old, now.clone()], &now), None);
        assert_eq!(objection(&[], &now), None);
    }
}

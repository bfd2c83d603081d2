//! Whether a recorded position still applies: the topics it was recorded
//! for (source cluster, source topic id, target topic id) against the
//! topics under the same names now.
//!
//! Checked when a session resumes each partition, and before every commit
//! for the topics the batch touched — after the batch's last fetch, so
//! records a consumer read from a topic recreated under it never commit.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use eosmirror_state::SourcePartition;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};

use super::failure::WorkerError;
use super::progress::Lineage;
use crate::topics::identity::{TopicId, TopicIdRequest};

/// What a partition's recorded position means now.
#[derive(Debug, PartialEq, Eq)]
pub enum Continuity {
    /// Same topics: resume at the position.
    Same,
    /// A topic was recreated and `--start.over` names it: copy the new
    /// source topic from its first record, as if it had no position.
    StartOver,
}

/// The ids of `topics` on both clusters now.
#[derive(Debug)]
pub struct TopicIds {
    source: HashMap<String, Option<TopicId>>,
    target: HashMap<String, Option<TopicId>>,
}

/// The requests for [`TopicIds`] on both clusters, in flight.
pub struct PendingTopicIds {
    source: TopicIdRequest,
    target: TopicIdRequest,
}

impl PendingTopicIds {
    /// The answers (waiting for them).
    pub fn wait(self) -> Result<TopicIds, String> {
        let answer = |side: &str, request: TopicIdRequest| {
            request
                .wait()
                .map(|ids| ids.into_iter().collect())
                .map_err(|e| format!("reading the {side} topics' ids: {e}"))
        };
        Ok(TopicIds {
            source: answer("source", self.source)?,
            target: answer("target", self.target)?,
        })
    }
}

impl TopicIds {
    /// Asks both clusters for the ids of `topics` (one request each, sent
    /// at once).
    pub fn request<S: ConsumerContext, T: ConsumerContext>(
        source: &BaseConsumer<S>,
        target: &BaseConsumer<T>,
        topics: &BTreeSet<&str>,
        timeout: Duration,
    ) -> PendingTopicIds {
        let topics: Vec<&str> = topics.iter().copied().collect();
        PendingTopicIds {
            source: TopicIdRequest::send(source.client(), &topics, timeout),
            target: TopicIdRequest::send(target.client(), &topics, timeout),
        }
    }

    /// The lineage of `topic` as it is now, given the source cluster's id;
    /// an error when the topic is missing on either side (it is being
    /// deleted or created: a later session looks again).
    pub fn lineage(&self, topic: &str, source_cluster_id: &str) -> Result<Lineage, String> {
        let id = |side: &str, ids: &HashMap<String, Option<TopicId>>| {
            ids.get(topic)
                .copied()
                .flatten()
                .ok_or_else(|| format!("the {side} topic {topic} does not exist right now"))
        };
        Ok(Lineage {
            source_cluster_id: source_cluster_id.to_string(),
            source_topic_id: id("source", &self.source)?,
            target_topic_id: id("target", &self.target)?,
        })
    }

    /// Whether `partition`'s topics still have the ids of `lineage` (the
    /// cluster id is the session's: one connection cannot change cluster).
    pub fn unchanged(&self, partition: &SourcePartition, lineage: &Lineage) -> Result<(), Change> {
        let now =
            |ids: &HashMap<String, Option<TopicId>>| ids.get(&partition.topic).copied().flatten();
        for (side, recorded, current) in [
            ("source", lineage.source_topic_id, now(&self.source)),
            ("target", lineage.target_topic_id, now(&self.target)),
        ] {
            match current {
                Some(current) if current == recorded => {}
                Some(current) => {
                    return Err(Change::Recreated(WorkerError::TopicRecreated {
                        source_partition: partition.clone(),
                        side,
                        recorded,
                        current: current.to_string(),
                    }))
                }
                None => return Err(Change::Deleted { side }),
            }
        }
        Ok(())
    }
}

/// How a partition's topics changed under a session.
#[derive(Debug)]
pub enum Change {
    /// Another topic under the same name: the partition's positions do not
    /// apply to it.
    Recreated(WorkerError),
    /// The `side` topic is gone (or not known to the broker asked): a later
    /// session finds it recreated, or the topic refresh takes the
    /// partition out of the lane.
    Deleted { side: &'static str },
}

/// Compares a recorded position's lineage with the topics now. A different
/// source cluster always stops; a recreated topic starts over only when
/// `start_over` (the operator named it with `--start.over`).
pub fn compare(
    partition: &SourcePartition,
    recorded: &Lineage,
    current: &Lineage,
    start_over: bool,
) -> Result<Continuity, WorkerError> {
    if recorded.source_cluster_id != current.source_cluster_id {
        return Err(WorkerError::SourceClusterChanged {
            source_partition: partition.clone(),
            recorded: recorded.source_cluster_id.clone(),
            current: current.source_cluster_id.clone(),
        });
    }
    for (side, recorded, current) in [
        ("source", recorded.source_topic_id, current.source_topic_id),
        ("target", recorded.target_topic_id, current.target_topic_id),
    ] {
        if recorded != current {
            if start_over {
                return Ok(Continuity::StartOver);
            }
            return Err(WorkerError::TopicRecreated {
                source_partition: partition.clone(),
                side,
                recorded,
                current: current.to_string(),
            });
        }
    }
    Ok(Continuity::Same)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lineage(cluster: &str, source: u8, target: u8) -> Lineage {
        Lineage {
            source_cluster_id: cluster.into(),
            source_topic_id: TopicId([source; 16]),
            target_topic_id: TopicId([target; 16]),
        }
    }

    #[test]
    fn same_topics_resume() {
        let p = SourcePartition::new("orders", 0);
        let l = lineage("c", 1, 2);
        assert_eq!(
            compare(&p, &l, &l.clone(), false).unwrap(),
            Continuity::Same
        );
    }

    #[test]
    fn a_recreated_topic_on_either_side_stops_unless_started_over() {
        let p = SourcePartition::new("orders", 0);
        let recorded = lineage("c", 1, 2);
        for (now, side) in [
            (lineage("c", 3, 2), "source"),
            (lineage("c", 1, 3), "target"),
        ] {
            match compare(&p, &recorded, &now, false) {
                Err(WorkerError::TopicRecreated { side: named, .. }) => assert_eq!(named, side),
                other => panic!("{side}: {other:?}"),
            }
            assert_eq!(
                compare(&p, &recorded, &now, true).unwrap(),
                Continuity::StartOver
            );
        }
    }

    #[test]
    fn another_source_cluster_always_stops() {
        let p = SourcePartition::new("orders", 0);
        let err = compare(&p, &lineage("a", 1, 2), &lineage("b", 1, 2), true).unwrap_err();
        assert!(
            matches!(err, WorkerError::SourceClusterChanged { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("new --source.alias"), "{err}");
    }

    #[test]
    fn unchanged_tells_a_deleted_topic_from_a_recreated_one() {
        let p = SourcePartition::new("orders", 0);
        let recorded = lineage("c", 1, 2);
        let ids = |source: Option<u8>, target: Option<u8>| TopicIds {
            source: HashMap::from([("orders".to_string(), source.map(|b| TopicId([b; 16])))]),
            target: HashMap::from([("orders".to_string(), target.map(|b| TopicId([b; 16])))]),
        };
        assert!(ids(Some(1), Some(2)).unchanged(&p, &recorded).is_ok());
        assert!(matches!(
            ids(None, Some(2)).unchanged(&p, &recorded),
            Err(Change::Deleted { side: "source" })
        ));
        assert!(matches!(
            ids(Some(1), None).unchanged(&p, &recorded),
            Err(Change::Deleted { side: "target" })
        ));
        let recreated = ids(Some(1), Some(9)).unchanged(&p, &recorded).unwrap_err();
        assert!(
            matches!(
                recreated,
                Change::Recreated(WorkerError::TopicRecreated { side: "target", .. })
            ),
            "{recreated:?}"
        );
    }
}

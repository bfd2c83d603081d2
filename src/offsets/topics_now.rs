//! Whether an offset mapping belongs to the topics under its names now.
//!
//! A topic deleted and created again under its name starts its offsets
//! over. Until `run --start.over` copies it, the mapping on the target (and
//! the copy) are the old topic's: read for the new one, they would turn its
//! offsets into positions in the old copy that look exact (a translation),
//! or compare its records with the old topic's copies (verify).

use std::collections::{BTreeMap, BTreeSet};

use crate::read::{ReadError, Side};
use crate::replication::progress::Lineage;
use crate::topics::identity::TopicId;

/// The ids a topic has now on each cluster; `None` where not known, which
/// checks nothing on that side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopicsNow {
    /// The source topic's id: the topic whose offsets are translated or read.
    pub source: Option<TopicId>,
    /// The target topic's id: the topic the copy is in.
    pub target: Option<TopicId>,
}

/// The ids each of `topics` has now on both clusters (one DescribeTopics
/// request per cluster).
pub fn topics_now<'a>(
    source: &Side,
    target: &Side,
    topics: impl IntoIterator<Item = &'a str>,
) -> Result<BTreeMap<String, TopicsNow>, ReadError> {
    let names: Vec<&str> = topics
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let source_ids = source.topic_ids(&names)?;
    let target_ids = target.topic_ids(&names)?;
    let id = |ids: &BTreeMap<String, Option<TopicId>>, name: &str| ids.get(name).copied().flatten();
    Ok(names
        .iter()
        .map(|&name| {
            let now = TopicsNow {
                source: id(&source_ids, name),
                target: id(&target_ids, name),
            };
            (name.to_string(), now)
        })
        .collect())
}

/// A mapping recorded for a topic since deleted and created again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {side} topic was deleted and created again (topic id {now} now, {copied} in the copy's mapping): the mapping and the copy are the old topic's and say nothing of the new one's offsets. Once the new topic is copied (delete the target topic if it holds the old copy, then run `eosmirror run --start.over '{topic}'`; see the README), its new mapping is used")]
pub struct Recreated {
    /// "source" or "target": the cluster where the topic was recreated.
    pub side: &'static str,
    /// Its name (the same on both clusters).
    pub topic: String,
    /// The id the mapping was recorded for.
    pub copied: TopicId,
    /// The id under the same name now.
    pub now: TopicId,
}

/// Whether a mapping recorded for `lineage` belongs to `topic` as it is
/// `now`.
pub fn check_topics(topic: &str, lineage: &Lineage, now: TopicsNow) -> Result<(), Recreated> {
    let sides = [
        ("source", lineage.source_topic_id, now.source),
        ("target", lineage.target_topic_id, now.target),
    ];
    for (side, copied, now) in sides {
        if let Some(now) = now.filter(|&now| now != copied) {
            return Err(Recreated {
                side,
                topic: topic.to_string(),
                copied,
                now,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_of_topics_recreated_since_is_refused_by_side() {
        let lineage = Lineage {
            source_cluster_id: "source".into(),
            source_topic_id: TopicId([1; 16]),
            target_topic_id: TopicId([2; 16]),
        };
        let same = TopicsNow {
            source: Some(TopicId([1; 16])),
            target: Some(TopicId([2; 16])),
        };
        assert_eq!(check_topics("t", &lineage, same), Ok(()));
        assert_eq!(check_topics("t", &lineage, TopicsNow::default()), Ok(()));
        let source_recreated = TopicsNow {
            source: Some(TopicId([3; 16])),
            ..same
        };
        assert_eq!(
            check_topics("t", &lineage, source_recreated),
            Err(Recreated {
                side: "source",
                topic: "t".into(),
                copied: TopicId([1; 16]),
                now: TopicId([3; 16]),
            })
        );
        let target_recreated = TopicsNow {
            target: Some(TopicId([4; 16])),
            ..same
        };
        let refused = check_topics("t", &lineage, target_recreated).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("the target topic was deleted and created again"),
            "{refused}"
        );
    }
}

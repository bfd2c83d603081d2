//! A consumer group's source offsets, translated exactly into target
//! offsets through the mapping eosmirror committed with the copies: what
//! `translate`, `cutover`, `failover` and group sync share. The rule for
//! one offset is in `translation.rs`; this reads the mapping from the
//! target, applies the rule to each of a group's partitions and reports it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::clusters::{Cluster, CONNECT_TIMEOUT};
use crate::groups::apply::Applied;
use crate::groups::translation::{
    still_on_target, translate, TranslatedOffset, TranslationKind, Untranslatable,
};
use crate::groups::TopicPartition;
use crate::offsets::history::{read_mappings_with_positions, Answering};
use crate::offsets::tail::Needed;
use crate::offsets::topics_now::{check_topics, TopicsNow};
use crate::replication::progress::InternalTopics;
use crate::topics::filter::TopicFilter;
use crate::topics::identity::TopicId;
use crate::topics::target::partition_counts;
use eosmirror_state::SourcePartition;

/// Prefetch bound of the mapping reader (KiB).
const MAPPING_QUEUE_KBYTES: usize = 16 * 1024;

/// One partition of a group's translation.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionTranslation {
    /// The source topic (the target topic has the same name).
    pub topic: String,
    /// The partition (same number on both sides).
    pub partition: i32,
    /// The group's committed offset on the source.
    pub source_offset: i64,
    /// Its translation; `None` when there is none (see `error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub translation: Option<TranslatedOffset>,
    /// Why there is no translation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With --apply: `applied` or `unchanged`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<&'static str>,
    /// With --apply: the group's offset on the target before (`None`: it
    /// had none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_offset_before: Option<i64>,
}

/// A group's translation (and what applying it did).
#[derive(Debug, Clone, Serialize)]
pub struct GroupTranslation {
    /// The consumer group (the same name on both clusters).
    pub group: String,
    /// Each partition the group has a committed offset for.
    pub partitions: Vec<PartitionTranslation>,
}

impl GroupTranslation {
    /// Target offsets to commit; `None` if any partition has no translation.
    pub fn target_offsets(&self) -> Option<BTreeMap<TopicPartition, i64>> {
        self.partitions
            .iter()
            .map(|p| Some(((p.topic.clone(), p.partition), p.translation?.target_offset)))
            .collect()
    }

    /// Records what applying did.
    pub fn record_applied(&mut self, applied: &Applied) {
        for p in &mut self.partitions {
            let key = (p.topic.clone(), p.partition);
            if let Some((before, _)) = applied.committed.get(&key) {
                p.action = Some("applied");
                p.target_offset_before = *before;
            } else if applied.unchanged.contains(&key) {
                p.action = Some("unchanged");
                p.target_offset_before = p.translation.map(|t| t.target_offset);
            }
        }
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for p in &self.partitions {
            let _ = write!(
                out,
                "group {}: {}-{}: source offset {}",
                self.group, p.topic, p.partition, p.source_offset
            );
            match (&p.translation, &p.error) {
                (Some(t), _) => {
                    let _ = write!(out, " -> target offset {}", t.target_offset);
                    match t.kind {
                        TranslationKind::Exact => out.push_str(" (exact)"),
                        TranslationKind::Tail => {
                            let _ = write!(out, " (replicated tail: not copied yet; up to {} consumed records will be read again once copied)", t.rereads);
                        }
                    }
                }
                (None, Some(e)) => {
                    let _ = write!(out, ": no translation: {e}");
                }
                (None, None) => {}
            }
            match (p.action, p.target_offset_before) {
                (Some(action), Some(before)) => {
                    let _ = write!(out, " [{action}; target group was at {before}]");
                }
                (Some(action), None) => {
                    let _ = write!(out, " [{action}; target group had no offset]");
                }
                _ => {}
            }
            out.push('\n');
        }
        out
    }
}

/// Partitions replicated by this mirror: source topics (optionally
/// filtered) that exist on the target too.
pub fn replicated_partitions(
    source: &Cluster,
    target: &Cluster,
    topics: Option<&TopicFilter>,
) -> anyhow::Result<Vec<TopicPartition>> {
    let on_source = partition_counts(&source.connection, "source", CONNECT_TIMEOUT)?;
    let on_target = partition_counts(&target.connection, "target", CONNECT_TIMEOUT)?;
    Ok(on_source
        .iter()
        .filter(|(name, _)| !name.starts_with("__") && on_target.contains_key(*name))
        .filter(|(name, _)| topics.is_none_or(|f| f.matches(name)))
        .flat_map(|(name, &n)| (0..n).map(move |p| (name.clone(), p)))
        .collect())
}

/// Committed source offsets per group.
pub type GroupOffsets = BTreeMap<String, BTreeMap<TopicPartition, i64>>;

/// The ids of the source topics whose offsets the groups committed (`None`:
/// not known), by topic name: read from the source, or recorded with the
/// offsets by group sync when the source is gone.
pub type SourceTopicIds = BTreeMap<String, Option<TopicId>>;

/// The ids the topics of `groups`' offsets have on the source now.
pub fn source_topic_ids(source: &Cluster, groups: &GroupOffsets) -> anyhow::Result<SourceTopicIds> {
    let names: BTreeSet<&str> = groups
        .values()
        .flat_map(|offsets| offsets.keys().map(|(topic, _)| topic.as_str()))
        .collect();
    let side = source.side(1024, CONNECT_TIMEOUT);
    Ok(side.topic_ids(&names.into_iter().collect::<Vec<_>>())?)
}

/// Translates each group's committed source offsets through the mapping on
/// the target, in the groups' order. The mapping of the union of their
/// partitions is read once: a history of days, read again for each of many
/// groups, would keep a cutover's outage window open that many times over.
///
/// A partition whose mapping was recorded for other topics than
/// `source_ids` and the target's topics now (a topic deleted and created
/// again under its name) has no translation: see [`check_topics`].
pub fn translate_groups(
    target: &Cluster,
    alias: &str,
    groups: &GroupOffsets,
    source_ids: &SourceTopicIds,
) -> anyhow::Result<Vec<GroupTranslation>> {
    let side = target.side(MAPPING_QUEUE_KBYTES, Duration::from_secs(120));
    // The history from the lowest offset of any group, per partition: a
    // group caught up needs the last few commits, not days of them.
    // Only the runs the groups' offsets translate into are kept: a group
    // days behind a transactional source would otherwise hold a run per
    // source transaction since.
    let mut answering: Answering = BTreeMap::new();
    for (partition, &offset) in groups.values().flatten() {
        answering
            .entry(partition.clone())
            .or_default()
            .insert(offset);
    }
    let lowest: BTreeMap<TopicPartition, i64> = answering
        .iter()
        .filter_map(|(partition, offsets)| Some((partition.clone(), *offsets.first()?)))
        .collect();
    let wanted: BTreeSet<TopicPartition> = lowest.keys().cloned().collect();
    let topics = InternalTopics::for_alias(alias);
    // A partition idle for longer than the progress topic's retention has
    // no mapping left there, but the compacted position topic keeps its
    // replicated tail for ever: groups caught up on it still translate.
    let (maps, lineages, truncated) = read_mappings_with_positions(
        &side,
        &topics,
        &wanted,
        &Needed::From(lowest),
        Some(&answering),
    )?;
    let names: BTreeSet<&str> = wanted.iter().map(|(topic, _)| topic.as_str()).collect();
    let target_ids = side.topic_ids(&names.into_iter().collect::<Vec<_>>())?;
    // Where each target partition's log starts: a copy below it is gone.
    // Only partitions the target has: one it lacks has no copy to lose.
    let target_partitions = partition_counts(&target.connection, "target", CONNECT_TIMEOUT)?;
    let on_target: Vec<SourcePartition> = wanted
        .iter()
        .filter(|(topic, partition)| {
            target_partitions
                .get(topic)
                .is_some_and(|&n| *partition < n)
        })
        .map(|(topic, partition)| SourcePartition::new(topic, *partition))
        .collect();
    let target_starts = side.watermarks_of(&on_target)?;
    let empty = Default::default();
    let translation_of = |(topic, partition): &TopicPartition, source_offset: i64| {
        let key = (topic.clone(), *partition);
        let now = TopicsNow {
            source: source_ids.get(topic).copied().flatten(),
            target: target_ids.get(topic).copied().flatten(),
        };
        let result = match lineages.get(&key) {
            Some(lineage) => check_topics(topic, lineage, now).map_err(Untranslatable::from),
            None => Ok(()),
        }
        .and_then(|()| {
            translate(
                maps.get(&key).unwrap_or(&empty),
                truncated.contains(&key),
                source_offset,
            )
        })
        .and_then(|translated| {
            match target_starts.get(&SourcePartition::new(topic, *partition)) {
                Some(&(low, _)) => still_on_target(translated, low),
                None => Ok(translated),
            }
        });
        PartitionTranslation {
            topic: topic.clone(),
            partition: *partition,
            source_offset,
            error: result.as_ref().err().map(|e| e.to_string()),
            translation: result.ok(),
            action: None,
            target_offset_before: None,
        }
    };
    Ok(groups
        .iter()
        .map(|(group, offsets)| GroupTranslation {
            group: group.clone(),
            partitions: offsets
                .iter()
                .map(|(tp, &offset)| translation_of(tp, offset))
                .collect(),
        })
        .collect())
}

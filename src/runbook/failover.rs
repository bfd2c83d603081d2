//! Failover, run by `eosmirror failover`: the source cluster is gone. Apply
//! the translations of the group offsets `run --groups.sync` last recorded
//! on the target, and report the recovery point: what the source had that
//! was not replicated when it was last observed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use serde::Serialize;

use crate::clusters::Cluster;
use crate::config::ClientRole;
use crate::groups::apply::apply;
use crate::groups::record::{GroupOffsetsRecord, Recorded};
use crate::groups::translate::{translate_groups, GroupOffsets, GroupTranslation, SourceTopicIds};
use crate::offsets::history::read_mappings_with_positions;
use crate::offsets::tail::Needed;
use crate::pattern::NamePattern;
use crate::replication::progress::InternalTopics;
use crate::topics::identity::TopicId;

/// Which groups fail over onto which target.
#[derive(Debug, Clone)]
pub struct FailoverOptions {
    /// Java client properties of the target: the only cluster failover
    /// contacts, since the source is gone.
    pub target_config: PathBuf,
    /// The mirror's `--source.alias`: it names the internal topics holding
    /// the recorded offsets and the mapping.
    pub source_alias: String,
    /// The recorded groups applied.
    pub groups: NamePattern,
    /// The group option as given: the error when no group matches quotes
    /// it.
    pub groups_given: String,
    /// Whether a group's target offsets may move backwards.
    pub allow_rewind: bool,
}

/// A partition's recovery point.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionRpo {
    /// The source topic.
    pub topic: String,
    /// The partition (same number on both sides).
    pub partition: i32,
    /// Source end offset when last observed.
    pub source_end: i64,
    /// Replicated position now (from the mapping on the target).
    pub replicated_position: i64,
    /// Source offsets observed on the source but not replicated (an upper
    /// bound in records: markers count too).
    pub unreplicated_offsets: i64,
}

/// What failover did and what may have been lost.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverReport {
    /// Each applied group's translation and what applying it did.
    pub groups: Vec<GroupTranslation>,
    /// When the source ends were last observed (ms since the epoch).
    pub source_observed_at_ms: i64,
    /// What each partition may have lost: the recovery point.
    pub rpo: Vec<PartitionRpo>,
    /// Groups left where they were, each with the reason and what to do.
    /// In a failover every group that can move moves: one group that cannot
    /// (an abandoned one whose mapping expired, one with consumers already
    /// on the target) must not hold back the others.
    pub problems: Vec<String>,
}

impl FailoverReport {
    /// Every matching group was moved.
    pub fn complete(&self) -> bool {
        self.problems.is_empty()
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for g in &self.groups {
            out.push_str(&g.to_text());
        }
        let _ = writeln!(
            out,
            "recovery point (source last observed at {} ms since the epoch):",
            self.source_observed_at_ms
        );
        for p in &self.rpo {
            let _ = writeln!(
                out,
                "  {}-{}: source end {} replicated {}: {} offsets not replicated",
                p.topic, p.partition, p.source_end, p.replicated_position, p.unreplicated_offsets
            );
        }
        for problem in &self.problems {
            let _ = writeln!(out, "problem: {problem}");
        }
        let lost: i64 = self.rpo.iter().map(|p| p.unreplicated_offsets).sum();
        let _ = writeln!(
            out,
            "failover: {} group(s) applied, {} not; at most {lost} source offsets were not replicated",
            self.groups.len(),
            self.problems.len()
        );
        out
    }
}

/// Runs a failover. Blocking; never contacts the source.
pub fn failover(options: &FailoverOptions) -> anyhow::Result<FailoverReport> {
    let alias = &options.source_alias;
    let target = Cluster::connect("target", &options.target_config, ClientRole::Producer)?;
    let topics = InternalTopics::for_alias(alias);
    let side = target.side(16 * 1024, Duration::from_secs(120));
    let recorded = Recorded::read(&side, &topics.groups)?;
    let Some(ends) = recorded.source_ends.clone() else {
        bail!("{} holds no observation of the source's end offsets: `eosmirror run --groups.sync` never ran for --source.alias {alias}, so the recovery point is unknown", topics.groups);
    };
    let groups: Vec<_> = recorded
        .groups
        .values()
        .filter(|g| options.groups.matches(&g.group))
        .collect();
    if groups.is_empty() {
        bail!(
            "no recorded group matches {} (recorded: {}); only groups synced by `eosmirror run --groups.sync` can fail over",
            options.groups_given,
            recorded.groups.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }

    // The recovery point first: once a group has moved, a failed read
    // would leave the operator with an error and no report of the moves.
    let wanted = ends
        .partitions
        .iter()
        .map(|(t, p, _, _)| (t.clone(), *p))
        .collect();
    // Only each partition's replicated position: its newest commit.
    let (maps, lineages, _) =
        read_mappings_with_positions(&side, &topics, &wanted, &Needed::Last(0), None)?;
    let observed_ids: BTreeMap<&str, TopicId> = ends
        .source_topic_ids
        .iter()
        .map(|(topic, id)| (topic.as_str(), *id))
        .collect();
    let rpo: Vec<PartitionRpo> = ends
        .partitions
        .iter()
        .map(|(topic, partition, source_end, observed_position)| {
            let key = (topic.clone(), *partition);
            // A position of the topic before it was recreated on the source
            // says nothing of the new topic's records.
            let same_topic = lineages.get(&key).is_some_and(|l| {
                observed_ids
                    .get(topic.as_str())
                    .is_none_or(|id| *id == l.source_topic_id)
            });
            let position = maps
                .get(&key)
                .filter(|_| same_topic)
                .and_then(|m| m.replicated_position)
                .unwrap_or(*observed_position)
                .max(*observed_position);
            PartitionRpo {
                topic: topic.clone(),
                partition: *partition,
                source_end: *source_end,
                replicated_position: position,
                unreplicated_offsets: (source_end - position).max(0),
            }
        })
        .collect();

    let mut translated = Vec::new();
    for (ids, offsets) in &batches_by_topic_ids(&groups) {
        translated.extend(translate_groups(&target, alias, offsets, ids)?);
    }
    translated.sort_by(|a, b| a.group.cmp(&b.group));
    let mut translations = Vec::new();
    let mut problems = Vec::new();
    for mut translation in translated {
        let Some(to_commit) = translation.target_offsets() else {
            let untranslated = translation
                .partitions
                .iter()
                .filter_map(|p| {
                    let error = p.error.as_ref()?;
                    Some(format!("{}-{}: {error}", p.topic, p.partition))
                })
                .collect::<Vec<_>>()
                .join("; ");
            problems.push(format!(
                "group {:?} was not moved, some of its partitions have no translation ({untranslated}); a group abandoned on the source can be left out with --groups",
                translation.group
            ));
            continue;
        };
        match apply(
            &target.groups(),
            &translation.group,
            &to_commit,
            options.allow_rewind,
        ) {
            Ok(applied) => {
                translation.record_applied(&applied);
                translations.push(translation);
            }
            Err(e) => problems.push(e.to_string()),
        }
    }

    Ok(FailoverReport {
        problems,
        groups: translations,
        source_observed_at_ms: ends.observed_at_ms,
        rpo,
    })
}

/// The groups in batches whose recorded source topic ids agree: one batch
/// (one read of the mapping), unless a topic was recreated between two of
/// sync's rounds that recorded them. The mapping's topics are checked
/// against each batch's ids.
fn batches_by_topic_ids(groups: &[&GroupOffsetsRecord]) -> Vec<(SourceTopicIds, GroupOffsets)> {
    let mut batches: Vec<(SourceTopicIds, GroupOffsets)> = Vec::new();
    for g in groups {
        let agrees = |ids: &SourceTopicIds| {
            g.source_topic_ids
                .iter()
                .all(|(topic, id)| ids.get(topic).is_none_or(|known| *known == Some(*id)))
        };
        let batch = match batches.iter().position(|(ids, _)| agrees(ids)) {
            Some(i) => &mut batches[i],
            None => {
                batches.push(Default::default());
                batches.last_mut().expect("just pushed")
            }
        };
        for (topic, id) in &g.source_topic_ids {
            batch.0.insert(topic.clone(), Some(*id));
        }
        let offsets = g.offsets.iter().map(|(t, p, o)| ((t.clone(), *p), *o));
        batch.1.insert(g.group.clone(), offsets.collect());
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(group: &str, topic: &str, id: u8) -> GroupOffsetsRecord {
        GroupOffsetsRecord {
            group: group.into(),
            offsets: vec![(topic.into(), 0, 5)],
            source_topic_ids: vec![(topic.into(), TopicId([id; 16]))],
            observed_at_ms: 0,
        }
    }

    #[test]
    fn groups_share_one_read_unless_their_topic_ids_disagree() {
        let (a, b, c) = (
            record("a", "t", 1),
            record("b", "u", 2),
            record("c", "t", 3),
        );
        let batches = batches_by_topic_ids(&[&a, &b]);
        assert_eq!(batches.len(), 1, "{batches:?}");
        assert_eq!(batches[0].1.len(), 2);
        let batches = batches_by_topic_ids(&[&a, &b, &c]);
        assert_eq!(batches.len(), 2, "{batches:?}");
        assert_eq!(batches[1].0["t"], Some(TopicId([3; 16])));
        assert!(batches[1].1.contains_key("c"));
    }
}

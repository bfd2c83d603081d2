//! A session's start weighs each partition's cached checkpoint against the
//! target's latest position record (the target is the source of truth).

use eosmirror_state::Checkpoint;

use crate::replication::progress::{Lineage, ProgressRecord};

/// What the cache of one partition is worth at a session's start.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum CacheCheck {
    /// It agrees with the target: keep it.
    Agrees,
    /// Forget it: it missed commits (another instance's, or writes lost in
    /// a crash), or it is of other topics than today's (a topic started
    /// over since, here or by another instance of the fleet), so its
    /// offsets say nothing about today's position.
    Forget,
    /// The cache recorded commits of today's topics that the target no
    /// longer holds: `target_next` is the target's position for today's
    /// topics, if it has one.
    TargetLost { target_next: Option<i64> },
}

/// Judges `cached` against the target's latest position record (`target`)
/// while the topics are `current`.
///
/// The cache only ever records a commit after the target took it, so a
/// cache of today's topics ahead of the target (or a target with no
/// position of today's topics) means the target lost committed data. A
/// cache of other topics compares with nothing and is forgotten, unless
/// the target has no position of the partition at all.
pub(super) fn check_cache(
    cached: &Checkpoint,
    current: &Lineage,
    target: Option<&ProgressRecord>,
) -> CacheCheck {
    if cached.incarnation != current.incarnation() {
        // A start-over always leaves a position of its topics: a target
        // with none lost the cached commits (its positions were reset).
        return match target {
            Some(_) => CacheCheck::Forget,
            None => CacheCheck::TargetLost { target_next: None },
        };
    }
    let target = target.filter(|record| record.lineage == *current);
    match target.map(|record| (record.next_source_offset, record.next_target_offset)) {
        Some(next) if next == (cached.next_source_offset, cached.next_target_offset) => {
            CacheCheck::Agrees
        }
        // Level in source offsets but not in target offsets: the target's
        // copies are not the ones cached (it lost commits that were copied
        // again); it is the source of truth.
        Some((next, _)) if next >= cached.next_source_offset => CacheCheck::Forget,
        next => CacheCheck::TargetLost {
            target_next: next.map(|(source, _)| source),
        },
    }
}

#[cfg(test)]
mod tests {
    use eosmirror_state::SourcePartition;

    use super::*;
    use crate::topics::identity::TopicId;

    fn lineage(source: u8, target: u8) -> Lineage {
        Lineage {
            source_cluster_id: "source".into(),
            source_topic_id: TopicId([source; 16]),
            target_topic_id: TopicId([target; 16]),
        }
    }

    fn cached(lineage: &Lineage, next_source_offset: i64) -> Checkpoint {
        Checkpoint {
            incarnation: lineage.incarnation(),
            next_source_offset,
            next_target_offset: next_source_offset + 1,
            progress_offset: 7,
        }
    }

    fn target(lineage: &Lineage, next_source_offset: i64) -> ProgressRecord {
        ProgressRecord {
            source: SourcePartition::new("orders", 0),
            lineage: lineage.clone(),
            runs: Vec::new(),
            next_source_offset,
            copies_end: next_source_offset,
            next_target_offset: next_source_offset + 1,
            instance: 1,
            committed_at_ms: 0,
            begins_history: false,
        }
    }

    #[test]
    fn a_cache_of_todays_topics_is_kept_level_forgotten_behind_and_ahead_means_loss() {
        let today = lineage(1, 2);
        let at = |next| check_cache(&cached(&today, 100), &today, Some(&target(&today, next)));
        assert_eq!(at(100), CacheCheck::Agrees);
        assert_eq!(at(150), CacheCheck::Forget);
        assert_eq!(
            at(99),
            CacheCheck::TargetLost {
                target_next: Some(99)
            }
        );
        assert_eq!(
            check_cache(&cached(&today, 100), &today, None),
            CacheCheck::TargetLost { target_next: None }
        );
        // Level in source offsets, not in target offsets: other copies.
        let mut elsewhere = target(&today, 100);
        elsewhere.next_target_offset += 5;
        assert_eq!(
            check_cache(&cached(&today, 100), &today, Some(&elsewhere)),
            CacheCheck::Forget
        );
    }

    /// Another instance (or this one, before a crash lost the cache's
    /// writes) started the topic over: the target is behind the cache, but
    /// in other offsets.
    #[test]
    fn a_cache_of_topics_started_over_since_is_forgotten_whatever_its_offsets() {
        let before = lineage(1, 2);
        let today = lineage(3, 4);
        for target_next in [0, 99, 100, 150] {
            assert_eq!(
                check_cache(
                    &cached(&before, 100),
                    &today,
                    Some(&target(&today, target_next))
                ),
                CacheCheck::Forget
            );
        }
    }

    /// A start-over writes its topics' position: a target with no position
    /// of the partition lost the cached commits (its internal topics were
    /// reset, or it is another cluster under the same cluster id), whatever
    /// topics the cache is of.
    #[test]
    fn a_target_without_a_position_lost_the_cached_commits_of_any_topics() {
        let before = lineage(1, 2);
        let today = lineage(3, 4);
        assert_eq!(
            check_cache(&cached(&before, 100), &today, None),
            CacheCheck::TargetLost { target_next: None }
        );
    }

    /// The cache only records what the target committed: a target whose
    /// latest position is of older topics lost today's.
    #[test]
    fn a_target_position_of_older_topics_than_the_cache_is_loss() {
        let before = lineage(1, 2);
        let today = lineage(3, 4);
        assert_eq!(
            check_cache(&cached(&today, 10), &today, Some(&target(&before, 500))),
            CacheCheck::TargetLost { target_next: None }
        );
    }
}

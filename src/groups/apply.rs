//! Committing translated offsets to a target group, safely: never into a
//! group with active members (they own their offsets), never backwards
//! unless asked, and all partitions or none.

use std::collections::BTreeMap;

use super::kafka::GroupClient;
use super::GroupError;
use super::TopicPartition;

/// Why translated offsets were not committed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("group {group:?} has {} active member(s) on the target ({}); translated offsets are only committed to a group nobody consumes with: stop those consumers first (a static member, one with group.instance.id, stays in the group until its session.timeout.ms has passed after its consumer stopped)", members.len(), members.join(", "))]
    ActiveMembers { group: String, members: Vec<String> },
    #[error("group {group:?}: applying would move the target group backwards ({}); nothing was committed. To do it anyway, pass --allow-rewind to `translate --group {group} --apply`, `cutover` or `failover` (group sync in `run` never moves a group backwards)", describe_rewinds(rewinds))]
    Rewind {
        group: String,
        /// (partition, current target offset, translated offset).
        rewinds: Vec<(TopicPartition, i64, i64)>,
    },
    #[error(transparent)]
    Kafka(#[from] GroupError),
}

fn describe_rewinds(rewinds: &[(TopicPartition, i64, i64)]) -> String {
    rewinds
        .iter()
        .map(|((t, p), current, new)| format!("{t}-{p} from {current} to {new}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What an apply changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Partitions committed, with the offset the target group had before
    /// (`None`: no offset).
    pub committed: BTreeMap<TopicPartition, (Option<i64>, i64)>,
    /// Partitions already at their translated offset.
    pub unchanged: Vec<TopicPartition>,
}

/// Decides what to commit given the target group's current offsets.
pub fn plan(
    group: &str,
    translated: &BTreeMap<TopicPartition, i64>,
    current: &BTreeMap<TopicPartition, i64>,
    allow_rewind: bool,
) -> Result<Applied, ApplyError> {
    let mut applied = Applied::default();
    let mut rewinds = Vec::new();
    for (partition, &new) in translated {
        match current.get(partition) {
            Some(&now) if now == new => applied.unchanged.push(partition.clone()),
            Some(&now) if now > new && !allow_rewind => rewinds.push((partition.clone(), now, new)),
            now => {
                applied
                    .committed
                    .insert(partition.clone(), (now.copied(), new));
            }
        }
    }
    if !rewinds.is_empty() {
        return Err(ApplyError::Rewind {
            group: group.to_string(),
            rewinds,
        });
    }
    Ok(applied)
}

/// Commits `translated` to `group` on the target if the group has no
/// active members and no partition would move backwards (unless
/// `allow_rewind`).
pub fn apply(
    target: &GroupClient,
    group: &str,
    translated: &BTreeMap<TopicPartition, i64>,
    allow_rewind: bool,
) -> Result<Applied, ApplyError> {
    let membership = target.membership(group)?;
    if !membership.members.is_empty() {
        return Err(ApplyError::ActiveMembers {
            group: group.to_string(),
            members: membership.members,
        });
    }
    let partitions: Vec<TopicPartition> = translated.keys().cloned().collect();
    let current = target.committed(group, &partitions)?;
    let applied = plan(group, translated, &current, allow_rewind)?;
    let to_commit: BTreeMap<TopicPartition, i64> = applied
        .committed
        .iter()
        .map(|(p, (_, new))| (p.clone(), *new))
        .collect();
    if !to_commit.is_empty() {
        target.commit(group, &to_commit)?;
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        ("t".to_string(), p)
    }

    #[test]
    fn commits_forward_moves_and_new_partitions_keeps_equal_ones() {
        let translated = BTreeMap::from([(tp(0), 10), (tp(1), 5), (tp(2), 7)]);
        let current = BTreeMap::from([(tp(0), 4), (tp(1), 5)]);
        let a = plan("g", &translated, &current, false).unwrap();
        assert_eq!(
            a.committed,
            BTreeMap::from([(tp(0), (Some(4), 10)), (tp(2), (None, 7))])
        );
        assert_eq!(a.unchanged, vec![tp(1)]);
    }

    #[test]
    fn refuses_any_rewind_unless_allowed() {
        let translated = BTreeMap::from([(tp(0), 10), (tp(1), 3)]);
        let current = BTreeMap::from([(tp(0), 4), (tp(1), 5)]);
        let err = plan("g", &translated, &current, false).unwrap_err();
        assert!(err.to_string().contains("t-1 from 5 to 3"), "{err}");
        assert!(err.to_string().contains("--allow-rewind"), "{err}");
        let a = plan("g", &translated, &current, true).unwrap();
        assert_eq!(a.committed.len(), 2);
    }
}

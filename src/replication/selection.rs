//! Every instance of a fleet copies the same topics.
//!
//! A lane copies the partitions of the topics its owner selects
//! (`--include`, `--exclude`), and the fleet's group moves lanes between
//! instances. An instance started with another selection would, while it
//! owns a lane, leave out that lane's partitions of topics the others copy
//! (a standby missing them when it is failed over to), or copy topics the
//! others leave out. Nothing would say so.
//!
//! So every member of the fleet's group carries a fingerprint of its
//! selection in its client id (see [`super::membership::fleet_client_id`]),
//! which the group's description shows. A start is refused while the group
//! has a member with another fingerprint; a running instance whose group
//! gains one (two instances started at once) ends its run, and so does the
//! other. Members without a fingerprint (another tool) are not judged.

use std::time::Duration;

use crate::clusters::Cluster;
use crate::failpoints::{self, fault_armed};
use crate::groups::kafka::GroupClient;
use crate::groups::GroupError;
use crate::replication::layout::fnv1a;
use crate::replication::membership::{describe_member, selection_of_client_id, FleetSettings};
use crate::topics::filter::TopicFilter;

/// The fingerprint of a topic selection: 8 hex digits of a fixed hash of
/// the patterns as compiled (so the same patterns give the same
/// fingerprint on every machine and version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection(String);

impl Selection {
    pub fn of(filter: &TopicFilter) -> Selection {
        let (include, exclude) = filter.patterns();
        let text = format!("{include}\0{}", exclude.unwrap_or_default());
        Selection(format!("{:08x}", fnv1a(text.as_bytes()) as u32))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The fleet's group has members that select other topics than this
/// instance.
#[derive(Debug, thiserror::Error)]
#[error("the fleet's group {group} on the target has members started with other --include/--exclude than this instance: {others}. Every instance of a fleet must select the same topics: lanes move between instances, and while a lane is with an instance that leaves some of its topics out, nothing copies them. Start every instance with the same --include and --exclude; to change them, stop every instance, then start them all with the new ones (an instance killed without leaving the group stays a member for --fleet.session.timeout.ms, {session_secs} s)")]
pub struct SelectionDiffers {
    pub group: String,
    /// The other members, `instance-<id>@<host>`.
    pub others: String,
    pub session_secs: u64,
}

/// Who to ask and what this instance selects. Blocking calls.
pub struct SelectionCheck {
    groups: GroupClient,
    /// The fleet's group.
    group: String,
    own: Selection,
    session_timeout: Duration,
}

impl SelectionCheck {
    /// The check of `fleet`'s group on `target`.
    pub fn new(target: &Cluster, fleet: &FleetSettings) -> SelectionCheck {
        SelectionCheck {
            groups: target.groups(),
            group: fleet.group_id.clone(),
            own: fleet.selection.clone(),
            session_timeout: fleet.session_timeout,
        }
    }

    /// The start's check: refuses while the group has a member with
    /// another selection. A describe that fails is logged and the start
    /// goes on; the running instance checks again at every refresh.
    pub fn before_joining(&self) -> Result<(), SelectionDiffers> {
        if fault_armed(failpoints::FLEET_SELECTION_UNSEEN) {
            tracing::warn!(
                "fault point {}: the fleet's group is not checked before joining",
                failpoints::FLEET_SELECTION_UNSEEN
            );
            return Ok(());
        }
        match self.check() {
            Ok(verdict) => verdict,
            Err(e) => {
                tracing::warn!(group = %self.group, "could not compare this instance's --include/--exclude with the fleet's other members: {e}");
                Ok(())
            }
        }
    }

    /// Describes the fleet's group: `Ok(Err(_))` names the members with
    /// another selection, `Err` is a describe that failed (the caller
    /// decides whether that stops it).
    pub fn check(&self) -> Result<Result<(), SelectionDiffers>, GroupError> {
        let membership = self.groups.membership(&self.group)?;
        let others: Vec<String> = membership
            .assignments
            .iter()
            .filter(|m| selection_of_client_id(&m.client_id).is_some_and(|s| s != self.own.0))
            .map(|m| describe_member(&m.client_id, &m.host))
            .collect();
        if others.is_empty() {
            return Ok(Ok(()));
        }
        Ok(Err(SelectionDiffers {
            group: self.group.clone(),
            others: others.join(", "),
            session_secs: self.session_timeout.as_secs(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selection(include: &str, exclude: Option<&str>) -> Selection {
        Selection::of(&TopicFilter::new(include, exclude).unwrap())
    }

    #[test]
    fn the_same_patterns_give_the_same_fingerprint_and_others_another() {
        assert_eq!(selection("orders.*", None), selection("orders.*", None));
        assert_ne!(selection("orders.*", None), selection("orders", None));
        assert_ne!(
            selection("orders.*", None),
            selection("orders.*", Some("orders.test"))
        );
        // Include and exclude are told apart.
        assert_ne!(selection("a", Some("b")), selection("b", Some("a")));
        assert_eq!(selection("a", None).as_str().len(), 8);
    }
}

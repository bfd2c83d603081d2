//! Every instance of a fleet copies the same topics, the same way.
//!
//! A lane copies the partitions of the topics its owner selects
//! (`--include`, `--exclude`), and the fleet's group moves lanes between
//! instances. An instance started with another selection would, while it
//! owns a lane, leave out that lane's partitions of topics the others copy
//! (a standby missing them when it is failed over to), or copy topics the
//! others leave out. Nothing would say so. The same holds for which groups
//! are synced (`--groups.sync`, run by the owner of lane 0). (Options a
//! runbook adds for one restart, `--start.over`, `--on.source.gap skip`,
//! `--target.allow.nonempty`, are not compared: a lane whose owner lacks
//! them stops the partition by name, never silently.)
//!
//! So every member of the fleet's group carries a fingerprint of these
//! options (its "selection") in its client id (see
//! [`super::member_id::fleet_client_id`]),
//! which the group's description shows. A start is refused while the group
//! has a member with another fingerprint. Instances that got in anyway
//! (started at once, or while the group could not be described) are found
//! by a watch that describes the group every refresh interval: the
//! instances whose selection is not the fleet's end their run, the fleet's
//! being the one most members have (on a tie, the lowest fingerprint), so
//! every instance reaches the same verdict and the fleet keeps one
//! selection. Members without a fingerprint (another tool, an eosmirror
//! before it) are not judged.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::clusters::Cluster;
use crate::failpoints::{self, fault_armed};
use crate::groups::admin::GroupAdmin;
use crate::groups::GroupMembership;
use crate::replication::layout::fnv1a;
use crate::replication::member_id::{
    describe_member, instance_of_client_id, selection_of_client_id,
};
use crate::shutdown::Shutdown;

/// What every instance of a fleet must share: the options that decide
/// what is copied and synced and how a lane meets its partitions'
/// troubles, with their fingerprint (8 hex digits of FNV-1a over the
/// options as given to it, patterns as compiled: the same on every
/// machine; pinned by a test).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    fingerprint: String,
    /// The options set, as a command line shows them (for messages).
    described: String,
}

impl Selection {
    /// The selection of `options` (name, value if set).
    pub fn of(options: &[(&str, Option<&str>)]) -> Selection {
        let mut text = String::new();
        let mut described = Vec::new();
        for (name, value) in options {
            if let Some(value) = value {
                text.push_str(&format!("{name}\0{value}\0"));
                described.push(format!("{name} '{value}'"));
            }
        }
        Selection {
            fingerprint: format!("{:08x}", fnv1a(text.as_bytes()) as u32),
            described: described.join(" "),
        }
    }

    /// The fingerprint, as member client ids carry it.
    pub fn as_str(&self) -> &str {
        &self.fingerprint
    }
}

/// Past a member's session timeout, how long the coordinator may take to
/// remove it.
const SESSION_SLACK: Duration = Duration::from_secs(2);

/// This instance may not copy in the fleet: its group has members that
/// copy or sync something else.
#[derive(Debug, thiserror::Error)]
#[error("the fleet's group {group} on the target has members started with other --include/--exclude/--groups.sync than this instance ({own}, fingerprint {own_fingerprint}): {others}. Every instance of a fleet must share them: lanes move between instances, and while a lane is with an instance that leaves some of its topics out, nothing copies them (and groups are synced by whichever instance owns lane 0). {what_now} Start every instance with the same options; to change them, stop every instance, then start them all with the new ones")]
pub struct SelectionDiffers {
    pub group: String,
    /// This instance's options, as the user can compare them.
    pub own: String,
    pub own_fingerprint: String,
    /// The other members, `instance-<id>@<host> (fingerprint <hex>)`.
    pub others: String,
    /// Why this instance is the one that stops.
    pub what_now: &'static str,
}

/// What this instance selects and which group to compare it with.
pub struct SelectionCheck {
    target: Cluster,
    group: String,
    /// This process's instance id, as its member's client id names it.
    instance: u64,
    /// How long the group keeps a member killed without leaving.
    session_timeout: Duration,
    own: Selection,
}

/// Whom a description of the fleet's group judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Judging {
    /// An instance about to join: any other selection refuses it.
    Newcomer,
    /// A member: only a selection other than the fleet's ends it.
    Member,
}

impl SelectionCheck {
    /// The check of the fleet's `group` (whose members' sessions last
    /// `session_timeout`) on `target` for this process (`instance`) and
    /// its `selection`.
    pub fn new(
        target: &Cluster,
        group: &str,
        session_timeout: Duration,
        instance: u64,
        selection: &Selection,
    ) -> SelectionCheck {
        SelectionCheck {
            target: target.clone(),
            group: group.to_string(),
            instance,
            session_timeout,
            own: selection.clone(),
        }
    }

    /// The start's check (blocking): refuses while the group has a member
    /// with another selection. A group that cannot be described (a
    /// coordinator still loading its offsets after a broker restart, past
    /// the retries) is logged and the start goes on, judged by the watch
    /// once in: refusing there would fail every start after a target
    /// restart. (A newcomer let in so, alone against one member, wins a tie
    /// with the lower fingerprint: a narrow window, logged.)
    pub fn before_joining(&self) -> Result<(), SelectionDiffers> {
        tracing::info!(group = %self.group, fingerprint = %self.own.fingerprint, selection = %self.own.described, "this instance's options that every member of the fleet must share");
        if fault_armed(failpoints::FLEET_SELECTION_UNSEEN) {
            tracing::warn!(
                "fault point {}: the fleet's group is not checked before joining",
                failpoints::FLEET_SELECTION_UNSEEN
            );
            return Ok(());
        }
        // A member killed without leaving (this instance's predecessor,
        // restarted with new options) stays for its session timeout: only
        // a member still there after it refuses the start.
        let deadline = Instant::now() + self.session_timeout + SESSION_SLACK;
        let mut told_waiting = false;
        loop {
            let verdict = match self.target.groups().membership(&self.group) {
                Ok(membership) => self.judge(&membership, Judging::Newcomer),
                Err(e) => {
                    tracing::warn!(group = %self.group, "could not compare this instance's shared options with the fleet's members before joining (judged again once joined): {e}");
                    return Ok(());
                }
            };
            match verdict {
                Err(differs) if Instant::now() < deadline => {
                    if !told_waiting {
                        tracing::info!(group = %self.group, others = %differs.others, "members with other shared options; waiting out the session timeout of a member killed without leaving ({:?} at most)", deadline - Instant::now());
                        told_waiting = true;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
                verdict => return verdict,
            }
        }
    }

    /// Judges this instance by the members `membership` describes. A member
    /// is judged only once the description holds it (before its join
    /// lands, it would count the others without itself).
    fn judge(
        &self,
        membership: &GroupMembership,
        judging: Judging,
    ) -> Result<(), SelectionDiffers> {
        let in_group = membership
            .assignments
            .iter()
            .any(|m| instance_of_client_id(&m.client_id) == Some(self.instance));
        if judging == Judging::Member && !in_group {
            return Ok(());
        }
        let mut by_selection: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for member in &membership.assignments {
            if let Some(selection) = selection_of_client_id(&member.client_id) {
                by_selection
                    .entry(selection)
                    .or_default()
                    .push(describe_member(&member.client_id, &member.host));
            }
        }
        let others: Vec<String> = by_selection
            .iter()
            .filter(|(selection, _)| **selection != self.own.fingerprint)
            .flat_map(|(selection, members)| {
                members
                    .iter()
                    .map(move |m| format!("{m} (fingerprint {selection})"))
            })
            .collect();
        if others.is_empty() {
            return Ok(());
        }
        let what_now = match judging {
            Judging::Newcomer => "This instance does not join.",
            Judging::Member => {
                // Most members first, then the lowest fingerprint: every
                // member computes the same.
                let fleets = by_selection
                    .iter()
                    .max_by(|(a, am), (b, bm)| am.len().cmp(&bm.len()).then(b.cmp(a)))
                    .map(|(selection, _)| *selection);
                if fleets == Some(self.own.fingerprint.as_str()) {
                    return Ok(());
                }
                "This instance is the one that leaves (the fleet's selection is the one most members have; on a tie, the lowest fingerprint)."
            }
        };
        Err(SelectionDiffers {
            group: self.group.clone(),
            own: self.own.described.clone(),
            own_fingerprint: self.own.fingerprint.clone(),
            others: others.join(", "),
            what_now,
        })
    }
}

/// Longest wait between describes while they fail.
const FAILING_INTERVAL_MAX: Duration = Duration::from_secs(30);

/// Describes the fleet's group every `interval` (one request, one admin
/// client while they succeed) and sends a verdict that this instance must
/// leave, then ends. Runs beside the supervisor's loop, which it never
/// holds up; a describe that fails is logged when it starts failing and
/// when it recovers.
///
/// A describe that fails (the target away) takes its admin client with it,
/// and the next one gets a new client: librdkafka keeps a timed-out
/// coordinator request queued on its client, and when the coordinator
/// answers again, frees it twice and aborts the process (the assertion
/// `eonce->refcnt > 0` in `rd_kafka_enq_once_del_source_return`, librdkafka
/// PR #5397; met in chaos runs whose target broker took minutes to
/// restart). A client destroyed first drops the request cleanly. While
/// describes fail, the wait doubles up to [`FAILING_INTERVAL_MAX`].
pub async fn watch(
    check: SelectionCheck,
    interval: Duration,
    shutdown: Shutdown,
    differs: mpsc::Sender<SelectionDiffers>,
) {
    let check = Arc::new(check);
    let mut admin: Option<GroupAdmin> = None;
    let mut failing = false;
    let mut wait = interval;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.wait() => return,
        }
        let asked = Arc::clone(&check);
        let reused = admin.take();
        let (kept, described) = tokio::task::spawn_blocking(move || {
            let target = &asked.target;
            let admin = match reused {
                Some(admin) => admin,
                None => {
                    match GroupAdmin::new(target.name, &target.connection, target.groups().timeout)
                    {
                        Ok(admin) => admin,
                        Err(e) => return (None, Err(e)),
                    }
                }
            };
            match admin.describe_one(&asked.group) {
                Ok(membership) => (Some(admin), Ok(membership)),
                // Dropped here, on a blocking thread (a client's destruction
                // waits for its threads).
                Err(e) => (None, Err(e)),
            }
        })
        .await
        .expect("selection check panicked");
        admin = kept;
        match described {
            Ok(membership) => {
                if failing {
                    tracing::info!(group = %check.group, "the fleet's shared options are compared again");
                    failing = false;
                }
                wait = interval;
                if let Err(verdict) = check.judge(&membership, Judging::Member) {
                    let _ = differs.send(verdict).await;
                    return;
                }
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(group = %check.group, "could not compare this instance's shared options with the fleet's other members (asked again, less often while it fails: from {interval:?} up to every {FAILING_INTERVAL_MAX:?}): {e}");
                    failing = true;
                }
                wait = (wait * 2).min(FAILING_INTERVAL_MAX.max(interval));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groups::MemberAssignment;
    use crate::replication::member_id::fleet_client_id;
    use crate::topics::filter::TopicFilter;

    /// The selection of a run that sets only these topic patterns.
    fn selection(include: &str, exclude: Option<&str>) -> Selection {
        let filter = TopicFilter::new(include, exclude).unwrap();
        let (include, exclude) = filter.patterns();
        Selection::of(&[("--include", Some(include)), ("--exclude", exclude)])
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
        // The other shared options count; unset ones do not.
        let with =
            |name, value| Selection::of(&[("--include", Some("^(?:orders)$")), (name, value)]);
        assert_eq!(with("--groups.sync", None), selection("orders", None));
        assert_ne!(with("--groups.sync", Some("g")), selection("orders", None));
        // The same value under two options is told apart.
        assert_ne!(
            with("--groups.sync", Some("a")),
            with("--exclude", Some("a"))
        );
        assert_eq!(
            with("--groups.sync", Some("g")).described,
            "--include '^(?:orders)$' --groups.sync 'g'"
        );
        // Pinned: a change breaks a rolling upgrade of every fleet.
        assert_eq!(selection("orders.*", None).as_str(), "169270b8");
    }

    fn check(include: &str) -> SelectionCheck {
        SelectionCheck {
            target: Cluster {
                name: "target",
                connection: Default::default(),
            },
            group: "eosmirror.source".into(),
            instance: 1,
            session_timeout: Duration::ZERO,
            own: selection(include, None),
        }
    }

    /// A group of members with these selections (instance ids 1, 2, ...).
    fn group(includes: &[&str]) -> GroupMembership {
        let assignments = includes
            .iter()
            .zip(1..)
            .map(|(include, instance)| MemberAssignment {
                client_id: fleet_client_id(None, selection(include, None).as_str(), instance),
                host: "/127.0.0.1".into(),
                partitions: Vec::new(),
            })
            .collect();
        GroupMembership {
            state: "Stable".into(),
            members: Vec::new(),
            assignments,
        }
    }

    #[test]
    fn a_newcomer_is_refused_by_any_other_selection() {
        let newcomer = check("a|b");
        assert!(newcomer
            .judge(&group(&["a|b", "a|b"]), Judging::Newcomer)
            .is_ok());
        let refused = newcomer
            .judge(&group(&["a|b", "a"]), Judging::Newcomer)
            .unwrap_err();
        assert!(
            refused
                .others
                .starts_with("instance-0000000000000002@/127.0.0.1 (fingerprint "),
            "{refused}"
        );
        assert!(refused.to_string().contains("This instance does not join."));
    }

    #[test]
    fn among_members_only_a_selection_other_than_the_fleets_leaves() {
        // Two against one: the one leaves, the two stay.
        assert!(check("a")
            .judge(&group(&["a", "a", "b"]), Judging::Member)
            .is_ok());
        assert!(check("b")
            .judge(&group(&["a", "a", "b"]), Judging::Member)
            .is_err());
        // A tie: the lowest fingerprint stays, whichever member judges.
        let (low, high) = {
            let (a, b) = (selection("a", None), selection("b", None));
            if a.fingerprint < b.fingerprint {
                ("a", "b")
            } else {
                ("b", "a")
            }
        };
        assert!(check(low)
            .judge(&group(&["a", "b"]), Judging::Member)
            .is_ok());
        assert!(check(high)
            .judge(&group(&["a", "b"]), Judging::Member)
            .is_err());
        // Before its own join lands, a member judges nothing (it would
        // count the others without itself); a newcomer is refused.
        let mut joining = group(&["a"]);
        joining.assignments[0].client_id = fleet_client_id(None, selection("a", None).as_str(), 7);
        assert!(check("b").judge(&joining, Judging::Member).is_ok());
        assert!(check("b").judge(&joining, Judging::Newcomer).is_err());
        // Members without a fingerprint are not judged.
        let mut other_tool = group(&["a"]);
        other_tool.assignments[0].client_id = "rdkafka".into();
        assert!(check("b").judge(&other_tool, Judging::Member).is_ok());
    }
}

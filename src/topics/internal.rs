//! Checks of eosmirror's internal topics that already exist on the target.
//!
//! eosmirror creates its internal topics with settings that keep what it
//! needs: the progress topic deletes by time (`--progress.retention.ms`),
//! the position and groups topics are compacted, so an idle partition's
//! position or an idle group's offsets never age out. A topic created by
//! hand (or by another tool, or altered later) may not: `cleanup.policy=delete`
//! on the position topic loses positions, a shorter `retention.ms` on the
//! progress topic loses translation history, unclean leader election loses
//! committed records, and `min.insync.replicas` above the replication
//! factor makes every transaction fail. These are refused, naming the
//! setting, the value found, the value needed and the command that fixes
//! it. A replication factor of 1 on a cluster with more brokers is only
//! warned about: it is a durability choice, not a setting that loses data
//! by itself.
//!
//! The checks run whenever [`super::target::prepare_target`] runs: at start
//! and at every topic refresh. That costs one DescribeConfigs request for at
//! most three topics, and it also catches a topic altered or recreated by
//! hand while eosmirror runs, which a start-only check would trust until the
//! next restart. Warnings are returned to the caller, which logs each one
//! once per process.
//!
//! [`check`] is the pure decision; [`check_existing`] gathers what it needs
//! from the target.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rdkafka::config::ClientConfig;

/// The topic settings the checks read. DescribeConfigs reports each one's
/// effective value, whether set on the topic or inherited from the broker.
pub(crate) const CHECKED_SETTINGS: &[&str] = &[
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "unclean.leader.election.enable",
    "min.insync.replicas",
];

/// Which internal topic a topic is; each keeps something different.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InternalKind {
    /// `__eosmirror.progress.<alias>`: offset-translation history.
    Progress,
    /// `__eosmirror.position.<alias>`: the latest position per source partition.
    Position,
    /// `__eosmirror.groups.<alias>`: recorded group offsets for failover.
    Groups,
    /// `__eosmirror.status.<alias>`: what running instances report for
    /// `eosmirror status`; advisory, so its settings are not checked.
    Status,
}

impl InternalKind {
    /// The `cleanup.policy` the topic needs.
    fn cleanup_policy(self) -> &'static str {
        match self {
            InternalKind::Progress => "delete",
            InternalKind::Position | InternalKind::Groups | InternalKind::Status => "compact",
        }
    }

    /// Why it needs that policy, for the refusal.
    fn cleanup_reason(self) -> &'static str {
        match self {
            InternalKind::Progress => {
                "the offset-translation history must keep every record until --progress.retention.ms; compaction would keep only the latest record of each source partition"
            }
            InternalKind::Position => {
                "compaction keeps each source partition's latest position however long the partition stays idle; deletion by retention would lose it, and eosmirror would no longer know how far that partition was copied"
            }
            InternalKind::Groups => {
                "compaction keeps each group's latest recorded offsets however long the group stays idle; deletion by retention would lose what failover applies"
            }
            InternalKind::Status => {
                "compaction keeps each lane's latest status; deletion by retention would only empty `eosmirror status` until the next report"
            }
        }
    }
}

/// How Kafka's command-line tools reach the target: the connection part of
/// the commands named in fixes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ToolConnection {
    bootstrap: String,
    /// The target's properties file, when the target needs security
    /// settings: it is a Java properties file, exactly what the tools'
    /// `--command-config` reads.
    command_config: Option<PathBuf>,
}

impl ToolConnection {
    /// From the target's client settings and the file they came from.
    pub fn new(target: &ClientConfig, file: &Path) -> ToolConnection {
        let secured = target
            .get("security.protocol")
            .is_some_and(|p| !p.eq_ignore_ascii_case("plaintext"));
        ToolConnection {
            bootstrap: target.get("bootstrap.servers").unwrap_or_default().into(),
            command_config: secured.then(|| file.to_path_buf()),
        }
    }
}

impl fmt::Display for ToolConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--bootstrap-server {}", self.bootstrap)?;
        if let Some(file) = &self.command_config {
            write!(f, " --command-config {}", file.display())?;
        }
        Ok(())
    }
}

/// An existing internal topic as the target reports it.
#[derive(Debug, Clone)]
pub struct ObservedTopic<'a> {
    pub kind: InternalKind,
    pub name: &'a str,
    pub partitions: i32,
    /// Fewest replicas of any of its partitions.
    pub replication_factor: i32,
    /// Effective values of [`CHECKED_SETTINGS`]; a missing one is not judged.
    pub settings: &'a BTreeMap<String, String>,
}

/// What the checks compare against.
#[derive(Debug, Clone)]
pub struct Needs<'a> {
    /// `--progress.retention.ms`.
    pub progress_retention: Duration,
    /// Brokers the target's metadata lists.
    pub target_brokers: usize,
    pub tools: &'a ToolConnection,
}

/// What is wrong with one internal topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Issue {
    CleanupPolicy {
        found: String,
    },
    RetentionTooShort {
        found_ms: i64,
        needed_ms: u128,
    },
    /// A warning only: a size limit deletes the history before its time
    /// (translation then refuses, by name, what it no longer holds).
    RetentionBytes {
        found_bytes: i64,
    },
    /// The groups topic is written and read at partition 0 only.
    GroupsPartitions {
        found: i32,
    },
    UncleanLeaderElection,
    MinInsyncAboveReplicas {
        min_insync: i32,
        replication_factor: i32,
    },
    /// A warning only: one broker's disk holds the topic.
    SingleReplica {
        brokers: usize,
    },
}

/// One finding about one internal topic, with its fix; displays as one line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Finding {
    pub topic: String,
    pub kind: InternalKind,
    pub issue: Issue,
    /// The rendered [`ToolConnection`] for the fix command.
    tools: String,
}

impl Finding {
    /// Whether the run must stop (otherwise it is a warning).
    pub fn refuses(&self) -> bool {
        !matches!(
            self.issue,
            Issue::SingleReplica { .. } | Issue::RetentionBytes { .. }
        )
    }

    /// `kafka-configs.sh ... --add-config key=value` for this topic.
    fn set(&self, setting: &str) -> String {
        format!(
            "`kafka-configs.sh {} --alter --entity-type topics --entity-name {} --add-config {setting}`",
            self.tools, self.topic
        )
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let topic = &self.topic;
        match &self.issue {
            Issue::CleanupPolicy { found } => {
                let needed = self.kind.cleanup_policy();
                write!(
                    f,
                    "{topic} has cleanup.policy={found}, but eosmirror needs cleanup.policy={needed}: {}. Fix: {}",
                    self.kind.cleanup_reason(),
                    self.set(&format!("cleanup.policy={needed}"))
                )
            }
            Issue::RetentionTooShort {
                found_ms,
                needed_ms,
            } => write!(
                f,
                "{topic} has retention.ms={found_ms}, shorter than --progress.retention.ms={needed_ms}: the offset-translation history would be deleted sooner than configured, and groups lagging further behind could not be translated exactly. Fix: {}, or run with --progress.retention.ms {found_ms} to accept the shorter history",
                self.set(&format!("retention.ms={needed_ms}"))
            ),
            Issue::RetentionBytes { found_bytes } => write!(
                f,
                "{topic} has retention.bytes={found_bytes}: once a partition holds more, its oldest offset-translation history is deleted, whatever --progress.retention.ms says, and groups lagging behind it cannot be translated exactly (translate, cutover and failover then refuse them by name). Fix: {}",
                self.set("retention.bytes=-1")
            ),
            Issue::GroupsPartitions { found } => write!(
                f,
                "{topic} has {found} partitions, but eosmirror needs 1: it records and reads group offsets at partition 0 only. Fix: `kafka-topics.sh {} --delete --topic {topic}` and start eosmirror again, which recreates it with 1 partition (`run --groups.sync` records the offsets again at its next round)",
                self.tools
            ),
            Issue::UncleanLeaderElection => write!(
                f,
                "{topic} has unclean.leader.election.enable=true, but eosmirror needs false: an out-of-sync replica could become leader and drop records eosmirror committed there. Fix: {}",
                self.set("unclean.leader.election.enable=false")
            ),
            Issue::MinInsyncAboveReplicas {
                min_insync,
                replication_factor,
            } => write!(
                f,
                "{topic} has min.insync.replicas={min_insync}, but only {replication_factor} replica(s) per partition: every write (acks=all) would fail with NOT_ENOUGH_REPLICAS. Fix: {}, or add replicas with kafka-reassign-partitions.sh",
                self.set(&format!("min.insync.replicas={replication_factor}"))
            ),
            Issue::SingleReplica { brokers } => write!(
                f,
                "{topic} has replication factor 1 although the target has {brokers} brokers: losing that one broker's disk loses what eosmirror keeps there. To add replicas: `kafka-reassign-partitions.sh {} --reassignment-json-file replicas.json --execute` (replicas.json listing several brokers for each partition); --target.replication.factor sets it for topics eosmirror creates",
                self.tools
            ),
        }
    }
}

/// Everything wrong with one existing internal topic: refusals and warnings
/// (see [`Finding::refuses`]). The partition counts of the progress and
/// position topics are the lane layout, checked by the caller
/// ([`TopicError::Layout`]).
pub fn check(topic: &ObservedTopic<'_>, needs: &Needs<'_>) -> Vec<Finding> {
    let mut issues = Vec::new();
    let setting = |key: &str| topic.settings.get(key).map(|v| v.trim());

    if let Some(found) = setting("cleanup.policy") {
        // A list such as "compact,delete" does both, which is wrong for
        // every internal topic.
        let mut policies: Vec<&str> = found.split(',').map(str::trim).collect();
        policies.sort_unstable();
        policies.dedup();
        if policies != [topic.kind.cleanup_policy()] {
            issues.push(Issue::CleanupPolicy {
                found: found.to_string(),
            });
        }
    }
    if topic.kind == InternalKind::Progress {
        let needed_ms = needs.progress_retention.as_millis();
        // Negative (-1) means no time limit.
        if let Some(found_ms) = setting("retention.ms").and_then(|v| v.parse::<i64>().ok()) {
            if u128::try_from(found_ms).is_ok_and(|found| found < needed_ms) {
                issues.push(Issue::RetentionTooShort {
                    found_ms,
                    needed_ms,
                });
            }
        }
        // Negative (-1) means no size limit.
        if let Some(found_bytes) = setting("retention.bytes").and_then(|v| v.parse::<i64>().ok()) {
            if found_bytes >= 0 {
                issues.push(Issue::RetentionBytes { found_bytes });
            }
        }
    }
    if topic.kind == InternalKind::Groups && topic.partitions != 1 {
        issues.push(Issue::GroupsPartitions {
            found: topic.partitions,
        });
    }
    if setting("unclean.leader.election.enable").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        issues.push(Issue::UncleanLeaderElection);
    }
    if let Some(min_insync) = setting("min.insync.replicas").and_then(|v| v.parse::<i32>().ok()) {
        if min_insync > topic.replication_factor {
            issues.push(Issue::MinInsyncAboveReplicas {
                min_insync,
                replication_factor: topic.replication_factor,
            });
        }
    }
    if topic.replication_factor == 1 && needs.target_brokers > 1 {
        issues.push(Issue::SingleReplica {
            brokers: needs.target_brokers,
        });
    }
    issues
        .into_iter()
        .map(|issue| Finding {
            topic: topic.name.to_string(),
            kind: topic.kind,
            issue,
            tools: needs.tools.to_string(),
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The connection part of fix commands for [`tools`]; shared with the
    /// target preparation's tests.
    pub(in crate::topics) const TOOLS: &str = "--bootstrap-server t1:9092,t2:9092";

    pub(in crate::topics) fn tools() -> ToolConnection {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", "t1:9092,t2:9092");
        ToolConnection::new(&config, Path::new("config/producer.properties"))
    }

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// What eosmirror itself creates, on a one-broker cluster.
    fn good(kind: InternalKind) -> BTreeMap<String, String> {
        settings(&[
            ("cleanup.policy", kind.cleanup_policy()),
            ("retention.ms", "604800000"),
            ("retention.bytes", "-1"),
            ("unclean.leader.election.enable", "false"),
            ("min.insync.replicas", "1"),
        ])
    }

    fn run(
        kind: InternalKind,
        settings: &BTreeMap<String, String>,
        partitions: i32,
        replication_factor: i32,
        brokers: usize,
    ) -> Vec<Finding> {
        let tools = tools();
        let name = match kind {
            InternalKind::Progress => "__eosmirror.progress.a",
            InternalKind::Position => "__eosmirror.position.a",
            InternalKind::Groups => "__eosmirror.groups.a",
            InternalKind::Status => "__eosmirror.status.a",
        };
        check(
            &ObservedTopic {
                kind,
                name,
                partitions,
                replication_factor,
                settings,
            },
            &Needs {
                progress_retention: Duration::from_millis(604_800_000),
                target_brokers: brokers,
                tools: &tools,
            },
        )
    }

    fn only(findings: Vec<Finding>) -> Finding {
        assert_eq!(findings.len(), 1, "{findings:#?}");
        findings.into_iter().next().unwrap()
    }

    #[test]
    fn settings_eosmirror_creates_pass() {
        for kind in [
            InternalKind::Progress,
            InternalKind::Position,
            InternalKind::Groups,
        ] {
            let partitions = if kind == InternalKind::Groups { 1 } else { 4 };
            assert_eq!(run(kind, &good(kind), partitions, 1, 1), vec![]);
            assert_eq!(run(kind, &good(kind), partitions, 3, 3), vec![]);
        }
    }

    #[test]
    fn a_size_limit_on_the_history_is_a_warning_with_the_fix() {
        let mut s = good(InternalKind::Progress);
        s.insert("retention.bytes".into(), "1048576".into());
        let finding = only(run(InternalKind::Progress, &s, 4, 1, 1));
        assert!(!finding.refuses());
        assert_eq!(
            finding.issue,
            Issue::RetentionBytes {
                found_bytes: 1_048_576
            }
        );
        let message = finding.to_string();
        assert!(
            message.starts_with("__eosmirror.progress.a has retention.bytes=1048576: "),
            "{message}"
        );
        assert!(
            message.ends_with(&format!(
                "Fix: `kafka-configs.sh {TOOLS} --alter --entity-type topics --entity-name __eosmirror.progress.a --add-config retention.bytes=-1`"
            )),
            "{message}"
        );
        // The other internal topics keep one record per key: a size limit
        // there is compaction's business.
        let mut s = good(InternalKind::Position);
        s.insert("retention.bytes".into(), "1048576".into());
        assert_eq!(run(InternalKind::Position, &s, 4, 1, 1), vec![]);
    }

    #[test]
    fn position_topic_with_delete_is_refused_with_the_fix() {
        let mut s = good(InternalKind::Position);
        s.insert("cleanup.policy".into(), "delete".into());
        let finding = only(run(InternalKind::Position, &s, 4, 1, 1));
        assert!(finding.refuses());
        assert_eq!(
            finding.issue,
            Issue::CleanupPolicy {
                found: "delete".into()
            }
        );
        let message = finding.to_string();
        assert!(
            message.starts_with(
                "__eosmirror.position.a has cleanup.policy=delete, but eosmirror needs cleanup.policy=compact: "
            ),
            "{message}"
        );
        assert!(
            message.ends_with(&format!(
                "Fix: `kafka-configs.sh {TOOLS} --alter --entity-type topics --entity-name __eosmirror.position.a --add-config cleanup.policy=compact`"
            )),
            "{message}"
        );
    }

    #[test]
    fn groups_topic_needs_compaction_and_progress_topic_deletion() {
        let mut s = good(InternalKind::Groups);
        s.insert("cleanup.policy".into(), "compact,delete".into());
        let finding = only(run(InternalKind::Groups, &s, 1, 1, 1));
        assert!(finding.refuses());
        assert!(finding
            .to_string()
            .contains("--entity-name __eosmirror.groups.a --add-config cleanup.policy=compact`"));

        let mut s = good(InternalKind::Progress);
        s.insert("cleanup.policy".into(), "compact".into());
        let message = only(run(InternalKind::Progress, &s, 4, 1, 1)).to_string();
        assert!(
            message.starts_with("__eosmirror.progress.a has cleanup.policy=compact, but eosmirror needs cleanup.policy=delete"),
            "{message}"
        );
        assert!(
            message.contains(
                "--entity-name __eosmirror.progress.a --add-config cleanup.policy=delete`"
            ),
            "{message}"
        );

        // The order of a list does not matter, nor do repeats.
        let mut s = good(InternalKind::Position);
        s.insert("cleanup.policy".into(), "compact, compact".into());
        assert_eq!(run(InternalKind::Position, &s, 4, 1, 1), vec![]);
    }

    #[test]
    fn shorter_progress_retention_is_refused_and_infinite_is_fine() {
        let mut s = good(InternalKind::Progress);
        s.insert("retention.ms".into(), "3600000".into());
        let finding = only(run(InternalKind::Progress, &s, 4, 1, 1));
        assert!(finding.refuses());
        assert_eq!(
            finding.to_string(),
            format!(
                "__eosmirror.progress.a has retention.ms=3600000, shorter than --progress.retention.ms=604800000: the offset-translation history would be deleted sooner than configured, and groups lagging further behind could not be translated exactly. Fix: `kafka-configs.sh {TOOLS} --alter --entity-type topics --entity-name __eosmirror.progress.a --add-config retention.ms=604800000`, or run with --progress.retention.ms 3600000 to accept the shorter history"
            )
        );

        for fine in ["-1", "604800000", "704800000"] {
            s.insert("retention.ms".into(), fine.into());
            assert_eq!(run(InternalKind::Progress, &s, 4, 1, 1), vec![], "{fine}");
        }
        // Retention does not apply to compacted topics.
        let mut s = good(InternalKind::Position);
        s.insert("retention.ms".into(), "1000".into());
        assert_eq!(run(InternalKind::Position, &s, 4, 1, 1), vec![]);
    }

    #[test]
    fn groups_topic_with_more_partitions_is_refused() {
        let finding = only(run(
            InternalKind::Groups,
            &good(InternalKind::Groups),
            3,
            1,
            1,
        ));
        assert!(finding.refuses());
        assert_eq!(
            finding.to_string(),
            format!(
                "__eosmirror.groups.a has 3 partitions, but eosmirror needs 1: it records and reads group offsets at partition 0 only. Fix: `kafka-topics.sh {TOOLS} --delete --topic __eosmirror.groups.a` and start eosmirror again, which recreates it with 1 partition (`run --groups.sync` records the offsets again at its next round)"
            )
        );
        // Progress and position partition counts are the lane layout,
        // checked elsewhere.
        let progress = good(InternalKind::Progress);
        assert_eq!(run(InternalKind::Progress, &progress, 7, 1, 1), vec![]);
    }

    #[test]
    fn unclean_leader_election_is_refused() {
        let mut s = good(InternalKind::Position);
        s.insert("unclean.leader.election.enable".into(), "TRUE".into());
        let finding = only(run(InternalKind::Position, &s, 4, 1, 1));
        assert!(finding.refuses());
        assert_eq!(finding.issue, Issue::UncleanLeaderElection);
        let message = finding.to_string();
        assert!(
            message.starts_with("__eosmirror.position.a has unclean.leader.election.enable=true, but eosmirror needs false"),
            "{message}"
        );
        assert!(
            message.ends_with(&format!("Fix: `kafka-configs.sh {TOOLS} --alter --entity-type topics --entity-name __eosmirror.position.a --add-config unclean.leader.election.enable=false`")),
            "{message}"
        );
    }

    #[test]
    fn min_insync_above_the_replication_factor_is_refused() {
        let mut s = good(InternalKind::Progress);
        s.insert("min.insync.replicas".into(), "3".into());
        let finding = only(run(InternalKind::Progress, &s, 4, 2, 2));
        assert!(finding.refuses());
        assert_eq!(
            finding.to_string(),
            format!(
                "__eosmirror.progress.a has min.insync.replicas=3, but only 2 replica(s) per partition: every write (acks=all) would fail with NOT_ENOUGH_REPLICAS. Fix: `kafka-configs.sh {TOOLS} --alter --entity-type topics --entity-name __eosmirror.progress.a --add-config min.insync.replicas=2`, or add replicas with kafka-reassign-partitions.sh"
            )
        );
        // Equal is strict but writable.
        s.insert("min.insync.replicas".into(), "2".into());
        assert_eq!(run(InternalKind::Progress, &s, 4, 2, 2), vec![]);
    }

    #[test]
    fn a_single_replica_on_several_brokers_is_only_a_warning() {
        let finding = only(run(
            InternalKind::Position,
            &good(InternalKind::Position),
            4,
            1,
            3,
        ));
        assert!(!finding.refuses());
        assert_eq!(
            finding.to_string(),
            format!(
                "__eosmirror.position.a has replication factor 1 although the target has 3 brokers: losing that one broker's disk loses what eosmirror keeps there. To add replicas: `kafka-reassign-partitions.sh {TOOLS} --reassignment-json-file replicas.json --execute` (replicas.json listing several brokers for each partition); --target.replication.factor sets it for topics eosmirror creates"
            )
        );
        // One broker: nothing better is possible.
        let position = good(InternalKind::Position);
        assert_eq!(run(InternalKind::Position, &position, 4, 1, 1), vec![]);
    }

    #[test]
    fn every_problem_of_a_topic_is_named_at_once() {
        let s = settings(&[
            ("cleanup.policy", "delete"),
            ("unclean.leader.election.enable", "true"),
            ("min.insync.replicas", "2"),
        ]);
        let findings = run(InternalKind::Groups, &s, 2, 1, 3);
        let issues: Vec<_> = findings.iter().map(|f| f.issue.clone()).collect();
        assert_eq!(
            issues,
            vec![
                Issue::CleanupPolicy {
                    found: "delete".into()
                },
                Issue::GroupsPartitions { found: 2 },
                Issue::UncleanLeaderElection,
                Issue::MinInsyncAboveReplicas {
                    min_insync: 2,
                    replication_factor: 1
                },
                Issue::SingleReplica { brokers: 3 },
            ]
        );
    }

    #[test]
    fn settings_the_target_does_not_report_are_not_judged() {
        let empty = BTreeMap::new();
        assert_eq!(run(InternalKind::Progress, &empty, 4, 1, 1), vec![]);
    }

    #[test]
    fn fix_commands_carry_the_target_properties_when_it_is_secured() {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", "kafka.example:9093")
            .set("security.protocol", "SASL_SSL")
            .set("sasl.password", "not-in-any-message");
        let tools = ToolConnection::new(&config, Path::new("config/producer.properties"));
        assert_eq!(
            tools.to_string(),
            "--bootstrap-server kafka.example:9093 --command-config config/producer.properties"
        );
        config.set("security.protocol", "PLAINTEXT");
        let tools = ToolConnection::new(&config, Path::new("config/producer.properties"));
        assert_eq!(tools.to_string(), "--bootstrap-server kafka.example:9093");
    }
}

//! Making the target ready for the source topics: same names, at least the
//! same partition counts, the source's relevant topic settings, and
//! eosmirror's internal topics.
//!
//! Everything is checked before anything is created, so bad input (a target
//! topic with fewer partitions than its source, an internal topic set up to
//! lose positions: see [`super::internal`]) leaves the target untouched.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rdkafka::admin::{
    AdminClient, AdminOptions, ConfigSource, NewPartitions, NewTopic, TopicReplication,
};
use rdkafka::client::{Client, ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode::{
    self, ClusterAuthorizationFailed, TopicAuthorizationFailed,
};

use eosmirror_state::SourcePartition;

use super::configs::{describe_topics, setting};
use super::filter::TopicFilter;
use super::internal::{self, Finding, InternalKind, Needs, ToolConnection};
use crate::failpoints::{self, fault_argument};
use crate::replication::layout::Layout;
use crate::replication::progress::InternalTopics;

/// Topic settings carried from a source topic to the target topic eosmirror
/// creates, when they are set on the source topic itself. Not carried:
/// `message.timestamp.*` (the copy keeps source timestamps: a created topic
/// is set to CreateTime, and a window that held at the source may not hold
/// later) and anything about placement or replication, which belongs to
/// the target cluster.
const COPIED_SETTINGS: &[&str] = &[
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "max.message.bytes",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "delete.retention.ms",
    "min.cleanable.dirty.ratio",
    "segment.bytes",
    "segment.ms",
    "compression.type",
];

/// A source topic to replicate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTopic {
    pub name: String,
    pub partitions: i32,
}

/// Failures preparing the target; each names the topic and the fix.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("reading metadata from the {cluster} cluster: {source}")]
    Metadata {
        cluster: &'static str,
        #[source]
        source: KafkaError,
    },
    #[error("target topic(s) have fewer partitions than their source: {}. Add partitions on the target (kafka-topics.sh --alter --partitions N) or run with --target.add.partitions; nothing was created or changed", .0.iter().map(|(t, s, d)| format!("{t} (source {s}, target {d})")).collect::<Vec<_>>().join(", "))]
    TooFewPartitions(Vec<(String, i32, i32)>),
    #[error("internal topic {topic} has {partitions} partition(s), but this run uses --lanes {lanes}: the deployment of this --source.alias was started with --lanes {partitions} (each lane writes its own partition), unless partitions were added to it by hand. Run with --lanes {partitions}. Changing the lane count of a deployment is not supported yet; nothing was created or changed")]
    Layout {
        topic: String,
        partitions: i32,
        lanes: u32,
    },
    #[error("another eosmirror instance created the internal topic {topic} with {partitions} partition(s) while this one started with --lanes {lanes}: the deployment of this --source.alias uses --lanes {partitions} (each lane writes its own partition). Run with --lanes {partitions}; this run created target topics it lacked but copied nothing")]
    LayoutRaced {
        topic: String,
        partitions: i32,
        lanes: u32,
    },
    #[error("another eosmirror instance created {topics} on the target while this one started, but the target did not list them within {waited_secs} s, so their partition counts (the lane layout) are unknown; this run copied nothing. Start it again")]
    CreatedUnlisted { topics: String, waited_secs: u64 },
    #[error("eosmirror's internal topic(s) on the target are set up to lose what eosmirror keeps there, or to refuse its writes: {}; nothing was created or changed", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    InternalTopics(Vec<Finding>),
    #[error("checking the settings of eosmirror's internal topic(s) {topics} on the target: DescribeConfigs was denied ({code}). Allow it for eosmirror's target user, e.g. `kafka-acls.sh {tools} --add --allow-principal User:<user> --operation DescribeConfigs --topic __eosmirror. --resource-pattern-type prefixed`; nothing was created or changed")]
    InternalTopicsNotDescribable {
        topics: String,
        code: RDKafkaErrorCode,
        /// The rendered tool connection, for the command.
        tools: String,
    },
    #[error("target topic(s) {} have message.timestamp.type=LogAppendTime: the target would replace every copy's timestamp with the time it was appended. Set CreateTime on each, e.g. `kafka-configs.sh {tools} --alter --entity-type topics --entity-name {} --add-config message.timestamp.type=CreateTime`; nothing more is copied into them (copies made since such a setting was changed while running carry append times)", .topics.join(", "), .topics[0])]
    LogAppendTime {
        topics: Vec<String>,
        /// The rendered tool connection, for the command.
        tools: String,
    },
    #[error("reading the settings of source topic {topic} was denied ({code}): the source user needs DescribeConfigs on it")]
    SourceSettingsDenied {
        topic: String,
        code: RDKafkaErrorCode,
    },
    #[error("{operation} for topic {topic} on the {cluster} cluster failed: {reason}")]
    Admin {
        operation: &'static str,
        topic: String,
        cluster: &'static str,
        reason: String,
    },
}

/// Options for topics eosmirror creates on the target.
#[derive(Debug, Clone)]
pub struct TargetTopicOptions {
    /// Replication factor of created topics; `-1` takes the broker default.
    pub replication_factor: i32,
    /// Add partitions to target topics that have fewer than their source.
    pub add_partitions: bool,
    /// Retention of the progress (offset-translation history) topic.
    pub progress_retention: Duration,
    /// The deployment's layout: the progress and position topics get one
    /// partition per lane.
    pub layout: Layout,
    /// How Kafka's tools reach the target, for the fixes errors name.
    pub tools: ToolConnection,
}

/// Partition count and replication factor of one topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicShape {
    pub partitions: i32,
    /// Fewest replicas of any of its partitions.
    pub replication_factor: i32,
}

/// A cluster's topics and broker count, from one metadata request.
#[derive(Debug, Clone, Default)]
pub struct ClusterMetadata {
    pub topics: BTreeMap<String, TopicShape>,
    pub brokers: usize,
}

impl ClusterMetadata {
    /// Partition count per topic, for discovery and the commands that
    /// compare the two clusters.
    pub fn partition_counts(self) -> BTreeMap<String, i32> {
        self.topics
            .into_iter()
            .map(|(name, shape)| (name, shape.partitions))
            .collect()
    }
}

/// Partition counts per topic as one cluster's metadata reports them.
/// Blocking; call from a blocking thread.
pub fn partition_counts(
    client: &ClientConfig,
    cluster: &'static str,
    timeout: Duration,
) -> Result<BTreeMap<String, i32>, TopicError> {
    Ok(cluster_metadata(client, cluster, timeout)?.partition_counts())
}

/// Topics (partitions, replication factor) and brokers as one cluster's
/// metadata reports them. Blocking; call from a blocking thread.
pub fn cluster_metadata(
    client: &ClientConfig,
    cluster: &'static str,
    timeout: Duration,
) -> Result<ClusterMetadata, TopicError> {
    let consumer: BaseConsumer = client
        .create()
        .map_err(|source| TopicError::Metadata { cluster, source })?;
    metadata_of(consumer.client(), cluster, timeout)
}

/// [`cluster_metadata`] with a client the caller keeps.
pub fn metadata_of<C: ClientContext>(
    client: &Client<C>,
    cluster: &'static str,
    timeout: Duration,
) -> Result<ClusterMetadata, TopicError> {
    let metadata = client
        .fetch_metadata(None, timeout)
        .map_err(|source| TopicError::Metadata { cluster, source })?;
    let topics = metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .map(|t| {
            let shape = TopicShape {
                partitions: t.partitions().len() as i32,
                replication_factor: t
                    .partitions()
                    .iter()
                    .map(|p| p.replicas().len() as i32)
                    .min()
                    .unwrap_or(0),
            };
            (t.name().to_string(), shape)
        })
        .collect();
    Ok(ClusterMetadata {
        topics,
        brokers: metadata.brokers().len(),
    })
}

/// The source topics the filter selects.
pub fn select(counts: &BTreeMap<String, i32>, filter: &TopicFilter) -> Vec<SourceTopic> {
    counts
        .iter()
        .filter(|(name, _)| filter.matches(name))
        .map(|(name, &partitions)| SourceTopic {
            name: name.clone(),
            partitions,
        })
        .collect()
}

/// An internal topic `run` creates when it is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalTopicSpec {
    pub name: String,
    pub kind: InternalKind,
    pub partitions: i32,
    pub settings: Vec<(&'static str, String)>,
}

/// The internal topics of a deployment as `run` creates them: the progress
/// and position topics with one partition per lane, the groups and status
/// topics with one.
pub fn internal_specs(
    internal: &InternalTopics,
    options: &TargetTopicOptions,
) -> [InternalTopicSpec; 4] {
    let lanes = options.layout.internal_partitions();
    let compacted = || {
        vec![
            ("cleanup.policy", "compact".to_string()),
            ("segment.ms", "3600000".to_string()),
            ("min.cleanable.dirty.ratio", "0.1".to_string()),
        ]
    };
    [
        InternalTopicSpec {
            name: internal.progress.clone(),
            kind: InternalKind::Progress,
            partitions: lanes,
            settings: vec![
                ("cleanup.policy", "delete".to_string()),
                (
                    "retention.ms",
                    options.progress_retention.as_millis().to_string(),
                ),
                // Not the broker's log.retention.bytes: history is kept by time.
                ("retention.bytes", "-1".to_string()),
            ],
        },
        InternalTopicSpec {
            name: internal.position.clone(),
            kind: InternalKind::Position,
            partitions: lanes,
            settings: compacted(),
        },
        InternalTopicSpec {
            name: internal.groups.clone(),
            kind: InternalKind::Groups,
            partitions: 1,
            settings: compacted(),
        },
        // Small segments, so that compaction keeps it at about one record
        // per lane for `eosmirror status` to read.
        InternalTopicSpec {
            name: internal.status.clone(),
            kind: InternalKind::Status,
            partitions: 1,
            settings: vec![
                ("cleanup.policy", "compact".to_string()),
                ("segment.ms", "600000".to_string()),
                ("min.cleanable.dirty.ratio", "0.1".to_string()),
            ],
        },
    ]
}

/// What `run` does to the target for the selected source topics, decided
/// from the two clusters' metadata alone. `run` ([`prepare_target`]) acts on
/// it and `eosmirror plan` prints it, so the preflight and the run never
/// disagree about what would be created or refused.
#[derive(Debug, Clone, Default)]
pub struct TopicDecision {
    /// Source topics without a target topic: created with the source's
    /// partition count and carried settings.
    pub missing: Vec<SourceTopic>,
    /// Target topics with at least the source's partitions: (source topic,
    /// target partitions).
    pub present: Vec<(SourceTopic, i32)>,
    /// (topic, source partitions, target partitions) where the target has
    /// fewer: refused, or extended with `--target.add.partitions`.
    pub too_few: Vec<(String, i32, i32)>,
    /// Whether `too_few` is extended rather than refused.
    pub add_partitions: bool,
    /// Internal topics that do not exist yet.
    pub internal_missing: Vec<InternalTopicSpec>,
    /// Internal topics that exist (their settings are checked by
    /// [`check_existing`]).
    pub internal_present: Vec<InternalTopicSpec>,
    /// Progress or position topics whose partition count is another lane
    /// count: (topic, partitions).
    pub layout_mismatch: Vec<(String, i32)>,
    /// The lane count of this run.
    pub lanes: u32,
}

impl TopicDecision {
    /// Every reason the decision refuses, in the order `run` reports them.
    pub fn refusals(&self) -> Vec<TopicError> {
        let mut refusals = Vec::new();
        if !self.too_few.is_empty() && !self.add_partitions {
            refusals.push(TopicError::TooFewPartitions(self.too_few.clone()));
        }
        for (topic, partitions) in &self.layout_mismatch {
            refusals.push(TopicError::Layout {
                topic: topic.clone(),
                partitions: *partitions,
                lanes: self.lanes,
            });
        }
        refusals
    }
}

/// Decides what to create, extend or refuse on the target (pure).
pub fn decide(
    topics: &[SourceTopic],
    target_metadata: &ClusterMetadata,
    internal: &InternalTopics,
    options: &TargetTopicOptions,
) -> TopicDecision {
    let partitions_on_target = |name: &str| target_metadata.topics.get(name).map(|t| t.partitions);
    let mut decision = TopicDecision {
        add_partitions: options.add_partitions,
        lanes: options.layout.lanes(),
        ..TopicDecision::default()
    };
    for topic in topics {
        match partitions_on_target(&topic.name) {
            None => decision.missing.push(topic.clone()),
            Some(n) if n < topic.partitions => {
                decision
                    .too_few
                    .push((topic.name.clone(), topic.partitions, n))
            }
            Some(n) => decision.present.push((topic.clone(), n)),
        }
    }
    for spec in internal_specs(internal, options) {
        match partitions_on_target(&spec.name) {
            None => decision.internal_missing.push(spec),
            Some(partitions) => {
                let per_lane = matches!(spec.kind, InternalKind::Progress | InternalKind::Position);
                if per_lane && partitions != spec.partitions {
                    decision
                        .layout_mismatch
                        .push((spec.name.clone(), partitions));
                }
                decision.internal_present.push(spec);
            }
        }
    }
    decision
}

/// What [`prepare_target`] did.
#[derive(Debug, Default)]
pub struct Prepared {
    /// Warnings about existing internal topics.
    pub warnings: Vec<Finding>,
    /// Partitions it created (new topics, internal ones included, and
    /// partitions added): a broker answers for them only once it has loaded
    /// them, seconds later at thousands of partitions.
    pub new_partitions: Vec<SourcePartition>,
    /// Topics another instance created or grew between the metadata this
    /// decision read and its CreateTopics or CreatePartitions: [`decide`]
    /// has to see them, with their partition counts, before anything is
    /// copied (an instance started at the same time with another `--lanes`
    /// made the internal topics; one with `--target.add.partitions` grew a
    /// topic).
    pub created_meanwhile: Vec<String>,
    /// Data topics the target refused to create or to grow: their
    /// partitions from `copyable` on have no copy to go to, while the
    /// other topics are copied on.
    pub refused: Vec<RefusedTopic>,
    /// The `max.message.bytes` of the data topics described or created
    /// with it: lanes keep their record batches within it.
    pub max_message_bytes: BTreeMap<String, usize>,
}

/// A source topic left out because its copy cannot be made ready: the
/// target refused to create it or to add partitions to it (a creation
/// policy, a quota, an ACL, a setting copied from the source it does not
/// take), or its settings, which the created copy carries, could not be
/// read on the source.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RefusedTopic {
    pub topic: String,
    /// Its partitions below this one exist on the target (0: none).
    pub copyable: i32,
    /// The source's partition count: what the target topic needs.
    pub partitions: i32,
    /// What was refused.
    pub step: RefusedStep,
    /// What the cluster answered, and to what.
    pub reason: String,
}

/// The step of making a topic's copy ready that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusedStep {
    /// Reading the source topic's settings (DescribeConfigs), which the
    /// source denied.
    ReadSettingsDenied,
    /// Reading the source topic's settings, which failed otherwise (a
    /// time-out, a broker away): likely gone at the next refresh.
    ReadSettings,
    /// Creating the target topic.
    Create,
    /// Adding partitions to the target topic.
    AddPartitions,
}

impl fmt::Display for RefusedTopic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.step {
            RefusedStep::ReadSettingsDenied => write!(f, "the settings of source topic {} could not be read ({}), and the target topic eosmirror would create carries them: its records are not copied. Allow DescribeConfigs on it to the source user (e.g. `kafka-acls.sh --add --allow-principal User:<source user> --operation DescribeConfigs --topic {}`), or create it on the target yourself with {} partitions, message.timestamp.type=CreateTime and the source topic's settings eosmirror would copy ({})", self.topic, self.reason, self.topic, self.partitions, COPIED_SETTINGS.join(", ")),
            RefusedStep::ReadSettings => write!(f, "the settings of source topic {} could not be read ({}), and the target topic eosmirror would create carries them: its records are not copied until a refresh reads them", self.topic, self.reason),
            RefusedStep::Create => write!(f, "the target refused to create topic {} ({}): its records are not copied. Create it on the target yourself with {} partitions, message.timestamp.type=CreateTime and the source topic's settings eosmirror would copy ({}) (eosmirror then copies into it), or fix what the target refuses", self.topic, self.reason, self.partitions, COPIED_SETTINGS.join(", ")),
            RefusedStep::AddPartitions => write!(f, "the target refused to add partitions to topic {} ({}): its partitions from {} on are not copied. Add them on the target yourself (kafka-topics.sh --alter --topic {} --partitions {}), or fix what the target refuses", self.topic, self.reason, self.copyable, self.topic, self.partitions),
        }
    }
}

/// Creates or extends target topics so that every source partition has a
/// same-numbered target partition, and creates the internal topics, as
/// [`decide`] decided. Checks the internal topics that exist first
/// ([`check_existing`]); returns its warnings, which do not stop
/// the run.
pub async fn prepare_target(
    source_admin: &AdminClient<DefaultClientContext>,
    target_admin: &AdminClient<DefaultClientContext>,
    topics: &[SourceTopic],
    target_metadata: &ClusterMetadata,
    internal: &InternalTopics,
    options: &TargetTopicOptions,
) -> Result<Prepared, TopicError> {
    let decision = decide(topics, target_metadata, internal, options);
    if let Some(refusal) = decision.refusals().into_iter().next() {
        return Err(refusal);
    }

    let admin_options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));

    let needs = Needs {
        progress_retention: options.progress_retention,
        target_brokers: target_metadata.brokers,
        tools: &options.tools,
    };
    let (refusals, warnings): (Vec<Finding>, Vec<Finding>) =
        check_existing(target_admin, internal, target_metadata, &needs)
            .await?
            .into_iter()
            .partition(Finding::refuses);
    if !refusals.is_empty() {
        return Err(TopicError::InternalTopics(refusals));
    }

    let types = describe_target_topics(target_admin, &decision).await;
    if !types.unchecked.is_empty() {
        static WARNED: AtomicBool = AtomicBool::new(false);
        if !WARNED.swap(true, Ordering::Relaxed) {
            tracing::warn!("could not check the timestamp type of target topics ({}); a topic with message.timestamp.type=LogAppendTime would replace the copies' timestamps. Allow DescribeConfigs on them to eosmirror's target user to have it checked (logged once)", types.unchecked_summary());
        }
    }
    if !types.appending.is_empty() {
        return Err(TopicError::LogAppendTime {
            topics: types.appending,
            tools: options.tools.to_string(),
        });
    }

    let mut max_message_bytes = types.max_message_bytes;
    let mut refused = Vec::new();
    let mut new_topics = Vec::new();
    for topic in &decision.missing {
        // One topic whose settings cannot be read leaves the others to be
        // copied, as one the target refuses does.
        let mut settings = match source_topic_settings(source_admin, &topic.name).await {
            Ok(settings) => settings,
            Err(e) => {
                refused.push(RefusedTopic {
                    topic: topic.name.clone(),
                    copyable: 0,
                    partitions: topic.partitions,
                    step: match e {
                        TopicError::SourceSettingsDenied { .. } => RefusedStep::ReadSettingsDenied,
                        _ => RefusedStep::ReadSettings,
                    },
                    reason: match e {
                        TopicError::SourceSettingsDenied { code, .. } => code.to_string(),
                        other => other.to_string(),
                    },
                });
                continue;
            }
        };
        // A topic created without the setting takes the broker's default,
        // seen when the next refresh describes it.
        if let Some(limit) = settings
            .iter()
            .find(|(k, _)| k == "max.message.bytes")
            .and_then(|(_, v)| v.parse().ok())
        {
            max_message_bytes.insert(topic.name.clone(), limit);
        }
        // Whatever the target broker's default: copies keep their
        // source timestamps.
        settings.push(("message.timestamp.type".into(), "CreateTime".into()));
        new_topics.push((topic, settings));
    }

    let mut creations: Vec<NewTopic<'_>> = Vec::new();
    for (topic, settings) in &new_topics {
        let mut new = NewTopic::new(
            &topic.name,
            topic.partitions,
            TopicReplication::Fixed(options.replication_factor),
        );
        for (k, v) in settings {
            new = new.set(k, v);
        }
        creations.push(new);
    }
    for spec in &decision.internal_missing {
        let mut new = NewTopic::new(
            &spec.name,
            spec.partitions,
            TopicReplication::Fixed(options.replication_factor),
        );
        for (k, v) in &spec.settings {
            new = new.set(k, v);
        }
        creations.push(new);
    }
    let mut new_partitions = Vec::new();
    let mut created_meanwhile = Vec::new();
    if !creations.is_empty() || !decision.too_few.is_empty() {
        if let Some(go) = fault_argument(failpoints::TOPICS_SLOW_CREATE) {
            tracing::warn!(
                "fault point {}: the topics and partitions are created once {go} exists",
                failpoints::TOPICS_SLOW_CREATE
            );
            let waiting = std::time::Instant::now();
            while !std::path::Path::new(&go).exists() && waiting.elapsed() < SLOW_CREATE_WAIT {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    if !creations.is_empty() {
        // A fault: the target refuses topics named like the argument.
        let refuse = fault_argument(failpoints::TOPICS_REFUSE_CREATE);
        let (asked, faulted): (Vec<_>, Vec<_>) = creations
            .iter()
            .partition(|c| refuse.as_ref().is_none_or(|r| !c.name.contains(r.as_str())));
        let mut results = match asked.is_empty() {
            true => Vec::new(),
            false => target_admin
                .create_topics(asked, &admin_options)
                .await
                .map_err(|e| admin_error("create topics", "(several)", e.to_string()))?,
        };
        results.extend(
            faulted
                .iter()
                .map(|c| Err((c.name.to_string(), RDKafkaErrorCode::PolicyViolation))),
        );
        for result in results {
            match result {
                Ok(name) => {
                    tracing::info!(topic = %name, "created target topic");
                    let count = creations
                        .iter()
                        .find(|c| c.name == name)
                        .map_or(0, |c| c.num_partitions);
                    new_partitions.extend((0..count).map(|p| SourcePartition::new(&name, p)));
                }
                // Another instance created it meanwhile: checked by the
                // caller against fresh metadata.
                Err((name, RDKafkaErrorCode::TopicAlreadyExists)) => created_meanwhile.push(name),
                // A data topic refused leaves the others to be copied; the
                // internal topics are every lane's.
                Err((name, code)) => {
                    let Some(topic) = decision.missing.iter().find(|t| t.name == name) else {
                        return Err(admin_error("create topic", &name, code.to_string()));
                    };
                    refused.push(RefusedTopic {
                        topic: name,
                        copyable: 0,
                        partitions: topic.partitions,
                        step: RefusedStep::Create,
                        reason: code.to_string(),
                    })
                }
            }
        }
    }

    if !decision.too_few.is_empty() {
        let additions: Vec<NewPartitions<'_>> = decision
            .too_few
            .iter()
            .map(|(name, source_count, _)| NewPartitions::new(name, *source_count as usize))
            .collect();
        let results = target_admin
            .create_partitions(additions.iter(), &admin_options)
            .await
            .map_err(|e| admin_error("add partitions", "(several)", e.to_string()))?;
        for result in results {
            match result {
                Ok(name) => {
                    tracing::info!(topic = %name, "added partitions to target topic");
                    if let Some((_, source_count, target_count)) =
                        decision.too_few.iter().find(|(t, _, _)| *t == name)
                    {
                        new_partitions.extend(
                            (*target_count..*source_count).map(|p| SourcePartition::new(&name, p)),
                        );
                    }
                }
                // Another instance added them meanwhile (the count asked
                // for is no longer above the topic's): checked by the
                // caller against fresh metadata.
                Err((name, RDKafkaErrorCode::InvalidPartitions)) => created_meanwhile.push(name),
                Err((name, code)) => {
                    let (partitions, copyable) = decision
                        .too_few
                        .iter()
                        .find(|(t, _, _)| *t == name)
                        .map_or((0, 0), |(_, source_count, target_count)| {
                            (*source_count, *target_count)
                        });
                    refused.push(RefusedTopic {
                        topic: name,
                        copyable,
                        partitions,
                        step: RefusedStep::AddPartitions,
                        reason: code.to_string(),
                    })
                }
            }
        }
    }
    Ok(Prepared {
        warnings,
        new_partitions,
        created_meanwhile,
        refused,
        max_message_bytes,
    })
}

/// Longest the `topics::slow-create` fault waits for its test.
const SLOW_CREATE_WAIT: Duration = Duration::from_secs(120);

pub(crate) fn admin(
    config: &ClientConfig,
    cluster: &'static str,
) -> Result<AdminClient<DefaultClientContext>, TopicError> {
    config
        .create()
        .map_err(|source| TopicError::Metadata { cluster, source })
}

fn admin_error(operation: &'static str, topic: &str, reason: String) -> TopicError {
    TopicError::Admin {
        operation,
        topic: topic.to_string(),
        cluster: "target",
        reason,
    }
}

/// The settings of `topic` on the source worth carrying to the target.
pub(crate) async fn source_topic_settings(
    source_admin: &AdminClient<DefaultClientContext>,
    topic: &str,
) -> Result<Vec<(String, String)>, TopicError> {
    // A fault: the source refuses to describe topics named like the
    // argument, as it does without a DescribeConfigs ACL.
    if fault_argument(failpoints::TOPICS_REFUSE_DESCRIBE).is_some_and(|t| topic.contains(&t)) {
        return Err(TopicError::SourceSettingsDenied {
            topic: topic.to_string(),
            code: RDKafkaErrorCode::TopicAuthorizationFailed,
        });
    }
    let answers = describe_topics(source_admin, &[topic])
        .await
        .map_err(|e| TopicError::Admin {
            operation: "describe configs",
            topic: topic.to_string(),
            cluster: "source",
            reason: e.to_string(),
        })?;
    let mut settings = Vec::new();
    for (_, answer) in answers {
        let resource = answer.map_err(|code| match code {
            TopicAuthorizationFailed | ClusterAuthorizationFailed => {
                TopicError::SourceSettingsDenied {
                    topic: topic.to_string(),
                    code,
                }
            }
            _ => TopicError::Admin {
                operation: "describe configs",
                topic: topic.to_string(),
                cluster: "source",
                reason: code.to_string(),
            },
        })?;
        for entry in resource.entries {
            if entry.source == ConfigSource::DynamicTopic
                && COPIED_SETTINGS.contains(&entry.name.as_str())
            {
                if let Some(value) = entry.value {
                    settings.push((entry.name, value));
                }
            }
        }
    }
    Ok(settings)
}

/// What a look at the target topics' settings found.
pub(crate) struct TargetTopicSettings {
    /// Topics whose broker stamps records with their append time,
    /// replacing the timestamps copies carry.
    pub appending: Vec<String>,
    /// What could not be checked, each with why: the check needs
    /// DescribeConfigs on data topics, which copying does not, so the
    /// caller says so and passes them.
    pub unchecked: Vec<String>,
    /// Each described topic's `max.message.bytes`: the largest record
    /// batch it takes.
    pub max_message_bytes: BTreeMap<String, usize>,
}

impl TargetTopicSettings {
    /// The unchecked topics for one log line: the count and the first few.
    pub fn unchecked_summary(&self) -> String {
        let first: Vec<&str> = self.unchecked.iter().take(3).map(String::as_str).collect();
        format!(
            "{} of them, e.g. {}",
            self.unchecked.len(),
            first.join(", ")
        )
    }
}

/// The settings of the target topics `decision` found present or extends
/// (`--target.add.partitions`), in one DescribeConfigs request: their
/// timestamp types (`run` refuses a LogAppendTime topic before copying into
/// it, and `plan` says so beforehand) and batch limits.
pub(crate) async fn describe_target_topics(
    target_admin: &AdminClient<DefaultClientContext>,
    decision: &TopicDecision,
) -> TargetTopicSettings {
    let extended = decision
        .too_few
        .iter()
        .filter(|_| decision.add_partitions)
        .map(|(name, ..)| name.as_str());
    let topics: Vec<&str> = decision
        .present
        .iter()
        .map(|(t, _)| t.name.as_str())
        .chain(extended)
        .collect();
    let mut types = TargetTopicSettings {
        appending: Vec::new(),
        unchecked: Vec::new(),
        max_message_bytes: BTreeMap::new(),
    };
    let answers = match describe_topics(target_admin, &topics).await {
        Ok(answers) => answers,
        Err(e) => {
            types.unchecked = topics.iter().map(|t| format!("{t}: {e}")).collect();
            return types;
        }
    };
    for (topic, answer) in answers {
        match answer {
            Ok(resource) => {
                if setting(&resource, "message.timestamp.type") == Some("LogAppendTime") {
                    types.appending.push(topic.to_string());
                }
                if let Some(limit) =
                    setting(&resource, "max.message.bytes").and_then(|v| v.parse().ok())
                {
                    types.max_message_bytes.insert(topic.to_string(), limit);
                }
            }
            Err(code) => types.unchecked.push(format!("{topic}: {code}")),
        }
    }
    types
}

/// Describes the internal topics that exist on the target (one
/// DescribeConfigs request) and checks each. Nothing is written.
pub async fn check_existing(
    target_admin: &AdminClient<DefaultClientContext>,
    internal: &InternalTopics,
    target: &ClusterMetadata,
    needs: &Needs<'_>,
) -> Result<Vec<Finding>, TopicError> {
    let existing: Vec<(InternalKind, &str)> = [
        (InternalKind::Progress, internal.progress.as_str()),
        (InternalKind::Position, internal.position.as_str()),
        (InternalKind::Groups, internal.groups.as_str()),
    ]
    .into_iter()
    .filter(|(_, name)| target.topics.contains_key(*name))
    .collect();
    if existing.is_empty() {
        return Ok(Vec::new());
    }

    let names = existing
        .iter()
        .map(|(_, name)| *name)
        .collect::<Vec<_>>()
        .join(", ");
    let describe_error = |topics: &str, code: Option<RDKafkaErrorCode>, reason: String| {
        describe_failure(topics, code, reason, needs.tools)
    };
    let topics: Vec<&str> = existing.iter().map(|(_, name)| *name).collect();
    let answers = describe_topics(target_admin, &topics)
        .await
        .map_err(|e| describe_error(&names, e.rdkafka_error_code(), e.to_string()))?;

    let mut findings = Vec::new();
    for ((kind, name), (_, answer)) in existing.into_iter().zip(answers) {
        let resource = answer.map_err(|code| describe_error(name, Some(code), code.to_string()))?;
        let settings: BTreeMap<String, String> = resource
            .entries
            .into_iter()
            .filter(|e| internal::CHECKED_SETTINGS.contains(&e.name.as_str()))
            .filter_map(|e| Some((e.name, e.value?)))
            .collect();
        let shape = target.topics[name];
        findings.extend(internal::check(
            &internal::ObservedTopic {
                kind,
                name,
                partitions: shape.partitions,
                replication_factor: shape.replication_factor,
                settings: &settings,
            },
            needs,
        ));
    }
    Ok(findings)
}

/// A failed DescribeConfigs: a denial names the ACL to grant, anything else
/// is reported as the broker said it.
fn describe_failure(
    topics: &str,
    code: Option<RDKafkaErrorCode>,
    reason: String,
    tools: &ToolConnection,
) -> TopicError {
    match code {
        Some(code @ (TopicAuthorizationFailed | ClusterAuthorizationFailed)) => {
            TopicError::InternalTopicsNotDescribable {
                topics: topics.to_string(),
                code,
                tools: tools.to_string(),
            }
        }
        _ => TopicError::Admin {
            operation: "describe configs (checking eosmirror's internal topics)",
            topic: topics.to_string(),
            cluster: "target",
            reason,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    use crate::topics::internal::tests::{tools, TOOLS};

    fn options(add_partitions: bool) -> TargetTopicOptions {
        let mut target = ClientConfig::new();
        target.set("bootstrap.servers", "t:9092");
        TargetTopicOptions {
            replication_factor: -1,
            add_partitions,
            progress_retention: Duration::from_secs(3600),
            layout: Layout::new(4).unwrap(),
            tools: ToolConnection::new(&target, Path::new("p.properties")),
        }
    }

    fn shape(partitions: i32) -> TopicShape {
        TopicShape {
            partitions,
            replication_factor: 1,
        }
    }

    #[test]
    fn the_decision_creates_extends_or_refuses_from_metadata_alone() {
        let internal = InternalTopics::for_alias("a");
        let topic = |name: &str, partitions| SourceTopic {
            name: name.into(),
            partitions,
        };
        let topics = [topic("new", 3), topic("same", 2), topic("short", 3)];
        let mut target = ClusterMetadata {
            brokers: 1,
            ..ClusterMetadata::default()
        };
        target.topics.insert("same".into(), shape(4));
        target.topics.insert("short".into(), shape(2));
        target.topics.insert(internal.position.clone(), shape(2));

        let decision = decide(&topics, &target, &internal, &options(false));
        assert_eq!(decision.missing, [topic("new", 3)]);
        assert_eq!(decision.present, [(topic("same", 2), 4)]);
        assert_eq!(decision.too_few, [("short".to_string(), 3, 2)]);
        let missing: Vec<_> = decision.internal_missing.iter().map(|s| &s.name).collect();
        assert_eq!(
            missing,
            [&internal.progress, &internal.groups, &internal.status]
        );
        assert_eq!(decision.layout_mismatch, [(internal.position.clone(), 2)]);
        let refusals: Vec<String> = decision.refusals().iter().map(|r| r.to_string()).collect();
        assert_eq!(refusals.len(), 2, "{refusals:?}");
        assert!(
            refusals[0].contains("short (source 3, target 2)"),
            "{refusals:?}"
        );
        assert!(refusals[1].contains("Run with --lanes 2"), "{refusals:?}");

        let extending = decide(&topics, &target, &internal, &options(true));
        assert_eq!(extending.refusals().len(), 1, "only the layout refuses");
        let progress = &extending.internal_missing[0];
        assert_eq!(progress.partitions, 4);
        assert!(progress
            .settings
            .contains(&("retention.ms", "3600000".to_string())));
        assert!(progress
            .settings
            .contains(&("retention.bytes", "-1".to_string())));
    }

    #[test]
    fn a_source_topic_left_out_unread_names_the_acl_only_when_denied() {
        let refused = |step| {
            RefusedTopic {
                topic: "orders".into(),
                copyable: 0,
                partitions: 3,
                step,
                reason: "why".into(),
            }
            .to_string()
        };
        let denied = refused(RefusedStep::ReadSettingsDenied);
        assert!(
            denied.contains("--operation DescribeConfigs --topic orders"),
            "{denied}"
        );
        let failed = refused(RefusedStep::ReadSettings);
        assert!(!failed.contains("kafka-acls"), "{failed}");
        assert!(failed.contains("until a refresh reads them"), "{failed}");
    }

    #[test]
    fn a_denied_describe_names_the_acl_to_grant() {
        let message = describe_failure(
            "__eosmirror.progress.a",
            Some(TopicAuthorizationFailed),
            "denied".into(),
            &tools(),
        )
        .to_string();
        assert!(
            message.starts_with("checking the settings of eosmirror's internal topic(s) __eosmirror.progress.a on the target: DescribeConfigs was denied ("),
            "{message}"
        );
        assert!(
            message.contains(&format!("`kafka-acls.sh {TOOLS} --add --allow-principal User:<user> --operation DescribeConfigs --topic __eosmirror. --resource-pattern-type prefixed`")),
            "{message}"
        );

        let other = describe_failure(
            "__eosmirror.progress.a",
            Some(RDKafkaErrorCode::RequestTimedOut),
            "Broker: Request timed out".into(),
            &tools(),
        );
        assert!(matches!(other, TopicError::Admin { .. }), "{other}");
    }
}

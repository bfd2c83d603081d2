//! `eosmirror plan`: the preflight a careful operator runs the day before a
//! cutover, with `run`'s flags. It answers "would `run` start and copy?"
//! without writing: no topic, no offset, no committed transaction, no state
//! dir. Each check reuses what `run` does at start, so the two cannot
//! disagree: the start-up connection check (`connect.rs`), the topic
//! decision (`topics::target::decide`) and the internal-topic checks
//! (`topics::internal`).
//!
//! The one thing that touches the target is the transaction probe:
//! `init_transactions` under a transactional id of its own
//! (`<prefix>.<alias>.plan-probe-<random>`), never a lane's (that would
//! fence a running instance). It is the only way to prove Write and
//! Describe on the lanes' transactional ids; the coordinator records the
//! probe's id in `__transaction_state` (no data record, no commit), where it
//! expires after the target's `transactional.id.expiration.ms`.
//!
//! Exit codes: 0 nothing blocks `run`; 1 something would (a `problem:` line
//! names it and its fix); 2 plan could not tell (a cluster did not answer in
//! time, a check timed out) and found no problem.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use crate::clusters::{connection_only, load_client_config, Endpoints, CONNECT_TIMEOUT};
use crate::config::ClientRole;
use crate::connect::{cluster_id, GaveUp};
use crate::read::reader_config;
use crate::replication::client_settings::{self, LaneCheck};
use crate::replication::layout::Layout;
use crate::replication::limits::BufferBudget;
use crate::replication::progress::InternalTopics;
use crate::replication::throttle::ThrottleLimits;
use crate::replication::watermarks;
use crate::topics::acls;
use crate::topics::filter::TopicFilter;
use crate::topics::internal::{Finding as InternalFinding, Needs, ToolConnection};
use crate::topics::target::{
    self, cluster_metadata, partition_counts, select, SourceTopic, TargetTopicOptions,
};
use eosmirror_state::SourcePartition;

/// What one line of the plan says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Checked and fine.
    Ok,
    /// `run` would create this.
    Create,
    /// `run` would add partitions (`--target.add.partitions`).
    AddPartitions,
    /// `run` would stop on this.
    Problem,
    /// `run` starts, but look at this.
    Warning,
    /// Could not be checked.
    Unknown,
    /// The size and duration of the copy.
    Estimate,
    /// Something plan does not check, said rather than implied.
    Note,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Ok => "ok",
            Kind::Create => "create",
            Kind::AddPartitions => "add-partitions",
            Kind::Problem => "problem",
            Kind::Warning => "warning",
            Kind::Unknown => "unknown",
            Kind::Estimate => "estimate",
            Kind::Note => "note",
        }
    }
}

/// One finding.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    pub kind: Kind,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The plan's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// `run` with the same flags would start copying.
    Ready,
    /// Something the plan names stops `run`; fix it first.
    Blocked,
    /// Some checks could not be made; none of the others found a problem.
    Unknown,
}

impl Verdict {
    /// The process exit code: 0 ready, 1 blocked, 2 unknown.
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Ready => 0,
            Verdict::Blocked => 1,
            Verdict::Unknown => 2,
        }
    }
}

/// The bytes and records a first start would copy.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    pub partitions: usize,
    /// Sum of (high - low watermark): an upper bound on records.
    pub records_at_most: u64,
    pub bytes: u64,
    pub sampled_records: u64,
    pub sampled_bytes: u64,
    /// At the given throttle; `None` when unthrottled.
    pub seconds_at_throttle: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    pub findings: Vec<Line>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimate: Option<Estimate>,
    pub verdict: Verdict,
}

impl PlanReport {
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for line in &self.findings {
            let _ = write!(out, "{}: {}", line.kind.label(), line.text);
            if let Some(fix) = &line.fix {
                let _ = write!(out, " (fix: {fix})");
            }
            out.push('\n');
        }
        let problems = self.count(Kind::Problem);
        let _ = match self.verdict {
            Verdict::Ready => writeln!(out, "plan: READY: nothing found that would stop `eosmirror run`"),
            Verdict::Blocked => writeln!(
                out,
                "plan: BLOCKED: {problems} problem(s) would stop `eosmirror run`; fix them and plan again"
            ),
            Verdict::Unknown => writeln!(
                out,
                "plan: UNKNOWN: {} check(s) could not be made; no problem found among the others",
                self.count(Kind::Unknown)
            ),
        };
        out
    }

    /// The plan when `run` could not even take its flags (a `--lanes`, a
    /// pattern, a throttle file it refuses): each reason is a problem, and
    /// no cluster is contacted, since what the plan checks there depends
    /// on those flags.
    pub fn flags_unusable(reasons: impl IntoIterator<Item = String>) -> PlanReport {
        let mut findings = Findings::default();
        for reason in reasons {
            findings.problem(
                format!("run refuses its flags: {reason}"),
                "change the flags as the message says; the clusters are checked once run accepts them",
            );
        }
        PlanReport {
            verdict: findings.verdict(),
            findings: findings.0,
            estimate: None,
        }
    }

    fn count(&self, kind: Kind) -> usize {
        self.findings.iter().filter(|l| l.kind == kind).count()
    }
}

/// Collects lines; decides the verdict.
#[derive(Default)]
struct Findings(Vec<Line>);

impl Findings {
    fn add(&mut self, kind: Kind, text: impl Into<String>) {
        self.0.push(Line {
            kind,
            text: text.into(),
            fix: None,
        });
    }

    fn problem(&mut self, text: impl Into<String>, fix: impl Into<String>) {
        self.0.push(Line {
            kind: Kind::Problem,
            text: text.into(),
            fix: Some(fix.into()),
        });
    }

    fn verdict(&self) -> Verdict {
        if self.0.iter().any(|l| l.kind == Kind::Problem) {
            Verdict::Blocked
        } else if self.0.iter().any(|l| l.kind == Kind::Unknown) {
            Verdict::Unknown
        } else {
            Verdict::Ready
        }
    }
}

/// How long the transaction probe may wait for the coordinator.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the size sample may read in all.
const SAMPLE_TIME: Duration = Duration::from_secs(10);

/// Most partitions read for the size sample; the others take the mean.
const SAMPLE_PARTITIONS: usize = 1_000;

/// What plan checks: `run`'s settings as `run` would take them, plain, so
/// the `plan` command builds them from `run`'s own flags.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Both clusters, and the alias that names the deployment's internal
    /// topics and transactional ids.
    pub endpoints: Endpoints,
    /// Why `run` would refuse its own flags (before it connects), if it would.
    pub flags_refused: Option<String>,
    /// The deployment's lane count.
    pub layout: Layout,
    /// The source topics `run` would copy.
    pub topics: TopicFilter,
    /// `run`'s throttle: the time estimate of the copy honours it.
    pub throttle: ThrottleLimits,
    /// `--transactional.id.prefix`: the transaction probe uses an id under
    /// it, so the ACLs it proves are the lanes'.
    pub transactional_id_prefix: String,
    /// Replication factor of topics `run` would create; `-1` takes the
    /// broker default.
    pub replication_factor: i32,
    /// Whether `run` would add partitions to target topics that have fewer
    /// than their source.
    pub add_partitions: bool,
    /// Retention the progress topic would get.
    pub progress_retention: Duration,
    /// Newest committed records read per source partition to estimate the
    /// average record size (0: no byte estimate).
    pub sample_records: u64,
    /// `run`'s `--transaction.timeout.ms`, which the lanes' clients get.
    pub transaction_timeout: Duration,
    /// `run`'s `--max.memory.bytes`, whose lane share the lanes' clients get.
    pub max_memory_bytes: usize,
}

/// Runs every check; blocking (call from a blocking thread inside a tokio
/// runtime: the admin requests are awaited on it).
pub fn plan(options: &PlanOptions) -> anyhow::Result<PlanReport> {
    let mut findings = Findings::default();
    let alias = &options.endpoints.source_alias;
    let layout = options.layout;
    let filter = &options.topics;

    if let Some(refused) = &options.flags_refused {
        findings.problem(
            format!("run refuses its flags: {refused}"),
            "change the flags as the message says",
        );
    }
    let source = connect(
        &mut findings,
        "source",
        &options.endpoints.source_config,
        ClientRole::Consumer,
    );
    let target = connect(
        &mut findings,
        "target",
        &options.endpoints.target_config,
        ClientRole::Producer,
    );
    if let (Some(source), Some(target)) = (&source, &target) {
        if source.id == target.id {
            findings.problem(
                format!("source and target are the same cluster (id {})", source.id),
                "point --producer.config at the target cluster",
            );
        }
    }

    let lanes_accepted = match (&source, &target) {
        (Some(source), Some(target)) => check_lane_clients(
            &mut findings,
            source.whole.clone(),
            target.whole.clone(),
            options,
        ),
        _ => false,
    };
    let source = source.map(|s| s.connection);
    let target = target.map(|t| t.connection);

    let tools = target
        .as_ref()
        .map(|t| ToolConnection::new(t, &options.endpoints.target_config));
    if let (Some(target), Some(tools)) = (&target, &tools) {
        let base = format!("{}.{alias}", options.transactional_id_prefix);
        probe_transactions(
            &mut findings,
            target,
            &base,
            options.transaction_timeout,
            tools,
            lanes_accepted,
        );
    }
    if let (Some(target), Some(tools)) = (&target, &tools) {
        list_acls(&mut findings, target, tools);
    }

    let mut estimate = None;
    if let (Some(source), Some(target), Some(tools)) = (&source, &target, tools) {
        let target_topics = TargetTopicOptions {
            replication_factor: options.replication_factor,
            add_partitions: options.add_partitions,
            progress_retention: options.progress_retention,
            layout,
            tools,
        };
        let topics = plan_topics(&mut findings, source, target, alias, filter, &target_topics)?;
        if let Some((topics, resumes)) = topics {
            if !topics.is_empty() {
                estimate = estimate_copy(&mut findings, source, &topics, resumes, options);
            }
        }
    }
    let verdict = findings.verdict();
    Ok(PlanReport {
        findings: findings.0,
        estimate,
        verdict,
    })
}

/// `run`'s check that librdkafka takes the files' settings (`source`,
/// `target`: all of them) as a lane's clients get them, with the
/// `--max.memory.bytes` and `--transaction.timeout.ms` given: some
/// combinations it refuses only when a client is created. Whether it
/// takes them.
fn check_lane_clients(
    findings: &mut Findings,
    mut source: ClientConfig,
    mut target: ClientConfig,
    options: &PlanOptions,
) -> bool {
    let endpoints = &options.endpoints;
    client_settings::for_lanes(
        &mut source,
        &mut target,
        &endpoints.source_alias,
        options.transaction_timeout.as_millis() as u64,
        &endpoints.target_config,
    );
    let check = LaneCheck {
        transactional_id_base: format!(
            "{}.{}",
            options.transactional_id_prefix, endpoints.source_alias
        ),
        transaction_timeout: options.transaction_timeout,
        budget: BufferBudget::split(options.max_memory_bytes, options.layout.lanes() as usize),
        consumer_file: endpoints.source_config.clone(),
        producer_file: endpoints.target_config.clone(),
    };
    if let Some(warning) = check.memory_beyond_bound(&source, options.layout.lanes()) {
        findings.add(Kind::Warning, warning);
    }
    match check.refuse_unusable(&source, &target) {
        Ok(()) => true,
        Err(e) => {
            findings.problem(
                crate::error_chain::one_line(&e),
                "change the setting it names, in the file it names",
            );
            false
        }
    }
}

/// A cluster `run`'s start-up check reached.
struct Reached {
    /// Every setting of its file, for the lanes' client check.
    whole: ClientConfig,
    /// The settings that reach and authenticate, for plan's own clients.
    connection: ClientConfig,
    /// The cluster id, to tell source and target apart.
    id: String,
}

/// `run`'s start-up check of one cluster: its settings and id, or a
/// `problem:` (a named cause: credentials, TLS, advertised listeners, a
/// file `run` would refuse) or `unknown:` (no answer in time) line.
fn connect(
    findings: &mut Findings,
    name: &'static str,
    file: &Path,
    role: ClientRole,
) -> Option<Reached> {
    let config = match load_client_config(file, role) {
        Ok(config) => config,
        Err(e) => {
            findings.problem(
                format!("{name} settings: {}", crate::error_chain::one_line(&e)),
                format!("correct {}", file.display()),
            );
            return None;
        }
    };
    let connection = connection_only(&config);
    match cluster_id(&connection, name, file, CONNECT_TIMEOUT) {
        Ok(id) => {
            findings.add(
                Kind::Ok,
                format!(
                    "{name} cluster {id} reachable at {} with the settings in {}; every broker's advertised address answers",
                    connection.get("bootstrap.servers").unwrap_or_default(),
                    file.display()
                ),
            );
            Some(Reached {
                whole: config,
                connection,
                id,
            })
        }
        Err(e) if e.downcast_ref::<GaveUp>().is_some() => {
            findings.add(Kind::Unknown, crate::error_chain::one_line(&e));
            None
        }
        Err(e) => {
            // The start-up check's message already names the setting to change.
            findings.problem(
                crate::error_chain::one_line(&e),
                format!("change {} as the message says", file.display()),
            );
            None
        }
    }
}

/// A random-enough suffix: two plans at once must not fence each other.
fn probe_suffix() -> String {
    let nanos = crate::clock::unix_nanos();
    format!("{:x}", nanos ^ (u64::from(std::process::id()) << 40))
}

/// `init_transactions`, `begin` and `abort` with the probe's own id under
/// the lanes' prefix. `init_transactions` is FindCoordinator (Describe on the
/// transactional id) and InitProducerId (Write), exactly what every lane's
/// session starts with; the abort sends nothing (no partition was added).
/// The lanes' transaction timeout: librdkafka judges the file's
/// `socket.timeout.ms` against it. `lanes_accepted`: whether librdkafka
/// took the lanes' settings; if not, a probe it refuses alike adds nothing
/// to that problem.
fn probe_transactions(
    findings: &mut Findings,
    target: &ClientConfig,
    base: &str,
    transaction_timeout: Duration,
    tools: &ToolConnection,
    lanes_accepted: bool,
) {
    let id = format!("{base}.plan-probe-{}", probe_suffix());
    let mut config = target.clone();
    // A transactional id implies idempotence and acks=all, as for the lanes.
    config.set("transactional.id", &id).set(
        "transaction.timeout.ms",
        transaction_timeout.as_millis().to_string(),
    );
    let producer: BaseProducer = match config.create() {
        Ok(p) => p,
        Err(e) => {
            if lanes_accepted {
                findings.add(
                    Kind::Unknown,
                    format!("transactions on the target: cannot create the probe producer: {e}"),
                );
            }
            return;
        }
    };
    let result = producer
        .init_transactions(PROBE_TIMEOUT)
        .and_then(|()| producer.begin_transaction())
        .and_then(|()| producer.abort_transaction(PROBE_TIMEOUT));
    // The user name is no secret; without SASL the principal is the
    // certificate's or the broker's mapping of it, which plan cannot know.
    let principal = target
        .get("sasl.username")
        .map_or("<principal>".to_string(), |u| format!("User:{u}"));
    findings.0.push(probe_finding(
        result,
        &id,
        base,
        &tools.to_string(),
        &principal,
    ));
}

/// What the probe's outcome means for `run`'s lanes (pure).
fn probe_finding(
    result: Result<(), KafkaError>,
    id: &str,
    base: &str,
    tools: &str,
    principal: &str,
) -> Line {
    let line = |kind, text: String, fix: Option<String>| Line { kind, text, fix };
    let Err(e) = result else {
        return line(
            Kind::Ok,
            format!(
                "the target accepts transactions under {base}.* (probe {id}: init, begin and abort; no record written, the lanes' ids {base}.lane-N untouched)"
            ),
            None,
        );
    };
    match e.rdkafka_error_code() {
        Some(RDKafkaErrorCode::TransactionalIdAuthorizationFailed) => line(
            Kind::Problem,
            format!(
                "the target denies the transactional ids {base}.* (TransactionalIdAuthorizationFailed for the probe {id}); every lane's init_transactions would fail"
            ),
            Some(format!(
                "`kafka-acls.sh {tools} --add --allow-principal {principal} --operation Write --operation Describe --transactional-id {base}. --resource-pattern-type prefixed`"
            )),
        ),
        Some(RDKafkaErrorCode::ClusterAuthorizationFailed) => line(
            Kind::Problem,
            format!("the target refuses the probe's producer id (ClusterAuthorizationFailed for {id})"),
            Some(format!(
                "`kafka-acls.sh {tools} --add --allow-principal {principal} --operation IdempotentWrite --cluster`"
            )),
        ),
        Some(RDKafkaErrorCode::InvalidTransactionTimeout) => line(
            Kind::Problem,
            format!("the target refuses --transaction.timeout.ms as above its transaction.max.timeout.ms (InvalidTransactionTimeout for the probe {id}); every lane's init_transactions would fail"),
            Some("lower --transaction.timeout.ms to at most the target brokers' transaction.max.timeout.ms (900000 unless set), or raise that broker setting".into()),
        ),
        _ if is_timeout(&e) => line(
            Kind::Unknown,
            format!(
                "transactions on the target: the probe {id} got no answer within {PROBE_TIMEOUT:?} ({e}); the transaction coordinator may be unavailable (a target with fewer brokers than transaction.state.log.replication.factor or min.isr never has one)"
            ),
            None,
        ),
        _ => line(
            Kind::Problem,
            format!("the target refused a transaction of the probe {id}: {e}"),
            Some("use a target that allows Kafka transactions, and allow the transactional ids (Write, Describe)".into()),
        ),
    }
}

/// The target's ACLs for the principal of `--producer.config`, when the
/// target lets it ask (DescribeAcls needs Describe on the cluster). Shown,
/// not judged: the probes are what proves the grants `run` needs.
fn list_acls(findings: &mut Findings, target: &ClientConfig, tools: &ToolConnection) {
    let Some(user) = target.get("sasl.username") else {
        findings.add(
            Kind::Note,
            "ACLs not listed: without a SASL user plan cannot tell which principal the target sees (a certificate's name, or ANONYMOUS)",
        );
        return;
    };
    let principal = format!("User:{user}");
    let admin = match target::admin(target, "target") {
        Ok(admin) => admin,
        Err(e) => {
            findings.add(Kind::Note, format!("ACLs not listed: {e}"));
            return;
        }
    };
    match acls::describe(admin.inner(), Some(&principal), CONNECT_TIMEOUT) {
        Ok(entries) if entries.is_empty() => findings.add(
            Kind::Note,
            format!("DescribeAcls lists no ACL for {principal} on the target: none are set for it, or the target has no authorizer, or it may not describe ACLs (librdkafka 2.12 drops DescribeAcls' error code, so the three look alike); the probe above is the proof for transactions"),
        ),
        Ok(entries) => findings.add(
            Kind::Ok,
            format!(
                "the target's ACLs for {principal} (DescribeAcls): {}",
                entries.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
            ),
        ),
        Err(e) => match e.rdkafka_error_code() {
            Some(RDKafkaErrorCode::SecurityDisabled) => findings.add(
                Kind::Note,
                "ACLs not listed: the target has no authorizer (DescribeAcls: security disabled), so every authenticated principal may do everything",
            ),
            Some(RDKafkaErrorCode::ClusterAuthorizationFailed) => findings.add(
                Kind::Note,
                format!("ACLs not listed: {principal} may not describe them (DescribeAcls needs Describe on the cluster: `kafka-acls.sh {tools} --add --allow-principal {principal} --operation Describe --cluster`); the probes above are the proof"),
            ),
            _ => findings.add(Kind::Note, format!("ACLs not listed: DescribeAcls failed: {e}")),
        },
    }
}

fn is_timeout(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::OperationTimedOut | RDKafkaErrorCode::RequestTimedOut)
    ) || e.to_string().to_ascii_lowercase().contains("timed out")
}

/// The topic plan: the decision `run` acts on, the internal topics' checks
/// and the settings created topics would get. Returns the selected source
/// topics and whether the deployment ran before (its position topic
/// exists), or `None` when the metadata could not be read.
fn plan_topics(
    findings: &mut Findings,
    source: &ClientConfig,
    target: &ClientConfig,
    alias: &str,
    filter: &TopicFilter,
    options: &TargetTopicOptions,
) -> anyhow::Result<Option<(Vec<SourceTopic>, bool)>> {
    let (source_counts, target_metadata) = match (
        partition_counts(source, "source", CONNECT_TIMEOUT),
        cluster_metadata(target, "target", CONNECT_TIMEOUT),
    ) {
        (Ok(s), Ok(t)) => (s, t),
        (Err(e), _) | (_, Err(e)) => {
            findings.add(Kind::Unknown, format!("topic plan: {e}"));
            return Ok(None);
        }
    };
    let topics = select(&source_counts, filter);
    if topics.is_empty() {
        findings.add(
            Kind::Warning,
            "no source topic matches --include/--exclude: run would start and copy nothing until one appears",
        );
    }
    let internal_topics = InternalTopics::for_alias(alias);
    let decision = target::decide(&topics, &target_metadata, &internal_topics, options);
    let tools = &options.tools;
    let replication = match options.replication_factor {
        -1 => "the target's default replication factor".to_string(),
        n => format!("replication factor {n}"),
    };

    let runtime = tokio::runtime::Handle::current();
    let source_admin = target::admin(source, "source")?;
    let target_admin = target::admin(target, "target")?;
    for topic in &decision.missing {
        let settings = runtime.block_on(target::source_topic_settings(&source_admin, &topic.name));
        match settings {
            Ok(settings) => {
                let carried = match settings.is_empty() {
                    true => "no topic-level settings to carry".to_string(),
                    false => settings
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                };
                findings.add(
                    Kind::Create,
                    format!(
                        "topic {} on the target: {} partition(s) like the source, {replication}, {carried}",
                        topic.name, topic.partitions
                    ),
                );
            }
            Err(e) => findings.problem(
                format!("topic {}: run reads its settings on the source before creating it, and that failed: {e}", topic.name),
                "allow DescribeConfigs on the source topics for the source user",
            ),
        }
    }
    let types = runtime.block_on(target::describe_target_topics(&target_admin, &decision));
    if !types.unchecked.is_empty() {
        findings.add(
            Kind::Warning,
            format!("could not check the timestamp type of target topics ({}): run checks again, and copies into a topic with message.timestamp.type=LogAppendTime would carry the target's append times. Allow DescribeConfigs on them to the target user", types.unchecked_summary()),
        );
    }
    let appending = |findings: &mut Findings, name: &str| {
        let found = types.appending.iter().any(|t| t == name);
        if found {
            findings.problem(
                format!("target topic {name} has message.timestamp.type=LogAppendTime: run refuses it (the target would replace every copy's timestamp with the time it was appended)"),
                format!("`kafka-configs.sh {tools} --alter --entity-type topics --entity-name {name} --add-config message.timestamp.type=CreateTime`"),
            );
        }
        found
    };
    for (topic, on_target) in &decision.present {
        if appending(findings, &topic.name) {
            continue;
        }
        findings.add(
            Kind::Ok,
            format!(
                "topic {} exists on the target with {on_target} partition(s) (source {})",
                topic.name, topic.partitions
            ),
        );
    }
    for (name, on_source, on_target) in &decision.too_few {
        if decision.add_partitions && appending(findings, name) {
            continue;
        }
        match decision.add_partitions {
            true => findings.add(
                Kind::AddPartitions,
                format!("topic {name} on the target: from {on_target} to {on_source} partition(s) (--target.add.partitions)"),
            ),
            false => findings.problem(
                format!("target topic {name} has {on_target} partition(s), fewer than its source's {on_source}: run refuses it"),
                format!("`kafka-topics.sh {tools} --alter --topic {name} --partitions {on_source}`, or run with --target.add.partitions"),
            ),
        }
    }
    for refusal in decision.refusals() {
        if let target::TopicError::Layout { .. } = refusal {
            findings.problem(refusal.to_string(), "run with the --lanes it names");
        }
    }
    for spec in &decision.internal_missing {
        let settings = spec
            .settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        findings.add(
            Kind::Create,
            format!(
                "internal topic {}: {} partition(s), {replication}, {settings}",
                spec.name, spec.partitions
            ),
        );
    }

    let needs = Needs {
        progress_retention: options.progress_retention,
        target_brokers: target_metadata.brokers,
        tools,
    };
    let checked = runtime.block_on(target::check_existing(
        &target_admin,
        &internal_topics,
        &target_metadata,
        &needs,
    ));
    match checked {
        Ok(internal_findings) => {
            for spec in &decision.internal_present {
                let about: Vec<&InternalFinding> = internal_findings
                    .iter()
                    .filter(|f| f.topic == spec.name)
                    .collect();
                let mismatched = decision
                    .layout_mismatch
                    .iter()
                    .any(|(t, _)| *t == spec.name);
                if about.iter().all(|f| !f.refuses()) && !mismatched {
                    findings.add(
                        Kind::Ok,
                        format!(
                            "internal topic {} exists with {} partition(s) and settings run accepts",
                            spec.name, target_metadata.topics[&spec.name].partitions
                        ),
                    );
                }
                for finding in about {
                    let kind = if finding.refuses() {
                        Kind::Problem
                    } else {
                        Kind::Warning
                    };
                    findings.add(kind, finding.to_string());
                }
            }
        }
        Err(e) => findings.problem(e.to_string(), "grant what the message names"),
    }
    let resumes = target_metadata
        .topics
        .contains_key(&internal_topics.position);
    Ok(Some((topics, resumes)))
}

/// Watermarks and a sample of record sizes; `None` (with an `unknown:`
/// line) when the source does not answer.
fn estimate_copy(
    findings: &mut Findings,
    source: &ClientConfig,
    topics: &[SourceTopic],
    resumes: bool,
    options: &PlanOptions,
) -> Option<Estimate> {
    let limits = options.throttle;
    let partitions: Vec<SourcePartition> = topics
        .iter()
        .flat_map(|t| (0..t.partitions).map(move |p| SourcePartition::new(&t.name, p)))
        .collect();
    let group = format!("eosmirror.plan.{}", options.endpoints.source_alias);
    let counting: Result<BaseConsumer, _> = reader_config(source, &group, false).create();
    let marks = counting.map_err(|e| e.to_string()).and_then(|c| {
        watermarks::fetch_all(&c, &partitions, CONNECT_TIMEOUT).map_err(|e| e.to_string())
    });
    let marks = match marks {
        Ok(m) => m,
        Err(e) => {
            findings.add(
                Kind::Unknown,
                format!("size of the copy: source watermarks: {e}"),
            );
            return None;
        }
    };
    let sizes = sample_sizes(source, &group, &marks, options.sample_records);
    let (sampled_records, sampled_bytes) = sizes
        .values()
        .fold((0, 0), |(r, b), (sr, sb)| (r + sr, b + sb));
    let mean = (sampled_records > 0).then(|| sampled_bytes as f64 / sampled_records as f64);
    let mut records = 0u64;
    let mut bytes = 0f64;
    for (partition, (low, high)) in &marks {
        let count = (high - low).max(0) as u64;
        records += count;
        let partition_mean = match sizes.get(partition) {
            Some(&(r, b)) if r > 0 => Some(b as f64 / r as f64),
            _ => mean,
        };
        bytes += count as f64 * partition_mean.unwrap_or(0.0);
    }
    let bytes = bytes.round() as u64;
    let how = match mean {
        Some(mean) => format!(
            "(high - low watermark) of each partition x the mean key+value+header size of up to {} of its newest committed records ({sampled_records} records sampled, {} on average; partitions without a sample take that average)",
            options.sample_records,
            human_bytes(mean.round() as u64)
        ),
        None => "no committed record could be sampled, so no byte count".to_string(),
    };
    findings.add(
        Kind::Estimate,
        format!(
            "about {} in at most {records} records over {} partition(s) of {} topic(s), {}; estimated as {how}; the record count is an upper bound (transaction markers, aborted and compacted-away records take offsets too)",
            human_bytes(bytes),
            marks.len(),
            topics.len(),
            match resumes {
                false => "from each partition's earliest record (a first start)",
                true => "counted from each partition's earliest record, but this deployment ran before (its position topic exists) and resumes from its positions, so it copies only what is past them",
            }
        ),
    );
    let by_bytes = limits.bytes_per_sec.filter(|_| mean.is_some()).map(|l| {
        (
            bytes.div_ceil(l.max(1)),
            format!("--throttle.bytes.per.sec {l}"),
        )
    });
    let by_records = limits.records_per_sec.map(|l| {
        (
            records.div_ceil(l.max(1)),
            format!("--throttle.records.per.sec {l}"),
        )
    });
    let slowest = [by_bytes.clone(), by_records.clone()]
        .into_iter()
        .flatten()
        .max_by_key(|(s, _)| *s);
    match &slowest {
        Some((seconds, _)) => {
            let parts: Vec<String> = [by_bytes, by_records]
                .into_iter()
                .flatten()
                .map(|(s, flag)| format!("{} at {flag}", human_duration(s)))
                .collect();
            findings.add(
                Kind::Estimate,
                format!(
                    "the copy takes at least {} at the throttle ({}): the slower limit holds; records arriving meanwhile add to it",
                    human_duration(*seconds),
                    parts.join(", ")
                ),
            );
        }
        None => findings.add(
            Kind::Estimate,
            "no --throttle.* limit: the copy runs as fast as the clusters allow; `tests/bench/replication` measures a pair of clusters",
        ),
    }
    Some(Estimate {
        partitions: marks.len(),
        records_at_most: records,
        bytes,
        sampled_records,
        sampled_bytes,
        seconds_at_throttle: slowest.map(|(s, _)| s),
    })
}

/// Reads up to `per_partition` of the newest committed records of each
/// partition (of the first [`SAMPLE_PARTITIONS`]); (records, bytes) per
/// partition, bytes counted as the throttle counts them.
fn sample_sizes(
    source: &ClientConfig,
    group: &str,
    marks: &watermarks::Watermarks,
    per_partition: u64,
) -> BTreeMap<SourcePartition, (u64, u64)> {
    let mut sizes = BTreeMap::new();
    if per_partition == 0 {
        return sizes;
    }
    let Ok(reader) = reader_config(source, group, true).create::<BaseConsumer>() else {
        return sizes;
    };
    let mut assignment = TopicPartitionList::new();
    let mut wanted: BTreeMap<(String, i32), (i64, u64)> = BTreeMap::new();
    let mut chosen: Vec<_> = marks.iter().filter(|(_, (l, h))| h > l).collect();
    chosen.sort_by(|a, b| a.0.cmp(b.0));
    for (p, &(low, high)) in chosen.into_iter().take(SAMPLE_PARTITIONS) {
        let start = (high - per_partition as i64).max(low);
        if assignment
            .add_partition_offset(&p.topic, p.partition, Offset::Offset(start))
            .is_ok()
        {
            wanted.insert((p.topic.clone(), p.partition), (high, 0));
        }
    }
    if wanted.is_empty() || reader.assign(&assignment).is_err() {
        return sizes;
    }
    let deadline = Instant::now() + SAMPLE_TIME;
    while !wanted.is_empty() && Instant::now() < deadline {
        let Some(Ok(message)) = reader.poll(Duration::from_millis(200)) else {
            continue;
        };
        let key = (message.topic().to_string(), message.partition());
        let Some((high, taken)) = wanted.get_mut(&key) else {
            continue;
        };
        let headers: usize = message
            .headers()
            .map(|hs| {
                hs.iter()
                    .map(|h| h.key.len() + h.value.map_or(0, <[u8]>::len))
                    .sum()
            })
            .unwrap_or(0);
        let size = message.key().map_or(0, <[u8]>::len)
            + message.payload().map_or(0, <[u8]>::len)
            + headers;
        let entry = sizes
            .entry(SourcePartition::new(&key.0, key.1))
            .or_insert((0, 0));
        entry.0 += 1;
        entry.1 += size as u64;
        *taken += 1;
        if *taken >= per_partition || message.offset() + 1 >= *high {
            wanted.remove(&key);
        }
    }
    sizes
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} B"),
        _ => format!("{value:.1} {}", UNITS[unit]),
    }
}

fn human_duration(seconds: u64) -> String {
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    match (h, m) {
        (0, 0) => format!("{s} s"),
        (0, _) => format!("{m} min {s} s"),
        _ => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_blocks_and_an_unknown_alone_cannot_tell() {
        let mut findings = Findings::default();
        findings.add(Kind::Ok, "fine");
        findings.add(Kind::Create, "a topic");
        assert_eq!(findings.verdict(), Verdict::Ready);
        findings.add(Kind::Unknown, "no answer");
        assert_eq!(findings.verdict(), Verdict::Unknown);
        findings.problem("bad", "fix it");
        assert_eq!(findings.verdict(), Verdict::Blocked);
        let text = PlanReport {
            findings: findings.0,
            estimate: None,
            verdict: Verdict::Blocked,
        }
        .to_text();
        assert!(text.contains("problem: bad (fix: fix it)\n"), "{text}");
        assert!(text.ends_with(
            "plan: BLOCKED: 1 problem(s) would stop `eosmirror run`; fix them and plan again\n"
        ));
    }

    #[test]
    fn a_denied_transactional_id_names_the_acl_to_grant() {
        let denied = Err(KafkaError::Global(
            RDKafkaErrorCode::TransactionalIdAuthorizationFailed,
        ));
        let tools = "--bootstrap-server t:9093 --command-config p.properties";
        let line = probe_finding(denied, "x.a.plan-probe-1", "x.a", tools, "User:mirror");
        assert_eq!(line.kind, Kind::Problem);
        assert!(
            line.text.contains("TransactionalIdAuthorizationFailed"),
            "{}",
            line.text
        );
        assert_eq!(
            line.fix.as_deref(),
            Some("`kafka-acls.sh --bootstrap-server t:9093 --command-config p.properties --add --allow-principal User:mirror --operation Write --operation Describe --transactional-id x.a. --resource-pattern-type prefixed`")
        );
        let timed_out = Err(KafkaError::Global(RDKafkaErrorCode::OperationTimedOut));
        let line = probe_finding(timed_out, "x.a.plan-probe-1", "x.a", tools, "User:mirror");
        assert_eq!(line.kind, Kind::Unknown);
        let line = probe_finding(Ok(()), "x.a.plan-probe-1", "x.a", tools, "User:mirror");
        assert_eq!(line.kind, Kind::Ok);
        assert!(line.text.contains("x.a.lane-N untouched"), "{}", line.text);
    }

    #[test]
    fn sizes_and_durations_read_at_a_glance() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(12_345_678), "12.3 MB");
        assert_eq!(human_duration(59), "59 s");
        assert_eq!(human_duration(61), "1 min 1 s");
        assert_eq!(human_duration(7_260), "2 h 1 min");
    }
}

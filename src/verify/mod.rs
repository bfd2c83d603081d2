//! `eosmirror verify`: is the target an exact copy of the source?
//!
//! Mapped mode pairs every committed source record with its copy through
//! the offset mapping eosmirror committed atomically with the copies (the
//! progress records), so no header is needed on data records and a
//! difference is found at the very record where it happens. Sequence mode
//! compares copies made by other tools record by record in order.
//!
//! Consistency of the snapshot (mapped mode): the target's high watermarks
//! are taken first, then verify waits until every transaction below them
//! has ended, and only then reads the progress topic to its end, once no
//! transaction is open below the progress partitions' high watermarks read
//! then (a transaction's commit markers land partition by partition). Every
//! eosmirror transaction that wrote a target record in the checked range
//! has therefore committed (or aborted) before the mapping is read, and its
//! progress record — written in the same transaction — is in the mapping.
//! So no record of a running mirror is ever mistaken for an unexpected one.
//! The mapping is taken as of the snapshot (`read_mappings_as_of`): commits
//! made after it are left out, or their copies, past the snapshot's end,
//! would be reported missing.

pub mod compaction;
pub mod judge;
pub mod lookups;
pub mod plan;
pub mod progress_line;
pub mod range;
pub mod report;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use eosmirror_state::SourcePartition;

use crate::clusters::{Cluster, Endpoints, CONNECT_TIMEOUT};
use crate::config::ClientRole;
use crate::offsets::history::{read_mappings_as_of, AsOf, MappingTooLarge, TargetEnds};
use crate::offsets::mapping::OffsetMap;
use crate::offsets::tail::Needed;
use crate::offsets::topics_now::{check_topics, topics_now};
use crate::read::{first_committed, start_of_last, RangeReader, ReadError, Side};
use crate::replication::layout::{Lane, Layout};
use crate::replication::progress::InternalTopics;
use crate::replication::throttle::{Throttle, ThrottleLimits};
use crate::topics::filter::TopicFilter;
use crate::topics::target::partition_counts;
use lookups::SourceLookups;
use plan::{plan_mapped, PlanInputs, Watermarks};
use range::{Range, SideName, Starts};
use report::{PartitionReport, Report};

/// One partition's work: what to read on each side, and how to pair.
struct Job {
    report: PartitionReport,
    /// Exact mapping (mapped mode only).
    map: Option<OffsetMap>,
}

/// What verify checks and how: plain options, so `verify` and `cutover`
/// (which verifies the copy's tail) build them alike.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// Both clusters, and the alias whose offset mapping pairs records.
    pub endpoints: Endpoints,
    /// The source topics checked.
    pub topics: TopicFilter,
    /// The topic options as given (`--include "a" --exclude "b"`): the
    /// error when no source topic matches quotes them.
    pub topics_given: String,
    /// The part of each partition checked.
    pub range: Range,
    /// How source and target records are paired.
    pub pairing: Pairing,
    /// Partitions read at the same time (each reads both sides).
    pub parallelism: usize,
    /// Bound on prefetched record bytes across all readers.
    pub max_memory_bytes: usize,
    /// Bound on the offset mappings held at once (mapped mode): past it,
    /// the partitions are checked in batches whose mappings fit.
    pub max_mapping_bytes: usize,
    /// Most bytes read per second from each cluster: verify reads
    /// production clusters. `None`: unlimited.
    pub throttle_bytes_per_sec: Option<u64>,
    /// Longest a read may make no progress before its partition is
    /// reported unverifiable.
    pub stall_timeout: Duration,
}

/// How records are paired.
#[derive(Debug, Clone)]
pub enum Pairing {
    /// Through eosmirror's exact offset mapping (same topic names).
    Mapped,
    /// By order, for copies made by other tools.
    Sequence {
        /// Prefix of target topic names (MirrorMaker 2 writes
        /// `<source alias>.<topic>`).
        target_prefix: String,
        /// Where to start in listed partitions; the others start at their
        /// first record.
        starts: Starts,
    },
}

impl Pairing {
    /// The mode's name in the report.
    fn name(&self) -> &'static str {
        match self {
            Pairing::Mapped => "mapped",
            Pairing::Sequence { .. } => "sequence",
        }
    }
}

/// Runs verify and returns its report. Blocking: run it off the async
/// runtime.
pub fn verify(options: &VerifyOptions) -> anyhow::Result<Report> {
    let started = Instant::now();
    let filter = &options.topics;
    let range = options.range;
    let no_starts = Starts::new();
    let (target_prefix, starts) = match &options.pairing {
        Pairing::Mapped => ("", &no_starts),
        Pairing::Sequence {
            target_prefix,
            starts,
        } => (target_prefix.as_str(), starts),
    };
    let source_cluster = Cluster::connect(
        "source",
        &options.endpoints.source_config,
        ClientRole::Consumer,
    )?;
    let target_cluster = Cluster::connect(
        "target",
        &options.endpoints.target_config,
        ClientRole::Producer,
    )?;
    let stall_limit = options.stall_timeout;
    let readers = 2 * options.parallelism;
    let reader_kbytes = options.max_memory_bytes / readers / 1024;
    let mut source = source_cluster.side(reader_kbytes, stall_limit);
    let mut target = target_cluster.side(reader_kbytes, stall_limit);
    if let Some(rate) = options.throttle_bytes_per_sec {
        for side in [&mut source, &mut target] {
            side.throttle = Some(Arc::new(Throttle::new(ThrottleLimits {
                bytes_per_sec: Some(rate),
                records_per_sec: None,
            })));
        }
    }

    let source_topics = partition_counts(&source.connection, "source", CONNECT_TIMEOUT)?;
    let target_topics = partition_counts(&target.connection, "target", CONNECT_TIMEOUT)?;
    let selected: Vec<(String, i32)> = source_topics
        .iter()
        .filter(|(name, _)| filter.matches(name))
        .map(|(name, &n)| (name.clone(), n))
        .collect();
    if selected.is_empty() {
        bail!(
            "no source topic matches {}; check the pattern (topics on the source: {})",
            options.topics_given,
            source_topics
                .keys()
                .filter(|t| !t.starts_with("__"))
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }

    let mut jobs = Vec::new();
    for (topic, partitions) in &selected {
        let target_topic = format!("{target_prefix}{topic}");
        let target_partitions = target_topics.get(&target_topic).copied().unwrap_or(0);
        for partition in 0..*partitions {
            let mut report = PartitionReport {
                topic: topic.clone(),
                target_topic: target_topic.clone(),
                partition,
                ..PartitionReport::default()
            };
            if partition >= target_partitions {
                report.unverifiable.push(if target_partitions == 0 {
                    format!("the target has no topic {target_topic}")
                } else {
                    format!("the target topic {target_topic} has {target_partitions} partitions; partition {partition} is missing")
                });
            }
            jobs.push(Job { report, map: None });
        }
    }

    let read = Arc::new(AtomicU64::new(0));
    let reports = match options.pairing {
        Pairing::Mapped => {
            mark_compacted_topics(&mut jobs, &source, &target);
            verify_mapped(jobs, &source, &target, options, &read)?
        }
        Pairing::Sequence { .. } => {
            plan_sequence_jobs(&mut jobs, &source, &target, range, starts)?;
            check_starts(&jobs, starts)?;
            run_jobs(jobs, &source, &target, options.parallelism, &read)
        }
    };
    Ok(Report::new(
        options.pairing.name(),
        reports,
        started.elapsed().as_secs_f64(),
    ))
}

/// Every `--start` names a partition verified.
fn check_starts(jobs: &[Job], starts: &Starts) -> anyhow::Result<()> {
    for (side, topic, partition) in starts.keys() {
        let known = jobs.iter().any(|j| {
            j.report.partition == *partition
                && match side {
                    SideName::Source => j.report.topic == *topic,
                    SideName::Target => j.report.target_topic == *topic,
                }
        });
        if !known {
            bail!("--start names {topic}-{partition}, which is not among the verified partitions");
        }
    }
    Ok(())
}

/// Mapped mode: plans and checks the partitions in batches whose offset
/// mappings fit `--max.mapping.bytes` together, each batch at its own
/// snapshot. All at once if they fit (one read of the progress topic);
/// past the bound, one batch per lane (a lane's partitions are in one
/// partition of the progress topic), halved until it fits. A partition
/// whose mapping alone does not fit is unverifiable, with what to do.
fn verify_mapped(
    jobs: Vec<Job>,
    source: &Side,
    target: &Side,
    options: &VerifyOptions,
    read: &Arc<AtomicU64>,
) -> anyhow::Result<Vec<PartitionReport>> {
    let topics = InternalTopics::for_alias(&options.endpoints.source_alias);
    let mut batches = VecDeque::from([jobs]);
    let mut reports = Vec::new();
    let mut split_by_lane = false;
    while let Some(mut batch) = batches.pop_front() {
        let planned = plan_mapped_jobs(&mut batch, source, target, &topics, options);
        match planned {
            Ok(()) => {
                reports.extend(run_jobs(batch, source, target, options.parallelism, read));
                continue;
            }
            Err(e) if e.is::<MappingTooLarge>() => {}
            // Nothing checked yet: verify could not start.
            Err(e) if reports.is_empty() && batches.is_empty() => return Err(e),
            // The batches checked keep their findings; this one says why
            // it was not.
            Err(e) => {
                let why = format!("not checked: {}", crate::error_chain::one_line(&e));
                for job in &mut batch {
                    job.report.unverifiable.push(why.clone());
                    reports.push(std::mem::take(&mut job.report));
                }
                continue;
            }
        }
        if let [job] = &mut batch[..] {
            job.report.unverifiable.push(format!(
                "its offset mapping alone needs more than --max.mapping.bytes ({} bytes); verify a part of it (--since or --last) or raise the bound",
                options.max_mapping_bytes
            ));
            reports.push(std::mem::take(&mut job.report));
            continue;
        }
        let parts = if split_by_lane {
            let half = batch.split_off(batch.len() / 2);
            vec![batch, half]
        } else {
            split_by_lane = true;
            tracing::info!(
                "verify: the offset mappings of {} partitions need more than --max.mapping.bytes ({} bytes); checking them lane by lane, in batches that fit",
                batch.len(),
                options.max_mapping_bytes
            );
            by_lane(batch, target, &topics)?
        };
        for part in parts.into_iter().rev().filter(|p| !p.is_empty()) {
            batches.push_front(part);
        }
    }
    // In the order of the partitions, whatever the batches were.
    reports.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    Ok(reports)
}

/// `jobs` grouped by the lane that copies them (the progress topic's
/// partition holding their history), in their order.
fn by_lane(
    jobs: Vec<Job>,
    target: &Side,
    topics: &InternalTopics,
) -> anyhow::Result<Vec<Vec<Job>>> {
    let lanes = target.partition_count(&topics.progress)?.unwrap_or(1);
    let Ok(layout) = Layout::new(lanes as u32) else {
        return Ok(vec![jobs]);
    };
    let mut groups: BTreeMap<Lane, Vec<Job>> = BTreeMap::new();
    for job in jobs {
        let partition = SourcePartition::new(&job.report.topic, job.report.partition);
        groups
            .entry(layout.lane_of(&partition))
            .or_default()
            .push(job);
    }
    Ok(groups.into_values().collect())
}

/// Marks the jobs of topics compacted on either cluster (see
/// [`compaction`]). A topic whose policy a cluster does not tell (no
/// DescribeConfigs permission) is judged strictly: records its cleaner
/// removed would show as differences, and a warning says so.
fn mark_compacted_topics(jobs: &mut [Job], source: &Side, target: &Side) {
    let source_topics: BTreeSet<&str> = jobs.iter().map(|j| j.report.topic.as_str()).collect();
    // A missing target topic already makes its partitions unverifiable.
    let target_topics: BTreeSet<&str> = jobs
        .iter()
        .filter(|j| j.report.unverifiable.is_empty())
        .map(|j| j.report.target_topic.as_str())
        .collect();
    let mut compacted = BTreeSet::new();
    for (side, cluster, names) in [
        (source, "source", source_topics),
        (target, "target", target_topics),
    ] {
        let names: Vec<&str> = names.into_iter().collect();
        let (found, unknown) = compaction::compacted_topics(&side.connection, cluster, &names);
        for why in unknown {
            tracing::warn!("verify: no cleanup.policy for {why}; judged as not compacted (records its cleaner removed would show as differences)");
        }
        compacted.extend(found.into_iter().map(|t| (cluster, t)));
    }
    for job in jobs {
        let report = &mut job.report;
        for (cluster, topic) in [("source", &report.topic), ("target", &report.target_topic)] {
            if compacted.contains(&(cluster, topic.clone())) {
                report.compacted_on.push(cluster);
            }
        }
    }
}

/// Reads the offset mapping and plans every partition (mapped mode), or
/// stops with [`MappingTooLarge`] before it changes any job.
fn plan_mapped_jobs(
    jobs: &mut [Job],
    source: &Side,
    target: &Side,
    topics: &InternalTopics,
    options: &VerifyOptions,
) -> anyhow::Result<()> {
    let range = options.range;
    let mut target_marks: BTreeMap<(String, i32), Watermarks> = target
        .watermarks_of(&partitions_of(jobs, SideName::Target))?
        .into_iter()
        .map(|(p, (low, high))| ((p.topic, p.partition), Watermarks { low, high }))
        .collect();
    // Every transaction below the snapshot must end before the mapping is
    // read (see the module comment).
    let ends: Vec<(String, i32, i64)> = target_marks
        .iter()
        .filter(|(_, marks)| marks.high > marks.low)
        .map(|((topic, partition), marks)| (topic.clone(), *partition, marks.high))
        .collect();
    target.wait_until_settled(&ends)?;
    // Mapped mode copies to the same topic and partition number.
    let snapshot: TargetEnds = target_marks
        .iter()
        .map(|(key, marks)| (key.clone(), marks.high))
        .collect();
    // `--since`: where each partition's range starts on the source.
    let mut since_offsets = BTreeMap::new();
    if let Range::Since(ms) = range {
        for (p, offset) in source.offsets_for_time(&partitions_of(jobs, SideName::Source), ms)? {
            since_offsets.insert((p.topic, p.partition), offset);
        }
    }
    let needed = match range {
        Range::All => Needed::All,
        // No record at or after the time: the range starts at the end.
        Range::Since(_) => Needed::From(
            since_offsets
                .iter()
                .map(|(key, offset)| (key.clone(), offset.unwrap_or(i64::MAX)))
                .collect(),
        ),
        Range::Last(n) => Needed::Last(n),
    };
    let as_of = AsOf {
        ends: &snapshot,
        max_mapping_bytes: options.max_mapping_bytes,
    };
    let (mut maps, lineages, later, history_truncated) =
        read_mappings_as_of(target, topics, as_of, &needed)?;
    let ids = topics_now(source, target, jobs.iter().map(|j| j.report.topic.as_str()))?;
    // Read after the history: every commit in it was acknowledged by the
    // in-sync replicas, so a target partition now ending below a commit's
    // copies lost them (an unclean leader election, a replaced disk). Taken
    // for copies made after the snapshot, they would only shorten the range
    // checked, and the copy would verify exact without them.
    let past: Vec<SourcePartition> = later
        .keys()
        .map(|(topic, partition)| SourcePartition::new(topic, *partition))
        .collect();
    let ends_now = target.watermarks_of(&past)?;
    let mut lost = BTreeMap::new();
    let mut past_lineages = BTreeMap::new();
    for (key, past) in later {
        let now = ends_now.get(&SourcePartition::new(&key.0, key.1));
        if let Some(&(_, now)) = now.filter(|(_, high)| *high < past.copies_end) {
            lost.insert(key.clone(), (now, past.copies_end));
        }
        if let Some(marks) = target_marks.get_mut(&key) {
            marks.high = marks.high.min(past.first_copy).max(marks.low);
        }
        past_lineages.insert(key, past.lineage);
    }

    let source_ends = source_committed_ends(source, jobs)?;
    for job in jobs.iter_mut().filter(|j| j.report.unverifiable.is_empty()) {
        let r = &mut job.report;
        let key = (r.topic.clone(), r.partition);
        // A copy of a topic deleted since is no copy of this one (with
        // every commit past the snapshot, the newest lineage is theirs).
        if let Some(lineage) = lineages.get(&key).or(past_lineages.get(&key)) {
            let now = ids.get(&r.topic).copied().unwrap_or_default();
            if let Err(recreated) = check_topics(&r.topic, lineage, now) {
                r.unverifiable.push(recreated.to_string());
                continue;
            }
        }
        if let Some((now, copies_end)) = lost.get(&key) {
            r.unverifiable.push(format!(
                "the target partition ends at {now}, below copies eosmirror committed up to {copies_end}: the target lost committed copies (an unclean leader election, a broker's disk restored from a backup), so the copy is not exact. To copy the topic again, delete the target topic and restart run with --start.over '{}'", r.topic
            ));
            continue;
        }
        let source_marks = source_ends[&SourcePartition::new(&r.topic, r.partition)];
        // Moved, not copied: the maps of a whole history are large.
        let map = maps.remove(&key).unwrap_or_default();
        let since_offset = since_offsets.get(&key).copied().flatten();
        let truncated = history_truncated.contains(&key);
        let mut marks = target_marks[&(r.target_topic.clone(), r.partition)];
        if truncated && range == Range::All {
            // Where the mapping kept starts is judged against the target's
            // first committed record, not its log start: a log that starts
            // with transaction markers (a segment may) holds nothing there
            // that an expired mapping leaves unjudged.
            match first_committed(target, &r.target_topic, r.partition, marks.low, marks.high) {
                Ok(first) => marks.low = first.unwrap_or(marks.high),
                Err(e) => {
                    r.unverifiable
                        .push(format!("reading where the target's records start: {e}"));
                    continue;
                }
            }
        }
        let plan = plan_mapped(&PlanInputs {
            range,
            source: source_marks,
            target: marks,
            map: &map,
            history_truncated: truncated,
            since_offset,
            // A lineage with no commit: only a position past the snapshot.
            copied_after_snapshot: truncated
                && lineages.contains_key(&key)
                && map.replicated_position.is_none(),
        });
        r.source_range = (plan.source_from, plan.source_to);
        r.target_range = (plan.target_from, plan.target_to);
        r.from_log_start = [
            plan.source_from <= source_marks.low,
            plan.target_from <= marks.low,
        ];
        r.unverifiable.extend(plan.unverifiable);
        if let Some(from) = plan.unreplicated_from {
            if let Some(first) =
                first_committed(source, &r.topic, r.partition, from, source_marks.high)?
            {
                r.not_yet_replicated = Some((first, source_marks.high));
            }
        }
        job.map = Some(map);
    }
    Ok(())
}

/// The partitions of `jobs` still to be verified, on one side.
fn partitions_of(jobs: &[Job], side: SideName) -> Vec<SourcePartition> {
    jobs.iter()
        .filter(|j| j.report.unverifiable.is_empty())
        .map(|j| {
            let r = &j.report;
            let topic = match side {
                SideName::Source => &r.topic,
                SideName::Target => &r.target_topic,
            };
            SourcePartition::new(topic, r.partition)
        })
        .collect()
}

/// The committed data of every source partition still to be verified: up
/// to its last stable offset. Records past it are in a transaction still
/// open; they are named in the report (a commit would add them later), not
/// read, since a `read_committed` read would wait for that transaction to
/// end.
fn source_committed_ends(
    source: &Side,
    jobs: &mut [Job],
) -> Result<HashMap<SourcePartition, Watermarks>, ReadError> {
    let partitions = partitions_of(jobs, SideName::Source);
    let stable = source.stable_watermarks_of(&partitions)?;
    let all = source.watermarks_of(&partitions)?;
    for job in jobs.iter_mut().filter(|j| j.report.unverifiable.is_empty()) {
        let r = &mut job.report;
        let key = SourcePartition::new(&r.topic, r.partition);
        let (stable_end, high) = (stable[&key].1, all[&key].1);
        r.open_transaction = (high > stable_end).then_some((stable_end, high));
    }
    Ok(stable
        .into_iter()
        .map(|(p, (low, high))| (p, Watermarks { low, high }))
        .collect())
}

/// Plans every partition for order-based comparison (sequence mode).
fn plan_sequence_jobs(
    jobs: &mut [Job],
    source: &Side,
    target: &Side,
    range: Range,
    starts: &Starts,
) -> anyhow::Result<()> {
    let source_ends = source_committed_ends(source, jobs)?;
    // Another tool's copy: its open transactions are not waited for.
    let target_ends = target.stable_watermarks_of(&partitions_of(jobs, SideName::Target))?;
    // Copies keep source timestamps, so the same time finds the same place
    // on both sides.
    let since_offsets = match range {
        Range::Since(ms) => Some((
            source.offsets_for_time(&partitions_of(jobs, SideName::Source), ms)?,
            target.offsets_for_time(&partitions_of(jobs, SideName::Target), ms)?,
        )),
        Range::All | Range::Last(_) => None,
    };
    for job in jobs.iter_mut().filter(|j| j.report.unverifiable.is_empty()) {
        let r = &mut job.report;
        let Watermarks {
            low: s_low,
            high: s_high,
        } = source_ends[&SourcePartition::new(&r.topic, r.partition)];
        let (t_low, t_high) = target_ends[&SourcePartition::new(&r.target_topic, r.partition)];
        let (mut s_from, mut t_from) = match range {
            Range::All => (s_low, t_low),
            Range::Since(_) => {
                let (source_since, target_since) =
                    since_offsets.as_ref().expect("asked for --since above");
                (
                    source_since[&SourcePartition::new(&r.topic, r.partition)].unwrap_or(s_high),
                    target_since[&SourcePartition::new(&r.target_topic, r.partition)]
                        .unwrap_or(t_high),
                )
            }
            // The last n records of each side, not offsets: markers and
            // aborted records (one side transactional, the other not) would
            // put the two windows' starts on different records.
            Range::Last(n) => {
                let starts = start_of_last(source, &r.topic, r.partition, (s_low, s_high), n)
                    .and_then(|s| {
                        Ok((
                            s,
                            start_of_last(
                                target,
                                &r.target_topic,
                                r.partition,
                                (t_low, t_high),
                                n,
                            )?,
                        ))
                    });
                match starts {
                    Ok(starts) => starts,
                    Err(e) => {
                        r.unverifiable
                            .push(format!("finding where the last {n} records start: {e}"));
                        continue;
                    }
                }
            }
        };
        if let Some(&o) = starts.get(&(SideName::Source, r.topic.clone(), r.partition)) {
            s_from = o;
        }
        if let Some(&o) = starts.get(&(SideName::Target, r.target_topic.clone(), r.partition)) {
            t_from = o;
        }
        if s_from < s_low {
            r.unverifiable.push(format!("source offsets [{s_from}, {s_low}) were deleted from the source (retention or DeleteRecords); start later with --start source:{}:{}={s_low}", r.topic, r.partition));
            s_from = s_low;
        }
        if t_from < t_low {
            r.unverifiable.push(format!("target offsets [{t_from}, {t_low}) were deleted from the target; start later with --start target:{}:{}={t_low}", r.target_topic, r.partition));
            t_from = t_low;
        }
        r.source_range = (s_from, s_high.max(s_from));
        r.target_range = (t_from, t_high.max(t_from));
    }
    Ok(())
}

/// Checks the partitions, `parallelism` at a time, each on its own thread,
/// with the progress line on standard error.
fn run_jobs(
    jobs: Vec<Job>,
    source: &Side,
    target: &Side,
    parallelism: usize,
    read: &Arc<AtomicU64>,
) -> Vec<PartitionReport> {
    let total: u64 = jobs
        .iter()
        .map(|j| {
            (j.report.source_range.1 - j.report.source_range.0 + j.report.target_range.1
                - j.report.target_range.0)
                .max(0) as u64
        })
        .sum();
    // Counted per batch: the line shows this batch against its total.
    read.store(0, std::sync::atomic::Ordering::Relaxed);
    let display = progress_line::ProgressLine::start(total, Arc::clone(read));
    let count = jobs.len();
    let queue = Mutex::new(jobs.into_iter().enumerate().collect::<VecDeque<_>>());
    let done = Mutex::new(Vec::with_capacity(count));
    let stalled = StalledSides::default();
    std::thread::scope(|scope| {
        for _ in 0..parallelism.min(count) {
            scope.spawn(|| loop {
                let Some((index, job)) = queue.lock().expect("queue lock").pop_front() else {
                    break;
                };
                let report = check_partition(job, source, target, read, &stalled);
                done.lock().expect("results lock").push((index, report));
            });
        }
    });
    display.finish();
    let mut done = done.into_inner().expect("results lock");
    done.sort_by_key(|(index, _)| *index);
    done.into_iter().map(|(_, r)| r).collect()
}

/// The first read of each side that made no progress for the stall limit
/// while every broker of that side was down. Once one did, the partitions
/// after it are not read from that side: each would wait the whole limit
/// again (with 1,000 partitions, four at a time and the default 2 minutes,
/// some 8 hours before verify gave up).
#[derive(Default)]
struct StalledSides(Mutex<BTreeMap<&'static str, String>>);

impl StalledSides {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, String>> {
        self.0.lock().expect("stalled sides lock")
    }
}

/// Reads both sides of one partition and judges them. A read that cannot
/// finish makes the partition unverifiable, naming why.
fn check_partition(
    job: Job,
    source: &Side,
    target: &Side,
    read: &Arc<AtomicU64>,
    stalled: &StalledSides,
) -> PartitionReport {
    let Job { mut report, map } = job;
    let not_read: Vec<String> = [source.name, target.name]
        .into_iter()
        .filter_map(|side| {
            let why = stalled.lock().get(side).cloned()?;
            Some(format!("not read: the {side} stopped answering ({why})"))
        })
        .collect();
    if !not_read.is_empty() {
        report.unverifiable.extend(not_read);
        return report;
    }
    let result = (|| -> Result<(), ReadError> {
        let (s_from, s_to) = report.source_range;
        let (t_from, t_to) = report.target_range;
        let mut s = RangeReader::open(
            source,
            &report.topic,
            report.partition,
            s_from,
            s_to,
            true,
            Arc::clone(read),
        )?;
        let mut t = RangeReader::open(
            target,
            &report.target_topic,
            report.partition,
            t_from,
            t_to,
            true,
            Arc::clone(read),
        )?;
        let mut lookups = SourceLookups::new(source, &report.topic, report.partition);
        match &map {
            Some(map) => judge::judge_mapped(&mut s, &mut t, map, &mut lookups, &mut report),
            None => judge::judge_sequence(&mut s, &mut t, &mut lookups, &mut report),
        }
    })();
    if let Err(e) = result {
        if let ReadError::Stalled {
            side, recovering, ..
        } = &e
        {
            if recovering.all_brokers_down() {
                stalled.lock().entry(side).or_insert_with(|| e.to_string());
            }
        }
        report.unverifiable.push(format!("reading stopped: {e}"));
    }
    report
}

//! `eosmirror status`: how far each partition is replicated, from any
//! machine with `run`'s properties files; the running process is not needed.
//!
//! Everything comes from the clusters, with a bounded number of clients
//! whatever the partition count (one reader of the position topic, one of
//! the status topic, one watermark client and one reader on the source,
//! one admin request for the fleet's group):
//!
//! - **replicated position** and **last commit**: the latest record of each
//!   source partition in the position topic, read `read_committed` up to
//!   its last stable offset (a transaction open there is not waited for);
//!   last commit is the record's commit time (a session's claim counts).
//! - **lag in records**: the source's committed end (last stable offset)
//!   minus the replicated position; 0 when nothing but transaction markers
//!   or aborted records lies between them. Records of source transactions
//!   still open are not counted: they cannot be copied yet.
//! - **lag in time**: now minus the timestamp of the oldest committed
//!   record not yet replicated (the first one at or after the position):
//!   how long the oldest missing record has been waiting, 0 when none is.
//!   One record per lagging partition is read, all through one consumer.
//! - **owner**: the lane from the fixed layout, the instance from the
//!   fleet group's assignment (each member's client id names its instance).
//! - **stopped** partitions, rates, ETAs: from the status topic, which only
//!   running instances write (every 5 s); older records are "stale".

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use eosmirror_state::SourcePartition;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use crate::clusters::{Cluster, Endpoints};
use crate::config::ClientRole;
use crate::error_chain::one_line;
use crate::groups::kafka::GroupClient;
use crate::offsets::topics_now::{check_topics, topics_now, Recreated};
use crate::read::{is_deleted, poll_reader, reader_config, StallWatch};
use crate::replication::layout::Layout;
use crate::replication::member_id::describe_member;
use crate::replication::progress::{InternalTopics, ProgressEntry, ProgressRecord};
use crate::replication::status_topic::LaneStatus;
use crate::replication::watermarks;
use crate::topics::filter::TopicFilter;
use crate::topics::target::partition_counts;

/// Exit codes for scripts.
pub const HEALTHY: u8 = 0;
pub const LAGGING: u8 = 1;
pub const CANNOT_TELL: u8 = 2;

/// One partition's line.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionStatus {
    pub topic: String,
    pub partition: i32,
    pub lane: u32,
    /// The instance the fleet's group gave the lane to (`instance-<id>@host`),
    /// `None` when no running instance owns it.
    pub owner: Option<String>,
    /// Next source offset to copy as the target records it; `None`: no
    /// position yet.
    pub replicated_position: Option<i64>,
    /// The source's first offset and committed end (last stable offset).
    pub source_start: Option<i64>,
    pub source_end: Option<i64>,
    pub lag_records: Option<i64>,
    pub lag_ms: Option<i64>,
    /// When the position was last committed (ms since the epoch).
    pub last_commit_ms: Option<i64>,
    /// The instance that wrote the latest position.
    pub last_writer: Option<String>,
    /// Why a running instance stopped it (fresh status record).
    pub stopped: Option<String>,
    /// A stopped reason from a stale status record (not counted).
    pub stale_stopped: Option<String>,
    /// Whatever else is wrong or unknown about the partition.
    pub notes: Vec<String>,
    /// `ok`, `lagging`, `stopped`, `unknown` (lag not read in time), `gone`
    /// (no longer on the source; not counted).
    pub state: &'static str,
}

/// One lane's owner and last published status.
#[derive(Debug, Clone, Serialize)]
pub struct LaneView {
    pub lane: u32,
    pub owner: Option<String>,
    pub partitions: usize,
    pub status: Option<LaneStatusView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LaneStatusView {
    pub instance: String,
    pub host: String,
    pub pid: u32,
    pub published_at_ms: i64,
    pub age_ms: i64,
    pub stale: bool,
    /// False: the instance's last record, written as it stopped.
    pub running: bool,
    pub records_per_sec: f64,
    pub remaining: u64,
    pub eta_secs: Option<u64>,
    pub stopped: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    pub partitions: usize,
    pub lagging: usize,
    pub stopped: usize,
    pub lag_records: i64,
    pub max_lag_ms: i64,
    /// From fresh status records.
    pub records_per_sec: f64,
    pub eta_secs: Option<u64>,
    pub lanes: u32,
    pub lanes_owned: usize,
    pub instances: Vec<String>,
}

/// When a partition lags and when a status record is too old to count;
/// the report states them so its verdict can be read.
#[derive(Debug, Clone, Serialize)]
pub struct Thresholds {
    /// A partition lags when more committed source records than this are
    /// not replicated (`--max.lag.records`).
    pub max_lag_records: i64,
    /// A partition lags when its oldest record not yet replicated is older
    /// than this, in ms (`--max.lag.ms`).
    pub max_lag_ms: i64,
    /// Status records older than this (ms) are stale and not counted
    /// (`--status.max.age.ms`).
    pub status_max_age_ms: i64,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    pub alias: String,
    pub at_ms: i64,
    /// `healthy`, `lagging` (a partition over a threshold), `stopped` (a
    /// partition stopped by its own error, maybe also lagging ones) or
    /// `cannot_tell` (neither, but some partition's lag is unknown).
    pub verdict: &'static str,
    pub exit_code: u8,
    pub thresholds: Thresholds,
    pub totals: Totals,
    pub lanes: Vec<LaneView>,
    pub partitions: Vec<PartitionStatus>,
    pub notes: Vec<String>,
}

/// What status reads and how it judges: plain options, built by the
/// `status` command from its flags.
#[derive(Debug, Clone)]
pub struct StatusOptions {
    /// Both clusters, and the alias whose positions are read.
    pub endpoints: Endpoints,
    /// Source topics whose partitions are listed even without a position
    /// yet (`--include`, less `--exclude`); `None`: only partitions the
    /// target has a position for.
    pub include: Option<TopicFilter>,
    /// Topics left out even when they have a position (`--exclude`).
    pub exclude: Option<TopicFilter>,
    /// `run`'s `--transactional.id.prefix`: with the alias it names the
    /// fleet's group, which tells who owns each lane.
    pub transactional_id_prefix: String,
    /// When a partition counts as lagging, and when a status record is
    /// stale.
    pub thresholds: Thresholds,
    /// Longest a read of a cluster may make no progress.
    pub timeout: Duration,
}

/// Reads everything and builds the report; an error means "cannot tell".
pub fn gather(options: &StatusOptions) -> anyhow::Result<StatusReport> {
    let timeout = options.timeout;
    let alias = &options.endpoints.source_alias;
    let filter = options.include.as_ref();
    let exclude = options.exclude.as_ref();
    let target = Cluster::connect(
        "target",
        &options.endpoints.target_config,
        ClientRole::Producer,
    )?;
    let source = Cluster::connect(
        "source",
        &options.endpoints.source_config,
        ClientRole::Consumer,
    )?;
    let topics = InternalTopics::for_alias(alias);
    let target_topics = partition_counts(&target.connection, "target", timeout)?;
    let Some(&lanes) = target_topics.get(&topics.position) else {
        anyhow::bail!(
            "no positions found for --source.alias {alias}: the target has no topic {} (eosmirror run never ran with this alias against this target; pass the alias `run` used)",
            topics.position
        );
    };
    let layout = Layout::new(lanes as u32)
        .map_err(|e| anyhow::anyhow!("{} has {lanes} partitions: {e}", topics.position))?;

    // Positions: the latest committed record per source partition.
    let mut positions: BTreeMap<SourcePartition, ProgressRecord> = BTreeMap::new();
    read_topic(
        &target.connection,
        &topics.position,
        lanes,
        timeout,
        |partition, key, value| {
            match ProgressEntry::decode(key, value).map_err(|e| {
                anyhow::anyhow!("{} holds an unreadable record: {e}", topics.position)
            })? {
                ProgressEntry::Record(record) => {
                    positions.insert(record.source.clone(), record);
                }
                // One written by hand into another lane's partition
                // deletes nothing (the lanes pass it over too).
                ProgressEntry::Tombstone(source)
                    if layout.lane_of(&source).internal_partition() == partition =>
                {
                    positions.remove(&source);
                }
                ProgressEntry::Tombstone(_) => {}
            }
            Ok(())
        },
    )?;
    if positions.is_empty() {
        anyhow::bail!(
            "no positions found for --source.alias {alias}: {} holds no committed position (eosmirror run has not committed anything yet)",
            topics.position
        );
    }
    let at_ms = crate::clock::unix_millis();
    let mut notes = Vec::new();

    // Status records, latest per lane.
    let mut lane_status: BTreeMap<u32, LaneStatus> = BTreeMap::new();
    if let Some(&n) = target_topics.get(&topics.status) {
        read_topic(
            &target.connection,
            &topics.status,
            n,
            timeout,
            |_, _, value| {
                if let Ok(status) = LaneStatus::decode(value.unwrap_or_default()) {
                    lane_status.insert(status.lane, status);
                }
                Ok(())
            },
        )?;
    } else {
        notes.push(format!(
            "the target has no topic {}: no running eosmirror of this version has published stopped partitions or rates",
            topics.status
        ));
    }

    // The fleet's group: who owns each lane now.
    let group = format!("{}.{alias}", options.transactional_id_prefix);
    let mut owners: BTreeMap<u32, String> = BTreeMap::new();
    let groups = GroupClient {
        cluster: "target",
        connection: target.connection.clone(),
        timeout,
    };
    match groups.membership(&group) {
        Ok(membership) => {
            for member in &membership.assignments {
                let name = describe_member(&member.client_id, &member.host);
                for (topic, partition) in &member.partitions {
                    if *topic == topics.position {
                        owners.insert(*partition as u32, name.clone());
                    }
                }
            }
        }
        Err(e) => notes.push(format!(
            "owners unknown: describing the fleet's group {group} failed: {}",
            one_line(&anyhow::Error::from(e))
        )),
    }

    // Which partitions: every one with a position, plus (with --include)
    // matching source partitions without one.
    let source_counts = partition_counts(&source.connection, "source", timeout)?;
    let mut wanted: BTreeSet<SourcePartition> = positions
        .keys()
        .filter(|p| exclude.is_none_or(|e| !e.matches(&p.topic)))
        .filter(|p| filter.is_none_or(|f| f.matches(&p.topic)))
        .cloned()
        .collect();
    if let Some(filter) = filter {
        for (topic, &count) in &source_counts {
            if filter.matches(topic) {
                wanted.extend((0..count).map(|p| SourcePartition::new(topic, p)));
            }
        }
    }
    let on_source: Vec<SourcePartition> = wanted
        .iter()
        .filter(|p| {
            source_counts
                .get(&p.topic)
                .is_some_and(|&n| p.partition < n)
        })
        .cloned()
        .collect();
    let recreated = recreated_positions(&source, &target, &positions, &wanted, timeout)
        .unwrap_or_else(|e| {
            notes.push(format!(
                "the topics' ids could not be read ({}): a position recorded for a topic since deleted and created again is not told apart",
                one_line(&e)
            ));
            BTreeMap::new()
        });
    // A position of a topic deleted since says nothing of the new one.
    let positions: BTreeMap<&SourcePartition, &ProgressRecord> = positions
        .iter()
        .filter(|(p, _)| !recreated.contains_key(*p))
        .collect();
    let source_client: BaseConsumer = source
        .connection
        .clone()
        .set("isolation.level", "read_committed")
        .create()?;
    let ends = watermarks::fetch_all(&source_client, &on_source, timeout)
        .map_err(|e| anyhow::anyhow!("reading the source's ends: {e}"))?;

    // The oldest record not yet replicated, per lagging partition.
    let mut from: HashMap<SourcePartition, (i64, i64)> = HashMap::new();
    for p in &on_source {
        let (low, end) = ends[p];
        let position = positions.get(p).map(|r| r.next_source_offset);
        let start = position.unwrap_or(low).max(low);
        if start < end {
            from.insert(p.clone(), (start, end));
        }
    }
    let pending = first_pending(&source.connection, &from, timeout)?;

    let stale_after = options.thresholds.status_max_age_ms;
    let fresh = |s: &LaneStatus| s.running && at_ms - s.published_at_ms <= stale_after;
    let mut stopped_now: HashMap<SourcePartition, String> = HashMap::new();
    let mut stopped_stale: HashMap<SourcePartition, String> = HashMap::new();
    for status in lane_status.values() {
        let into = if fresh(status) {
            &mut stopped_now
        } else {
            &mut stopped_stale
        };
        for s in &status.stopped {
            into.insert(
                SourcePartition::new(&s.topic, s.partition),
                s.reason.clone(),
            );
        }
        if fresh(status) && status.stopped_unlisted > 0 {
            notes.push(format!(
                "lane-{} has {} more stopped partitions than its status record lists (see that instance's log)",
                status.lane, status.stopped_unlisted
            ));
        }
    }

    let mut partitions = Vec::new();
    for p in &wanted {
        let lane = layout.lane_of(p);
        let record = positions.get(p);
        let mut line = PartitionStatus {
            topic: p.topic.clone(),
            partition: p.partition,
            lane: lane.0,
            owner: owners.get(&lane.0).cloned(),
            replicated_position: record.map(|r| r.next_source_offset),
            source_start: None,
            source_end: None,
            lag_records: None,
            lag_ms: None,
            last_commit_ms: record.map(|r| r.committed_at_ms),
            last_writer: record.map(|r| format!("instance-{:016x}", r.instance)),
            stopped: stopped_now.get(p).cloned(),
            stale_stopped: stopped_stale.get(p).cloned(),
            notes: Vec::new(),
            state: "ok",
        };
        if let Some(recreated) = recreated.get(p) {
            line.notes.push(recreated.to_string());
        } else if record.is_none() {
            line.notes
                .push("no position yet: nothing of it was replicated".into());
        }
        match ends.get(p) {
            None => line
                .notes
                .push("not on the source (its topic was deleted, or has fewer partitions)".into()),
            Some(&marks) => fill_lag(&mut line, marks, pending.get(p).copied(), at_ms),
        }
        line.state = judge(
            &line,
            options.thresholds.max_lag_records,
            options.thresholds.max_lag_ms,
        );
        partitions.push(line);
    }

    let mut lane_views = Vec::new();
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for p in &partitions {
        *counts.entry(p.lane).or_default() += 1;
    }
    for lane in 0..layout.lanes() {
        let status = lane_status.get(&lane).map(|s| LaneStatusView {
            instance: format!("instance-{:016x}", s.instance),
            host: s.host.clone(),
            pid: s.pid,
            published_at_ms: s.published_at_ms,
            age_ms: at_ms - s.published_at_ms,
            stale: !fresh(s),
            running: s.running,
            records_per_sec: s.records_per_sec,
            remaining: s.remaining,
            eta_secs: s.eta_secs,
            stopped: s.stopped.len() + s.stopped_unlisted,
        });
        lane_views.push(LaneView {
            lane,
            owner: owners.get(&lane).cloned(),
            partitions: counts.get(&lane).copied().unwrap_or(0),
            status,
        });
    }
    let live: Vec<&LaneStatusView> = lane_views
        .iter()
        .filter_map(|l| l.status.as_ref())
        .filter(|s| !s.stale)
        .collect();
    let instances: BTreeSet<String> = owners.values().cloned().collect();
    let totals = Totals {
        partitions: partitions.len(),
        lagging: partitions.iter().filter(|p| p.state == "lagging").count(),
        stopped: partitions.iter().filter(|p| p.stopped.is_some()).count(),
        lag_records: partitions.iter().filter_map(|p| p.lag_records).sum(),
        max_lag_ms: partitions
            .iter()
            .filter_map(|p| p.lag_ms)
            .max()
            .unwrap_or(0),
        records_per_sec: live.iter().fold(0.0, |sum, s| sum + s.records_per_sec),
        eta_secs: live.iter().filter_map(|s| s.eta_secs).max(),
        lanes: layout.lanes(),
        lanes_owned: owners.len(),
        instances: instances.into_iter().collect(),
    };
    let unknown = partitions.iter().filter(|p| p.state == "unknown").count();
    // Lagging or stopped partitions decide; otherwise one whose lag is
    // unknown means the report cannot say the mirror is healthy.
    let (verdict, exit_code) = if totals.stopped > 0 {
        ("stopped", LAGGING)
    } else if totals.lagging > 0 {
        ("lagging", LAGGING)
    } else if unknown > 0 {
        ("cannot_tell", CANNOT_TELL)
    } else {
        ("healthy", HEALTHY)
    };
    Ok(StatusReport {
        alias: alias.clone(),
        at_ms,
        verdict,
        exit_code,
        thresholds: options.thresholds.clone(),
        totals,
        lanes: lane_views,
        partitions,
        notes,
    })
}

/// The partitions whose positions were recorded for a topic since deleted
/// and created again under the same name (on either cluster). Per
/// partition: during a start-over some may already have new positions.
fn recreated_positions(
    source: &Cluster,
    target: &Cluster,
    positions: &BTreeMap<SourcePartition, ProgressRecord>,
    wanted: &BTreeSet<SourcePartition>,
    timeout: Duration,
) -> anyhow::Result<BTreeMap<SourcePartition, Recreated>> {
    let ids = topics_now(
        &source.side(1024, timeout),
        &target.side(1024, timeout),
        wanted.iter().map(|p| p.topic.as_str()),
    )?;
    let mut recreated = BTreeMap::new();
    for (p, record) in positions.iter().filter(|(p, _)| wanted.contains(*p)) {
        let now = ids.get(&p.topic).copied().unwrap_or_default();
        if let Err(e) = check_topics(&p.topic, &record.lineage, now) {
            recreated.insert(p.clone(), e);
        }
    }
    Ok(recreated)
}

/// The lag of one partition, given the source's first offset and
/// committed end, and what the bounded read found at the replicated
/// position (`None`: not read, because nothing lies there, or not in time).
fn fill_lag(
    line: &mut PartitionStatus,
    (low, end): (i64, i64),
    pending: Option<Pending>,
    at_ms: i64,
) {
    line.source_start = Some(low);
    line.source_end = Some(end);
    let start = line.replicated_position.unwrap_or(low).max(low);
    if let Some(position) = line.replicated_position {
        if position < low {
            line.notes.push(format!(
                "source records at offsets {position}..{low} were deleted before they were replicated"
            ));
        }
    }
    match pending {
        // Not read in time: the count is an upper bound (markers and
        // aborted records included), the age unknown.
        None if start < end => {
            line.lag_records = Some(end - start);
            line.notes.push(
                "the oldest record not yet replicated was not read in time: lag in time unknown, lag in records counts markers too"
                    .into(),
            );
        }
        // Nothing between the position and the end, or only markers and
        // aborted records.
        None | Some(Pending::Nothing) => {
            line.lag_records = Some(0);
            line.lag_ms = Some(0);
        }
        Some(Pending::Record(timestamp)) => {
            line.lag_records = Some(end - start);
            line.lag_ms = timestamp.map(|t| (at_ms - t).max(0));
        }
    }
}

/// A partition's state: stopped wins, then a threshold passed.
fn judge(line: &PartitionStatus, max_lag_records: i64, max_lag_ms: i64) -> &'static str {
    let over = line.lag_records.is_some_and(|l| l > max_lag_records)
        || line.lag_ms.is_some_and(|l| l > max_lag_ms);
    if line.stopped.is_some() {
        "stopped"
    } else if line.source_end.is_none() {
        // Its topic was deleted on the source: nothing is left to copy.
        "gone"
    } else if over {
        "lagging"
    } else if line.lag_records.is_none() || line.lag_ms.is_none() {
        "unknown"
    } else {
        "ok"
    }
}

/// Reads every committed record of `topic` (all `partitions`, one
/// consumer) up to each partition's last stable offset, in order per
/// partition: `visit(value)`.
fn read_topic(
    connection: &ClientConfig,
    topic: &str,
    partitions: i32,
    stall_limit: Duration,
    mut visit: impl FnMut(i32, Option<&[u8]>, Option<&[u8]>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let reader: BaseConsumer = reader_config(connection, "__eosmirror.status-reader", true)
        .set("queued.max.messages.kbytes", "16384")
        .create()?;
    let all: Vec<SourcePartition> = (0..partitions)
        .map(|p| SourcePartition::new(topic, p))
        .collect();
    let marks = watermarks::fetch_all(&reader, &all, stall_limit)
        .map_err(|e| anyhow::anyhow!("reading the offsets of {topic}: {e}"))?;
    let mut assignment = TopicPartitionList::new();
    let mut left: HashMap<i32, i64> = HashMap::new();
    for (p, &(low, end)) in &marks {
        if low < end {
            assignment.add_partition_offset(topic, p.partition, Offset::Offset(low))?;
            left.insert(p.partition, end);
        }
    }
    if left.is_empty() {
        return Ok(());
    }
    reader.assign(&assignment)?;
    let mut stall = StallWatch::new(stall_limit);
    let mut last_positions: HashMap<i32, i64> = HashMap::new();
    while !left.is_empty() {
        match stall.poll(&reader, Duration::from_millis(100)) {
            Some(Ok(message)) => {
                stall.moved();
                visit(message.partition(), message.key(), message.payload())?;
            }
            Some(Err(e)) if is_deleted(&e) => {
                anyhow::bail!("{topic}: records were deleted while they were read; try again")
            }
            Some(Err(e)) => anyhow::bail!("reading {topic}: {e}"),
            None => {}
        }
        // Done with a partition once the reader's position reached its
        // end: past markers too, which no message shows.
        for element in reader.position()?.elements() {
            if let Offset::Offset(at) = element.offset() {
                let p = element.partition();
                if last_positions.insert(p, at) != Some(at) {
                    stall.moved();
                }
                if left.get(&p).is_some_and(|&end| at >= end) {
                    left.remove(&p);
                }
            }
        }
        if let Some(recovering) = stall.stalled() {
            anyhow::bail!(
                "reading {topic} made no progress for {stall_limit:?} ({} partition(s) not read to their end){recovering}",
                left.len()
            );
        }
    }
    Ok(())
}

/// What lies between a partition's replicated position and its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// No committed record: only transaction markers or aborted records.
    Nothing,
    /// The first committed record and its timestamp (if it has one).
    Record(Option<i64>),
}

/// For each partition in `from` (start offset, committed end), what the
/// first committed record in that range is. Partitions not
/// answered within `limit` are left out. One consumer; one record per
/// partition is kept (the rest of a fetch is dropped by pausing).
fn first_pending(
    connection: &ClientConfig,
    from: &HashMap<SourcePartition, (i64, i64)>,
    limit: Duration,
) -> anyhow::Result<HashMap<SourcePartition, Pending>> {
    let mut found = HashMap::new();
    if from.is_empty() {
        return Ok(found);
    }
    let reader: BaseConsumer = reader_config(connection, "__eosmirror.status-reader", true)
        .set("queued.max.messages.kbytes", "4096")
        .set("fetch.message.max.bytes", "65536")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    for (p, &(start, _)) in from {
        assignment.add_partition_offset(&p.topic, p.partition, Offset::Offset(start))?;
    }
    reader.assign(&assignment)?;
    let deadline = Instant::now() + limit;
    while found.len() < from.len() && Instant::now() < deadline {
        match poll_reader(&reader, Duration::from_millis(100)) {
            Some(Ok(message)) => {
                let p = SourcePartition::new(message.topic(), message.partition());
                if let (Some(&(_, end)), false) = (from.get(&p), found.contains_key(&p)) {
                    // A record at or past the end was committed after the
                    // end was read: nothing committed was pending then.
                    let answer = if message.offset() < end {
                        Pending::Record(message.timestamp().to_millis())
                    } else {
                        Pending::Nothing
                    };
                    found.insert(p.clone(), answer);
                    let mut pause = TopicPartitionList::new();
                    pause.add_partition(&p.topic, p.partition);
                    let _ = reader.pause(&pause);
                }
            }
            Some(Err(e)) if is_deleted(&e) => {
                // Deleted under the read (retention): read again from the
                // new start next time; lag stays unknown for it now.
            }
            Some(Err(e)) => anyhow::bail!("reading the source: {e}"),
            None => {}
        }
        for element in reader.position()?.elements() {
            if let Offset::Offset(at) = element.offset() {
                let p = SourcePartition::new(element.topic(), element.partition());
                if let Some(&(_, end)) = from.get(&p) {
                    if at >= end && !found.contains_key(&p) {
                        found.insert(p, Pending::Nothing);
                    }
                }
            }
        }
    }
    Ok(found)
}

fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.round(jiff::Unit::Second).unwrap_or(t).to_string())
        .unwrap_or_else(|_| ms.to_string())
}

fn seconds(ms: i64) -> String {
    if ms == 0 {
        "0s".to_string()
    } else if ms < 10_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}h", ms as f64 / 3_600_000.0)
    }
}

fn or_dash<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
}

impl StatusReport {
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let t = &self.totals;
        let _ = writeln!(
            out,
            "eosmirror status of --source.alias {} at {}",
            self.alias,
            time(self.at_ms)
        );
        let _ = writeln!(
            out,
            "totals: {} partitions, {} lagging, {} stopped; lag {} records, oldest unreplicated record {} old; {:.0} records/s{}; lanes {}/{} owned by {} instance(s)",
            t.partitions,
            t.lagging,
            t.stopped,
            t.lag_records,
            seconds(t.max_lag_ms),
            t.records_per_sec,
            t.eta_secs.map(|e| format!(", ETA {e}s")).unwrap_or_default(),
            t.lanes_owned,
            t.lanes,
            t.instances.len()
        );
        for lane in &self.lanes {
            let owner = lane.owner.as_deref().unwrap_or("no running instance");
            let status = match &lane.status {
                None => "no status published".to_string(),
                Some(s) if !s.running => format!(
                    "{}@{} stopped {} ago",
                    s.instance,
                    s.host,
                    seconds(s.age_ms)
                ),
                Some(s) if s.stale => format!(
                    "stale status: {}@{} last published {} ago (killed, frozen or cut off?)",
                    s.instance,
                    s.host,
                    seconds(s.age_ms)
                ),
                Some(s) => format!(
                    "{:.0} records/s, {} remaining{}",
                    s.records_per_sec,
                    s.remaining,
                    s.eta_secs
                        .map(|e| format!(", ETA {e}s"))
                        .unwrap_or_default()
                ),
            };
            let _ = writeln!(
                out,
                "lane-{}: {} partition(s), owner {owner}; {status}",
                lane.lane, lane.partitions
            );
        }
        let header = [
            "PARTITION",
            "LANE",
            "REPLICATED",
            "SOURCE END",
            "LAG",
            "LAG TIME",
            "LAST COMMIT",
            "STATE",
        ];
        let rows: Vec<[String; 8]> = self
            .partitions
            .iter()
            .map(|p| {
                [
                    format!("{}-{}", p.topic, p.partition),
                    format!("lane-{}", p.lane),
                    or_dash(p.replicated_position),
                    or_dash(p.source_end),
                    or_dash(p.lag_records),
                    p.lag_ms.map_or_else(|| "-".into(), seconds),
                    p.last_commit_ms.map_or_else(|| "-".into(), time),
                    p.state.to_string(),
                ]
            })
            .collect();
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.len());
            }
        }
        let line = |cells: &[&str]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            padded.join("  ").trim_end().to_string()
        };
        let _ = writeln!(out, "{}", line(&header));
        for (row, p) in rows.iter().zip(&self.partitions) {
            let cells: Vec<&str> = row.iter().map(String::as_str).collect();
            let _ = writeln!(out, "{}", line(&cells));
            if let Some(reason) = &p.stopped {
                let _ = writeln!(out, "    stopped: {reason}");
            }
            if let Some(reason) = &p.stale_stopped {
                let _ = writeln!(out, "    stopped (stale status, not counted): {reason}");
            }
            for note in &p.notes {
                let _ = writeln!(out, "    {note}");
            }
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        let _ = writeln!(
            out,
            "verdict: {} (exit {}; lagging means over --max.lag.records {} or --max.lag.ms {}, or stopped)",
            self.verdict.replace('_', " ").to_uppercase(),
            self.exit_code,
            self.thresholds.max_lag_records,
            self.thresholds.max_lag_ms
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(position: Option<i64>) -> PartitionStatus {
        PartitionStatus {
            topic: "t".into(),
            partition: 0,
            lane: 1,
            owner: None,
            replicated_position: position,
            source_start: None,
            source_end: None,
            lag_records: None,
            lag_ms: None,
            last_commit_ms: None,
            last_writer: None,
            stopped: None,
            stale_stopped: None,
            notes: Vec::new(),
            state: "ok",
        }
    }

    #[test]
    fn lag_counts_committed_records_after_the_position_and_the_oldest_ones_age() {
        let mut l = line(Some(40));
        fill_lag(&mut l, (0, 55), Some(Pending::Record(Some(9_000))), 10_000);
        assert_eq!((l.lag_records, l.lag_ms), (Some(15), Some(1_000)));
        assert_eq!(judge(&l, 10_000, 60_000), "ok");
        assert_eq!(judge(&l, 14, 60_000), "lagging");
        assert_eq!(judge(&l, 10_000, 999), "lagging");
        l.stopped = Some("gap".into());
        assert_eq!(judge(&l, 14, 999), "stopped");
    }

    #[test]
    fn only_markers_after_the_position_are_no_lag() {
        let mut l = line(Some(10));
        fill_lag(&mut l, (0, 11), Some(Pending::Nothing), 10_000);
        assert_eq!((l.lag_records, l.lag_ms), (Some(0), Some(0)));
        let mut caught_up = line(Some(11));
        fill_lag(&mut caught_up, (0, 11), None, 10_000);
        assert_eq!(caught_up.lag_records, Some(0));
        assert_eq!(judge(&caught_up, 0, 0), "ok");
    }

    #[test]
    fn deleted_records_and_unread_partitions_are_named() {
        assert_eq!(judge(&line(Some(3)), 0, 0), "gone");
        let mut gap = line(Some(100));
        fill_lag(&mut gap, (120, 150), Some(Pending::Record(Some(1))), 10);
        assert_eq!(gap.lag_records, Some(30));
        assert!(
            gap.notes[0].contains("offsets 100..120 were deleted"),
            "{:?}",
            gap.notes
        );
        let mut unread = line(None);
        fill_lag(&mut unread, (5, 9), None, 10);
        assert_eq!((unread.lag_records, unread.lag_ms), (Some(4), None));
        assert_eq!(judge(&unread, 10, 0), "unknown");
        assert_eq!(judge(&unread, 3, 0), "lagging");
        let mut fresh = line(None);
        fill_lag(&mut fresh, (5, 9), Some(Pending::Record(None)), 10);
        assert_eq!((fresh.lag_records, fresh.lag_ms), (Some(4), None));
        assert_eq!(judge(&fresh, 10, 0), "unknown");
    }
}

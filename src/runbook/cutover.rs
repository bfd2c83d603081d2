//! Cutover: the orderly migration runbook, run by `eosmirror cutover`.
//!
//! 1. Report whether producers still write to the source: sample each
//!    source partition's high watermark twice, 2 s apart.
//! 2. Wait (bounded by [`CutoverOptions::timeout`]) until every source transaction open
//!    at the second sample has ended (the last stable offset reached the
//!    sampled high watermark) and the replicated position of every partition
//!    reaches the source's end of committed data. An open transaction keeps
//!    the end of committed data still while it lasts; its commit would add
//!    records the copy lacks, so a cutover that did not wait for it would
//!    report a complete copy and lose them.
//! 3. Verify the copy's tail (or all of it).
//! 4. Move each consumer group: its source offsets, translated exactly, are
//!    committed to the same group on the target. Groups the pattern names
//!    outright are asked for by name (a listing can leave one out), and
//!    no group moves if the source was written after its second sample (a
//!    consumer may have read past the copy).
//! 5. Report; exit 0 only if all of it holds. Running it again is safe: a
//!    group already moved is left unchanged.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde::Serialize;

use crate::clusters::{connect_both, Endpoints};
use crate::failpoints::{self, fault_armed};
use crate::groups::apply::apply;
use crate::groups::translate::{
    replicated_partitions, source_topic_ids, translate_groups, GroupOffsets, GroupTranslation,
};
use crate::groups::TopicPartition;
use crate::offsets::history::read_positions;
use crate::offsets::topics_now::{check_topics, topics_now};
use crate::pattern::NamePattern;
use crate::read::{first_committed, first_record, Side};
use crate::replication::progress::InternalTopics;
use crate::topics::filter::TopicFilter;
use crate::verify::range::Range;
use crate::verify::report::{Report, Verdict};
use crate::verify::{verify, Pairing, VerifyOptions};
use eosmirror_state::SourcePartition;

/// How often replication progress is checked while waiting.
const POLL: Duration = Duration::from_secs(1);

/// What a cutover moves and how long it may wait.
#[derive(Debug, Clone)]
pub struct CutoverOptions {
    /// Both clusters, and the alias whose offset mapping translates the
    /// groups.
    pub endpoints: Endpoints,
    /// The replicated source topics whose copy must be complete.
    pub topics: TopicFilter,
    /// The topic options as given: the error when no topic matches quotes
    /// them.
    pub topics_given: String,
    /// The consumer groups moved to the target.
    pub groups: NamePattern,
    /// The group option as given: the problem when no group matches quotes
    /// it.
    pub groups_given: String,
    /// The group names the option spells out whole
    /// ([`NamePattern::spelled_out_groups`]): asked for by name, since a
    /// broker's listing may leave a group out.
    pub groups_named: Vec<String>,
    /// Longest wait for the copy to reach the source's end of committed
    /// data; the outage window's budget.
    pub timeout: Duration,
    /// The part of each partition verified before any group moves: the
    /// copy's tail by default, since the copy was verifiable all along.
    pub verify_range: Range,
    /// Whether a group's target offsets may move backwards (a group that
    /// already consumed past the translation on the target).
    pub allow_rewind: bool,
}

/// One partition's state at the end of the wait.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionCatchUp {
    /// The source topic.
    pub topic: String,
    /// The partition (same number on both sides).
    pub partition: i32,
    /// End of committed source data (the last stable offset).
    pub source_end: i64,
    /// The next source offset to copy, from the position topic (the
    /// partition's first offset when it has no position yet).
    pub replicated_position: i64,
    /// Committed source records not yet replicated (0: caught up).
    pub lag: i64,
    /// Source offsets `[from, to)` still held by a transaction that was
    /// open at cutover's second sample of the high watermarks: from the
    /// last stable offset to that sample. `None` once every such
    /// transaction ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_transaction: Option<(i64, i64)>,
    /// Why the position on the target is not this topic's: it was recorded
    /// for a topic since deleted and created again. Such a partition is not
    /// copied until `run --start.over`, so cutover does not wait for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recreated: Option<String>,
}

impl PartitionCatchUp {
    fn settled(&self) -> bool {
        self.recreated.is_some() || (self.lag == 0 && self.open_transaction.is_none())
    }
}

/// The cutover report.
#[derive(Debug, Clone, Serialize)]
pub struct CutoverReport {
    /// Partitions whose source end moved while cutover looked (producers
    /// still writing).
    pub source_still_written: Vec<String>,
    /// Every replicated partition at the end of the wait.
    pub partitions: Vec<PartitionCatchUp>,
    /// Whether the copy reached the source's end of committed data within
    /// the timeout; verify and the groups wait for it.
    pub caught_up: bool,
    /// Verify's report on the copy's tail (or all of it);
    /// `None` when the copy did not catch up.
    pub verify: Option<Report>,
    /// Each moved group's translation and what applying it did.
    pub groups: Vec<GroupTranslation>,
    /// Why cutover did not complete; empty when it did.
    pub problems: Vec<String>,
}

impl CutoverReport {
    pub fn complete(&self) -> bool {
        self.problems.is_empty()
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if !self.source_still_written.is_empty() {
            let _ = writeln!(
                out,
                "source still written to: {}",
                self.source_still_written.join(", ")
            );
        }
        for p in &self.partitions {
            let _ = write!(
                out,
                "{}-{}: source end {} replicated {} lag {}",
                p.topic, p.partition, p.source_end, p.replicated_position, p.lag
            );
            if let Some((from, to)) = p.open_transaction {
                let _ = write!(out, "; offsets [{from}, {to}) in an open transaction");
            }
            out.push('\n');
        }
        if let Some(v) = &self.verify {
            out.push_str(&v.to_text());
        }
        for g in &self.groups {
            out.push_str(&g.to_text());
        }
        for problem in &self.problems {
            let _ = writeln!(out, "problem: {problem}");
        }
        let _ = writeln!(
            out,
            "cutover: {}",
            if self.complete() {
                "COMPLETE: the target holds an exact copy and the groups are moved"
            } else {
                "NOT COMPLETE"
            }
        );
        out
    }
}

/// Source ends of committed data and replicated positions, per partition,
/// and which transactions open at `sampled` (the high watermarks of
/// cutover's second sample) still hold their partition.
fn catch_up(
    source: &Side,
    target: &Side,
    alias: &str,
    partitions: &[TopicPartition],
    sampled: &BTreeMap<TopicPartition, i64>,
) -> anyhow::Result<Vec<PartitionCatchUp>> {
    let wanted = partitions.iter().cloned().collect();
    let positions = read_positions(target, &InternalTopics::for_alias(alias).position, &wanted)?;
    let stable_ends = source.stable_watermarks_of(&source_partitions(partitions))?;
    // After the ends: a topic recreated in between is told apart.
    let ids = topics_now(source, target, partitions.iter().map(|(t, _)| t.as_str()))?;
    let mut out = Vec::new();
    for tp in partitions {
        let (topic, partition) = tp;
        let (low, stable) = stable_ends[&SourcePartition::new(topic, *partition)];
        let sampled_high = sampled[tp];
        // A position of a topic recreated since says nothing of this one.
        let now = ids.get(topic).copied().unwrap_or_default();
        let recreated = positions
            .get(tp)
            .and_then(|p| check_topics(topic, &p.lineage, now).err());
        let position = positions
            .get(tp)
            .filter(|_| recreated.is_none())
            .map_or(low, |p| p.next_source_offset);
        // Past the position, only transaction markers or aborted records
        // may remain for the partition to count as caught up.
        let next = if position < stable {
            first_committed(source, topic, *partition, position.max(low), stable)?
        } else {
            None
        };
        out.push(PartitionCatchUp {
            topic: topic.clone(),
            partition: *partition,
            source_end: stable,
            replicated_position: position,
            lag: next.map_or(0, |n| stable - n),
            open_transaction: (stable < sampled_high).then_some((stable, sampled_high)),
            recreated: recreated.map(|r| r.to_string()),
        });
    }
    Ok(out)
}

/// High watermarks: they move with every record written, committed,
/// aborted or in a transaction still open.
fn high_watermarks(
    source: &Side,
    partitions: &[TopicPartition],
) -> anyhow::Result<BTreeMap<TopicPartition, i64>> {
    Ok(source
        .watermarks_of(&source_partitions(partitions))?
        .into_iter()
        .map(|(p, (_, high))| ((p.topic, p.partition), high))
        .collect())
}

fn source_partitions(partitions: &[TopicPartition]) -> Vec<SourcePartition> {
    partitions
        .iter()
        .map(|(topic, partition)| SourcePartition::new(topic, *partition))
        .collect()
}

/// Partitions that received records between two samples of their high
/// watermarks. A transaction marker alone moves the high watermark too (a
/// transaction cutover waited for has ended): that is not a write.
fn written_between(
    source: &Side,
    before: &BTreeMap<TopicPartition, i64>,
    after: &BTreeMap<TopicPartition, i64>,
) -> anyhow::Result<Vec<String>> {
    let mut written = Vec::new();
    for ((topic, partition), &end) in after {
        let start = before[&(topic.clone(), *partition)];
        if end > start && first_record(source, topic, *partition, start, end, false)?.is_some() {
            written.push(format!("{topic}-{partition}"));
        }
    }
    Ok(written)
}

/// Partitions an open source transaction still holds, with the offsets.
fn held_partitions(state: &[PartitionCatchUp]) -> Vec<String> {
    state
        .iter()
        .filter_map(|p| {
            p.open_transaction
                .map(|(from, to)| format!("{}-{} (offsets [{from}, {to}))", p.topic, p.partition))
        })
        .collect()
}

/// Names the partitions still held by an open source transaction and what
/// to do about it.
fn open_transactions_problem(state: &[PartitionCatchUp], timeout: Duration) -> Option<String> {
    let held = held_partitions(state);
    (!held.is_empty()).then(|| {
        format!(
            "source transactions that were open when cutover looked at the producers did not end within {} ms: {}. Their records are neither committed nor aborted; a commit would add records the copy does not hold. librdkafka has no DescribeProducers or ListTransactions request, so eosmirror cannot name the transactional id: `kafka-transactions.sh --bootstrap-server <source> describe-producers --topic <topic> --partition <partition>` names the producer, and its `find-hanging` command finds transactions no producer will end. Let that producer commit or abort (or stop its application), then run cutover again",
            timeout.as_millis(),
            held.join(", ")
        )
    })
}

/// Runs a cutover. Blocking.
pub fn cutover(options: &CutoverOptions) -> anyhow::Result<CutoverReport> {
    let endpoints = &options.endpoints;
    let alias = &endpoints.source_alias;
    let timeout_ms = options.timeout.as_millis();
    let (source, target) = connect_both(endpoints)?;
    let partitions = replicated_partitions(&source, &target, Some(&options.topics))?;
    if partitions.is_empty() {
        bail!(
            "no topic matching {} exists on both clusters",
            options.topics_given
        );
    }
    let mut problems = Vec::new();

    // 1. Producer activity, and the high watermarks every transaction open
    // now has to get past before the copy can be complete.
    let source_side = source.side(1024, Duration::from_secs(120));
    let target_side = target.side(16 * 1024, Duration::from_secs(120));
    let before = high_watermarks(&source_side, &partitions)?;
    std::thread::sleep(Duration::from_secs(2));
    if fault_armed(failpoints::CUTOVER_SLOW_LOOK) {
        tracing::warn!(
            "fault point {}: the source is watched 10 s longer",
            failpoints::CUTOVER_SLOW_LOOK
        );
        std::thread::sleep(Duration::from_secs(10));
    }
    let after = high_watermarks(&source_side, &partitions)?;
    let moving = written_between(&source_side, &before, &after)?;

    // 2. Wait for those transactions to end and the copy to reach the
    // source's end. Every transaction open at the second sample counts,
    // one begun between the samples too: the end of committed data stays
    // below its records, so the copy looks caught up while they wait, and
    // `still` below looks only for records written after the second sample.
    let deadline = Instant::now() + options.timeout;
    let mut announced = Vec::new();
    let (caught_up, state) = loop {
        let state = catch_up(&source_side, &target_side, alias, &partitions, &after)?;
        if state.iter().all(PartitionCatchUp::settled) {
            break (state.iter().all(|p| p.recreated.is_none()), state);
        }
        let held = held_partitions(&state);
        if !held.is_empty() && held != announced {
            tracing::info!(partitions = %held.join(", "), timeout_ms, "waiting for source transactions that were open when cutover looked at the producers to end");
            announced = held;
        }
        if Instant::now() >= deadline {
            break (false, state);
        }
        std::thread::sleep(POLL);
    };
    for p in &state {
        if let Some(recreated) = &p.recreated {
            problems.push(format!("{}-{}: {recreated}", p.topic, p.partition));
        }
    }
    if !caught_up {
        problems.extend(open_transactions_problem(&state, options.timeout));
        let behind: Vec<String> = state
            .iter()
            .filter(|p| p.lag > 0 && p.recreated.is_none())
            .map(|p| format!("{}-{} ({} behind)", p.topic, p.partition, p.lag))
            .collect();
        if !behind.is_empty() {
            problems.push(format!(
                "replication did not reach the source's end within {timeout_ms} ms: {}; is `eosmirror run` running for --source.alias {alias}?",
                behind.join(", ")
            ));
        }
    }
    // Producers still writing now make any copy out of date at once.
    let end = high_watermarks(&source_side, &partitions)?;
    let still = written_between(&source_side, &after, &end)?;
    if !still.is_empty() {
        problems.push(format!(
            "producers are still writing to the source ({}); stop them, then run cutover again",
            still.join(", ")
        ));
    }

    // 3. Verify.
    let mut verify_report = None;
    if caught_up {
        let verify_options = VerifyOptions {
            endpoints: endpoints.clone(),
            topics: options.topics.clone(),
            topics_given: options.topics_given.clone(),
            range: options.verify_range,
            pairing: Pairing::Mapped,
            parallelism: 4,
            max_memory_bytes: 64 << 20,
            // verify's default: the tail of --verify.last needs far less.
            max_mapping_bytes: 1 << 30,
            // The outage window is on: verify reads as fast as it can.
            throttle_bytes_per_sec: None,
            stall_timeout: Duration::from_secs(120),
        };
        let report = verify(&verify_options)?;
        if report.verdict != Verdict::Exact {
            problems.push(format!("verify found the copy {:?}", report.verdict));
        }
        verify_report = Some(report);
    }

    // 4. Groups, only onto a complete, exact copy.
    let mut groups = Vec::new();
    if problems.is_empty() {
        if fault_armed(failpoints::CUTOVER_SLOW_GROUPS) {
            tracing::warn!(
                "fault point {}: the groups are read 10 s later",
                failpoints::CUTOVER_SLOW_GROUPS
            );
            std::thread::sleep(Duration::from_secs(10));
        }
        // The listing leaves out, without an error, the groups of an
        // offsets partition without a leader: the names the pattern spells
        // out are asked for whatever it says.
        let names: BTreeSet<String> = source
            .groups()
            .list_groups()?
            .into_iter()
            .chain(options.groups_named.iter().cloned())
            .filter(|g| options.groups.matches(g))
            .collect();
        if names.is_empty() {
            problems.push(format!(
                "no consumer group on the source matches {}",
                options.groups_given
            ));
        }
        let matched = !names.is_empty();
        let mut final_offsets = GroupOffsets::new();
        let problems_before = problems.len();
        for group in names {
            let membership = source.groups().membership(&group)?;
            if !membership.members.is_empty() {
                problems.push(format!(
                    "group {group:?} still has active members on the source ({}); stop its consumers so its offsets are final, then run cutover again",
                    membership.members.join(", ")
                ));
                continue;
            }
            let offsets = source.groups().committed(&group, &partitions)?;
            if !offsets.is_empty() {
                final_offsets.insert(group, offsets);
            } else if options.groups_named.contains(&group) {
                // Named outright, so expected: a typo, or a group that
                // never consumed these topics, must not pass as moved.
                problems.push(format!(
                    "group {group:?}, named in --groups, has no committed offset on the source for the topics cut over; check its name"
                ));
            }
        }
        // Groups the pattern matched, none of which consumed these topics:
        // a wrong --include or --groups must not pass as "the groups are
        // moved".
        if matched && final_offsets.is_empty() && problems.len() == problems_before {
            problems.push(format!(
                "no consumer group matching {} has committed offsets on the source for the topics cut over; check --groups and --include",
                options.groups_given
            ));
        }
        // A producer that wrote during verify, and a consumer of the group
        // that read it before stopping, would leave the group past the
        // copy: its translation would read those records again once
        // copied. The ends sampled before verify must still hold now that
        // the offsets are final.
        let now = high_watermarks(&source_side, &partitions)?;
        let written = written_between(&source_side, &end, &now)?;
        if !written.is_empty() {
            problems.push(format!(
                "producers wrote to the source while cutover ran ({}); no group was moved. Stop them, then run cutover again",
                written.join(", ")
            ));
            final_offsets.clear();
        }
        let source_ids = source_topic_ids(&source, &final_offsets)?;
        for mut translation in translate_groups(&target, alias, &final_offsets, &source_ids)? {
            let group = &translation.group;
            match translation.target_offsets() {
                None => problems.push(format!(
                    "group {group:?}: some partitions have no translation"
                )),
                Some(to_commit) => {
                    match apply(&target.groups(), group, &to_commit, options.allow_rewind) {
                        Ok(applied) => translation.record_applied(&applied),
                        Err(e) => problems.push(e.to_string()),
                    }
                }
            }
            groups.push(translation);
        }
    }

    Ok(CutoverReport {
        source_still_written: moving,
        partitions: state,
        caught_up,
        verify: verify_report,
        groups,
        problems,
    })
}

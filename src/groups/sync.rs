//! Continuous group sync inside `run` (`--groups.sync REGEX`).
//!
//! Every interval: read the committed offsets of the matching source
//! groups, record them (and the source's end offsets) in the groups topic on
//! the target, so failover works when the source and this host are both
//! gone, and commit their translations to the same groups on the target
//! where those have no active members. A group with members on the target
//! is never touched: its consumers own their offsets.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use eosmirror_state::{SourcePartition, StateStore, Translation as Cached};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use regex::Regex;

use super::apply::{apply, ApplyError};
use super::record::{GroupOffsetsRecord, GroupsTopicRecord, SourceEndsRecord};
use super::TopicPartition;
use crate::clusters::Cluster;
use crate::read::{first_committed, Side};
use crate::shutdown::Shutdown;
use crate::topics::filter::TopicFilter;
use crate::translate::{replicated_partitions, translate_offsets};

/// Groups synced at the same time within a round.
const SYNC_THREADS: usize = 16;

/// What syncing one group did.
struct GroupOutcome {
    /// The translation is in place on the target (committed or unchanged).
    applied: bool,
    rereads: i64,
}

/// Everything a sync round needs.
pub struct GroupSync {
    /// Groups to sync (whole name).
    pub groups: Regex,
    pub interval: Duration,
    /// The topics `run` replicates.
    pub topics: TopicFilter,
    pub source: Cluster,
    pub target: Cluster,
    pub alias: String,
    /// `__eosmirror.groups.<alias>`.
    pub groups_topic: String,
    /// Translations come from the local cache first (cheap); the progress
    /// topic answers what the cache does not know.
    pub state: Arc<StateStore>,
}

impl GroupSync {
    /// Runs rounds until shutdown. A failed round is logged and retried at
    /// the next interval: sync must never stop replication.
    pub async fn run(self, shutdown: Shutdown) {
        let this = Arc::new(self);
        let mut last_applied: HashMap<String, Instant> = HashMap::new();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(this.interval) => {}
                _ = shutdown.wait() => return,
            }
            let round = Arc::clone(&this);
            let previous = last_applied.clone();
            match tokio::task::spawn_blocking(move || round.round(previous)).await {
                Ok(Ok(applied)) => last_applied = applied,
                Ok(Err(e)) => tracing::warn!(
                    "group sync round failed (retrying in {:?}): {e:#}",
                    this.interval
                ),
                Err(e) => tracing::error!("group sync round panicked: {e}"),
            }
        }
    }

    /// One round; returns when each group's translation was last committed
    /// (or found already in place).
    fn round(
        &self,
        mut last_applied: HashMap<String, Instant>,
    ) -> anyhow::Result<HashMap<String, Instant>> {
        let partitions = replicated_partitions(&self.source, &self.target, Some(&self.topics))?;
        let producer: ThreadedProducer<DefaultProducerContext> = self
            .target
            .connection
            .clone()
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .create()?;
        let observed_at_ms = now_ms();
        let started = Instant::now();
        let names: VecDeque<String> = self
            .source
            .groups()
            .list_groups()?
            .into_iter()
            .filter(|g| self.groups.is_match(g))
            .collect();
        // Each group costs a few round trips through short-lived clients:
        // groups are synced in parallel, a bounded number at a time.
        let queue = Mutex::new(names);
        let outcomes = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..SYNC_THREADS {
                scope.spawn(|| loop {
                    let Some(group) = queue.lock().expect("queue lock").pop_front() else {
                        return;
                    };
                    let outcome = self.sync_group(&group, &partitions, &producer, observed_at_ms);
                    outcomes
                        .lock()
                        .expect("outcomes lock")
                        .push((group, outcome));
                });
            }
        });
        let mut synced = 0usize;
        for (group, outcome) in outcomes.into_inner().expect("outcomes lock") {
            match outcome {
                Ok(None) => continue,
                Ok(Some(GroupOutcome { applied, rereads })) => {
                    if applied {
                        last_applied.insert(group.clone(), Instant::now());
                    }
                    synced += 1;
                    let age = last_applied
                        .get(&group)
                        .map_or(f64::INFINITY, |t| t.elapsed().as_secs_f64());
                    crate::metrics::group_synced(&group, age, rereads);
                }
                Err(e) => tracing::warn!(%group, "group sync: {e:#}"),
            }
        }
        send(
            &producer,
            &self.groups_topic,
            &self.source_ends(&partitions, observed_at_ms)?,
        )?;
        producer.flush(Duration::from_secs(30)).map_err(|e| {
            anyhow::anyhow!("recording group offsets in {}: {e}", self.groups_topic)
        })?;
        let elapsed = started.elapsed();
        tracing::debug!(
            groups = synced,
            elapsed_ms = elapsed.as_millis() as u64,
            "group sync round"
        );
        if elapsed > self.interval {
            tracing::warn!(
                groups = synced,
                "a group sync round took {elapsed:?}, longer than --groups.sync.interval.secs"
            );
        }
        Ok(last_applied)
    }

    /// Records one group's source offsets and commits their translation to
    /// the target group if it has no active members. `None`: the group has
    /// no offsets for the replicated topics.
    fn sync_group(
        &self,
        group: &str,
        partitions: &[TopicPartition],
        producer: &ThreadedProducer<DefaultProducerContext>,
        observed_at_ms: i64,
    ) -> anyhow::Result<Option<GroupOutcome>> {
        let offsets = self.source.groups().committed(group, partitions)?;
        if offsets.is_empty() {
            return Ok(None);
        }
        send(
            producer,
            &self.groups_topic,
            &GroupsTopicRecord::Group(GroupOffsetsRecord {
                group: group.to_string(),
                offsets: offsets
                    .iter()
                    .map(|((t, p), o)| (t.clone(), *p, *o))
                    .collect(),
                observed_at_ms,
            }),
        )?;
        let (translated, rereads) = self
            .translate(group, &offsets)
            .map_err(|e| e.context("not translated this round"))?;
        let applied = match apply(&self.target.groups(), group, &translated, false) {
            Ok(_) => true,
            Err(ApplyError::ActiveMembers { .. }) => {
                tracing::debug!(%group, "group has active members on the target; not synced");
                false
            }
            Err(e) => return Err(e.into()),
        };
        Ok(Some(GroupOutcome { applied, rereads }))
    }

    /// Target offsets for a group's source offsets, and the re-read count.
    fn translate(
        &self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> anyhow::Result<(BTreeMap<TopicPartition, i64>, i64)> {
        let mut translated = BTreeMap::new();
        let mut unknown = BTreeMap::new();
        let mut rereads = 0;
        for ((topic, partition), &offset) in offsets {
            let key = SourcePartition::new(topic.clone(), *partition);
            match (
                self.state.translate(&key, offset)?,
                self.state.checkpoint(&key)?,
            ) {
                (Cached::Exact(target), _) => {
                    translated.insert((topic.clone(), *partition), target);
                }
                (Cached::Tail, Some(checkpoint)) => {
                    translated.insert((topic.clone(), *partition), checkpoint.next_target_offset);
                    rereads += (offset - checkpoint.next_source_offset).max(0);
                }
                _ => {
                    unknown.insert((topic.clone(), *partition), offset);
                }
            }
        }
        if !unknown.is_empty() {
            let from_history = translate_offsets(&self.target, &self.alias, group, &unknown)?;
            for p in from_history.partitions {
                let Some(t) = p.translation else {
                    anyhow::bail!(
                        "group {group}: {}-{} has no translation: {}",
                        p.topic,
                        p.partition,
                        p.error.unwrap_or_default()
                    );
                };
                rereads += t.rereads;
                translated.insert((p.topic, p.partition), t.target_offset);
            }
        }
        Ok((translated, rereads))
    }

    /// Source end of committed data and replicated position per partition.
    fn source_ends(
        &self,
        partitions: &[TopicPartition],
        observed_at_ms: i64,
    ) -> anyhow::Result<GroupsTopicRecord> {
        let side: Side = self.source.side(1024, Duration::from_secs(30));
        let mut ends = Vec::new();
        let distinct: BTreeSet<&TopicPartition> = partitions.iter().collect();
        for (topic, partition) in distinct {
            let (_, high) = side.watermarks(topic, *partition)?;
            let position = self
                .state
                .checkpoint(&SourcePartition::new(topic.clone(), *partition))?
                .map_or(0, |c| c.next_source_offset);
            // Only transaction markers past the position: nothing is missing.
            let end = if position < high
                && first_committed(&side, topic, *partition, position, high)?.is_none()
            {
                position
            } else {
                high
            };
            ends.push((topic.clone(), *partition, end, position));
        }
        Ok(GroupsTopicRecord::SourceEnds(SourceEndsRecord {
            partitions: ends,
            observed_at_ms,
        }))
    }
}

fn send(
    producer: &ThreadedProducer<DefaultProducerContext>,
    topic: &str,
    record: &GroupsTopicRecord,
) -> anyhow::Result<()> {
    let (key, value) = (record.key(), record.encode());
    producer
        .send(BaseRecord::to(topic).partition(0).key(&key).payload(&value))
        .map_err(|(e, _)| anyhow::anyhow!("recording group offsets in {topic}: {e}"))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

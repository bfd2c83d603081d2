//! Continuous group sync inside `run` (`--groups.sync REGEX`).
//!
//! Every interval: read the committed offsets of the matching source
//! groups, record them (and the source's end offsets) in the groups topic on
//! the target, so failover works when the source and this host are both
//! gone, and commit their translations to the same groups on the target
//! where those have no active members. A group with members on the target
//! is never touched: its consumers own their offsets. In a fleet, the
//! instance that owns lane 0 syncs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eosmirror_state::{SourcePartition, StateStore};
use rdkafka::admin::AdminClient;
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};

use super::admin::GroupAdmin;
use super::apply::plan;
use super::record::{GroupOffsetsRecord, GroupsTopicRecord, Recorded, SourceEndsRecord};
use super::translate::{replicated_partitions, translate_groups, GroupOffsets, SourceTopicIds};
use super::translation::TranslatedOffset;
use super::TopicPartition;
use crate::clusters::{Cluster, CONNECT_TIMEOUT};
use crate::error_chain::one_line;
use crate::failpoints::{self, crash_point, fault_armed};
use crate::health::Health;
use crate::offsets::history::read_positions;
use crate::offsets::topics_now::{topics_now, TopicsNow};
use crate::pattern::NamePattern;
use crate::read::{first_committed, Side};
use crate::replication::layout::{Lane, Layout};
use crate::replication::membership::LaneOwnership;
use crate::replication::progress::InternalTopics;
use crate::shutdown::Shutdown;
use crate::topics::configs::{describe_topics, setting};
use crate::topics::filter::TopicFilter;
use crate::topics::identity::TopicId;

/// Reader memory for the groups topic (compacted: one record per group).
const RECORDED_READ_KBYTES: usize = 1024;

/// Everything a sync round needs.
pub struct GroupSync {
    /// Groups to sync (whole name).
    pub groups: NamePattern,
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
    /// The fleet's lanes: only the instance that owns lane 0 syncs, so
    /// instances never commit rounds of different ages over each other.
    pub lanes: Arc<LaneOwnership>,
    /// Which lane copies a partition: the cache is current only for the
    /// lanes this instance owns.
    pub layout: Layout,
    /// Which of them copy here, past their session's start.
    pub health: Arc<Health>,
}

/// A group's offsets as far as the local cache translates them.
#[derive(Default)]
struct CachedTranslation {
    /// Target offsets of the partitions the cache translated.
    translated: BTreeMap<TopicPartition, i64>,
    /// Their re-read count.
    rereads: i64,
    /// Source offsets of the partitions the cache could not translate.
    unknown: BTreeMap<TopicPartition, i64>,
}

impl GroupSync {
    /// Runs rounds until shutdown. A failed round is logged and retried at
    /// the next interval: sync must never stop replication.
    pub async fn run(self, shutdown: Shutdown) {
        let this = Arc::new(self);
        let mut last_applied: HashMap<String, Instant> = HashMap::new();
        // What the groups topic holds, read on from round to round.
        let mut recorded: Option<Recorded> = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(this.interval) => {}
                _ = shutdown.wait() => return,
            }
            if !this.lanes.is_owned(Lane(0)) {
                continue;
            }
            let round = Arc::clone(&this);
            let previous = (last_applied.clone(), recorded.take().unwrap_or_default());
            match tokio::task::spawn_blocking(move || round.round(previous.0, previous.1)).await {
                Ok(Ok((applied, read))) => {
                    last_applied = applied;
                    recorded = Some(read);
                }
                Ok(Err(e)) => tracing::warn!(
                    "group sync round failed (retrying in {:?}): {}",
                    this.interval,
                    one_line(&e)
                ),
                Err(e) => tracing::error!("group sync round panicked: {e}"),
            }
            for (group, applied) in &last_applied {
                crate::metrics::group_translation_age(group, applied.elapsed().as_secs_f64());
            }
        }
    }

    /// One round; returns when each group's translation was last committed
    /// (or found already in place), and the groups topic as read before
    /// this round's writes (`recorded`: as the last round read it, which
    /// this one reads on from).
    ///
    /// The topic holds the groups this sync observes: see [`gone`].
    fn round(
        &self,
        mut last_applied: HashMap<String, Instant>,
        mut recorded: Recorded,
    ) -> anyhow::Result<(HashMap<String, Instant>, Recorded)> {
        let side = self.target.side(RECORDED_READ_KBYTES, CONNECT_TIMEOUT);
        recorded.catch_up(&side, &self.groups_topic)?;
        let partitions = replicated_partitions(&self.source, &self.target, Some(&self.topics))?;
        // Every group's requests of a step are in flight at once on one
        // admin client: a round costs a few round trips, not a few per
        // group. Each step gets a client of its own: a timed-out request
        // stays queued on its client, and librdkafka aborts the process
        // when the coordinator answers it later (see `selection::watch`).
        let source_admin = || GroupAdmin::new("source", &self.source.connection, CONNECT_TIMEOUT);
        let target_admin = || GroupAdmin::new("target", &self.target.connection, CONNECT_TIMEOUT);
        let mut config = self.target.connection.clone();
        config.set("enable.idempotence", "true").set("acks", "all");
        // The target refuses a batch as a whole: batches kept within the
        // groups topic's max.message.bytes (with a margin for how the two
        // count a batch's framing) leave only a record over it to refuse,
        // at send, and that record is its group's alone.
        match self.groups_topic_limit(target_admin()?.client()) {
            Some(limit) => {
                // librdkafka takes 1000 to 1000000000.
                let within = limit
                    .saturating_sub(limit / 100 + 256)
                    .clamp(1000, 1_000_000_000);
                config.set("message.max.bytes", within.to_string());
            }
            // Unknown: one record per batch, so a refusal is still the
            // refused record's group alone.
            None => {
                config.set("batch.num.messages", "1");
            }
        }
        let producer: RecordProducer = config.create_with_context(RefusedRecords::default())?;
        let observed_at_ms = crate::clock::unix_millis();
        let started = Instant::now();
        // The recorded groups are asked for their offsets too, listed or
        // not: a listing leaves out the groups of an offsets partition
        // without a leader, and only a group's own answer (no offsets) may
        // remove its record, which failover needs.
        let listed: BTreeSet<String> = self.source.groups().list_groups()?.into_iter().collect();
        let names: Vec<String> = listed
            .iter()
            .chain(recorded.groups.keys())
            .filter(|g| self.groups.matches(g))
            .cloned()
            .collect::<BTreeSet<String>>()
            .into_iter()
            .collect();
        let committed = source_admin()?.committed(&names, &partitions);
        // Read after the offsets: a topic recreated in between gives the
        // offsets of the old topic the new id, which refuses them, never the
        // other way round.
        let topics_now = topics_now(
            &self.source.side(1024, CONNECT_TIMEOUT),
            &self.target.side(1024, CONNECT_TIMEOUT),
            partitions.iter().map(|(t, _)| t.as_str()),
        )?;
        let source_ids: SourceTopicIds = topics_now
            .iter()
            .map(|(topic, now)| (topic.clone(), now.source))
            .collect();
        let mut cached = BTreeMap::new();
        let mut observed = BTreeSet::new();
        let mut unread = BTreeSet::new();
        // Groups whose record could not be sent, and groups removed.
        let mut not_sent = BTreeSet::new();
        let mut removed = BTreeSet::new();
        for (group, offsets) in committed {
            let offsets = match offsets {
                Ok(o) if o.is_empty() => continue,
                Ok(o) => o,
                // The listing leaves out groups the principal may not
                // describe: one that is also refused its offsets is gone
                // for eosmirror (its ACLs were revoked).
                Err(e) if !listed.contains(&group) && e.is_authorization() => continue,
                Err(e) => {
                    tracing::warn!(%group, "group sync: {e}");
                    unread.insert(group);
                    continue;
                }
            };
            let record = GroupsTopicRecord::Group(GroupOffsetsRecord {
                group: group.clone(),
                offsets: offsets
                    .iter()
                    .map(|((t, p), o)| (t.clone(), *p, *o))
                    .collect(),
                source_topic_ids: recorded_ids(&source_ids, offsets.keys().map(|(t, _)| t)),
                observed_at_ms,
            });
            // A record refused at once (over the producer's
            // message.max.bytes: a group of some 30,000 partitions) keeps
            // that group where it is, not the others.
            if let Err(e) = send(&producer, &self.groups_topic, &record) {
                tracing::warn!(%group, "group sync: {}; the group is not moved this round", one_line(&e));
                unread.insert(group.clone());
                not_sent.insert(group);
                continue;
            }
            observed.insert(group.clone());
            match self.translate_cached(&offsets, &topics_now) {
                Ok(partial) => {
                    cached.insert(group, partial);
                }
                Err(e) => {
                    tracing::warn!(%group, "group sync: not translated this round: {}", one_line(&e))
                }
            }
        }
        for group in gone(recorded.groups.keys(), &observed, &unread, &partitions) {
            send_tombstone(&producer, &self.groups_topic, group)?;
            removed.insert(group.clone());
            last_applied.remove(group);
            crate::metrics::group_removed(group);
            tracing::info!(%group, "group sync: the group has no offsets of the replicated topics on the source any more (deleted, expired, or no longer matched by --groups.sync); its record is removed, so failover leaves it out");
        }
        let (translated, rereads) = self.translate_rest(cached, &source_ids);

        // Only groups nobody consumes on the target are written.
        let candidates: Vec<String> = translated.keys().cloned().collect();
        let idle: Vec<String> = target_admin()?
            .describe(&candidates)
            .into_iter()
            .filter_map(|(group, membership)| match membership {
                Ok(m) if m.members.is_empty() => Some(group),
                Ok(_) => {
                    tracing::debug!(%group, "group has active members on the target; not synced");
                    None
                }
                Err(e) => {
                    tracing::warn!(%group, "group sync: {e}");
                    None
                }
            })
            .collect();
        let mut commits = BTreeMap::new();
        let mut in_place = Vec::new();
        for (group, current) in target_admin()?.committed(&idle, &partitions) {
            let current = match current {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(%group, "group sync: {e}");
                    continue;
                }
            };
            match plan(&group, &translated[&group], &current, false) {
                Ok(applied) if applied.committed.is_empty() => in_place.push(group),
                Ok(applied) => {
                    let offsets = applied
                        .committed
                        .into_iter()
                        .map(|(p, (_, new))| (p, new))
                        .collect();
                    commits.insert(group, offsets);
                }
                Err(e) => tracing::warn!("group sync: {e}"),
            }
        }
        // The recorded source offsets are durable before any target group
        // moves: failover applies them and refuses to rewind, so a target
        // group must never be ahead of its record.
        let refused = flush(&producer, &self.groups_topic)?;
        for group in refused_groups(refused, &removed, &self.groups_topic)? {
            commits.remove(&group);
            in_place.retain(|g| *g != group);
            not_sent.insert(group);
        }
        if !commits.is_empty() && fault_armed(failpoints::GROUPS_SLOW_COMMIT) {
            let point = failpoints::GROUPS_SLOW_COMMIT;
            tracing::warn!("fault point {point}: waiting 10 s before committing the target groups");
            std::thread::sleep(Duration::from_secs(10));
            tracing::warn!("fault point {point}: committing the target groups now");
        }
        // Lane 0, and group sync with it, may have moved while the round
        // translated: the new owner's rounds are newer than this one.
        if !commits.is_empty() && !self.lanes.is_owned(Lane(0)) {
            anyhow::bail!("lane 0 moved to another instance during the round; its target groups are left to that instance's group sync");
        }
        for (group, done) in target_admin()?.commit(&commits) {
            match done {
                Ok(()) => in_place.push(group),
                Err(e) => tracing::warn!(%group, "group sync: {e}"),
            }
        }
        if !commits.is_empty() {
            crash_point!(failpoints::GROUPS_AFTER_TARGET_COMMIT);
        }
        for group in in_place {
            last_applied.insert(group, Instant::now());
        }
        for (group, r) in &rereads {
            crate::metrics::group_rereads(group, *r);
        }
        // A group never synced (its translation refused from the first
        // round, say) has an age too, or an alert on the age never fires.
        for group in observed
            .iter()
            .chain(&not_sent)
            .filter(|g| !last_applied.contains_key(*g))
        {
            crate::metrics::group_translation_age(group, f64::INFINITY);
        }
        let synced = rereads.len();
        send(
            &producer,
            &self.groups_topic,
            &self.source_ends(&partitions, &source_ids, observed_at_ms)?,
        )?;
        refused_groups(
            flush(&producer, &self.groups_topic)?,
            &removed,
            &self.groups_topic,
        )?;
        let elapsed = started.elapsed();
        tracing::debug!(
            groups = synced,
            elapsed_ms = elapsed.as_millis() as u64,
            "group sync round"
        );
        if elapsed > self.interval {
            tracing::warn!(
                groups = synced,
                "a group sync round took {elapsed:?}, longer than --groups.sync.interval.ms"
            );
        }
        Ok((last_applied, recorded))
    }

    /// The groups topic's `max.message.bytes`, if the target tells (one
    /// DescribeConfigs request). Blocking; call from a blocking thread of
    /// the runtime.
    fn groups_topic_limit(&self, target: &AdminClient<DefaultClientContext>) -> Option<usize> {
        let answers = tokio::runtime::Handle::current()
            .block_on(describe_topics(target, &[&self.groups_topic]))
            .ok()?;
        let (_, answer) = answers.into_iter().next()?;
        setting(&answer.ok()?, "max.message.bytes")?.parse().ok()
    }

    /// Whether the local cache holds `partition`'s current position and
    /// history: its lane is this instance's and copies here past its
    /// session's start (which checks the cache against the target), and the
    /// partition is not stopped (a cache that holds commits the target lost
    /// stops it, and stays as it was).
    fn cache_current(&self, partition: &SourcePartition) -> bool {
        let lane = self.layout.lane_of(partition);
        self.lanes.is_owned(lane)
            && self.health.copies(lane)
            && !self.health.stopped.contains(partition)
    }

    /// What the local cache translates of a group's source offsets; the
    /// rest is left for [`GroupSync::translate_rest`].
    fn translate_cached(
        &self,
        offsets: &BTreeMap<TopicPartition, i64>,
        topics_now: &BTreeMap<String, TopicsNow>,
    ) -> anyhow::Result<CachedTranslation> {
        let mut partial = CachedTranslation::default();
        for ((topic, partition), &offset) in offsets {
            let key = SourcePartition::new(topic.clone(), *partition);
            // The cache is the partition's only while this instance copies
            // it: another instance's lane moves on without this cache (a
            // tail from before the lane moved would translate short for
            // good), and may start the topic over (the cache's runs would be
            // the deleted topic's). A topic recreated since the lane's last
            // check (an idle lane checks none) is the target's mapping's to
            // refuse.
            let now = topics_now.get(topic).copied().unwrap_or_default();
            let same_topics = self.state.checkpoint(&key)?.is_some_and(|c| {
                let same = |id: [u8; 16], now: Option<TopicId>| now.is_none_or(|n| n.0 == id);
                same(c.incarnation.source_topic_id, now.source)
                    && same(c.incarnation.target_topic_id, now.target)
            });
            if !self.cache_current(&key) || !same_topics {
                partial.unknown.insert((topic.clone(), *partition), offset);
                continue;
            }
            // One snapshot of the cache: a tail taken after a commit the
            // lookup did not see would skip that commit's records.
            match self.state.translate(&key, offset)? {
                Some(lookup) => {
                    let t = TranslatedOffset::from_lookup(offset, lookup);
                    partial
                        .translated
                        .insert((topic.clone(), *partition), t.target_offset);
                    partial.rereads += t.rereads;
                }
                None => {
                    partial.unknown.insert((topic.clone(), *partition), offset);
                }
            }
        }
        Ok(partial)
    }

    /// Completes the cache's translations from the mapping on the target,
    /// read once for every group's unknown partitions. Returns each fully
    /// translated group's target offsets and re-read count; a group with a
    /// partition that has no translation is left out this round (logged).
    fn translate_rest(
        &self,
        cached: BTreeMap<String, CachedTranslation>,
        source_ids: &SourceTopicIds,
    ) -> (
        BTreeMap<String, BTreeMap<TopicPartition, i64>>,
        BTreeMap<String, i64>,
    ) {
        let unknown: GroupOffsets = cached
            .iter()
            .filter(|(_, c)| !c.unknown.is_empty())
            .map(|(group, c)| (group.clone(), c.unknown.clone()))
            .collect();
        let mut from_history = BTreeMap::new();
        if !unknown.is_empty() {
            match translate_groups(&self.target, &self.alias, &unknown, source_ids) {
                Ok(translations) => {
                    from_history = translations
                        .into_iter()
                        .map(|t| (t.group.clone(), t))
                        .collect();
                }
                Err(e) => tracing::warn!(
                    groups = unknown.len(),
                    "group sync: the mapping on the target was not read this round: {}",
                    one_line(&e)
                ),
            }
        }
        let mut translated = BTreeMap::new();
        let mut rereads = BTreeMap::new();
        for (group, mut partial) in cached {
            if !partial.unknown.is_empty() {
                let Some(history) = from_history.remove(&group) else {
                    continue;
                };
                let complete = history.partitions.into_iter().all(|p| match p.translation {
                    Some(t) => {
                        partial.rereads += t.rereads;
                        partial
                            .translated
                            .insert((p.topic, p.partition), t.target_offset);
                        true
                    }
                    None => {
                        tracing::warn!(
                            %group,
                            "group sync: not translated this round: {}-{} has no translation: {}",
                            p.topic,
                            p.partition,
                            p.error.unwrap_or_default()
                        );
                        false
                    }
                });
                if !complete {
                    continue;
                }
            }
            translated.insert(group.clone(), partial.translated);
            rereads.insert(group, partial.rereads);
        }
        (translated, rereads)
    }

    /// Source end of committed data and replicated position per partition.
    ///
    /// The local cache is current only for the lanes this instance copies;
    /// the others' positions come from the position topic on the target. A
    /// partition with no position has copied nothing: its copy starts at the
    /// source's first offset, which retention may have moved past 0.
    ///
    /// A position recorded for a source topic since deleted and created
    /// again (other than `source_ids`) counts as none: nothing of the new
    /// topic is replicated yet.
    fn source_ends(
        &self,
        partitions: &[TopicPartition],
        source_ids: &SourceTopicIds,
        observed_at_ms: i64,
    ) -> anyhow::Result<GroupsTopicRecord> {
        let side: Side = self.source.side(1024, Duration::from_secs(30));
        let distinct: BTreeSet<TopicPartition> = partitions.iter().cloned().collect();
        let cached = |(topic, partition): &TopicPartition| {
            self.cache_current(&SourcePartition::new(topic, *partition))
        };
        let elsewhere: BTreeSet<TopicPartition> =
            distinct.iter().filter(|tp| !cached(tp)).cloned().collect();
        let positions = if elsewhere.is_empty() {
            BTreeMap::new()
        } else {
            let target = self.target.side(1024, Duration::from_secs(30));
            let topic = InternalTopics::for_alias(&self.alias).position;
            read_positions(&target, &topic, &elsewhere)?
        };
        let stable_ends = side.stable_watermarks_of(
            &distinct
                .iter()
                .map(|(topic, partition)| SourcePartition::new(topic, *partition))
                .collect::<Vec<_>>(),
        )?;
        let mut ends = Vec::new();
        for tp in distinct {
            let (topic, partition) = &tp;
            let key = SourcePartition::new(topic, *partition);
            let (low, high) = stable_ends[&key];
            let source_now = source_ids.get(topic).copied().flatten();
            let position = if cached(&tp) {
                self.state
                    .checkpoint(&key)?
                    .filter(|c| source_now.is_none_or(|n| n.0 == c.incarnation.source_topic_id))
                    .map(|c| c.next_source_offset)
            } else {
                positions
                    .get(&tp)
                    .filter(|p| source_now.is_none_or(|n| n == p.lineage.source_topic_id))
                    .map(|p| p.next_source_offset)
            }
            .unwrap_or(low);
            // Only transaction markers past the position: nothing is missing.
            let end = if position < high
                && first_committed(&side, topic, *partition, position.max(low), high)?.is_none()
            {
                position
            } else {
                high
            };
            ends.push((topic.clone(), *partition, end, position));
        }
        Ok(GroupsTopicRecord::SourceEnds(SourceEndsRecord {
            partitions: ends,
            source_topic_ids: recorded_ids(source_ids, partitions.iter().map(|(t, _)| t)),
            observed_at_ms,
        }))
    }
}

/// The ids of `topics` (each once) as a record of the groups topic keeps
/// them; a topic whose id is not known is left out.
fn recorded_ids<'a>(
    ids: &SourceTopicIds,
    topics: impl Iterator<Item = &'a String>,
) -> Vec<(String, TopicId)> {
    let topics: BTreeSet<&String> = topics.collect();
    topics
        .into_iter()
        .filter_map(|t| Some((t.clone(), ids.get(t).copied().flatten()?)))
        .collect()
}

fn send(producer: &RecordProducer, topic: &str, record: &GroupsTopicRecord) -> anyhow::Result<()> {
    let (key, value) = (record.key(), record.encode());
    producer
        .send(BaseRecord::to(topic).partition(0).key(&key).payload(&value))
        .map_err(|(e, _)| anyhow::anyhow!("recording group offsets in {topic}: {e}"))
}

/// The recorded groups a round removes from the groups topic: those it did
/// not observe with offsets of the replicated topics on the source
/// (deleted, expired, or no longer matched by `--groups.sync`), so failover
/// never brings them back on the target. A group whose offsets could not be
/// read (`unread`) keeps its record, and nothing is removed in a round that
/// found no replicated partition at all (the clusters did not answer
/// completely: nothing to judge by).
fn gone<'a>(
    recorded: impl Iterator<Item = &'a String>,
    observed: &BTreeSet<String>,
    unread: &BTreeSet<String>,
    partitions: &[TopicPartition],
) -> Vec<&'a String> {
    if partitions.is_empty() {
        return Vec::new();
    }
    recorded
        .filter(|g| !observed.contains(*g) && !unread.contains(*g))
        .collect()
}

/// Sends a tombstone for `group`'s record (written with the round's flush).
fn send_tombstone(producer: &RecordProducer, topic: &str, group: &str) -> anyhow::Result<()> {
    let key = GroupsTopicRecord::group_key(group);
    producer
        .send(BaseRecord::<[u8], [u8]>::to(topic).partition(0).key(&key))
        .map_err(|(e, _)| anyhow::anyhow!("removing group {group:?} from {topic}: {e}"))
}

/// The groups topic's producer.
type RecordProducer = ThreadedProducer<RefusedRecords>;

/// The records of the groups topic the target refused since the last
/// [`flush`], by key, with why. librdkafka's flush returns `Ok` once every
/// record has an outcome, a refusal included (a revoked Write, a record
/// over the topic's `max.message.bytes`).
#[derive(Default)]
struct RefusedRecords(Mutex<BTreeMap<Vec<u8>, KafkaError>>);

impl ClientContext for RefusedRecords {}

impl ProducerContext for RefusedRecords {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((error, message)) = result {
            let key = message.key().unwrap_or_default().to_vec();
            let mut refused = self.0.lock().expect("refused records poisoned");
            refused.entry(key).or_insert_with(|| error.clone());
        }
    }
}

/// Waits until every record sent to the groups topic has an outcome;
/// returns the refused ones by key.
fn flush(producer: &RecordProducer, topic: &str) -> anyhow::Result<BTreeMap<Vec<u8>, KafkaError>> {
    producer
        .flush(Duration::from_secs(30))
        .map_err(|e| anyhow::anyhow!("recording group offsets in {topic}: {e}"))?;
    let mut refused = producer
        .context()
        .0
        .lock()
        .expect("refused records poisoned");
    Ok(std::mem::take(&mut *refused))
}

/// The groups whose own records are among `refused`: each is named and
/// left where it is this round (its record is not durable, and a target
/// group must never be ahead of its record), while the others move. Any
/// other refused record (the tombstone of a group in `removed`, the source
/// ends) fails the round.
fn refused_groups(
    refused: BTreeMap<Vec<u8>, KafkaError>,
    removed: &BTreeSet<String>,
    topic: &str,
) -> anyhow::Result<Vec<String>> {
    let mut groups = Vec::new();
    for (key, error) in refused {
        match GroupsTopicRecord::group_of_key(&key).filter(|g| !removed.contains(g)) {
            Some(group) => {
                tracing::warn!(%group, "group sync: the target refused the group's record in {topic}: {error}; the group is not moved this round (raise the topic's max.message.bytes, or check eosmirror's Write permission on it)");
                groups.push(group);
            }
            None => anyhow::bail!(
                "recording group offsets in {topic}: the target refused a record: {error}"
            ),
        }
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_recorded_group_not_observed_is_gone_unless_its_offsets_were_not_read() {
        let recorded = names(&["billing", "audit", "deleted", "unread"]);
        let partitions = [("orders".to_string(), 0)];
        let gone = gone(
            recorded.iter(),
            &names(&["billing", "audit", "new"]),
            &names(&["unread"]),
            &partitions,
        );
        assert_eq!(gone, [&"deleted".to_string()]);
    }

    #[test]
    fn nothing_is_gone_in_a_round_that_found_no_replicated_partition() {
        let recorded = names(&["billing"]);
        assert!(gone(recorded.iter(), &names(&[]), &names(&[]), &[]).is_empty());
    }
}

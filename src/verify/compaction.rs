//! Records one cluster's log cleaner removed and the other's kept.
//!
//! A compacted topic is cleaned on each cluster on its own schedule, so an
//! exact copy and its source need not hold the same records at the same
//! time: either side may have removed a record whose key has a later
//! record there (and a tombstone, after `delete.retention.ms`, with none).
//! A record missing from one side is held back until a later record of its
//! key shows on that side; what nothing explains by the end of the range
//! is reported as the difference it seemed.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

use super::report::{Anomaly, PartitionReport};
use crate::read::record::RecordImage;
use crate::topics::configs::{describe_topics, setting};

/// Records missing from one side held back per partition; beyond it the
/// partition is "could not verify", so memory stays bounded.
const MAX_PENDING: usize = 10_000;

/// Keys remembered per log and partition, to tell a tombstone the cleaner
/// removed (no earlier record of its key is left) from a lost one; beyond
/// it a missing tombstone of an unremembered key cannot be judged.
const MAX_KEYS: usize = 200_000;

/// The side of a copy a record is missing from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Log {
    Source,
    Target,
}

/// A record missing from one log, and what it is if nothing explains it.
struct Pending {
    /// Its offset in the log it is missing from: only a later record of
    /// its key there explains it.
    offset: i64,
    anomaly: Anomaly,
}

/// The records of a compacted topic's partition missing from one side,
/// waiting for a later record of their key on that side.
#[derive(Default)]
pub struct CompactionWatch {
    /// By log (`Log as usize`): whether that cluster compacts the topic.
    /// Only its own cleaner can explain a record missing from a log.
    compacted: [bool; 2],
    /// By log: whether the range read starts at the log's start (no
    /// record of a key can lie before it).
    from_start: [bool; 2],
    /// By log, then key digest: records missing from that log.
    pending: [HashMap<u64, Vec<Pending>>; 2],
    held: usize,
    /// By log: the keys met so far (up to [`MAX_KEYS`]).
    keys: [HashSet<u64>; 2],
    keys_full: [bool; 2],
    /// Why part of the partition could not be judged, if it could not.
    unjudged: Option<String>,
}

impl CompactionWatch {
    /// A watch for a topic each log (source, target) compacts or not,
    /// read from each log's start or not.
    pub fn new(compacted: [bool; 2], from_start: [bool; 2]) -> CompactionWatch {
        CompactionWatch {
            compacted,
            from_start,
            ..CompactionWatch::default()
        }
    }

    /// `record` (as the other side holds it) is missing from `log`, where
    /// it would be at `offset`; `anomaly` is what it is unless that log's
    /// cleaner removed it: a later record of its key shows there, or, for a
    /// tombstone (removed after `delete.retention.ms`, once the cleaner has
    /// removed the key's earlier records), no earlier record of its key was
    /// met there. A keyless record is never compacted (brokers refuse them
    /// in compacted topics).
    pub fn missing(
        &mut self,
        log: Log,
        record: &RecordImage,
        offset: i64,
        anomaly: Anomaly,
        report: &mut PartitionReport,
    ) {
        let Some(key) = record
            .key
            .as_deref()
            .filter(|_| self.compacted[log as usize])
        else {
            report.add(anomaly);
            return;
        };
        let key = digest(key);
        if record.value.is_none() {
            if self.keys[log as usize].contains(&key) {
                report.add(anomaly);
            } else if !self.from_start[log as usize] || self.keys_full[log as usize] {
                let why = if self.from_start[log as usize] {
                    format!("the partition holds more than {MAX_KEYS} keys, too many to remember whether an earlier record of its key is still there")
                } else {
                    "an earlier record of its key may lie before the range read (a --last or --since range, or the history's expired start)".to_string()
                };
                self.unjudged.get_or_insert_with(|| {
                    format!("a tombstone missing from the {} (at offset {offset} there) could not be judged: {why}", log.name())
                });
                // Neither are the key's earlier records missing there.
                self.explain(log, key, offset);
            } else {
                // The key's earlier records missing there went with it.
                let before = self.explain(log, key, offset);
                report.removed_by_compaction += 1 + before as u64;
            }
            return;
        }
        if self.held >= MAX_PENDING {
            self.unjudged.get_or_insert_with(|| format!("more than {MAX_PENDING} records are missing from one side, too many to hold until a later record of their key explains them (compaction); verify a shorter range with --last"));
            return;
        }
        self.held += 1;
        self.pending[log as usize]
            .entry(key)
            .or_default()
            .push(Pending { offset, anomaly });
    }

    /// `record` is in `log`: the records of its key missing before it there
    /// were removed by that log's cleaner.
    pub fn seen(&mut self, log: Log, record: &RecordImage, report: &mut PartitionReport) {
        if !self.compacted[log as usize] {
            return;
        }
        let Some(key) = &record.key else { return };
        let key = digest(key);
        let keys = &mut self.keys[log as usize];
        if keys.len() < MAX_KEYS {
            keys.insert(key);
        } else if !keys.contains(&key) {
            self.keys_full[log as usize] = true;
        }
        let explained = self.explain(log, key, record.offset);
        report.removed_by_compaction += explained as u64;
    }

    /// Lets go of the records of `key` missing from `log` before `offset`
    /// (a later record of the key is there, or its tombstone went too);
    /// returns how many.
    fn explain(&mut self, log: Log, key: u64, offset: i64) -> usize {
        let by_key = &mut self.pending[log as usize];
        let Some(waiting) = by_key.get_mut(&key) else {
            return 0;
        };
        let before = waiting.len();
        waiting.retain(|p| p.offset >= offset);
        let explained = before - waiting.len();
        if waiting.is_empty() {
            by_key.remove(&key);
        }
        self.held -= explained;
        explained
    }

    /// Reports every record nothing explained, in offset order per log, and
    /// what could not be judged.
    pub fn finish(&mut self, report: &mut PartitionReport) {
        for by_key in &mut self.pending {
            let mut left: Vec<Pending> = by_key.drain().flat_map(|(_, p)| p).collect();
            left.sort_by_key(|p| p.offset);
            for pending in left {
                report.add(pending.anomaly);
            }
        }
        self.held = 0;
        report.unverifiable.extend(self.unjudged.take());
    }
}

impl Log {
    fn name(self) -> &'static str {
        match self {
            Log::Source => "source",
            Log::Target => "target",
        }
    }
}

fn digest(key: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
}

/// The topics among `topics` whose `cleanup.policy` on `cluster` includes
/// `compact`, in one DescribeConfigs request; and for each topic it could
/// not tell, why (verify then judges that topic strictly, and says so).
/// Blocking; call from a blocking thread of the runtime.
pub fn compacted_topics(
    connection: &ClientConfig,
    cluster: &str,
    topics: &[&str],
) -> (BTreeSet<String>, Vec<String>) {
    let unknown = |why: &dyn std::fmt::Display| {
        topics
            .iter()
            .map(|t| format!("{cluster} topic {t}: {why}"))
            .collect()
    };
    if topics.is_empty() {
        return (BTreeSet::new(), Vec::new());
    }
    let admin: AdminClient<DefaultClientContext> = match connection.create() {
        Ok(admin) => admin,
        Err(e) => return (BTreeSet::new(), unknown(&e)),
    };
    let answers = match tokio::runtime::Handle::current().block_on(describe_topics(&admin, topics))
    {
        Ok(answers) => answers,
        Err(e) => return (BTreeSet::new(), unknown(&e)),
    };
    let mut compacted = BTreeSet::new();
    let mut unknown = Vec::new();
    for (topic, answer) in answers {
        match answer {
            Ok(resource) => {
                let policy = setting(&resource, "cleanup.policy");
                if policy.is_some_and(|p| p.split(',').any(|p| p.trim() == "compact")) {
                    compacted.insert(topic.to_string());
                }
            }
            Err(code) => unknown.push(format!("{cluster} topic {topic}: {code}")),
        }
    }
    (compacted, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::record::image;
    use crate::verify::report::Class;

    fn missing(offset: i64) -> Anomaly {
        Anomaly {
            class: Class::Missing,
            source_offset: Some(offset),
            target_offset: Some(offset),
            fields: Vec::new(),
        }
    }

    #[test]
    fn more_records_held_than_the_bound_make_the_partition_unverifiable() {
        let mut watch = CompactionWatch::new([false, true], [true, true]);
        let mut report = PartitionReport::default();
        for offset in 0..=MAX_PENDING as i64 {
            let mut record = image(offset, "v");
            record.key = Some(offset.to_string().into_bytes());
            watch.missing(Log::Target, &record, offset, missing(offset), &mut report);
        }
        watch.finish(&mut report);
        assert_eq!(report.unverifiable.len(), 1, "{:?}", report.unverifiable);
        assert!(report.unverifiable[0].contains("too many to hold"));
        // What was held and never explained is still reported.
        assert_eq!(report.count(Class::Missing), MAX_PENDING as u64);
    }
}

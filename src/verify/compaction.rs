//! Records one cluster's log cleaner removed and the other's kept.
//!
//! A compacted topic is cleaned on each cluster on its own schedule, so an
//! exact copy and its source need not hold the same records at the same
//! time: either side may have removed a record whose key has a later
//! record there (and a tombstone, after `delete.retention.ms`, with none).
//! A record missing from one side is held back until a later record of its
//! key shows on that side; what nothing explains by the end of the range
//! is reported as the difference it seemed.

use std::collections::{BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

use super::report::{Anomaly, PartitionReport};
use crate::read::record::RecordImage;

/// Records missing from one side held back per partition; beyond it they
/// are reported at once, so memory stays bounded.
const MAX_PENDING: usize = 10_000;

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
    /// By log (`Log as usize`), then key digest.
    pending: [HashMap<u64, Vec<Pending>>; 2],
    held: usize,
}

impl CompactionWatch {
    /// `record` (as the other side holds it) is missing from `log`, where
    /// it would be at `offset`; `anomaly` is what it is unless a later
    /// record of its key shows there. A keyless record was never compacted
    /// (brokers refuse them in compacted topics); a tombstone needs no
    /// later record (the cleaner removes it after `delete.retention.ms`).
    pub fn missing(
        &mut self,
        log: Log,
        record: &RecordImage,
        offset: i64,
        anomaly: Anomaly,
        report: &mut PartitionReport,
    ) {
        let Some(key) = &record.key else {
            report.add(anomaly);
            return;
        };
        if record.value.is_none() {
            report.removed_by_compaction += 1;
            return;
        }
        if self.held >= MAX_PENDING {
            report.add(anomaly);
            return;
        }
        self.held += 1;
        self.pending[log as usize]
            .entry(digest(key))
            .or_default()
            .push(Pending { offset, anomaly });
    }

    /// `record` is in `log`: the records of its key missing before it there
    /// were removed by that log's cleaner.
    pub fn seen(&mut self, log: Log, record: &RecordImage, report: &mut PartitionReport) {
        if self.held == 0 {
            return;
        }
        let Some(key) = &record.key else { return };
        let by_key = &mut self.pending[log as usize];
        let key = digest(key);
        let Some(waiting) = by_key.get_mut(&key) else {
            return;
        };
        let before = waiting.len();
        waiting.retain(|p| p.offset >= record.offset);
        let explained = before - waiting.len();
        if waiting.is_empty() {
            by_key.remove(&key);
        }
        self.held -= explained;
        report.removed_by_compaction += explained as u64;
    }

    /// Reports every record nothing explained, in offset order per log.
    pub fn finish(&mut self, report: &mut PartitionReport) {
        for by_key in &mut self.pending {
            let mut left: Vec<Pending> = by_key.drain().flat_map(|(_, p)| p).collect();
            left.sort_by_key(|p| p.offset);
            for pending in left {
                report.add(pending.anomaly);
            }
        }
        self.held = 0;
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
    let resources: Vec<ResourceSpecifier<'_>> =
        topics.iter().map(|t| ResourceSpecifier::Topic(t)).collect();
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(30)));
    let answer = tokio::runtime::Handle::current()
        .block_on(admin.describe_configs(resources.iter(), &options));
    let results = match answer {
        Ok(results) => results,
        Err(e) => return (BTreeSet::new(), unknown(&e)),
    };
    let mut compacted = BTreeSet::new();
    let mut unknown = Vec::new();
    // Results come in the order of the request.
    for (topic, result) in topics.iter().zip(results) {
        match result {
            Ok(resource) => {
                let policy = resource
                    .entries
                    .iter()
                    .find(|e| e.name == "cleanup.policy")
                    .and_then(|e| e.value.as_deref());
                if policy.is_some_and(|p| p.split(',').any(|p| p.trim() == "compact")) {
                    compacted.insert(topic.to_string());
                }
            }
            Err(code) => unknown.push(format!("{cluster} topic {topic}: {code}")),
        }
    }
    (compacted, unknown)
}

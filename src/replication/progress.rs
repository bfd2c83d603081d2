//! The progress record: the fact that makes a copy exactly-once.
//!
//! Every transaction a worker commits on the target carries, next to the data
//! records, one [`ProgressRecord`] written twice:
//!
//! - to the **progress topic** (`cleanup.policy=delete`), the full history of
//!   exact source→target offset runs, read by offset translation and verify;
//! - to the **position topic** (`cleanup.policy=compact`, keyed by source
//!   partition), so the latest position of every source partition survives
//!   forever — even for a partition idle longer than any retention — and a
//!   cold start reads a compacted topic instead of history.
//!
//! Both are internal topics of one source cluster alias with one partition
//! per lane: lane `k` writes partition `k` (see [`super::layout`]), so the
//! records of one source partition are all in one internal partition, in
//! commit order, and no partition is written by every transaction.

use eosmirror_state::{OffsetRun, SourcePartition, TopicIncarnation};
use serde::{Deserialize, Serialize};

use crate::topics::identity::TopicId;

/// Bumped when the encoding or the layout of the internal topics changes;
/// readers refuse versions they don't know instead of misreading positions.
/// Version 2: one internal partition per lane (version 1 had one partition).
/// Version 3: every record names its [`Lineage`]. Version 4: every record
/// says where the partition's copies end ([`ProgressRecord::copies_end`]);
/// version-3 records are still read (see [`without_copies_end`]), so the
/// copy's history stays readable. Version 5: the first record of each
/// partition's history says so ([`ProgressRecord::begins_history`]);
/// version-4 (and 3) records are read as version 5 with the flag clear:
/// whether they began a history is unknown, and readers that take a
/// history for whole only from a record with the flag never translate past
/// records on the strength of an older one (such a history reads as
/// truncated at its first record kept). (The groups topic's records have a version
/// of their own: see `groups/record.rs`.)
pub(crate) const FORMAT_VERSION: u8 = 5;

/// The version of the values written before [`FORMAT_VERSION`] 5: the
/// same fields but the last, `begins_history`.
const WITHOUT_BEGINS_HISTORY: u8 = 4;

/// The version of the values written before version 4.
const WITHOUT_COPIES_END: u8 = 3;

/// The version byte of record keys: the key (a source partition) has not
/// changed since version 3, and compaction keeps one record per key only
/// while the key's bytes stay the same.
const KEY_VERSION: u8 = 3;

/// Internal topics every eosmirror instance of one source alias shares.
#[derive(Debug, Clone)]
pub struct InternalTopics {
    /// History of offset runs (retention: delete).
    pub progress: String,
    /// Latest position per source partition (compacted).
    pub position: String,
    /// Latest recorded source offsets per consumer group, and the last
    /// observed source ends (compacted): what failover needs when the
    /// source and eosmirror's host are both gone.
    pub groups: String,
    /// What only a running instance knows, per lane (compacted, one
    /// partition): who copies it, partitions stopped by errors and why,
    /// rates. Advisory, written outside the transactions (see
    /// [`crate::replication::status_topic`]); read by `eosmirror status`.
    pub status: String,
}

impl InternalTopics {
    /// Names derived from the source alias. They start with `__`, so no
    /// include pattern ever replicates them.
    pub fn for_alias(alias: &str) -> InternalTopics {
        InternalTopics {
            progress: format!("__eosmirror.progress.{alias}"),
            position: format!("__eosmirror.position.{alias}"),
            groups: format!("__eosmirror.groups.{alias}"),
            status: format!("__eosmirror.status.{alias}"),
        }
    }
}

/// Which topics a record's offsets are offsets of: the source topic (in
/// which source cluster) and its target copy. A topic deleted and created
/// again keeps its name but gets a new id and starts its offsets over, so
/// offsets recorded under one lineage never apply to another: a changed
/// lineage stops the topic (or, with `--start.over`, starts a new history
/// that readers keep apart from the old one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lineage {
    /// The source cluster's id (Kafka's `cluster.id`).
    pub source_cluster_id: String,
    /// The source topic's id: new when the topic is created again.
    pub source_topic_id: TopicId,
    /// The target topic's id: new when the copy is created again.
    pub target_topic_id: TopicId,
}

impl Lineage {
    /// The topics' ids, as the local cache keeps them next to a checkpoint
    /// (the cache belongs to one source cluster).
    pub fn incarnation(&self) -> TopicIncarnation {
        TopicIncarnation {
            source_topic_id: self.source_topic_id.0,
            target_topic_id: self.target_topic_id.0,
        }
    }
}

/// Most offset runs one progress record holds: a batch ends once a
/// partition's copies make this many (a source of one-record transactions
/// makes a run of every record, since each marker leaves a gap). A run
/// encodes in at most 19 bytes (offsets of 2^31 and more), so a record
/// stays under half of the 1 MB `max.message.bytes` brokers default to;
/// the internal topics are created with that default, and a larger record
/// would be refused at every retry.
pub const MAX_RUNS: u32 = 25_000;

/// What one committed transaction replicated for one source partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressRecord {
    /// The source partition the transaction copied from.
    pub source: SourcePartition,
    /// The incarnations of the source and target topics the offsets below
    /// belong to.
    pub lineage: Lineage,
    /// Exact mapping of every record the transaction copied (may be empty
    /// when only the position moved, e.g. past a skipped gap).
    pub runs: Vec<OffsetRun>,
    /// Next source offset to copy: the resume position.
    pub next_source_offset: i64,
    /// Source offset just past the partition's last copy in this lineage
    /// (where its copy began, if nothing is copied yet); never above
    /// `next_source_offset`. The offsets from here to the position hold
    /// nothing that will be copied (transaction markers, aborted records,
    /// a reported gap), so a group committed among them, e.g. on the commit
    /// marker after the last copy, belongs at `next_target_offset` with no
    /// re-read: known from this record alone, after the progress topic's
    /// retention deleted the history of the copies.
    pub copies_end: i64,
    /// Target offset just past the last copied record. The transaction's
    /// commit marker sits here, so it is also where the next copy would be
    /// found by a consumer seeking to it.
    pub next_target_offset: i64,
    /// Random id of the eosmirror process that wrote it; tells a fenced
    /// worker whether another instance took its partition over.
    pub instance: u64,
    /// Wall-clock time of the commit (ms since the epoch), for lag reports.
    pub committed_at_ms: i64,
    /// Whether this is the first record of the partition's history in this
    /// lineage: the claim of a session that starts copying the partition
    /// (nothing copied before, or its topic started over). A history read
    /// from its beginning is complete only if it begins with such a record:
    /// a progress topic deleted and created again starts empty, not with
    /// these, and the offsets copied before it must read as expired, not
    /// as a gap before the first copy. The last field: version-4 values
    /// are decoded with it appended.
    pub begins_history: bool,
}

/// A progress or position record could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("{record} record has format version {found}; this eosmirror understands {} only (a newer eosmirror wrote it: upgrade; an older one: its internal topics have another layout, so replicate under a new --source.alias)", in_words(.understood))]
    UnknownVersion {
        /// Which internal topic's record (`progress`, `groups`).
        record: &'static str,
        found: u8,
        /// The versions this build reads, newest first.
        understood: &'static [u8],
    },
    #[error("record is empty")]
    Empty,
    #[error("record is malformed: {0}")]
    Malformed(String),
}

/// "version 3", "versions 4 and 3".
fn in_words(versions: &[u8]) -> String {
    match versions {
        [only] => format!("version {only}"),
        [newer @ .., oldest] => {
            let newer: Vec<String> = newer.iter().map(u8::to_string).collect();
            format!("versions {} and {oldest}", newer.join(", "))
        }
        [] => "no version".to_string(),
    }
}

impl ProgressRecord {
    /// Record key: the source partition, so the position topic compacts to
    /// one record per source partition.
    pub fn key(source: &SourcePartition) -> Vec<u8> {
        encode_with_version(KEY_VERSION, source)
    }

    /// The record's value on the target, with the format version first.
    pub fn encode(&self) -> Vec<u8> {
        encode_with_version(FORMAT_VERSION, self)
    }

    /// Reads a value written by [`ProgressRecord::encode`] of this version
    /// or of versions 4 and 3; another format version is an error naming it.
    pub fn decode(bytes: &[u8]) -> Result<ProgressRecord, DecodeError> {
        let (&version, body) = bytes.split_first().ok_or(DecodeError::Empty)?;
        match version {
            FORMAT_VERSION => decode_body(body),
            // The same encoding without the last field: a bincode `false`
            // is the byte 0.
            WITHOUT_BEGINS_HISTORY => decode_body(&[body, &[0]].concat()),
            WITHOUT_COPIES_END => {
                decode_body::<without_copies_end::ProgressRecord>(body).map(Into::into)
            }
            other => Err(unknown_version(
                other,
                &[FORMAT_VERSION, WITHOUT_BEGINS_HISTORY, WITHOUT_COPIES_END],
            )),
        }
    }

    /// Decodes a record key written by [`ProgressRecord::key`].
    pub fn decode_key(bytes: &[u8]) -> Result<SourcePartition, DecodeError> {
        let (&version, body) = bytes.split_first().ok_or(DecodeError::Empty)?;
        match version {
            KEY_VERSION => decode_body(body),
            other => Err(unknown_version(other, &[KEY_VERSION])),
        }
    }
}

fn unknown_version(found: u8, understood: &'static [u8]) -> DecodeError {
    DecodeError::UnknownVersion {
        record: "progress",
        found,
        understood,
    }
}

/// Progress and position records as version 3 wrote them: without
/// `copies_end`, read as ending at the position (what translation assumed
/// then: nothing known below it once the history expired).
mod without_copies_end {
    use eosmirror_state::{OffsetRun, SourcePartition};
    use serde::Deserialize;

    use super::Lineage;

    #[derive(Deserialize)]
    pub struct ProgressRecord {
        source: SourcePartition,
        lineage: Lineage,
        runs: Vec<OffsetRun>,
        next_source_offset: i64,
        next_target_offset: i64,
        instance: u64,
        committed_at_ms: i64,
    }

    impl From<ProgressRecord> for super::ProgressRecord {
        fn from(r: ProgressRecord) -> super::ProgressRecord {
            super::ProgressRecord {
                source: r.source,
                lineage: r.lineage,
                runs: r.runs,
                next_source_offset: r.next_source_offset,
                copies_end: r.next_source_offset,
                next_target_offset: r.next_target_offset,
                instance: r.instance,
                committed_at_ms: r.committed_at_ms,
                begins_history: false,
            }
        }
    }
}

/// A record of an internal topic read back: a commit's record, or a
/// tombstone. The position topic is compacted, and a tombstone (a null
/// value under a partition's key) is how Kafka's tools delete a key's
/// record: that partition has no position from there on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressEntry {
    Record(ProgressRecord),
    Tombstone(SourcePartition),
}

impl ProgressEntry {
    /// Reads a record's key and value; a null value is a tombstone of the
    /// partition its key names.
    pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<ProgressEntry, DecodeError> {
        match value {
            Some(value) => ProgressRecord::decode(value).map(ProgressEntry::Record),
            None => {
                ProgressRecord::decode_key(key.unwrap_or_default()).map(ProgressEntry::Tombstone)
            }
        }
    }
}

/// `value` encoded behind the format version byte `version`.
pub(crate) fn encode_with_version<T: Serialize>(version: u8, value: &T) -> Vec<u8> {
    let mut out = vec![version];
    let body = bincode::serde::encode_to_vec(value, bincode::config::standard())
        .expect("encoding plain data into a Vec cannot fail");
    out.extend_from_slice(&body);
    out
}

/// A value encoded whole in `body` (the bytes after the version byte).
pub(crate) fn decode_body<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, DecodeError> {
    let (value, used) = bincode::serde::decode_from_slice(body, bincode::config::standard())
        .map_err(|e| DecodeError::Malformed(e.to_string()))?;
    if used != body.len() {
        return Err(DecodeError::Malformed(format!(
            "{} trailing bytes",
            body.len() - used
        )));
    }
    Ok(value)
}

/// Builds the exact offset runs of one transaction from its deliveries,
/// given as (source offset, target offset) in source order.
///
/// Invariant (checked): target offsets increase with source offsets — a
/// partition's copy keeps the source order. Returns `None` if it does not.
pub fn runs_from_deliveries(deliveries: &[(i64, i64)]) -> Option<Vec<OffsetRun>> {
    let mut runs: Vec<OffsetRun> = Vec::new();
    let mut previous: Option<(i64, i64)> = None;
    for &(source, target) in deliveries {
        if let Some((ps, pt)) = previous {
            if source <= ps || target <= pt {
                return None;
            }
        }
        match runs.last_mut() {
            Some(run)
                if run.source_start + run.len as i64 == source
                    && run.target_start + run.len as i64 == target =>
            {
                run.len += 1
            }
            _ => runs.push(OffsetRun {
                source_start: source,
                target_start: target,
                len: 1,
            }),
        }
        previous = Some((source, target));
    }
    Some(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_of_the_most_runs_fits_the_default_message_size() {
        let far = 1_i64 << 40;
        let mut worst = record();
        worst.runs = (0..i64::from(MAX_RUNS))
            .map(|i| OffsetRun {
                source_start: far + 2 * i,
                target_start: far + i,
                len: 1,
            })
            .collect();
        let size = worst.encode().len();
        assert!(size < 500_000, "{size} bytes");
    }

    fn record() -> ProgressRecord {
        ProgressRecord {
            source: SourcePartition::new("orders", 3),
            lineage: Lineage {
                source_cluster_id: "source-cluster".into(),
                source_topic_id: TopicId([1; 16]),
                target_topic_id: TopicId([2; 16]),
            },
            runs: vec![OffsetRun {
                source_start: 10,
                target_start: 4,
                len: 5,
            }],
            next_source_offset: 15,
            copies_end: 15,
            next_target_offset: 9,
            instance: 42,
            committed_at_ms: 1_700_000_000_000,
            begins_history: false,
        }
    }

    #[test]
    fn round_trips() {
        let r = record();
        assert_eq!(ProgressRecord::decode(&r.encode()).unwrap(), r);
        let key = ProgressRecord::key(&r.source);
        assert_eq!(ProgressRecord::decode_key(&key).unwrap(), r.source);
    }

    #[test]
    fn a_null_value_is_a_tombstone_of_the_partition_its_key_names() {
        let r = record();
        let key = ProgressRecord::key(&r.source);
        assert_eq!(
            ProgressEntry::decode(Some(&key), Some(&r.encode())).unwrap(),
            ProgressEntry::Record(r.clone())
        );
        assert_eq!(
            ProgressEntry::decode(Some(&key), None).unwrap(),
            ProgressEntry::Tombstone(r.source)
        );
        assert!(ProgressEntry::decode(None, None).is_err());
        assert!(ProgressEntry::decode(Some(b"not a key"), None).is_err());
    }

    /// Records written by the version before: read as copies ending at
    /// the position; keys are the same bytes as then, so compaction goes
    /// on replacing the old records.
    #[test]
    fn version_3_records_are_read_with_the_copies_ending_at_the_position() {
        let r = record();
        let v3 = encode_with_version(
            3,
            &(
                &r.source,
                &r.lineage,
                &r.runs,
                r.next_source_offset,
                r.next_target_offset,
                r.instance,
                r.committed_at_ms,
            ),
        );
        let read = ProgressRecord::decode(&v3).unwrap();
        assert_eq!(
            read,
            ProgressRecord {
                begins_history: false,
                ..r.clone()
            }
        );
        assert_eq!(read.copies_end, read.next_source_offset);
        assert_eq!(ProgressRecord::key(&r.source)[0], 3);
    }

    /// Records written by version 4 are read with `begins_history` clear:
    /// whether one began its history is unknown, and taken for a
    /// beginning it would stop the tail search early and make a history
    /// trimmed by retention look whole (translations past unread records).
    #[test]
    fn version_4_records_are_not_taken_for_a_history_beginning() {
        let r = record();
        let v4 = encode_with_version(
            4,
            &(
                &r.source,
                &r.lineage,
                &r.runs,
                r.next_source_offset,
                r.copies_end,
                r.next_target_offset,
                r.instance,
                r.committed_at_ms,
            ),
        );
        let read = ProgressRecord::decode(&v4).unwrap();
        assert_eq!(
            read,
            ProgressRecord {
                begins_history: false,
                ..r
            }
        );
    }

    #[test]
    fn refuses_unknown_versions_and_garbage() {
        let mut bytes = record().encode();
        bytes[0] = 9;
        let unknown = ProgressRecord::decode(&bytes).unwrap_err();
        assert!(
            matches!(unknown, DecodeError::UnknownVersion { found: 9, .. }),
            "{unknown}"
        );
        assert!(
            unknown
                .to_string()
                .starts_with("progress record has format version 9; this eosmirror understands versions 5, 4 and 3 only"),
            "{unknown}"
        );
        assert!(matches!(
            ProgressRecord::decode(&[]),
            Err(DecodeError::Empty)
        ));
        assert!(ProgressRecord::decode(&[FORMAT_VERSION, 0xff, 0xff]).is_err());
        let mut long = record().encode();
        long.push(0);
        assert!(matches!(
            ProgressRecord::decode(&long),
            Err(DecodeError::Malformed(_))
        ));
    }

    #[test]
    fn runs_follow_gaps_on_either_side() {
        // Source gap at 12 (a marker), target gap at 103 (not ours).
        let deliveries = [(10, 100), (11, 101), (13, 102), (14, 104), (15, 105)];
        let runs = runs_from_deliveries(&deliveries).unwrap();
        let as_tuples: Vec<_> = runs
            .iter()
            .map(|r| (r.source_start, r.target_start, r.len))
            .collect();
        assert_eq!(as_tuples, vec![(10, 100, 2), (13, 102, 1), (14, 104, 2)]);
        assert_eq!(runs_from_deliveries(&[]).unwrap(), vec![]);
    }

    #[test]
    fn runs_refuse_reordering() {
        assert!(runs_from_deliveries(&[(10, 100), (11, 99)]).is_none());
        assert!(runs_from_deliveries(&[(10, 100), (10, 101)]).is_none());
    }
}

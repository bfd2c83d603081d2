//! Direct reads for the end of a scenario: a group's committed offset, the
//! workload records at an offset of either cluster, and which records a
//! source partition's log holds.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use crate::checker::is_transient;
use crate::judge::SourceHeld;
use crate::record::{decode, Decoded, Meta};
use crate::run::clusters::ClusterSpec;

/// A group's committed offsets of partitions `0..partitions` of `topic`,
/// in one request (`None` where it has none).
pub(super) fn committed(
    cluster: &ClusterSpec,
    group: &str,
    topic: &str,
    partitions: i32,
) -> Result<Vec<Option<i64>>> {
    let c: BaseConsumer = cluster.client_config().set("group.id", group).create()?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    // Scenarios run side by side on the same clusters: another one may be
    // restarting a broker, and the group coordinator answers
    // NotCoordinator or nothing until it is back.
    let deadline = Instant::now() + Duration::from_secs(90);
    let got = loop {
        match c.committed_offsets(tpl.clone(), Duration::from_secs(30)) {
            Ok(got) => break got,
            Err(e) if Instant::now() < deadline => {
                eprintln!("group check: reading {group}'s offsets: {e}; retrying");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => return Err(e.into()),
        }
    };
    Ok((0..partitions)
        .map(|p| match got.find_partition(topic, p).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => Some(o),
            _ => None,
        })
        .collect())
}

/// A workload record's identity: (stream, key, key sequence).
type RecordId = (u8, u32, u64);

/// The workload identity a record read back still carries, if any (an
/// altered record's fixed part may still parse).
fn workload_meta(m: &impl Message) -> Option<Meta> {
    match decode(m.key(), m.payload(), &Vec::new(), None) {
        Decoded::Intact(meta) | Decoded::Altered(Some(meta)) => Some(meta),
        _ => None,
    }
}

/// A `read_committed` reader, not assigned yet.
fn reader(cluster: &ClusterSpec) -> Result<BaseConsumer> {
    Ok(cluster
        .client_config()
        .set("group.id", "eosmirror-chaos-group-check")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        // The end of a partition is an empty fetch, which the broker holds
        // this long (500 ms by default: minutes over 1,000 partitions).
        .set("fetch.wait.max.ms", "10")
        // Records deleted under the reader are an error, never "the end".
        .set("auto.offset.reset", "error")
        .set("isolation.level", "read_committed")
        .create()?)
}

/// Assigns `reader` one partition from `offset`, in place of what it read.
fn assign(reader: &BaseConsumer, topic: &str, partition: i32, offset: i64) -> Result<()> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(offset))?;
    reader.assign(&tpl)?;
    Ok(())
}

/// The next record of `partition` from `reader` (its offset and identity),
/// `None` at the end of the partition. Anything of another partition (left
/// from a previous assignment) is skipped.
fn next_record(
    reader: &BaseConsumer,
    partition: i32,
    what: &str,
) -> Result<Option<(i64, RecordId)>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        match reader.poll(Duration::from_millis(200)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) if p == partition => return Ok(None),
            Some(Err(KafkaError::PartitionEOF(_))) => {}
            // librdkafka reconnects by itself; the deadline still holds.
            Some(Err(e)) if is_transient(&e) => {
                eprintln!("eosmirror-chaos: reading {what}: {e}; still reading")
            }
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(m)) if m.partition() != partition => {}
            Some(Ok(m)) => {
                let id = workload_meta(&m).map_or((u8::MAX, u32::MAX, m.offset() as u64), |meta| {
                    (meta.stream, meta.key, meta.kseq)
                });
                return Ok(Some((m.offset(), id)));
            }
        }
    }
    Err(anyhow!("{what}: reading timed out"))
}

/// Reads one record at a time from partitions of one topic with a single
/// client (a client per partition made the check of 1,000 partitions take
/// many minutes).
pub(super) struct FirstRecords<'a> {
    cluster: &'a ClusterSpec,
    topic: &'a str,
    reader: BaseConsumer,
}

impl<'a> FirstRecords<'a> {
    pub(super) fn new(cluster: &'a ClusterSpec, topic: &'a str) -> Result<FirstRecords<'a>> {
        Ok(FirstRecords {
            cluster,
            topic,
            reader: reader(cluster)?,
        })
    }

    /// The first committed record of `partition` at or after `offset`.
    /// Assigning the partition replaces the previous one: librdkafka drops
    /// what was fetched for that one, and [`next_record`] skips anything
    /// of it still queued.
    pub(super) fn at(&self, partition: i32, offset: i64) -> Result<Option<RecordId>> {
        assign(&self.reader, self.topic, partition, offset)?;
        let what = format!(
            "{}: {}-{partition} from {offset}",
            self.cluster.name, self.topic
        );
        Ok(next_record(&self.reader, partition, &what)?.map(|(_, id)| id))
    }
}

/// Whether the record `id` is among the committed records at or after
/// `offset`.
pub(super) fn holds_from(
    cluster: &ClusterSpec,
    topic: &str,
    partition: i32,
    offset: i64,
    id: RecordId,
) -> Result<bool> {
    let reader = reader(cluster)?;
    assign(&reader, topic, partition, offset)?;
    let what = format!("{}: {topic}-{partition} from {offset}", cluster.name);
    while let Some((_, found)) = next_record(&reader, partition, &what)? {
        if found == id {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The committed records of run `run` that `partitions` of `topic` hold,
/// read from each partition's start to its end with one client.
pub(super) fn source_held(
    cluster: &ClusterSpec,
    topic: &str,
    partitions: &BTreeSet<i32>,
    run: u64,
) -> Result<SourceHeld> {
    let reader = reader(cluster)?;
    let mut tpl = TopicPartitionList::new();
    for &p in partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    reader.assign(&tpl)?;
    let mut held = SourceHeld {
        partitions: partitions.iter().map(|&p| p as u32).collect(),
        ..SourceHeld::default()
    };
    let mut open = partitions.clone();
    // A deadline that moves with every record: long partitions are fine,
    // a reader that stopped getting anything is not.
    let mut deadline = Instant::now() + Duration::from_secs(60);
    while !open.is_empty() {
        if Instant::now() > deadline {
            return Err(anyhow!(
                "{}: reading {topic} partitions {open:?} to their end timed out",
                cluster.name
            ));
        }
        match reader.poll(Duration::from_millis(200)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                open.remove(&p);
            }
            Some(Err(e)) if is_transient(&e) => {
                eprintln!(
                    "eosmirror-chaos: {}: reading {topic}: {e}; still reading",
                    cluster.name
                )
            }
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(m)) => {
                deadline = Instant::now() + Duration::from_secs(60);
                if let Some(meta) = workload_meta(&m).filter(|meta| meta.run == run) {
                    held.keys
                        .entry((meta.partition, meta.key))
                        .or_default()
                        .insert(meta.kseq);
                }
            }
        }
    }
    Ok(held)
}

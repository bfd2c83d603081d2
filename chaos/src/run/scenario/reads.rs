//! Direct reads for the group check: a group's committed offset, and the
//! workload records at an offset of either cluster.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use crate::record::{decode, Decoded};
use crate::run::clusters::ClusterSpec;

/// A group's committed offset of a partition (the low watermark when it
/// has none).
pub(super) fn committed(
    cluster: &ClusterSpec,
    group: &str,
    topic: &str,
    partition: i32,
) -> Result<i64> {
    let c: BaseConsumer = cluster.client_config().set("group.id", group).create()?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, partition);
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
    match got.find_partition(topic, partition).map(|e| e.offset()) {
        Some(Offset::Offset(o)) => Ok(o),
        _ => Ok(cluster.watermarks(topic, partition)?.0),
    }
}

/// A workload record's identity: (stream, key, key sequence).
type RecordId = (u8, u32, u64);

/// A `read_committed` reader of one partition from `offset`.
fn partition_reader(
    cluster: &ClusterSpec,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<BaseConsumer> {
    let c: BaseConsumer = cluster
        .client_config()
        .set("group.id", "eosmirror-chaos-group-check")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        // Records deleted under the reader are an error, never "the end".
        .set("auto.offset.reset", "error")
        .set("isolation.level", "read_committed")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(offset))?;
    c.assign(&tpl)?;
    Ok(c)
}

/// The next record of `reader` (its offset and identity), `None` at the
/// end of the partition.
fn next_record(reader: &BaseConsumer, what: &str) -> Result<Option<(i64, RecordId)>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        match reader.poll(Duration::from_millis(200)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(_))) => return Ok(None),
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(m)) => {
                let id = match decode(m.key(), m.payload(), &Vec::new(), None) {
                    Decoded::Intact(meta) | Decoded::Altered(Some(meta)) => {
                        (meta.stream, meta.key, meta.kseq)
                    }
                    _ => (u8::MAX, u32::MAX, m.offset() as u64),
                };
                return Ok(Some((m.offset(), id)));
            }
        }
    }
    Err(anyhow!("{what}: reading timed out"))
}

/// The first committed record at or after `offset`.
pub(super) fn first_record_from(
    cluster: &ClusterSpec,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<Option<RecordId>> {
    let reader = partition_reader(cluster, topic, partition, offset)?;
    let what = format!("{}: {topic}-{partition} from {offset}", cluster.name);
    Ok(next_record(&reader, &what)?.map(|(_, id)| id))
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
    let reader = partition_reader(cluster, topic, partition, offset)?;
    let what = format!("{}: {topic}-{partition} from {offset}", cluster.name);
    while let Some((_, found)) = next_record(&reader, &what)? {
        if found == id {
            return Ok(true);
        }
    }
    Ok(false)
}

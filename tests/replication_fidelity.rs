//! `eosmirror run` copies every field of every committed record, for every
//! codec and for transactional sources, and nothing else.

mod support;

use support::mirror::MirrorSetup;
use support::{bed, unique_name, TestRecord, TxnOutcome};

/// Records with every shape a copy must keep.
fn mixed_records(tag: &str, partitions: i32, count: usize) -> Vec<TestRecord> {
    (0..count)
        .map(|i| TestRecord {
            partition: i as i32 % partitions,
            key: match i % 6 {
                0 => None,
                1 => Some(Vec::new()),
                _ => Some(format!("{tag}-k{i}").into_bytes()),
            },
            value: match i % 9 {
                0 => None,
                1 => Some(Vec::new()),
                2 => Some((0..=255u8).collect()),
                _ => Some(format!("{tag}-v{i}").repeat(1 + i % 40).into_bytes()),
            },
            headers: match i % 4 {
                0 => vec![],
                1 => vec![
                    ("dup".into(), Some(b"one".to_vec())),
                    ("dup".into(), Some(b"two".to_vec())),
                ],
                2 => vec![
                    ("bin".into(), Some(vec![0, 255, 7, 128])),
                    ("null".into(), None),
                ],
                _ => vec![("seq".into(), Some(i.to_string().into_bytes()))],
            },
            // Old explicit timestamps, a few years back and not in order.
            timestamp: (i % 3 != 0).then(|| 1_500_000_000_000 + ((i * 7919) % 100_000) as i64),
        })
        .collect()
}

#[test]
fn copies_every_field_of_every_codec_in_order() {
    let bed = bed();
    let prefix = unique_name("fidelity");
    let codecs = ["gzip", "lz4", "zstd", "snappy"];
    let topics: Vec<String> = (0..3).map(|i| format!("{prefix}-t{i}")).collect();
    for (i, topic) in topics.iter().enumerate() {
        bed.source
            .create_topic_with(topic, 4, &[("max.message.bytes", "2000000")]);
        for (j, codec) in codecs.iter().enumerate() {
            let records = mixed_records(&format!("{i}{codec}"), 4, 60 + 10 * j);
            bed.source
                .produce_with(topic, &records, &[("compression.type", codec)]);
        }
    }
    // A record of about 1 MB.
    let big = TestRecord {
        partition: 2,
        key: Some(b"big".to_vec()),
        value: Some(vec![42u8; 1_000_000]),
        headers: vec![("size".into(), Some(b"1MB".to_vec()))],
        timestamp: Some(1_600_000_000_000),
    };
    bed.source
        .produce_with(&topics[0], &[big], &[("message.max.bytes", "2000000")]);

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    setup.copy_and_check(&format!("{prefix}-t.*"), &[], &names);
    for topic in &topics {
        assert_eq!(bed.target.partition_count(topic), Some(4));
    }
}

#[test]
fn copies_only_committed_source_transactions() {
    let bed = bed();
    let topic = bed.source.create_topic("txn-source", 3);
    for round in 0..6 {
        let records = mixed_records(&format!("r{round}"), 3, 45);
        let outcome = if round % 2 == 1 {
            TxnOutcome::Abort
        } else {
            TxnOutcome::Commit
        };
        bed.source.produce_transaction(&topic, &records, outcome);
        if round == 3 {
            bed.source.produce(&topic, &mixed_records("plain", 3, 9));
        }
    }
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    setup.copy_and_check(&topic, &[], &[&topic]);
    // 3 committed rounds of 45 plus 9 plain records, none of the aborted ones.
    let copied = bed
        .target
        .read_all(&topic, support::Isolation::ReadCommitted);
    assert_eq!(copied.len(), 3 * 45 + 9);
    assert!(copied.iter().all(
        |r| !r.value.as_deref().unwrap_or_default().starts_with(b"r1")
            && !r.value.as_deref().unwrap_or_default().starts_with(b"r3")
            && !r.value.as_deref().unwrap_or_default().starts_with(b"r5")
    ));
}

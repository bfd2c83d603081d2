//! Benchmark helper: commits offsets for many consumer groups on one
//! cluster (as stopped consumers leave them), so group translation can be
//! timed at scale. Used by `tests/bench/groups`.
//!
//!     cargo run --release --example commit_groups -- BOOTSTRAP TOPIC PARTITIONS GROUPS PREFIX MAX_OFFSET

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bootstrap, topic, partitions, groups, prefix, max_offset] = &args[..] else {
        eprintln!("usage: commit_groups BOOTSTRAP TOPIC PARTITIONS GROUPS PREFIX MAX_OFFSET");
        std::process::exit(2);
    };
    let partitions: i32 = partitions.parse().expect("PARTITIONS");
    let groups: u64 = groups.parse().expect("GROUPS");
    let max_offset: i64 = max_offset.parse().expect("MAX_OFFSET");
    for g in 0..groups {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", format!("{prefix}{g}"))
            .create()
            .expect("client");
        let mut list = TopicPartitionList::new();
        for p in 0..partitions {
            // Spread deterministically over the partition.
            let offset = (g as i64 * 7919 + p as i64 * 104_729) % max_offset;
            list.add_partition_offset(topic, p, Offset::Offset(offset))
                .expect("offset");
        }
        // A new group's coordinator may still be settling: retry briefly.
        let mut attempt = 0;
        while let Err(e) = consumer.commit(&list, CommitMode::Sync) {
            attempt += 1;
            assert!(attempt < 20, "commit for group {g}: {e}");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
}

//! Case 5: an idle partition whose progress records aged out (short progress
//! retention), then the state dir deleted: its position must survive.

use std::time::{Duration, Instant};

use crate::brokers::{alter_topic, watermarks};
use crate::copy::{assert_exact_copy_with_history, history, records, wait_caught_up};
use crate::runs::{args, position_topic, progress_topic, stop_cleanly};
use crate::support::mirror::{count_committed, remove, MirrorSetup};
use crate::support::{bed, unique_name, Isolation};

#[test]
fn idle_partition_position_survives_progress_retention_and_state_loss() {
    let bed = bed();
    let topic = bed.source.create_topic("idle", 2);
    let alias = unique_name("idle");
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let run_args = args(&alias, &["--progress.retention.ms", "1000"]);
    let progress = progress_topic(&alias);
    let position = position_topic(&alias);

    // Both partitions get records and are copied.
    bed.source.produce(&topic, &records("a", &[0, 1], 0, 2_000));
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    let idle_since = count_committed(&bed.source, &topic)[&1];

    // Every progress record of partition 1 lies below this offset.
    let (_, idle_progress_end) = watermarks(&bed.target, &progress, 0);
    // Let the broker roll segments quickly, so that retention (1 s, set by
    // eosmirror) can delete them and compaction of the position topic can
    // run: what weeks of operation do, in seconds.
    alter_topic(&bed.target, &progress, &[("segment.ms", "1000")]);
    alter_topic(
        &bed.target,
        &position,
        &[
            ("segment.ms", "1000"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );

    // Only partition 0 moves on, until retention has deleted every progress
    // record of partition 1.
    let moving_since = Instant::now();
    let deadline = moving_since + Duration::from_secs(180);
    let mut n = 2_000;
    let mut rounds = 0;
    loop {
        bed.source.produce(&topic, &records("b", &[0], n, 50));
        n += 50;
        rounds += 1;
        let (low, _) = watermarks(&bed.target, &progress, 0);
        // At least 20 rounds, so partition 0 commits many positions while
        // partition 1 idles.
        if low >= idle_progress_end && rounds >= 20 {
            println!(
                "idle: progress topic start moved to {low} after {:?} and {} records to partition 0 (partition 1's last progress record was below {idle_progress_end})",
                moving_since.elapsed(),
                n - 2_000
            );
            break;
        }
        assert!(
            mirror.is_running(),
            "{}\n{}",
            mirror.output(),
            history(&setup)
        );
        assert!(
            Instant::now() < deadline,
            "progress retention never deleted partition 1's records (start {low}, needed {idle_progress_end})"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    wait_caught_up(&topic, &mut mirror, &setup);
    // Let the log cleaner compact the position topic (each transaction
    // there is one position record and one commit marker, so fewer records
    // than half the offsets means compaction removed some), as it would have
    // long done in production. Not asserted: the cleaner runs when it runs.
    let compaction_deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (low, high) = watermarks(&bed.target, &position, 0);
        let records = bed
            .target
            .read_all(&position, Isolation::ReadUncommitted)
            .len();
        if (records as i64) < (high - low) / 2 {
            println!(
                "idle: position topic compacted: offsets {low}..{high} hold {records} records"
            );
            break;
        }
        if Instant::now() > compaction_deadline {
            println!("idle: position topic not compacted yet (offsets {low}..{high} hold {records} records); going on without");
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    stop_cleanly(&mut mirror);

    // State gone; partition 0 moves on, partition 1 stays idle; restart.
    remove(&setup.state_dir);
    bed.source.produce(&topic, &records("c", &[0], n, 500));
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);
    assert_eq!(
        count_committed(&bed.source, &topic)[&1],
        idle_since,
        "partition 1 was not idle"
    );
    assert_exact_copy_with_history(&topic, &setup);
}

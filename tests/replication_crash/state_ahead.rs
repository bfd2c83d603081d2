//! Case 5: the local state ahead of the target. The cache only records
//! what the target committed, so a target whose positions are gone (its
//! position topic reset) lost committed data: the partition stops, named,
//! and nothing is copied again on top of the old copy.

use std::time::Duration;

use crate::copy::{records, wait_caught_up};
use crate::runs::{args, position_topic, stop_cleanly};
use crate::support::mirror::{count_committed, MirrorSetup};
use crate::support::{bed, unique_name};

#[test]
fn a_target_that_lost_the_positions_the_cache_holds_stops_the_partition_by_name() {
    let bed = bed();
    let partitions = [0, 1];
    let topic = bed.source.create_topic("state-ahead", 2);
    let alias = unique_name("ahead");
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let run_args = args(&alias, &[]);
    bed.source
        .produce(&topic, &records("a", &partitions, 0, 200));
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);
    let copied = count_committed(&bed.target, &topic);

    bed.target.delete_topic(&position_topic(&alias));
    bed.source
        .produce(&topic, &records("b", &partitions, 0, 20));
    let (code, output) = setup.run_to_exit(&topic, &run_args, Duration::from_secs(120));
    assert_ne!(
        code, 0,
        "a target that lost its positions must stop eosmirror:\n{output}"
    );
    for partition in partitions {
        let needle = format!(
            "{topic}-{partition}: the local state says source offsets up to {} were copied, but the target has no position for these topics: the target lost committed data",
            copied[&partition]
        );
        assert!(
            output.contains(&needle),
            "the stop must say {needle:?}:\n{output}"
        );
    }
    assert_eq!(
        count_committed(&bed.target, &topic),
        copied,
        "nothing may be copied again on top of the old copy"
    );
}

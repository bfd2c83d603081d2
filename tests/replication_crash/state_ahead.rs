//! Case 5: the local state ahead of the target. The cache only records
//! what the target committed, so a target whose positions are gone (its
//! position topic reset) lost committed data: the partition stops, named,
//! nothing is copied again on top of the old copy, and the run copies
//! the other partitions on.

use crate::copy::{records, wait_caught_up};
use crate::runs::{args, position_topic, stop_cleanly, STOP};
use crate::support::mirror::{assert_exact_copy, count_committed, MirrorSetup};
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
    // The run copies on what it can: a topic new to it.
    let healthy = bed.source.create_topic("state-ahead-healthy", 2);
    bed.source
        .produce(&healthy, &records("h", &partitions, 0, 20));
    let mut mirror = setup.start(&format!("{topic}|{healthy}"), &run_args);
    wait_caught_up(&healthy, &mut mirror, &setup);
    let code = mirror.stop(STOP);
    let output = mirror.output();
    assert_ne!(
        code, 0,
        "a target that lost its positions must stop eosmirror:\n{output}"
    );
    assert_exact_copy(&bed.source, &bed.target, &healthy);
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

//! Case 2: the state dir deleted between runs, and once right after a SIGKILL:
//! the position comes from the target alone.

use std::time::{Duration, Instant};

use crate::copy::{assert_exact_copy_with_history, records, wait_caught_up, CATCH_UP};
use crate::runs::{args, stop_cleanly};
use crate::support::mirror::{count_committed, remove, MirrorSetup};
use crate::support::{bed, unique_name, TxnOutcome};

#[test]
fn deleted_state_dir_is_rebuilt_from_the_target_without_duplicates() {
    let bed = bed();
    let partitions = [0, 1, 2];
    let topic = bed.source.create_topic("state-deleted", 3);
    let alias = unique_name("deleted");
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let run_args = args(&alias, &[]);

    // Part one, with a committed and an aborted source transaction.
    bed.source
        .produce(&topic, &records("a", &partitions, 0, 3_000));
    bed.source.produce_transaction(
        &topic,
        &records("a-txn", &partitions, 3_000, 300),
        TxnOutcome::Commit,
    );
    bed.source.produce_transaction(
        &topic,
        &records("a-abort", &partitions, 3_300, 300),
        TxnOutcome::Abort,
    );
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);
    assert!(setup.state_dir.is_dir(), "eosmirror made no state dir");

    // Part two: more records, state gone, restart.
    bed.source
        .produce(&topic, &records("b", &partitions, 0, 3_000));
    remove(&setup.state_dir);
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);
    assert!(
        mirror.output().contains("created local state"),
        "the restart did not start from an empty state dir:\n{}",
        mirror.output()
    );
    assert_exact_copy_with_history(&topic, &setup);

    // Part three: killed in the middle of copying, state gone, restart. The
    // killed instance's open transaction must be fenced and the position
    // found on the target alone.
    bed.source
        .produce(&topic, &records("c", &partitions, 0, 30_000));
    let before: usize = count_committed(&bed.target, &topic).values().sum();
    let mut mirror = setup.start(&topic, &run_args);
    let deadline = Instant::now() + CATCH_UP;
    while count_committed(&bed.target, &topic).values().sum::<usize>() == before {
        assert!(Instant::now() < deadline, "eosmirror copied nothing");
        assert!(mirror.is_running(), "{}", mirror.output());
        std::thread::sleep(Duration::from_millis(200));
    }
    mirror.kill();
    remove(&setup.state_dir);
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);
    assert_exact_copy_with_history(&topic, &setup);
}

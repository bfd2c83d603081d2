//! Case 3: the state dir corrupted between runs: moved aside and rebuilt from
//! the target.

use std::fs;

use crate::copy::{assert_exact_copy_with_history, records, wait_caught_up};
use crate::runs::{args, stop_cleanly};
use crate::state_dirs::moved_aside;
use crate::support::mirror::MirrorSetup;
use crate::support::{bed, unique_name, TxnOutcome};

/// Restarts eosmirror on a damaged state dir and checks that it moved the
/// dir aside (log line and `.corrupt-` sibling), rebuilt, and copied exactly.
fn restart_on_damaged_state(
    setup: &MirrorSetup,
    topic: &str,
    run_args: &[&str],
    aside_before: usize,
) {
    let mut mirror = setup.start(topic, run_args);
    wait_caught_up(topic, &mut mirror, setup);
    stop_cleanly(&mut mirror);
    let output = mirror.output();
    assert!(
        output.contains("moved it aside"),
        "eosmirror did not report moving the damaged state dir aside:\n{output}"
    );
    let aside = moved_aside(&setup.state_dir);
    assert_eq!(
        aside.len(),
        aside_before + 1,
        "expected one more .corrupt- dir next to {}: {aside:?}",
        setup.state_dir.display()
    );
    let newest = aside.last().unwrap();
    assert!(
        output.contains(&newest.display().to_string()),
        "the log does not name where the state went ({}):\n{output}",
        newest.display()
    );
    assert_exact_copy_with_history(topic, setup);
}

#[test]
fn corrupt_state_dir_is_moved_aside_and_rebuilt_from_the_target() {
    let bed = bed();
    let partitions = [0, 1, 2];
    let topic = bed.source.create_topic("state-corrupt", 3);
    let alias = unique_name("corrupt");
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let run_args = args(&alias, &[]);

    bed.source
        .produce(&topic, &records("a", &partitions, 0, 3_000));
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);

    // Round one: garbage in sled's config file (longer than 8 bytes, or
    // sled ignores it).
    let conf = setup.state_dir.join("conf");
    assert!(
        conf.is_file(),
        "no sled conf in {}",
        setup.state_dir.display()
    );
    fs::write(&conf, [0xA5u8; 64]).unwrap();
    bed.source
        .produce(&topic, &records("b", &partitions, 0, 3_000));
    restart_on_damaged_state(&setup, &topic, &run_args, 0);

    // Round two: garbage over every sled data file but the config.
    let mut damaged = Vec::new();
    for entry in fs::read_dir(&setup.state_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path.file_name().unwrap() != "conf" {
            let len = fs::metadata(&path).unwrap().len().max(4096) as usize;
            fs::write(&path, vec![0x5Au8; len]).unwrap();
            damaged.push(path);
        }
    }
    assert!(!damaged.is_empty(), "no sled data files to damage");
    bed.source.produce_transaction(
        &topic,
        &records("c-txn", &partitions, 0, 600),
        TxnOutcome::Commit,
    );
    bed.source
        .produce(&topic, &records("c", &partitions, 0, 3_000));
    restart_on_damaged_state(&setup, &topic, &run_args, 1);

    // Round three: the data file cut in half, as a crashed disk might leave
    // it. sled then either recovers an older prefix of its log (a cache
    // *behind* the target, which eosmirror must notice and correct) or
    // finds no header (moved aside). Either way: an exact copy.
    let db = setup.state_dir.join("db");
    let len = fs::metadata(&db).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&db)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    bed.source
        .produce(&topic, &records("d", &partitions, 0, 3_000));
    let mut mirror = setup.start(&topic, &run_args);
    wait_caught_up(&topic, &mut mirror, &setup);
    stop_cleanly(&mut mirror);
    let output = mirror.output();
    println!(
        "corrupt: after cutting db from {len} bytes to {}: {}",
        len / 2,
        if output.contains("moved it aside") {
            "moved aside"
        } else if output.contains("reopened local state") {
            "reopened (sled recovered a prefix)"
        } else {
            "?"
        }
    );
    assert_exact_copy_with_history(&topic, &setup);
}

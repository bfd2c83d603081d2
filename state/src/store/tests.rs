//! Tests of [`StateStore`] against real sled databases in temporary
//! directories.

use std::fs;
use std::path::{Path, PathBuf};

use super::*;
use crate::TopicIncarnation;

fn identity() -> ClusterIdentity {
    ClusterIdentity {
        source_alias: "dc1".into(),
        source_cluster_id: "src-cluster".into(),
        target_cluster_id: "tgt-cluster".into(),
    }
}

fn checkpoint(next_source: i64, next_target: i64) -> Checkpoint {
    Checkpoint {
        incarnation: TopicIncarnation {
            source_topic_id: [1; 16],
            target_topic_id: [2; 16],
        },
        next_source_offset: next_source,
        next_target_offset: next_target,
        progress_offset: next_source / 10,
    }
}

fn tail(next_source: i64, next_target: i64) -> Tail {
    Tail {
        next_source_offset: next_source,
        next_target_offset: next_target,
    }
}

fn run(source_start: i64, target_start: i64, len: u64) -> OffsetRun {
    OffsetRun {
        source_start,
        target_start,
        len,
    }
}

/// Opens the sled db underneath a store, waiting (like the store does) for
/// the lock a just-dropped handle's flusher thread still holds.
fn raw_sled(dir: &Path) -> sled::Db {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    loop {
        match sled::open(dir) {
            Ok(db) => return db,
            Err(e) if std::time::Instant::now() < deadline => {
                assert!(e.to_string().contains("could not acquire lock"), "{e}");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("open sled: {e}"),
        }
    }
}

fn open(dir: &Path) -> (StateStore, OpenOutcome) {
    StateStore::open(dir, &identity()).expect("open state store")
}

/// A temp dir and the (not yet existing) state dir inside it, so that
/// moved-aside siblings are cleaned up with it.
fn state_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("state");
    (tmp, dir)
}

/// Sorted names of the entries of a directory.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Asserts that opening rebuilt the store and returns where the old one went.
fn assert_rebuilt(dir: &Path, outcome: OpenOutcome, reason_contains: &str) -> PathBuf {
    let OpenOutcome::Rebuilt { moved_to, reason } = outcome else {
        panic!("expected Rebuilt, got {outcome:?}");
    };
    assert!(reason.contains(reason_contains), "reason: {reason}");
    assert!(
        moved_to.is_dir() || moved_to.is_file(),
        "{moved_to:?} missing"
    );
    let name = moved_to.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("state.corrupt-"), "{name}");
    assert_eq!(moved_to.parent(), dir.parent());
    moved_to
}

#[test]
fn create_then_reopen_roundtrip() {
    let (_tmp, dir) = state_dir();
    let orders = SourcePartition::new("orders", 0);
    {
        let (store, outcome) = open(&dir);
        assert_eq!(outcome, OpenOutcome::Created);
        assert_eq!(store.identity(), &identity());
        assert_eq!(store.checkpoint(&orders).unwrap(), None);
        store
            .record_commit(
                &orders,
                tail(0, 0),
                &checkpoint(10, 12),
                &[run(0, 0, 4), run(6, 4, 4)],
            )
            .unwrap();
        store.flush().unwrap();
    }
    let (store, outcome) = open(&dir);
    assert_eq!(outcome, OpenOutcome::Reopened);
    assert_eq!(store.checkpoint(&orders).unwrap(), Some(checkpoint(10, 12)));
    assert_eq!(
        store.translate(&orders, 7).unwrap(),
        Some(OffsetLookup::Exact(5))
    );
}

#[test]
fn trailing_slash_and_empty_dir_create_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    // An existing empty directory, e.g. a freshly mounted volume.
    let (_store, outcome) = StateStore::open(&tmp.path().join(""), &identity()).unwrap();
    assert_eq!(outcome, OpenOutcome::Created);
}

#[test]
fn missing_parent_directories_are_created() {
    let (_tmp, dir) = state_dir();
    let (_store, outcome) = open(&dir.join("a/b"));
    assert_eq!(outcome, OpenOutcome::Created);
}

#[test]
fn foreign_identity_is_refused_and_left_untouched() {
    let (_tmp, dir) = state_dir();
    let orders = SourcePartition::new("orders", 0);
    {
        let (store, _) = open(&dir);
        store
            .record_commit(&orders, tail(0, 0), &checkpoint(5, 5), &[run(0, 0, 5)])
            .unwrap();
    }
    let files_before = listing(&dir);
    let conf_before = fs::read(dir.join("conf")).unwrap();

    let mut others = vec![identity(), identity(), identity()];
    others[0].source_alias = "dc2".into();
    others[1].source_cluster_id = "other-src".into();
    others[2].target_cluster_id = "other-tgt".into();
    for other in others {
        let err = StateStore::open(&dir, &other).unwrap_err();
        let StateError::ForeignStateDir {
            dir: refused,
            expected,
            found,
        } = &err
        else {
            panic!("expected ForeignStateDir, got {err:?}");
        };
        assert_eq!(refused, &dir);
        assert_eq!(**expected, other);
        assert_eq!(**found, identity());
        let message = err.to_string();
        assert!(message.contains(&dir.display().to_string()), "{message}");
        assert!(message.contains("--state.dir"), "{message}");
    }

    // sled itself may add a snapshot file on any open (its recovery); the
    // store never writes to a foreign directory.
    let files_after = listing(&dir);
    assert!(
        files_before.iter().all(|f| files_after.contains(f)),
        "{files_after:?}"
    );
    assert_eq!(fs::read(dir.join("conf")).unwrap(), conf_before);
    assert_eq!(listing(dir.parent().unwrap()), ["state"]);
    let (store, outcome) = open(&dir);
    assert_eq!(outcome, OpenOutcome::Reopened);
    assert_eq!(store.checkpoint(&orders).unwrap(), Some(checkpoint(5, 5)));
}

/// `--state.dir` pointed at another program's directory: its files are
/// neither moved nor written into.
#[test]
fn dir_of_other_files_is_refused_untouched() {
    let (_tmp, dir) = state_dir();
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("consumer.properties"), "bootstrap.servers=x").unwrap();

    // The trailing slash must not matter either.
    let err = StateStore::open(&dir.join(""), &identity()).unwrap_err();
    assert!(matches!(err, StateError::NotAStateDir { .. }), "{err}");
    assert!(
        err.to_string().contains("a directory of other files"),
        "{err}"
    );
    assert_eq!(listing(&dir), ["consumer.properties"]);
    assert_eq!(
        listing(dir.parent().unwrap()),
        ["state"],
        "nothing moved aside"
    );
}

#[test]
fn garbage_sled_config_is_moved_aside_and_rebuilt() {
    let (_tmp, dir) = state_dir();
    drop(open(&dir));
    fs::write(dir.join("conf"), b"\xff\xfe garbage \x00\x01").unwrap();

    let (store, outcome) = open(&dir);
    let moved_to = assert_rebuilt(&dir, outcome, "sled cannot open it");
    assert_eq!(
        fs::read(moved_to.join("conf")).unwrap(),
        b"\xff\xfe garbage \x00\x01"
    );
    assert_eq!(
        store.checkpoint(&SourcePartition::new("t", 0)).unwrap(),
        None
    );
}

#[test]
fn garbage_sled_data_is_moved_aside_and_rebuilt() {
    let (_tmp, dir) = state_dir();
    drop(open(&dir));
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path.file_name().unwrap() != "conf" {
            fs::write(&path, vec![0xA5; 4096]).unwrap();
        }
    }

    let (_store, outcome) = open(&dir);
    assert_rebuilt(&dir, outcome, "");
}

#[test]
fn plain_file_instead_of_dir_is_refused_untouched() {
    let (_tmp, dir) = state_dir();
    fs::write(&dir, "oops").unwrap();
    let err = StateStore::open(&dir, &identity()).unwrap_err();
    assert!(
        err.to_string()
            .contains("is a file, not an eosmirror state dir"),
        "{err}"
    );
    assert_eq!(fs::read_to_string(&dir).unwrap(), "oops");
    assert_eq!(
        listing(dir.parent().unwrap()),
        ["state"],
        "nothing moved aside"
    );
}

#[test]
fn missing_header_is_rebuilt() {
    let (_tmp, dir) = state_dir();
    {
        let db = raw_sled(&dir);
        db.insert(b"something", b"else").unwrap();
        db.flush().unwrap();
    }
    let (_store, outcome) = open(&dir);
    assert_rebuilt(&dir, outcome, "header is missing");
}

#[test]
fn unknown_format_version_is_rebuilt() {
    let (_tmp, dir) = state_dir();
    {
        let db = raw_sled(&dir);
        let mut header = Header::current(&identity());
        header.format_version += 1;
        db.insert(Header::KEY, codec::encode(&header)).unwrap();
        db.flush().unwrap();
    }
    let (store, outcome) = open(&dir);
    assert_rebuilt(&dir, outcome, "unknown store format version");
    drop(store);
    assert_eq!(open(&dir).1, OpenOutcome::Reopened);
}

#[test]
fn undecodable_header_or_checkpoint_is_rebuilt() {
    let (_tmp, dir) = state_dir();
    {
        let db = raw_sled(&dir);
        let version = u8::try_from(crate::header::FORMAT_VERSION).unwrap();
        db.insert(Header::KEY, &[version, 0xFF, 0xFF][..]).unwrap();
        db.flush().unwrap();
    }
    let (store, outcome) = open(&dir);
    assert_rebuilt(&dir, outcome, "header does not decode");
    drop(store);

    {
        let db = raw_sled(&dir);
        let key = SourcePartition::new("orders", 0).key();
        db.open_tree(CHECKPOINTS_TREE)
            .unwrap()
            .insert(key, &[7][..])
            .unwrap();
        db.flush().unwrap();
    }
    let (_store, outcome) = open(&dir);
    assert_rebuilt(&dir, outcome, "checkpoint does not decode");
}

#[test]
fn undecodable_run_is_an_actionable_error() {
    let (_tmp, dir) = state_dir();
    let (store, _) = open(&dir);
    let orders = SourcePartition::new("orders", 0);
    store.runs.insert(orders.run_key(0), &[1][..]).unwrap();
    let err = store.translate(&orders, 0).unwrap_err();
    assert!(matches!(err, StateError::Corrupt { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("offset run of orders-0"), "{message}");
    assert!(message.contains("delete"), "{message}");
    assert!(message.contains(&dir.display().to_string()), "{message}");
}

#[test]
fn aside_names_never_collide() {
    let (_tmp, dir) = state_dir();
    let first = aside_path(&dir, 42);
    assert_eq!(first.file_name().unwrap(), "state.corrupt-42");
    fs::create_dir(&first).unwrap();
    let second = aside_path(&dir, 42);
    assert_eq!(second.file_name().unwrap(), "state.corrupt-42-1");
    fs::write(&second, "").unwrap();
    assert_eq!(
        aside_path(&dir, 42).file_name().unwrap(),
        "state.corrupt-42-2"
    );
}

#[test]
fn repeated_rebuilds_keep_every_moved_aside_copy() {
    let (_tmp, dir) = state_dir();
    let mut moved = Vec::new();
    for _ in 0..2 {
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("junk"), "x").unwrap();
        // Long enough for sled to parse it (it ignores a conf of <= 8 bytes).
        fs::write(dir.join("conf"), [0xA5; 64]).unwrap();
        let (store, outcome) = open(&dir);
        moved.push(assert_rebuilt(&dir, outcome, ""));
        drop(store);
    }
    assert_ne!(moved[0], moved[1]);
    assert!(moved.iter().all(|path| path.join("junk").exists()));
}

#[test]
fn locked_dir_is_refused_not_moved() {
    let (_tmp, dir) = state_dir();
    let (_store, _) = open(&dir);
    let err = StateStore::open(&dir, &identity()).unwrap_err();
    assert!(matches!(err, StateError::Locked { .. }), "{err:?}");
    assert!(err.to_string().contains("--state.dir"), "{err}");
    assert_eq!(listing(dir.parent().unwrap()), ["state"]);
}

#[test]
fn backwards_checkpoint_is_rejected_and_nothing_written() {
    let (_tmp, dir) = state_dir();
    let (store, _) = open(&dir);
    let orders = SourcePartition::new("orders", 2);
    store
        .record_commit(
            &orders,
            tail(90, 110),
            &checkpoint(100, 120),
            &[run(90, 110, 10)],
        )
        .unwrap();

    for behind in [checkpoint(99, 130), checkpoint(110, 119)] {
        let err = store
            .record_commit(&orders, tail(100, 120), &behind, &[])
            .unwrap_err();
        let StateError::PositionWentBackwards {
            partition,
            stored,
            attempted,
        } = &err
        else {
            panic!("expected PositionWentBackwards, got {err:?}");
        };
        assert_eq!(partition, &orders);
        assert_eq!(**stored, checkpoint(100, 120));
        assert_eq!(**attempted, behind);
        assert!(err.to_string().contains("orders-2"), "{err}");
    }
    // A rejected commit leaves neither its checkpoint nor its runs behind.
    let err = store
        .record_commit(
            &orders,
            tail(100, 120),
            &checkpoint(50, 200),
            &[run(200, 150, 1)],
        )
        .unwrap_err();
    assert!(matches!(err, StateError::PositionWentBackwards { .. }));
    assert_eq!(
        store.checkpoint(&orders).unwrap(),
        Some(checkpoint(100, 120))
    );
    assert_eq!(
        store.translate(&orders, 150).unwrap(),
        Some(OffsetLookup::Tail(tail(100, 120)))
    );

    // Standing still is allowed (an idle partition re-emitting its position).
    let idle = Checkpoint {
        progress_offset: 77,
        ..checkpoint(100, 120)
    };
    store
        .record_commit(&orders, tail(100, 120), &idle, &[])
        .unwrap();
    assert_eq!(store.checkpoint(&orders).unwrap(), Some(idle));
}

/// A commit's cache write failed and so did the reset after it: the next
/// commit must not be recorded, or the missing commit's offsets would read
/// as a source gap and translate to the next copy, skipping their records.
#[test]
fn a_commit_that_does_not_follow_the_stored_one_is_refused_and_nothing_written() {
    let (_tmp, dir) = state_dir();
    let (store, _) = open(&dir);
    let orders = SourcePartition::new("orders", 2);
    store
        .record_commit(&orders, tail(0, 0), &checkpoint(10, 11), &[run(0, 0, 10)])
        .unwrap();
    // Not recorded: source 10..20 → target 11..21.
    let after_hole = checkpoint(30, 32);
    let err = store
        .record_commit(&orders, tail(20, 22), &after_hole, &[run(20, 22, 10)])
        .unwrap_err();
    let StateError::CommitDoesNotFollow {
        partition,
        stored,
        follows,
    } = &err
    else {
        panic!("expected CommitDoesNotFollow, got {err:?}");
    };
    assert_eq!(partition, &orders);
    assert_eq!(**stored, checkpoint(10, 11));
    assert_eq!(*follows, tail(20, 22));
    assert!(err.to_string().contains("orders-2"), "{err}");
    assert_eq!(store.checkpoint(&orders).unwrap(), Some(checkpoint(10, 11)));
    assert_eq!(
        store.translate(&orders, 15).unwrap(),
        Some(OffsetLookup::Tail(tail(10, 11))),
        "an offset of the missing commit translates to the tail the cache knows"
    );

    // Same offsets, other topics (started over without a reset): refused.
    let started_over = Checkpoint {
        incarnation: TopicIncarnation {
            source_topic_id: [3; 16],
            target_topic_id: [4; 16],
        },
        ..checkpoint(20, 21)
    };
    let err = store
        .record_commit(&orders, tail(10, 11), &started_over, &[run(10, 11, 10)])
        .unwrap_err();
    assert!(
        matches!(err, StateError::CommitDoesNotFollow { .. }),
        "{err:?}"
    );

    // A source position moved without a commit, nothing copied (records
    // the source deleted before their copy): still continuous.
    store
        .record_commit(
            &orders,
            tail(12, 11),
            &checkpoint(14, 14),
            &[run(12, 11, 2)],
        )
        .unwrap();
    assert_eq!(
        store.translate(&orders, 10).unwrap(),
        Some(OffsetLookup::Exact(11))
    );

    // After a reset, the cache starts again at whatever commit comes next.
    store.reset_partition(&orders).unwrap();
    store
        .record_commit(&orders, tail(20, 22), &after_hole, &[run(20, 22, 10)])
        .unwrap();
    assert_eq!(store.translate(&orders, 15).unwrap(), None);
    assert_eq!(
        store.translate(&orders, 25).unwrap(),
        Some(OffsetLookup::Exact(27))
    );
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "out of order or overlapping")]
fn overlapping_runs_trip_a_debug_assertion() {
    let (_tmp, dir) = state_dir();
    let (store, _) = open(&dir);
    let _ = store.record_commit(
        &SourcePartition::new("orders", 0),
        tail(0, 0),
        &checkpoint(20, 20),
        &[run(0, 0, 10), run(5, 10, 5)],
    );
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "starts before the previous checkpoint")]
fn runs_before_the_previous_checkpoint_trip_a_debug_assertion() {
    let (_tmp, dir) = state_dir();
    let (store, _) = open(&dir);
    let orders = SourcePartition::new("orders", 0);
    store
        .record_commit(&orders, tail(0, 0), &checkpoint(10, 10), &[run(0, 0, 10)])
        .unwrap();
    let _ = store.record_commit(&orders, tail(10, 10), &checkpoint(20, 21), &[run(5, 11, 5)]);
}

/// Runs for "orders-0": source 10..15 → target 100..105, a source gap
/// 15..20, then source 20..23 → target 106..109 (target 105 is the commit
/// marker of the first transaction).
fn store_with_two_runs() -> (tempfile::TempDir, StateStore, SourcePartition) {
    let (tmp, dir) = state_dir();
    let (store, _) = open(&dir);
    let orders = SourcePartition::new("orders", 0);
    store
        .record_commit(
            &orders,
            tail(10, 100),
            &checkpoint(15, 106),
            &[run(10, 100, 5)],
        )
        .unwrap();
    store
        .record_commit(
            &orders,
            tail(15, 106),
            &checkpoint(25, 110),
            &[run(20, 106, 3)],
        )
        .unwrap();
    (tmp, store, orders)
}

#[test]
fn translate_exact_hits() {
    let (_tmp, store, orders) = store_with_two_runs();
    for (source, target) in [(10, 100), (12, 102), (14, 104), (20, 106), (22, 108)] {
        assert_eq!(
            store.translate(&orders, source).unwrap(),
            Some(OffsetLookup::Exact(target)),
            "source offset {source}"
        );
    }
}

#[test]
fn translate_gap_resolves_to_next_run_start() {
    let (_tmp, store, orders) = store_with_two_runs();
    for source in 15..20 {
        assert_eq!(
            store.translate(&orders, source).unwrap(),
            Some(OffsetLookup::Exact(106)),
            "source offset {source}"
        );
    }
}

#[test]
fn translate_after_last_run_is_tail() {
    let (_tmp, store, orders) = store_with_two_runs();
    for source in [23, 24, 25, 1_000, i64::MAX] {
        assert_eq!(
            store.translate(&orders, source).unwrap(),
            Some(OffsetLookup::Tail(tail(25, 110)))
        );
    }
}

#[test]
fn translate_before_first_run_or_without_runs_is_unknown() {
    let (_tmp, store, orders) = store_with_two_runs();
    for source in [i64::MIN, -1, 0, 9] {
        assert_eq!(store.translate(&orders, source).unwrap(), None);
    }
    let idle = SourcePartition::new("orders", 1);
    assert_eq!(store.translate(&idle, 0).unwrap(), None);
}

#[test]
fn partitions_and_prefix_topics_do_not_bleed() {
    let (_tmp, dir) = state_dir();
    let (store, _) = open(&dir);
    // Same source offsets everywhere, distinct target offsets per partition.
    let parts = [
        (SourcePartition::new("a", 1), 1_000),
        (SourcePartition::new("a", 256), 2_000),
        (SourcePartition::new("a.b", 1), 3_000),
        (SourcePartition::new("ab", 1), 4_000),
        (SourcePartition::new("", 1), 5_000),
    ];
    for (i, (partition, base)) in parts.iter().enumerate() {
        // Stagger the runs so a lookup that strayed into a neighbour would
        // find a different answer.
        let start = 10 * i as i64;
        store
            .record_commit(
                partition,
                tail(start, *base),
                &checkpoint(start + 5, base + 6),
                &[run(start, *base, 5)],
            )
            .unwrap();
    }
    for (i, (partition, base)) in parts.iter().enumerate() {
        let start = 10 * i as i64;
        assert_eq!(
            store.checkpoint(partition).unwrap(),
            Some(checkpoint(start + 5, base + 6))
        );
        assert_eq!(
            store.translate(partition, start + 2).unwrap(),
            Some(OffsetLookup::Exact(base + 2)),
            "{partition}"
        );
        assert_eq!(
            store.translate(partition, start + 5).unwrap(),
            Some(OffsetLookup::Tail(tail(start + 5, base + 6)))
        );
        assert_eq!(store.translate(partition, start - 1).unwrap(), None);
    }
    assert_eq!(
        store.checkpoint(&SourcePartition::new("a", 2)).unwrap(),
        None
    );
}

#[test]
fn reset_partition_removes_only_that_partition() {
    let (_tmp, dir) = state_dir();
    let (store, _) = open(&dir);
    let parts = [
        SourcePartition::new("a", 1),
        SourcePartition::new("a", 256),
        SourcePartition::new("a.b", 1),
    ];
    for partition in &parts {
        store
            .record_commit(
                partition,
                tail(0, 0),
                &checkpoint(5, 6),
                &[run(0, 0, 2), run(3, 2, 2)],
            )
            .unwrap();
    }

    let mut cached = store.cached_partitions().unwrap();
    cached.sort();
    let mut all = parts.to_vec();
    all.sort();
    assert_eq!(cached, all);

    store.reset_partition(&parts[0]).unwrap();
    assert!(!store.cached_partitions().unwrap().contains(&parts[0]));
    assert_eq!(store.checkpoint(&parts[0]).unwrap(), None);
    assert_eq!(store.translate(&parts[0], 0).unwrap(), None);
    assert_eq!(store.translate(&parts[0], 4).unwrap(), None);
    for partition in &parts[1..] {
        assert_eq!(store.checkpoint(partition).unwrap(), Some(checkpoint(5, 6)));
        assert_eq!(
            store.translate(partition, 4).unwrap(),
            Some(OffsetLookup::Exact(3))
        );
    }

    // After a reset the partition records from wherever the target says,
    // even "behind" the forgotten checkpoint.
    store
        .record_commit(&parts[0], tail(1, 1), &checkpoint(3, 4), &[run(1, 1, 2)])
        .unwrap();
    assert_eq!(
        store.translate(&parts[0], 2).unwrap(),
        Some(OffsetLookup::Exact(2))
    );
    assert_eq!(store.translate(&parts[0], 0).unwrap(), None);
}

/// Group sync's race, made deterministic: a group caught up at the
/// replicated position P is translated while a worker commits [P, Q). Each
/// commit point between the translation's reads must give either the
/// tail at P (before the commit) or the copy of P (after it), never the
/// tail at Q, which would skip the copies of [P, Q) on failover.
#[test]
fn translation_is_one_snapshot_while_commits_land() {
    for commit_at in 1..=2 {
        let (_tmp, dir) = state_dir();
        let (store, _) = open(&dir);
        let orders = SourcePartition::new("orders", 0);
        store
            .record_commit(&orders, tail(0, 0), &checkpoint(10, 11), &[run(0, 0, 10)])
            .unwrap();
        let mut calls = 0;
        let translation = store
            .translate_between(&orders, 10, || {
                calls += 1;
                if calls == commit_at {
                    store
                        .record_commit(
                            &orders,
                            tail(10, 11),
                            &checkpoint(20, 22),
                            &[run(10, 11, 10)],
                        )
                        .unwrap();
                }
            })
            .unwrap();
        assert_eq!(
            translation,
            Some(OffsetLookup::Exact(11)),
            "commit between read {commit_at} and {}",
            commit_at + 1
        );
    }
}

/// Commits that keep landing between the reads never yield a mixed answer:
/// after a bounded number of attempts the cache answers `Unknown`.
#[test]
fn translation_gives_up_while_every_read_races_a_commit() {
    let (_tmp, dir) = state_dir();
    let (store, _) = open(&dir);
    let orders = SourcePartition::new("orders", 0);
    store
        .record_commit(&orders, tail(0, 0), &checkpoint(10, 11), &[run(0, 0, 10)])
        .unwrap();
    let (mut next_source, mut next_target) = (10, 11);
    let translation = store
        .translate_between(&orders, 10_000, || {
            store
                .record_commit(
                    &orders,
                    tail(next_source, next_target),
                    &checkpoint(next_source + 10, next_target + 11),
                    &[run(next_source, next_target, 10)],
                )
                .unwrap();
            next_source += 10;
            next_target += 11;
        })
        .unwrap();
    assert_eq!(translation, None);
}

/// The number of runs `partition` has in the store's runs tree.
fn stored_runs(store: &StateStore, partition: &SourcePartition) -> u64 {
    store.runs.scan_prefix(partition.key()).count() as u64
}

/// Commits one run of one record per transaction, with a gap of one offset
/// (the transaction's commit marker) after each, as a transactional source
/// does: source offsets 2i, target offsets 2i.
fn commit_transactions(
    store: &StateStore,
    partition: &SourcePartition,
    range: std::ops::Range<i64>,
) {
    for i in range {
        store
            .record_commit(
                partition,
                tail(2 * i, 2 * i),
                &checkpoint(2 * i + 2, 2 * i + 2),
                &[run(2 * i, 2 * i, 1)],
            )
            .unwrap();
    }
}

#[test]
fn a_partition_keeps_its_newest_runs_and_translates_older_offsets_from_the_target() {
    let (_tmp, dir) = state_dir();
    let (store, _) = open(&dir);
    let orders = SourcePartition::new("orders", 0);
    let other = SourcePartition::new("orders", 1);
    commit_transactions(&store, &other, 0..3);
    let limit = MAX_RUNS_PER_PARTITION as i64;
    commit_transactions(&store, &orders, 0..limit + 10);
    assert_eq!(stored_runs(&store, &orders), MAX_RUNS_PER_PARTITION);
    // The ten oldest went: the progress topic answers for them.
    for source in [0, 1, 18, 19] {
        assert_eq!(
            store.translate(&orders, source).unwrap(),
            None,
            "source offset {source}"
        );
    }
    // The rest still translate exactly, the markers' gaps to the next copy.
    for source in [20, 21, 2 * limit, 2 * limit + 18] {
        assert_eq!(
            store.translate(&orders, source).unwrap(),
            Some(OffsetLookup::Exact(source + source % 2)),
            "source offset {source}"
        );
    }
    assert_eq!(
        store.translate(&orders, 2 * limit + 19).unwrap(),
        Some(OffsetLookup::Tail(tail(2 * limit + 20, 2 * limit + 20)))
    );
    // Another partition's runs are not counted or dropped with these.
    assert_eq!(stored_runs(&store, &other), 3);
    assert_eq!(
        store.translate(&other, 0).unwrap(),
        Some(OffsetLookup::Exact(0))
    );
}

#[test]
fn a_commit_of_more_runs_than_kept_drops_every_older_run_first() {
    let (_tmp, dir) = state_dir();
    let (store, _) = open(&dir);
    let orders = SourcePartition::new("orders", 0);
    commit_transactions(&store, &orders, 0..5);
    let limit = MAX_RUNS_PER_PARTITION as i64;
    let runs: Vec<OffsetRun> = (5..limit + 20).map(|i| run(2 * i, 2 * i, 1)).collect();
    store
        .record_commit(
            &orders,
            tail(10, 10),
            &checkpoint(2 * limit + 40, 2 * limit + 40),
            &runs,
        )
        .unwrap();
    assert_eq!(stored_runs(&store, &orders), MAX_RUNS_PER_PARTITION);
    // No older run survives a newer one: the oldest kept is the 20th.
    for source in [0, 8, 38, 39] {
        assert_eq!(
            store.translate(&orders, source).unwrap(),
            None,
            "source offset {source}"
        );
    }
    assert_eq!(
        store.translate(&orders, 40).unwrap(),
        Some(OffsetLookup::Exact(40))
    );
}

#[test]
fn runs_stored_before_counts_existed_are_counted_and_kept_to_the_limit() {
    let (_tmp, dir) = state_dir();
    let orders = SourcePartition::new("orders", 0);
    let limit = MAX_RUNS_PER_PARTITION as i64;
    {
        let (store, _) = open(&dir);
        commit_transactions(&store, &orders, 0..limit);
        store.flush().unwrap();
    }
    {
        // A store of the version before: no counts.
        let db = raw_sled(&dir);
        db.drop_tree(RUN_COUNTS_TREE).unwrap();
        db.flush().unwrap();
    }
    let (store, outcome) = open(&dir);
    assert!(matches!(outcome, OpenOutcome::Reopened), "{outcome:?}");
    commit_transactions(&store, &orders, limit..limit + 2);
    assert_eq!(stored_runs(&store, &orders), MAX_RUNS_PER_PARTITION);
    assert_eq!(store.translate(&orders, 2).unwrap(), None);
    assert_eq!(
        store.translate(&orders, 4).unwrap(),
        Some(OffsetLookup::Exact(4))
    );
}

#[test]
fn a_reset_partition_counts_its_runs_from_zero() {
    let (_tmp, dir) = state_dir();
    let (store, _) = open(&dir);
    let orders = SourcePartition::new("orders", 0);
    commit_transactions(&store, &orders, 0..10);
    store.reset_partition(&orders).unwrap();
    let limit = MAX_RUNS_PER_PARTITION as i64;
    commit_transactions(&store, &orders, 100..100 + limit);
    // Had the reset kept the count of ten, ten of these would have gone.
    assert_eq!(stored_runs(&store, &orders), MAX_RUNS_PER_PARTITION);
    assert_eq!(
        store.translate(&orders, 200).unwrap(),
        Some(OffsetLookup::Exact(200))
    );
}

#[test]
fn a_count_higher_than_the_runs_stored_is_corrected_not_trusted() {
    let (_tmp, dir) = state_dir();
    let orders = SourcePartition::new("orders", 0);
    {
        let (store, _) = open(&dir);
        commit_transactions(&store, &orders, 0..3);
        // As a binary without counts leaves it: runs reset, count kept.
        store
            .run_counts
            .insert(orders.key(), &MAX_RUNS_PER_PARTITION.to_be_bytes())
            .unwrap();
        store.runs.clear().unwrap();
    }
    let (store, _) = open(&dir);
    commit_transactions(&store, &orders, 3..5);
    // Trusted, the count would have skipped the new runs.
    assert_eq!(stored_runs(&store, &orders), 2);
    assert_eq!(
        store.translate(&orders, 8).unwrap(),
        Some(OffsetLookup::Exact(8))
    );
}

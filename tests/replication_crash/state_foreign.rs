//! Case 4: a state dir belonging to other clusters (or locked by another
//! process): refused with a message naming it and `--state.dir`, and
//! nothing written.

use std::time::Duration;

use eosmirror_state::{ClusterIdentity, OpenOutcome, SourcePartition, StateStore};

use crate::brokers::cluster_id;
use crate::copy::records;
use crate::runs::{args, position_topic, progress_topic};
use crate::state_dirs::{make_state_dir, moved_aside};
use crate::support::bed;
use crate::support::mirror::MirrorSetup;
use crate::support::unique_name;

/// Runs eosmirror on a state dir made for other clusters; returns its output
/// after checking that it refused and left the target and the dir alone.
fn run_on_foreign_state(foreign: &ClusterIdentity, own_alias: &str, case: &str) -> String {
    let bed = bed();
    let topic = bed.source.create_topic("foreign", 2);
    bed.source.produce(&topic, &records("a", &[0, 1], 0, 100));
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    make_state_dir(&setup.state_dir, foreign, &topic);

    let (code, output) = setup.run_to_exit(&topic, &args(own_alias, &[]), Duration::from_secs(120));
    println!("foreign ({case}): exit code {code}; output:\n{output}");
    assert_ne!(code, 0, "{case}: eosmirror accepted a foreign state dir");
    let dir = setup.state_dir.display().to_string();
    assert!(
        output.contains(&dir),
        "{case}: the message does not name the state dir {dir}:\n{output}"
    );
    assert!(
        output.contains("belongs to other clusters"),
        "{case}: the message does not say what is wrong:\n{output}"
    );
    assert!(
        output.contains(&format!("{:?}", foreign.source_alias))
            && output.contains(&format!("{:?}", foreign.source_cluster_id))
            && output.contains(&format!("{:?}", foreign.target_cluster_id)),
        "{case}: the message does not say whose state dir it is:\n{output}"
    );
    assert!(
        output.contains(&format!("delete {dir}")),
        "{case}: the message does not say what to do:\n{output}"
    );

    // Nothing written to the target: no copy, no internal topics.
    for name in [
        topic.clone(),
        progress_topic(own_alias),
        position_topic(own_alias),
    ] {
        assert_eq!(
            bed.target.partition_count(&name),
            None,
            "{case}: eosmirror created {name} on the target"
        );
    }
    // The foreign dir is neither moved aside nor changed.
    assert!(
        moved_aside(&setup.state_dir).is_empty(),
        "{case}: moved aside"
    );
    let (store, outcome) = StateStore::open(&setup.state_dir, foreign).expect("reopen");
    assert_eq!(outcome, OpenOutcome::Reopened, "{case}");
    assert_eq!(
        store
            .checkpoint(&SourcePartition::new(&topic, 0))
            .unwrap()
            .map(|c| c.next_source_offset),
        Some(1_000),
        "{case}: the foreign checkpoint changed"
    );
    output
}

#[test]
fn foreign_state_dir_is_refused_and_nothing_is_written() {
    let bed = bed();
    let alias = unique_name("foreign");
    let (source_id, target_id) = (cluster_id(&bed.source), cluster_id(&bed.target));
    let cases = [
        (
            "other clusters, same alias",
            ClusterIdentity {
                source_alias: alias.clone(),
                source_cluster_id: "some-other-source-cluster".into(),
                target_cluster_id: "some-other-target-cluster".into(),
            },
        ),
        (
            "other target cluster",
            ClusterIdentity {
                source_alias: alias.clone(),
                source_cluster_id: source_id.clone(),
                target_cluster_id: "some-other-target-cluster".into(),
            },
        ),
        (
            "same clusters, other alias",
            ClusterIdentity {
                source_alias: format!("{alias}-other"),
                source_cluster_id: source_id,
                target_cluster_id: target_id,
            },
        ),
    ];
    for (case, foreign) in &cases {
        run_on_foreign_state(foreign, &alias, case);
    }
}

#[test]
fn state_dir_errors_name_the_real_flag() {
    let bed = bed();
    let alias = unique_name("flag");
    // A foreign dir.
    let foreign = ClusterIdentity {
        source_alias: alias.clone(),
        source_cluster_id: "some-other-source-cluster".into(),
        target_cluster_id: "some-other-target-cluster".into(),
    };
    let foreign_output = run_on_foreign_state(&foreign, &alias, "flag name");

    // A dir locked by another process (here: this test holding the store).
    let topic = bed.source.create_topic("locked", 1);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let identity = ClusterIdentity {
        source_alias: alias.clone(),
        source_cluster_id: cluster_id(&bed.source),
        target_cluster_id: cluster_id(&bed.target),
    };
    let (held, _) = StateStore::open(&setup.state_dir, &identity).expect("open");
    let (code, locked_output) =
        setup.run_to_exit(&topic, &args(&alias, &[]), Duration::from_secs(120));
    drop(held);
    assert_ne!(code, 0, "{locked_output}");
    assert!(
        locked_output.contains("locked by another process"),
        "{locked_output}"
    );
    assert_eq!(bed.target.partition_count(&topic), None, "{locked_output}");

    let wrong: Vec<&String> = [&foreign_output, &locked_output]
        .into_iter()
        .filter(|output| !output.contains("--state.dir") || output.contains("--state-dir"))
        .collect();
    assert!(
        wrong.is_empty(),
        "messages name a flag eosmirror does not have (it has --state.dir):\n{wrong:#?}"
    );
}

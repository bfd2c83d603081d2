//! Guards against the mistakes that would silently duplicate data.

mod support;

use std::time::Duration;

use support::mirror::{assert_exact_copy, MirrorSetup};
use support::{bed, TestRecord};

#[test]
fn a_changed_alias_is_refused_instead_of_copying_again() {
    let bed = bed();
    let topic = bed.source.create_topic("guard-alias", 2);
    let records: Vec<TestRecord> = (0..40)
        .map(|i| TestRecord::new(i % 2, &format!("k{i}"), &format!("v{i}")))
        .collect();
    bed.source.produce(&topic, &records);

    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let alias = format!("{topic}-a");
    setup.copy_and_check(&topic, &["--source.alias", &alias], &[&topic]);

    // Same target, new alias, fresh state dir: no position is known, but the
    // target partitions hold the earlier copy.
    let other = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    let other_alias = format!("{topic}-b");
    let (code, output) = other.run_to_exit(
        &topic,
        &["--source.alias", &other_alias],
        Duration::from_secs(90),
    );
    assert_ne!(code, 0, "{output}");
    assert!(
        output.contains("already holds committed records"),
        "{output}"
    );
    assert!(output.contains("--target.allow.nonempty"), "{output}");
    assert_exact_copy(&bed.source, &bed.target, &topic);
}

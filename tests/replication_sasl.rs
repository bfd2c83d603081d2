//! A target that takes username/password (SASL PLAIN) with the Java client
//! settings MirrorMaker users already have: it works unchanged, a wrong
//! password is named at once, and the password is never printed.

mod support;

use std::fs;
use std::time::Duration;

use support::mirror::MirrorSetup;
use support::{bed, TestRecord, SASL_USER};

/// A producer.properties as a cloud vendor's MirrorMaker tutorial has it.
fn java_sasl_properties(bootstrap: &str, password: &str) -> String {
    format!(
        "bootstrap.servers={bootstrap}\n\
         security.protocol=SASL_PLAINTEXT\n\
         sasl.mechanism=PLAIN\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"{}\" password=\"{password}\";\n\
         key.serializer=org.apache.kafka.common.serialization.ByteArraySerializer\n",
        SASL_USER.0
    )
}

#[test]
fn replicates_into_a_sasl_target_with_java_settings() {
    let bed = bed();
    let Some(sasl) = &bed.target.sasl_plain else {
        eprintln!("skipped: the target has no SASL listener");
        return;
    };
    let topic = bed.source.create_topic("sasl-copy", 2);
    let records: Vec<TestRecord> = (0..50)
        .map(|i| TestRecord::new(i % 2, &format!("k{i}"), &format!("v{i}")))
        .collect();
    bed.source.produce(&topic, &records);

    let setup = MirrorSetup::new(&bed.source.bootstrap, sasl);
    fs::write(
        &setup.producer_config,
        java_sasl_properties(sasl, SASL_USER.1),
    )
    .unwrap();
    let output = setup.copy_and_check(&topic, &["--log", "debug"], &[&topic]);
    assert!(
        !output.contains(SASL_USER.1),
        "the password was printed:\n{output}"
    );
    assert!(
        output.contains("key.serializer"),
        "dropped Java-only key not named:\n{output}"
    );
}

#[test]
fn a_wrong_password_is_named_and_nothing_is_written() {
    let bed = bed();
    let Some(sasl) = &bed.target.sasl_plain else {
        eprintln!("skipped: the target has no SASL listener");
        return;
    };
    let topic = bed.source.create_topic("sasl-wrong", 1);
    bed.source.produce(&topic, &[TestRecord::new(0, "k", "v")]);

    let wrong = "not-the-password-7f3a";
    let setup = MirrorSetup::new(&bed.source.bootstrap, sasl);
    fs::write(&setup.producer_config, java_sasl_properties(sasl, wrong)).unwrap();
    let (code, output) = setup.run_to_exit(&topic, &["--log", "trace"], Duration::from_secs(90));
    assert_ne!(code, 0, "{output}");
    let error =
        support::mirror::error_line(&output).unwrap_or_else(|| panic!("no error line:\n{output}"));
    assert!(error.contains("cannot reach the target cluster"), "{error}");
    assert!(error.to_lowercase().contains("authentication"), "{error}");
    assert!(error.contains("credentials"), "{error}");
    assert!(
        error.contains(&setup.producer_config.display().to_string()),
        "{error}"
    );
    assert!(
        !output.contains(wrong),
        "the password was printed:\n{output}"
    );
    assert_eq!(
        bed.target.partition_count(&topic),
        None,
        "target topic created"
    );
}

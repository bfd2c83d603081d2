//! The MirrorMaker-to-cloud migration: a target that only accepts SASL_SSL
//! (PLAIN or SCRAM) or client certificates, configured with the Java client
//! files users already have (JKS and PKCS12 stores with passwords). Each
//! works unchanged and copies exactly once; each misconfiguration stops
//! eosmirror with one line naming the setting to change; and no password
//! from the files ever appears in the output, even at `--log trace`. A file
//! with no trust store at all (a publicly trusted cloud endpoint) trusts the
//! system's CA store, here the test CA given as `SSL_CERT_FILE` to the
//! eosmirror process only.

mod support;

use std::fs;
use std::time::Duration;

use support::mirror::MirrorSetup;
use support::{bed, secured_target, SecuredTarget, TestRecord};

const PLAIN: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
const SCRAM: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

/// The cloud vendor's tutorial file, verbatim except host, credentials and the
/// trust store's path and password.
fn vendor_properties(
    bootstrap: &str,
    user: &str,
    password: &str,
    truststore: &str,
    truststore_password: &str,
) -> String {
    format!(
        "# producer.properties\n\
         bootstrap.servers={bootstrap}\n\
         sasl.jaas.config={PLAIN} required username=\"{user}\" password=\"{password}\";\n\
         sasl.mechanism=PLAIN\n\
         security.protocol=SASL_SSL\n\
         ssl.truststore.location={truststore}\n\
         ssl.truststore.password={truststore_password}\n\
         ssl.endpoint.identification.algorithm=\n"
    )
}

fn scram_properties(s: &SecuredTarget, mechanism: &str, truststore: &str, extra: &str) -> String {
    format!(
        "bootstrap.servers={}\n\
         security.protocol=SASL_SSL\n\
         sasl.mechanism={mechanism}\n\
         sasl.jaas.config={SCRAM} required \\\n    username=\"{}\" \\\n    password=\"{}\";\n\
         ssl.truststore.location={truststore}\n\
         {extra}",
        s.sasl_ssl_scram,
        s.cred("SCRAM_USER"),
        s.cred("SCRAM_PASSWORD"),
    )
}

/// Panics if any password (or key material) shows up in `output`.
fn assert_no_secrets(output: &str, secrets: &[String]) {
    for secret in secrets {
        assert!(
            !output.contains(secret.as_str()),
            "a password was printed (length {}):\n{output}",
            secret.len()
        );
    }
    assert!(
        !output.contains("PRIVATE KEY"),
        "key material printed:\n{output}"
    );
}

/// Copies a fresh topic into the target described by `producer_properties`
/// with `--log trace`, checks the copy is exact, and that no secret leaked.
fn copy_through(s: &SecuredTarget, name: &str, producer_properties: &str) {
    let bed = bed();
    let topic = bed.source.create_topic(name, 2);
    let records: Vec<TestRecord> = (0..60)
        .map(|i| TestRecord::new(i % 2, &format!("k{i}"), &format!("v{i}")))
        .collect();
    bed.source.produce(&topic, &records);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    fs::write(&setup.producer_config, producer_properties).unwrap();
    let output = setup.copy_and_check(&topic, &["--log", "trace"], &[&topic]);
    assert_no_secrets(&output, &s.passwords());
}

/// Runs eosmirror against a misconfigured target; it must exit non-zero with
/// one `eosmirror: error:` line, which is returned. Nothing may be written to
/// the target and no secret printed.
fn failure(s: &SecuredTarget, producer_properties: &str, extra_secrets: &[&str]) -> String {
    failure_env(s, producer_properties, extra_secrets, &[]).0
}

/// Like [`failure`], with extra environment variables for eosmirror; returns
/// the error line and the whole output.
fn failure_env(
    s: &SecuredTarget,
    producer_properties: &str,
    extra_secrets: &[&str],
    env: &[(&str, &str)],
) -> (String, String) {
    let bed = bed();
    let topic = bed.source.create_topic("secured-fail", 1);
    bed.source.produce(&topic, &[TestRecord::new(0, "k", "v")]);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    fs::write(&setup.producer_config, producer_properties).unwrap();
    let (code, output) =
        setup.run_to_exit_env(&topic, &["--log", "trace"], env, Duration::from_secs(90));
    assert_ne!(code, 0, "{output}");
    let errors: Vec<&str> = output
        .lines()
        .filter(|l| l.starts_with("eosmirror: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "expected one error line:\n{output}");
    let mut secrets = s.passwords();
    secrets.extend(extra_secrets.iter().map(|x| x.to_string()));
    assert_no_secrets(&output, &secrets);
    assert_eq!(
        bed.target.partition_count(&topic),
        None,
        "target topic created"
    );
    assert!(
        errors[0].contains(&setup.producer_config.display().to_string()),
        "the file is not named: {}",
        errors[0]
    );
    eprintln!("{}", errors[0]);
    (errors[0].to_string(), output)
}

/// What a managed Kafka with a publicly trusted certificate hands out (Confluent
/// Cloud's client file): SASL_SSL, the JAAS line, and no trust store at all.
fn cloud_properties(s: &SecuredTarget) -> String {
    format!(
        "bootstrap.servers={}\n\
         security.protocol=SASL_SSL\n\
         sasl.mechanism=PLAIN\n\
         sasl.jaas.config={PLAIN} required username=\"{}\" password=\"{}\";\n",
        s.sasl_ssl_plain,
        s.cred("PLAIN_USER"),
        s.cred("PLAIN_PASSWORD"),
    )
}

/// The log line naming the system CA store eosmirror chose.
fn system_store_line(path: &str) -> String {
    format!("trusting the system CA store {path} (from SSL_CERT_FILE)")
}

fn assert_mentions(error: &str, parts: &[&str]) {
    for part in parts {
        assert!(error.contains(part), "`{part}` missing from: {error}");
    }
}

#[test]
fn vendor_file_with_sasl_ssl_plain_and_a_jks_truststore() {
    let Some(s) = secured_target() else { return };
    let props = vendor_properties(
        &s.sasl_ssl_plain,
        s.cred("PLAIN_USER"),
        s.cred("PLAIN_PASSWORD"),
        &s.file("client.truststore.jks"),
        s.cred("CLIENT_TRUSTSTORE_PASSWORD"),
    );
    copy_through(&s, "secured-plain-jks", &props);
}

#[test]
fn scram_sha_512_with_a_pkcs12_truststore_and_host_name_check() {
    let Some(s) = secured_target() else { return };
    let props = scram_properties(
        &s,
        "SCRAM-SHA-512",
        &s.file("client.truststore.p12"),
        &format!(
            "ssl.truststore.type=PKCS12\nssl.truststore.password={}\n\
             ssl.endpoint.identification.algorithm=https\n",
            s.cred("CLIENT_TRUSTSTORE_PASSWORD")
        ),
    );
    copy_through(&s, "secured-scram512-p12", &props);
}

#[test]
fn scram_sha_256_with_a_pem_ca() {
    let Some(s) = secured_target() else { return };
    let props = scram_properties(
        &s,
        "SCRAM-SHA-256",
        &s.file("ca.pem"),
        "ssl.truststore.type=PEM\n",
    );
    copy_through(&s, "secured-scram256-pem", &props);
}

#[test]
fn mtls_with_jks_stores_and_a_separate_key_password() {
    let Some(s) = secured_target() else { return };
    let props = format!(
        "bootstrap.servers={}\nsecurity.protocol=SSL\n\
         ssl.truststore.location={}\nssl.truststore.password={}\n\
         ssl.keystore.type=JKS\nssl.keystore.location={}\nssl.keystore.password={}\n\
         ssl.key.password={}\n",
        s.ssl_mtls,
        s.file("client.truststore.jks"),
        s.cred("CLIENT_TRUSTSTORE_PASSWORD"),
        s.file("client.keystore.jks"),
        s.cred("CLIENT_KEYSTORE_PASSWORD"),
        s.cred("CLIENT_JKS_KEY_PASSWORD"),
    );
    copy_through(&s, "secured-mtls-jks", &props);
}

#[test]
fn mtls_with_pkcs12_stores() {
    let Some(s) = secured_target() else { return };
    let props = format!(
        "bootstrap.servers={}\nsecurity.protocol=SSL\n\
         ssl.truststore.type=PKCS12\nssl.truststore.location={}\nssl.truststore.password={}\n\
         ssl.keystore.type=PKCS12\nssl.keystore.location={}\nssl.keystore.password={}\n",
        s.ssl_mtls,
        s.file("client.truststore.p12"),
        s.cred("CLIENT_TRUSTSTORE_PASSWORD"),
        s.file("client.keystore.p12"),
        s.cred("CLIENT_KEYSTORE_PASSWORD"),
    );
    copy_through(&s, "secured-mtls-p12", &props);
}

#[test]
fn wrong_sasl_password() {
    let Some(s) = secured_target() else { return };
    let wrong = "not-the-password-91ab";
    let props = vendor_properties(
        &s.sasl_ssl_plain,
        s.cred("PLAIN_USER"),
        wrong,
        &s.file("client.truststore.jks"),
        s.cred("CLIENT_TRUSTSTORE_PASSWORD"),
    );
    let error = failure(&s, &props, &[wrong]);
    assert_mentions(&error, &["authentication failed", "sasl.jaas.config"]);
}

#[test]
fn wrong_truststore_password() {
    let Some(s) = secured_target() else { return };
    let wrong = "not-the-store-password-5c1d";
    for store in ["client.truststore.jks", "client.truststore.p12"] {
        let props = vendor_properties(
            &s.sasl_ssl_plain,
            s.cred("PLAIN_USER"),
            s.cred("PLAIN_PASSWORD"),
            &s.file(store),
            wrong,
        );
        let error = failure(&s, &props, &[wrong]);
        assert_mentions(
            &error,
            &["integrity check failed", "set ssl.truststore.password"],
        );
    }
}

#[test]
fn wrong_key_password() {
    let Some(s) = secured_target() else { return };
    let wrong = "not-the-key-password-77e0";
    let props = format!(
        "bootstrap.servers={}\nsecurity.protocol=SSL\n\
         ssl.truststore.location={}\nssl.truststore.password={}\n\
         ssl.keystore.location={}\nssl.keystore.password={}\nssl.key.password={wrong}\n",
        s.ssl_mtls,
        s.file("client.truststore.jks"),
        s.cred("CLIENT_TRUSTSTORE_PASSWORD"),
        s.file("client.keystore.jks"),
        s.cred("CLIENT_KEYSTORE_PASSWORD"),
    );
    let error = failure(&s, &props, &[wrong]);
    assert_mentions(&error, &["cannot be decrypted", "set ssl.key.password"]);
}

#[test]
fn untrusted_certificate() {
    let Some(s) = secured_target() else { return };
    let props = vendor_properties(
        &s.sasl_ssl_plain,
        s.cred("PLAIN_USER"),
        s.cred("PLAIN_PASSWORD"),
        &s.file("untrusted.truststore.jks"),
        s.cred("CLIENT_TRUSTSTORE_PASSWORD"),
    );
    let error = failure(&s, &props, &[]);
    assert_mentions(
        &error,
        &["untrusted certificate", "ssl.truststore.location"],
    );
}

#[test]
fn host_name_mismatch() {
    let Some(s) = secured_target() else { return };
    // `127.1` reaches 127.0.0.1, but the certificate names only 127.0.0.1 and
    // localhost.
    let port = s.sasl_ssl_plain.rsplit(':').next().unwrap();
    let props = vendor_properties(
        &format!("127.1:{port}"),
        s.cred("PLAIN_USER"),
        s.cred("PLAIN_PASSWORD"),
        &s.file("client.truststore.jks"),
        s.cred("CLIENT_TRUSTSTORE_PASSWORD"),
    )
    .replace(
        "ssl.endpoint.identification.algorithm=\n",
        "ssl.endpoint.identification.algorithm=https\n",
    );
    let error = failure(&s, &props, &[]);
    assert_mentions(
        &error,
        &[
            "host name mismatch",
            "ssl.endpoint.identification.algorithm=",
        ],
    );
}

#[test]
fn sasl_mechanism_not_enabled_on_the_broker() {
    let Some(s) = secured_target() else { return };
    // SCRAM against the PLAIN-only listener.
    let props = scram_properties(
        &s,
        "SCRAM-SHA-512",
        &s.file("client.truststore.jks"),
        &format!(
            "ssl.truststore.password={}\n",
            s.cred("CLIENT_TRUSTSTORE_PASSWORD")
        ),
    )
    .replace(&s.sasl_ssl_scram, &s.sasl_ssl_plain);
    let error = failure(&s, &props, &[]);
    assert_mentions(
        &error,
        &["SASL mechanism not enabled", "sasl.mechanism", "PLAIN"],
    );
}

#[test]
fn plaintext_client_at_a_tls_port() {
    let Some(s) = secured_target() else { return };
    let props = vendor_properties(
        &s.sasl_ssl_plain,
        s.cred("PLAIN_USER"),
        s.cred("PLAIN_PASSWORD"),
        &s.file("client.truststore.jks"),
        s.cred("CLIENT_TRUSTSTORE_PASSWORD"),
    )
    .replace(
        "security.protocol=SASL_SSL",
        "security.protocol=SASL_PLAINTEXT",
    );
    let error = failure(&s, &props, &[]);
    assert_mentions(&error, &["expects TLS", "set security.protocol=SASL_SSL"]);
}

#[test]
fn mtls_listener_without_a_client_certificate() {
    let Some(s) = secured_target() else { return };
    let props = format!(
        "bootstrap.servers={}\nsecurity.protocol=SSL\n\
         ssl.truststore.location={}\nssl.truststore.password={}\n",
        s.ssl_mtls,
        s.file("client.truststore.jks"),
        s.cred("CLIENT_TRUSTSTORE_PASSWORD"),
    );
    let error = failure(&s, &props, &[]);
    assert_mentions(&error, &["client certificate", "ssl.keystore.location"]);
}

#[test]
fn cloud_file_without_a_truststore_trusts_the_system_store() {
    let Some(s) = secured_target() else { return };
    // The test CA plays the system's store, for the eosmirror processes only;
    // the machine's own store is not touched.
    let ca = s.file("ca.pem");
    let env = [("SSL_CERT_FILE", ca.as_str())];
    let bed = bed();
    let topic = bed.source.create_topic("secured-system-ca", 2);
    let records: Vec<TestRecord> = (0..60)
        .map(|i| TestRecord::new(i % 2, &format!("k{i}"), &format!("v{i}")))
        .collect();
    bed.source.produce(&topic, &records);
    let setup = MirrorSetup::new(&bed.source.bootstrap, &bed.target.bootstrap);
    fs::write(&setup.producer_config, cloud_properties(&s)).unwrap();
    let output = setup.copy_and_check_env(&topic, &[], &env, &[&topic]);
    assert!(output.contains(&system_store_line(&ca)), "{output}");
    assert_no_secrets(&output, &s.passwords());

    // The other commands build their clients through the same translation.
    let (code, stdout, stderr) = setup.command_env("verify", &["--include", &topic], &env);
    assert_eq!(code, 0, "verify:\n{stdout}\n{stderr}");
    assert!(stdout.contains("verdict: EXACT"), "{stdout}");
    assert!(stderr.contains(&system_store_line(&ca)), "{stderr}");
}

#[test]
fn system_store_without_the_brokers_ca_is_an_untrusted_certificate() {
    let Some(s) = secured_target() else { return };
    // A CA that signed nothing here, and the distribution's public bundle
    // where the machine has one: neither holds the test CA.
    let mut stores = vec![s.file("other-ca.pem")];
    let debian = "/etc/ssl/certs/ca-certificates.crt";
    if fs::metadata(debian).is_ok_and(|m| m.len() > 0) {
        stores.push(debian.to_string());
    }
    for store in &stores {
        let (error, output) = failure_env(
            &s,
            &cloud_properties(&s),
            &[],
            &[("SSL_CERT_FILE", store.as_str())],
        );
        assert_mentions(
            &error,
            &["untrusted certificate", "ssl.truststore.location"],
        );
        assert!(output.contains(&system_store_line(store)), "{output}");
    }
}

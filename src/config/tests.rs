//! End-to-end translation tests: properties text in, librdkafka settings or errors out.
//! No Kafka broker is needed; librdkafka validates settings offline.

use std::path::{Path, PathBuf};

use super::properties::{parse, DuplicateKey};
use super::stores::{StoreError, StoreFormat};
use super::system_trust::{Candidate, Lookup, StoreOrigin, SystemStore};
use super::translate::{translate_with, DroppedKey};
use super::*;

const FILE: &str = "/etc/eosmirror/client.properties";

impl Translated {
    /// The librdkafka value of `key`, if the file produced one.
    fn get(&self, key: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}
const CERT: &str = "-----BEGIN CERTIFICATE-----\n\
    QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2\n\
    d3h5ejAx\n-----END CERTIFICATE-----\n";

/// Stands in for the system's CA store in these tests: a directory that always exists.
/// The process environment is not read (tests run in parallel; CI sets SSL_CERT_FILE).
const SYSTEM_CA_DIR: &str = env!("CARGO_MANIFEST_DIR");

fn system_ca() -> Lookup<'static> {
    const STORES: &[Candidate] = &[Candidate::Dir(SYSTEM_CA_DIR)];
    Lookup {
        cert_file: None,
        cert_dir: None,
        candidates: STORES,
    }
}

/// A machine without any CA store: consulting it fails.
fn no_system_ca() -> Lookup<'static> {
    Lookup {
        cert_file: None,
        cert_dir: None,
        candidates: &[],
    }
}

fn run_with(text: &str, role: ClientRole, trust: &Lookup<'_>) -> Result<Translated, ConfigError> {
    translate_with(&parse(text).unwrap(), role, Path::new(FILE), trust)
}

fn run(text: &str, role: ClientRole) -> Result<Translated, ConfigError> {
    run_with(text, role, &system_ca())
}

fn ok(text: &str, role: ClientRole) -> Translated {
    run(text, role).unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str, role: ClientRole) -> ConfigError {
    match run(text, role) {
        Ok(t) => panic!("expected an error, got {t:?}"),
        Err(e) => e,
    }
}

fn dropped<'a>(t: &'a Translated, key: &str) -> &'a DroppedKey {
    t.dropped
        .iter()
        .find(|d| d.key == key)
        .unwrap_or_else(|| panic!("`{key}` not dropped: {t:?}"))
}

/// `Debug` of `shown` must not contain `secret`.
fn assert_hidden(shown: &impl std::fmt::Debug, secret: &str) {
    let text = format!("{shown:?}");
    assert!(!text.contains(secret), "secret leaked: {text}");
}

/// Neither `Display` nor `Debug` of `e` may contain `secret`.
fn assert_error_hidden(e: &ConfigError, secret: &str) {
    let text = format!("{e} || {e:?}");
    assert!(!text.contains(secret), "secret leaked: {text}");
}

fn temp_file(dir: &tempfile::TempDir, name: &str, content: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    path
}

#[test]
fn shared_keys_pass_through_unchanged() {
    let t = ok(
        "bootstrap.servers=a:9092\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n\
         client.id=mirror\ncompression.type=zstd\nlinger.ms=20\nbatch.size=65536\n\
         request.timeout.ms=30000\nretry.backoff.ms=100\ndelivery.timeout.ms=120000\n\
         max.in.flight.requests.per.connection=5\nretries=2147483647\n",
        ClientRole::Producer,
    );
    assert_eq!(
        t.settings,
        [
            ("bootstrap.servers", "a:9092"),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("client.id", "mirror"),
            ("compression.type", "zstd"),
            ("linger.ms", "20"),
            ("batch.size", "65536"),
            ("request.timeout.ms", "30000"),
            ("retry.backoff.ms", "100"),
            ("delivery.timeout.ms", "120000"),
            ("max.in.flight.requests.per.connection", "5"),
            ("retries", "2147483647"),
            // SASL_SSL without a trust store: the system's, as in Java.
            ("ssl.ca.location", SYSTEM_CA_DIR),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    );
    assert!(t.dropped.is_empty());
}

#[test]
fn consumer_keys_pass_through_and_group_id_is_kept() {
    let t = ok(
        "group.id=mm\nfetch.min.bytes=1\nfetch.max.bytes=52428800\n\
         max.partition.fetch.bytes=1048576\nsession.timeout.ms=45000\n\
         heartbeat.interval.ms=3000\nmax.poll.interval.ms=300000\nclient.rack=r1\n",
        ClientRole::Consumer,
    );
    assert_eq!(t.get("group.id"), Some("mm"));
    assert_eq!(t.get("max.partition.fetch.bytes"), Some("1048576"));
    assert_eq!(t.settings.len(), 8);
}

#[test]
fn librdkafka_only_keys_pass_through() {
    let t = ok(
        "ssl.ca.location=/x/ca.pem\nsocket.nagle.disable=true\n",
        ClientRole::Consumer,
    );
    assert_eq!(t.get("ssl.ca.location"), Some("/x/ca.pem"));
    assert_eq!(t.get("socket.nagle.disable"), Some("true"));
}

#[test]
fn statistics_are_eosmirrors_to_set() {
    let t = ok("statistics.interval.ms=1000\n", ClientRole::Producer);
    assert!(
        dropped(&t, "statistics.interval.ms")
            .reason
            .contains("--statistics.interval.ms"),
        "{:?}",
        t.dropped
    );
    assert_eq!(t.get("statistics.interval.ms"), None);
}

#[test]
fn values_are_trimmed_like_java_passwords_too() {
    let t = ok(
        "linger.ms = 5 \t\nsasl.password= pass word \t\n",
        ClientRole::Producer,
    );
    assert_eq!(t.get("linger.ms"), Some("5"));
    assert_eq!(t.get("sasl.password"), Some("pass word"));
}

#[test]
fn renamed_keys() {
    let t = ok(
        "max.request.size=2097152\nreceive.buffer.bytes=-1\nsend.buffer.bytes=131072\n\
         buffer.memory=33554432\ntransaction.timeout.ms=900000\n",
        ClientRole::Producer,
    );
    assert_eq!(t.get("message.max.bytes"), Some("2097152"));
    assert_eq!(t.get("socket.receive.buffer.bytes"), Some("0"));
    assert_eq!(t.get("socket.send.buffer.bytes"), Some("131072"));
    assert_eq!(t.get("max.request.size"), None);
    // eosmirror sets these for the lanes from its flags, and says so.
    assert_eq!(t.get("queue.buffering.max.kbytes"), None);
    assert!(dropped(&t, "buffer.memory")
        .reason
        .contains("--max.memory.bytes"));
    assert!(dropped(&t, "transaction.timeout.ms")
        .reason
        .contains("--transaction.timeout.ms"));

    let t = ok("fetch.max.wait.ms=500\n", ClientRole::Consumer);
    assert_eq!(t.get("fetch.wait.max.ms"), Some("500"));
}

#[test]
fn bad_converted_value_names_key_line_and_value() {
    let e = err("a.b=1\nreceive.buffer.bytes=lots\n", ClientRole::Consumer);
    let msg = e.to_string();
    assert!(
        matches!(e, ConfigError::InvalidValue { line: 2, .. }),
        "{e:?}"
    );
    assert!(
        msg.starts_with(&format!("{FILE}:2: receive.buffer.bytes=lots: expected -1")),
        "{msg}"
    );
}

#[test]
fn bootstrap_servers_list_is_normalised() {
    let t = ok(
        "bootstrap.servers = a:9092, b:9092 ,c:9092\n",
        ClientRole::Admin,
    );
    assert_eq!(t.get("bootstrap.servers"), Some("a:9092,b:9092,c:9092"));
}

#[test]
fn endpoint_identification() {
    let t = ok(
        "ssl.endpoint.identification.algorithm=\n",
        ClientRole::Consumer,
    );
    assert_eq!(t.get("ssl.endpoint.identification.algorithm"), Some("none"));
    let t = ok(
        "ssl.endpoint.identification.algorithm=https\n",
        ClientRole::Consumer,
    );
    assert_eq!(
        t.get("ssl.endpoint.identification.algorithm"),
        Some("https")
    );
}

#[test]
fn plain_and_scram_jaas_become_username_and_password() {
    let t = ok(
        "sasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \
         required \\\n    username=\"alice\" \\\n    password=\"hunter2-SECRET\";\n",
        ClientRole::Consumer,
    );
    assert_eq!(t.get("sasl.username"), Some("alice"));
    assert_eq!(t.get("sasl.password"), Some("hunter2-SECRET"));
    assert_eq!(t.get("sasl.jaas.config"), None);
    assert_hidden(&t, "hunter2");

    let t = ok(
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
         username='bob' password='pw' debug=true;\n",
        ClientRole::Producer,
    );
    assert_eq!(t.get("sasl.username"), Some("bob"));
    assert!(dropped(&t, "sasl.jaas.config").reason.contains("`debug`"));
}

/// The Java client reads no JAAS entry without SASL, so a leftover login
/// module, even one eosmirror could not use, does not refuse the file.
#[test]
fn jaas_under_a_protocol_without_sasl_is_dropped_unread() {
    for protocol in ["PLAINTEXT", "ssl"] {
        for module in [
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" password=\"hunter2\";",
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;",
            "not a JAAS entry password=hunter2",
        ] {
            let t = ok(
                &format!("security.protocol={protocol}\nsasl.jaas.config={module}\n"),
                ClientRole::Consumer,
            );
            let reason = &dropped(&t, "sasl.jaas.config").reason;
            assert!(
                reason.contains(&format!("unused with security.protocol={protocol}"))
                    && reason.contains("set security.protocol=SASL_SSL"),
                "{reason}"
            );
            assert!(
                t.settings.iter().all(|(k, _)| !k.starts_with("sasl.")),
                "{t:?}"
            );
            assert_hidden(&t, "hunter2");
        }
    }
}

#[test]
fn malformed_jaas_error_never_shows_the_password() {
    for text in [
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"alice\" password=\"hunter2-SECRET\"\n",
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=alice password=hunter2 SECRET;\n",
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule maybe \
         password=\"hunter2-SECRET\";\n",
        "sasl.jaas.config=hunter2-SECRET\n",
    ] {
        let e = err(text, ClientRole::Consumer);
        assert!(matches!(e, ConfigError::Jaas { line: 1, .. }), "{e:?}");
        assert!(e.to_string().contains(FILE), "{e}");
        assert_error_hidden(&e, "hunter2");
    }
}

#[test]
fn kerberos_and_oauth_jaas_are_refused_with_the_librdkafka_settings() {
    let e = err(
        "sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true \
         keyTab=\"/k/c.keytab\" principal=\"c@R\";\n",
        ClientRole::Consumer,
    );
    let msg = e.to_string();
    assert!(matches!(e, ConfigError::Unsupported { .. }), "{e:?}");
    assert!(msg.contains("sasl.kerberos.principal=c@R"), "{msg}");
    assert!(msg.contains("sasl.kerberos.keytab=/k/c.keytab"), "{msg}");

    let e = err(
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
         required clientId=\"m\" clientSecret=\"hunter2-SECRET\";\n",
        ClientRole::Consumer,
    );
    assert!(
        e.to_string().contains("sasl.oauthbearer.method=oidc"),
        "{e}"
    );
    assert_error_hidden(&e, "hunter2");
}

#[test]
fn jaas_and_explicit_username_conflict() {
    let e = err(
        "sasl.username=x\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \
         required username=\"a\" password=\"hunter2-SECRET\";\n",
        ClientRole::Consumer,
    );
    assert!(
        e.to_string().contains(
            "`sasl.username` (line 1) and `sasl.jaas.config` (line 2) both set librdkafka's \
             `sasl.username`"
        ),
        "{e}"
    );
    assert_error_hidden(&e, "hunter2");
}

#[test]
fn renamed_key_conflicts_with_its_librdkafka_name() {
    let e = err(
        "message.max.bytes=1000000\nmax.request.size=2000000\n",
        ClientRole::Producer,
    );
    assert!(
        matches!(
            e,
            ConfigError::Conflict { first_line: 1, second_line: 2, ref setting, .. } if setting == "message.max.bytes"
        ),
        "{e:?}"
    );
}

#[test]
fn a_setting_under_two_librdkafka_names_conflicts() {
    for (first, second) in [
        ("sasl.mechanism=SCRAM-SHA-512", "sasl.mechanisms=PLAIN"),
        ("linger.ms=5", "queue.buffering.max.ms=50"),
        ("delivery.timeout.ms=30000", "message.timeout.ms=60000"),
    ] {
        let e = err(&format!("{first}\n{second}\n"), ClientRole::Producer);
        assert!(
            matches!(
                e,
                ConfigError::Conflict {
                    first_line: 1,
                    second_line: 2,
                    ..
                }
            ),
            "{first} / {second}: {e:?}"
        );
    }
    // One value under both names leaves nothing to choose.
    let t = ok(
        "sasl.mechanism=PLAIN\nsasl.mechanisms=PLAIN\n",
        ClientRole::Producer,
    );
    assert_eq!(t.get("sasl.mechanism"), Some("PLAIN"));
}

/// MirrorMaker 1 producer files name the brokers with the Scala clients'
/// `metadata.broker.list`: alone, it names them; beside `bootstrap.servers`,
/// it is ignored, as by the Java client.
#[test]
fn the_old_broker_list_names_the_bootstrap_servers() {
    let t = ok(
        "metadata.broker.list=a:9092, b:9092\n",
        ClientRole::Producer,
    );
    assert_eq!(t.get("bootstrap.servers"), Some("a:9092,b:9092"));
    assert_eq!(t.get("metadata.broker.list"), None);

    // Beside bootstrap.servers, the Java client ignores it.
    let t = ok(
        "metadata.broker.list=old:9092\nbootstrap.servers=a:9092\n",
        ClientRole::Producer,
    );
    assert_eq!(t.get("bootstrap.servers"), Some("a:9092"));
    assert!(dropped(&t, "metadata.broker.list")
        .reason
        .contains("bootstrap.servers in this file is used"));
}

#[test]
fn pem_truststore_becomes_ca_location() {
    let dir = tempfile::tempdir().unwrap();
    let ca = temp_file(&dir, "ca.crt", CERT.as_bytes());
    let t = ok(
        &format!(
            "ssl.truststore.location={}\nssl.truststore.type=PEM\nssl.truststore.password=hunter2\n",
            ca.display()
        ),
        ClientRole::Consumer,
    );
    assert_eq!(t.get("ssl.ca.location"), Some(ca.to_str().unwrap()));
    assert!(dropped(&t, "ssl.truststore.password")
        .reason
        .contains("no password"));
    assert!(t.dropped.iter().all(|d| d.key != "ssl.truststore.type"));
    assert_eq!(t.settings.len(), 1);
}

#[test]
fn damaged_stores_are_named_without_their_password() {
    let dir = tempfile::tempdir().unwrap();
    // Sniffed by content: the declared type does not matter.
    let jks = temp_file(
        &dir,
        "client.truststore.jks",
        &[0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2],
    );
    let e = err(
        &format!(
            "bootstrap.servers=a:1\nssl.truststore.location={}\nssl.truststore.password=hunter2-SECRET\nssl.truststore.type=PKCS12\n",
            jks.display()
        ),
        ClientRole::Consumer,
    );
    assert!(
        matches!(
            &e,
            ConfigError::Store { line: 2, problem, .. }
                if matches!(**problem, StoreError::Damaged { format: StoreFormat::Jks, .. })
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "{FILE}:2: ssl.truststore.location={}: not a valid JKS store (truncated",
            jks.display()
        )),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
    assert_error_hidden(&e, "hunter2");

    let p12 = temp_file(&dir, "trust.p12", &[0x30, 0x82, 0x04, 0x00]);
    let e = err(
        &format!(
            "ssl.keystore.location={}\nssl.keystore.type=PKCS12\nssl.keystore.password=hunter2\n",
            p12.display()
        ),
        ClientRole::Producer,
    );
    assert!(
        matches!(
            &e,
            ConfigError::Store { problem, .. }
                if matches!(**problem, StoreError::Damaged { format: StoreFormat::Pkcs12, .. })
        ),
        "{e:?}"
    );
    assert_error_hidden(&e, "hunter2");
}

#[test]
fn unreadable_or_unrecognised_store() {
    let e = err(
        "ssl.truststore.location=/nonexistent/trust.jks\n",
        ClientRole::Consumer,
    );
    assert!(
        matches!(e, ConfigError::StoreUnreadable { line: 1, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("/nonexistent/trust.jks"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let odd = temp_file(&dir, "odd", b"???");
    let e = err(
        &format!("ssl.keystore.location={}\n", odd.display()),
        ClientRole::Consumer,
    );
    assert!(
        e.to_string()
            .contains("neither a JKS, JCEKS, PKCS12 nor a PEM store"),
        "{e}"
    );
}

#[test]
fn keystores() {
    let dir = tempfile::tempdir().unwrap();
    let pem = temp_file(&dir, "client.pem", CERT.as_bytes());
    let t = ok(
        &format!(
            "ssl.keystore.type=PEM\nssl.keystore.location={}\nssl.key.password=hunter2\n",
            pem.display()
        ),
        ClientRole::Producer,
    );
    assert_eq!(
        t.get("ssl.certificate.location"),
        Some(pem.to_str().unwrap())
    );
    assert_eq!(t.get("ssl.key.location"), Some(pem.to_str().unwrap()));
    assert_eq!(t.get("ssl.key.password"), Some("hunter2"));

    // A key password without any key is ignored with a warning.
    let t = ok("ssl.key.password=hunter2\n", ClientRole::Producer);
    assert!(dropped(&t, "ssl.key.password")
        .reason
        .contains("ssl.keystore.location"));
    assert!(t.settings.is_empty());
    // With an inline key it decrypts that key; like Java, the password is
    // trimmed.
    let t = ok(
        &format!(
            "ssl.keystore.type=PEM\nssl.keystore.key={}\nssl.key.password=hunter2 \t\n",
            CERT.replace('\n', " ")
        ),
        ClientRole::Producer,
    );
    assert_eq!(t.get("ssl.key.password"), Some("hunter2"));
    assert_hidden(&t, "hunter2");
}

/// The Java client loads no store over a plaintext protocol, so a leftover
/// path to a file that is gone does not refuse the file.
#[test]
fn store_settings_under_a_plaintext_protocol_are_dropped_unread() {
    for protocol in ["PLAINTEXT", "SASL_PLAINTEXT"] {
        let t = ok(
            &format!(
                "security.protocol={protocol}\nssl.truststore.location=/nonexistent/old.jks\n\
                 ssl.truststore.password=hunter2\nssl.keystore.location=/nonexistent/k.p12\n"
            ),
            ClientRole::Producer,
        );
        for key in [
            "ssl.truststore.location",
            "ssl.truststore.password",
            "ssl.keystore.location",
        ] {
            assert!(
                dropped(&t, key)
                    .reason
                    .contains(&format!("unused with security.protocol={protocol}")),
                "{key}: {t:?}"
            );
        }
        assert!(
            t.settings.iter().all(|(k, _)| !k.starts_with("ssl.")),
            "{t:?}"
        );
    }
    // With TLS the missing file is named, as before.
    err(
        "security.protocol=SSL\nssl.truststore.location=/nonexistent/old.jks\n",
        ClientRole::Producer,
    );
}

#[test]
fn orphan_store_settings_are_dropped() {
    let t = ok(
        "ssl.truststore.type=JKS\nssl.keystore.password=hunter2\n",
        ClientRole::Consumer,
    );
    assert!(dropped(&t, "ssl.truststore.type")
        .reason
        .contains("ssl.truststore.location"));
    assert!(dropped(&t, "ssl.keystore.password")
        .reason
        .contains("ssl.keystore.location"));
    assert!(t.settings.is_empty());
}

#[test]
fn inline_pem_certificates_are_rewrapped() {
    let text = "ssl.truststore.type=PEM\nssl.truststore.certificates=-----BEGIN CERTIFICATE----- \\\n  \
                QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVph \\\n  YmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAx \\\n  \
                -----END CERTIFICATE-----\n";
    let t = ok(text, ClientRole::Consumer);
    assert_eq!(t.get("ssl.ca.pem"), Some(CERT));
    assert!(t.dropped.is_empty(), "{t:?}");

    let e = err("ssl.keystore.key=hunter2-SECRET\n", ClientRole::Consumer);
    assert!(e.to_string().contains("no PEM block"), "{e}");
    assert_error_hidden(&e, "hunter2");
}

#[test]
fn java_only_keys_are_dropped_with_reasons() {
    let t = ok(
        "key.serializer=org.apache.kafka.common.serialization.ByteArraySerializer\n\
         value.serializer=org.apache.kafka.common.serialization.ByteArraySerializer\n\
         interceptor.classes=com.example.I\npartitioner.class=com.example.P\n\
         metric.reporters=com.example.R\nssl.keymanager.algorithm=SunX509\n\
         ssl.trustmanager.algorithm=PKIX\nssl.enabled.protocols=TLSv1.2,TLSv1.3\n\
         ssl.protocol=TLSv1.3\nsasl.login.callback.handler.class=com.example.H\n\
         max.block.ms=60000\ninternal.auto.downgrade.txn.commit=true\n",
        ClientRole::Producer,
    );
    assert!(t.settings.is_empty(), "{t:?}");
    assert_eq!(t.dropped.len(), 12);
    assert!(t.dropped.iter().all(|d| !d.reason.is_empty()));
    assert!(dropped(&t, "key.serializer").reason.contains("raw bytes"));
    assert_eq!(dropped(&t, "max.block.ms").line, 11);
    assert!(dropped(&t, "ssl.enabled.protocols")
        .to_string()
        .starts_with("line 8: `ssl.enabled.protocols` ignored: "));

    let t = ok(
        "key.deserializer=x\nvalue.deserializer=y\nmax.poll.records=500\nexclude.internal.topics=true\n",
        ClientRole::Consumer,
    );
    assert_eq!(t.dropped.len(), 4);
}

/// A file downloaded from a cloud console for Java clients carries the
/// Schema Registry's settings, one of them a secret: dropped with a reason,
/// their values never shown.
#[test]
fn serializer_settings_of_java_files_are_dropped_without_their_values() {
    let t = ok(
        "schema.registry.url=https://sr.example:443\n\
         basic.auth.credentials.source=USER_INFO\n\
         basic.auth.user.info=key:hunter2-SECRET\n\
         confluent.monitoring.interceptor.bootstrap.servers=m:9092\n\
         auto.register.schemas=false\n",
        ClientRole::Producer,
    );
    assert!(t.settings.is_empty(), "{t:?}");
    assert_eq!(t.dropped.len(), 5);
    let user_info = dropped(&t, "basic.auth.user.info").to_string();
    assert!(user_info.contains("Schema Registry"), "{user_info}");
    for d in &t.dropped {
        assert!(!d.to_string().contains("hunter2"), "{d}");
    }
    assert!(!format!("{t:?}").contains("hunter2"), "{t:?}");
}

#[test]
fn read_uncommitted_is_an_exactly_once_error() {
    let e = err(
        "group.id=g\nisolation.level=read_uncommitted\n",
        ClientRole::Consumer,
    );
    let msg = e.to_string();
    assert!(
        matches!(e, ConfigError::ExactlyOnce { line: 2, .. }),
        "{e:?}"
    );
    assert!(
        msg.starts_with(&format!(
            "{FILE}:2: isolation.level=read_uncommitted breaks exactly-once"
        )),
        "{msg}"
    );
    assert!(msg.contains("read_committed"), "{msg}");

    let t = ok("isolation.level=read_committed\n", ClientRole::Consumer);
    assert!(dropped(&t, "isolation.level")
        .reason
        .contains("eosmirror sets"));
}

#[test]
fn idempotence_and_acks_are_owned_by_the_producer() {
    let e = err("enable.idempotence=false\n", ClientRole::Producer);
    assert!(
        e.to_string()
            .contains("transactions require the idempotent producer"),
        "{e}"
    );
    let e = err("acks=1\n", ClientRole::Producer);
    assert!(e.to_string().contains("acks=1 breaks exactly-once"), "{e}");
    let e = err("request.required.acks=0\n", ClientRole::Producer);
    assert!(matches!(e, ConfigError::ExactlyOnce { .. }), "{e:?}");

    let t = ok(
        "enable.idempotence=TRUE\nacks=all\ntransactional.id=mm-1\n",
        ClientRole::Producer,
    );
    assert!(t.settings.is_empty(), "{t:?}");
    assert_eq!(t.dropped.len(), 3);
    assert!(ok("acks=-1\n", ClientRole::Producer).settings.is_empty());
}

#[test]
fn consumer_offset_keys_are_owned() {
    let t = ok(
        "enable.auto.commit=true\nauto.commit.interval.ms=5000\nauto.offset.reset=earliest\n\
         enable.auto.offset.store=false\n",
        ClientRole::Consumer,
    );
    assert!(t.settings.is_empty(), "{t:?}");
    assert!(dropped(&t, "enable.auto.commit")
        .reason
        .contains("inside each producer transaction"));
    assert_eq!(t.dropped.len(), 4);
}

#[test]
fn keys_of_another_role_are_dropped_not_refused() {
    let t = ok(
        "isolation.level=read_uncommitted\nfetch.max.wait.ms=5\n",
        ClientRole::Producer,
    );
    assert!(t.settings.is_empty());
    assert!(
        dropped(&t, "isolation.level")
            .reason
            .contains("a consumer setting, which a producer does not use"),
        "{t:?}"
    );
    let t = ok(
        "acks=1\nmax.request.size=1\ncompression.gzip.level=5\n",
        ClientRole::Consumer,
    );
    assert!(t.settings.is_empty());
    assert_eq!(t.dropped.len(), 3);
    let t = ok("enable.auto.commit=true\n", ClientRole::Admin);
    assert!(dropped(&t, "enable.auto.commit")
        .reason
        .contains("admin client"));
}

#[test]
fn unknown_key_is_rejected_naming_file_line_and_key() {
    let e = err(
        "bootstrap.servers=a:1\n\nlinger.msec=5\n",
        ClientRole::Producer,
    );
    assert!(
        matches!(&e, ConfigError::Rejected { line: 3, key, file, .. } if key == "linger.msec" && file == Path::new(FILE)),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("{FILE}:3: `linger.msec` rejected by librdkafka")),
        "{msg}"
    );
    assert!(msg.contains("check the spelling"), "{msg}");
}

#[test]
fn bad_value_is_rejected_with_librdkafka_reason() {
    let e = err("linger.ms=soon\n", ClientRole::Producer);
    assert!(matches!(e, ConfigError::Rejected { line: 1, .. }), "{e:?}");
    assert!(e.to_string().contains("linger.ms"), "{e}");

    let e = err("max.request.size=12\n", ClientRole::Producer);
    assert!(
        e.to_string()
            .contains("(`max.request.size` becomes librdkafka's `message.max.bytes`)"),
        "{e}"
    );
}

#[test]
fn rejected_secret_values_are_scrubbed() {
    let e = err("sasl.password=hunter2\\u0000SECRET\n", ClientRole::Consumer);
    assert!(matches!(e, ConfigError::Rejected { .. }), "{e:?}");
    assert_error_hidden(&e, "hunter2");
    // Whether or not this build has OIDC, the secret never shows.
    if let Err(e) = run(
        "sasl.oauthbearer.client.secret=hunter2-SECRET\n",
        ClientRole::Consumer,
    ) {
        assert_error_hidden(&e, "hunter2");
    }
}

#[test]
fn config_providers_are_unsupported() {
    let e = err(
        "config.providers=file\nconfig.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n",
        ClientRole::Consumer,
    );
    assert!(
        matches!(e, ConfigError::Unsupported { line: 1, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("placeholders"), "{e}");
}

#[test]
fn compression_levels_follow_the_codec() {
    let t = ok(
        "compression.type=gzip\ncompression.gzip.level=6\ncompression.zstd.level=3\n",
        ClientRole::Producer,
    );
    assert_eq!(t.get("compression.level"), Some("6"));
    assert!(dropped(&t, "compression.zstd.level")
        .reason
        .contains("compression.type=zstd"));
    let t = ok("compression.lz4.level=9\n", ClientRole::Producer);
    assert_eq!(t.get("compression.level"), None);
    let e = err(
        "compression.type=zstd\ncompression.zstd.level=19\n",
        ClientRole::Producer,
    );
    assert!(matches!(e, ConfigError::Rejected { line: 2, .. }), "{e:?}");
}

#[test]
fn assignment_strategy_and_cipher_suites() {
    // Java's default list (eager and cooperative mixed, which librdkafka
    // refuses) and assignors librdkafka lacks: lanes assign themselves
    // their partitions, so none is used, and the key is dropped.
    for value in [
        "org.apache.kafka.clients.consumer.RangeAssignor, org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
        "org.apache.kafka.clients.consumer.StickyAssignor",
    ] {
        let t = ok(
            &format!("partition.assignment.strategy={value}\n"),
            ClientRole::Consumer,
        );
        assert_eq!(t.get("partition.assignment.strategy"), None);
        assert!(dropped(&t, "partition.assignment.strategy")
            .reason
            .contains("assigns itself its source partitions"));
    }
    let e = err(
        "ssl.cipher.suites=TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384\n",
        ClientRole::Consumer,
    );
    assert!(matches!(e, ConfigError::InvalidValue { .. }), "{e:?}");
    let t = ok("ssl.cipher.suites=\n", ClientRole::Consumer);
    assert!(dropped(&t, "ssl.cipher.suites")
        .reason
        .contains("empty value"));
}

#[test]
fn debug_output_never_shows_secrets() {
    let text = "sasl.password=hunter2-a\nssl.truststore.password=hunter2-b\n\
                sasl.oauthbearer.client.secret=hunter2-c\nssl.key.pem=hunter2-d\n\
                my.token=hunter2-e\n";
    let props = parse(text).unwrap();
    assert!(!format!("{props:?}").contains("hunter2"));
    for p in props.iter() {
        assert!(!format!("{p:?}").contains("hunter2"));
    }
    let t = Translated {
        settings: props
            .iter()
            .map(|p| (p.key().to_string(), p.value().to_string()))
            .collect(),
        dropped: Vec::new(),
        duplicates: Vec::new(),
        system_trust: None,
    };
    assert!(!format!("{t:?}").contains("hunter2"));
}

#[test]
fn duplicates_are_reported_and_client_config_is_built() {
    let t = ok("client.id=a\nclient.id=b\n", ClientRole::Admin);
    assert_eq!(t.get("client.id"), Some("b"));
    assert_eq!(
        t.duplicates,
        [DuplicateKey {
            key: "client.id".into(),
            previous_line: 1,
            line: 2
        }]
    );
    assert_eq!(t.client_config().get("client.id"), Some("b"));
}

#[test]
fn load_client_config_reads_a_mirrormaker_file() {
    let dir = tempfile::tempdir().unwrap();
    let ca = temp_file(&dir, "ca.pem", CERT.as_bytes());
    let consumer = temp_file(
        &dir,
        "consumer.properties",
        format!(
            "# MirrorMaker consumer\n\
             bootstrap.servers=source-1:9093,source-2:9093\n\
             group.id=mirror-maker\n\
             exclude.internal.topics=true\n\
             auto.offset.reset=earliest\n\
             security.protocol=SASL_SSL\n\
             sasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n\
             \x20   username=\"mirror\" password=\"hunter2-SECRET\";\n\
             ssl.truststore.location={}\n\
             ssl.truststore.type=PEM\n\
             ssl.endpoint.identification.algorithm=\n\
             key.deserializer=org.apache.kafka.common.serialization.ByteArrayDeserializer\n\
             value.deserializer=org.apache.kafka.common.serialization.ByteArrayDeserializer\n",
            ca.display()
        )
        .as_bytes(),
    );
    let t = load_client_config(&consumer, ClientRole::Consumer).unwrap();
    assert_eq!(
        t.get("bootstrap.servers"),
        Some("source-1:9093,source-2:9093")
    );
    assert_eq!(t.get("group.id"), Some("mirror-maker"));
    assert_eq!(t.get("sasl.username"), Some("mirror"));
    assert_eq!(t.get("sasl.password"), Some("hunter2-SECRET"));
    assert_eq!(t.get("ssl.ca.location"), Some(ca.to_str().unwrap()));
    assert_eq!(t.get("ssl.endpoint.identification.algorithm"), Some("none"));
    let dropped: Vec<_> = t.dropped.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(
        dropped,
        [
            "exclude.internal.topics",
            "auto.offset.reset",
            "key.deserializer",
            "value.deserializer"
        ]
    );
    assert_hidden(&t, "hunter2");

    let producer = temp_file(
        &dir,
        "producer.properties",
        b"bootstrap.servers=t:9092\nacks=1\n",
    );
    let e = load_client_config(&producer, ClientRole::Producer).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{}:2: acks=1", producer.display())),
        "{e}"
    );

    let broken = temp_file(&dir, "broken.properties", b"a=\\u00zz\n");
    let e = load_client_config(&broken, ClientRole::Producer).unwrap_err();
    assert!(matches!(e, ConfigError::Properties(_)), "{e:?}");
    assert!(e.to_string().contains("broken.properties"), "{e}");
}

#[test]
fn tls_without_a_trust_store_trusts_the_system_store() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = temp_file(&dir, "bundle.pem", CERT.as_bytes());
    let from_env = Lookup {
        cert_file: Some(bundle.clone().into_os_string()),
        cert_dir: None,
        candidates: &[],
    };
    for protocol in ["SASL_SSL", "SSL", "sasl_ssl", " SSL "] {
        let t = run_with(
            &format!("bootstrap.servers=a:9093\nsecurity.protocol={protocol}\n"),
            ClientRole::Producer,
            &from_env,
        )
        .unwrap();
        assert_eq!(t.get("ssl.ca.location"), Some(bundle.to_str().unwrap()));
        assert_eq!(
            t.system_trust,
            Some(SystemStore {
                path: bundle.clone(),
                origin: StoreOrigin::CertFile
            }),
            "{protocol}"
        );
    }
}

#[test]
fn an_explicit_trust_store_wins_and_the_system_store_is_not_consulted() {
    let dir = tempfile::tempdir().unwrap();
    let ca = temp_file(&dir, "ca.pem", CERT.as_bytes());
    let ca = ca.to_str().unwrap();
    let inline = CERT.replace('\n', " ");
    for (text, key, value) in [
        (
            format!("ssl.truststore.location={ca}\nssl.truststore.type=PEM\n"),
            "ssl.ca.location",
            ca.to_string(),
        ),
        (
            format!("ssl.ca.location={ca}\n"),
            "ssl.ca.location",
            ca.to_string(),
        ),
        (
            "ssl.ca.location=probe\n".to_string(),
            "ssl.ca.location",
            "probe".to_string(),
        ),
        (
            format!("ssl.truststore.type=PEM\nssl.truststore.certificates={inline}\n"),
            "ssl.ca.pem",
            CERT.to_string(),
        ),
        (
            format!("ssl.ca.pem={inline}\n"),
            "ssl.ca.pem",
            inline.trim().to_string(),
        ),
    ] {
        let text = format!("security.protocol=SASL_SSL\n{text}");
        // A machine without a CA store: any lookup would fail.
        let t = run_with(&text, ClientRole::Consumer, &no_system_ca()).unwrap();
        assert_eq!(t.get(key), Some(value.as_str()), "{text}");
        assert_eq!(t.system_trust, None, "{text}");
        let other = if key == "ssl.ca.pem" {
            "ssl.ca.location"
        } else {
            "ssl.ca.pem"
        };
        assert_eq!(t.get(other), None, "{text}");
    }
}

#[test]
fn plaintext_and_unverified_clients_are_unaffected() {
    for text in [
        "bootstrap.servers=a:9092\n",
        "security.protocol=PLAINTEXT\n",
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n",
        "security.protocol=SSL\nenable.ssl.certificate.verification=false\n",
    ] {
        let t = run_with(text, ClientRole::Admin, &no_system_ca()).unwrap();
        assert_eq!(t.get("ssl.ca.location"), None, "{text}");
        assert_eq!(t.system_trust, None, "{text}");
    }
}

#[test]
fn no_trust_store_and_no_system_store_says_what_to_do() {
    let e = run_with(
        "bootstrap.servers=a:9093\nsecurity.protocol=SASL_SSL\n",
        ClientRole::Producer,
        &no_system_ca(),
    )
    .unwrap_err();
    assert!(
        matches!(e, ConfigError::NoTrustStore { line: 2, .. }),
        "{e:?}"
    );
    let msg = e.to_string();
    for part in [
        &format!("{FILE}:2: security.protocol=SASL_SSL and no ssl.truststore.location"),
        "no system CA store was found",
        "Set ssl.truststore.location",
        "set SSL_CERT_FILE",
        "ca-certificates",
    ] {
        assert!(msg.contains(part), "`{part}` missing from: {msg}");
    }

    let missing = Lookup {
        cert_file: Some("/nonexistent/ca.pem".into()),
        cert_dir: None,
        candidates: &[Candidate::Dir(SYSTEM_CA_DIR)],
    };
    let e = run_with("security.protocol=SSL\n", ClientRole::Consumer, &missing).unwrap_err();
    assert!(
        e.to_string()
            .contains("SSL_CERT_FILE=/nonexistent/ca.pem is not a readable, non-empty file"),
        "{e}"
    );
}

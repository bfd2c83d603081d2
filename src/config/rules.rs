//! The rule table: what each Java client key becomes for librdkafka, in one place.
//!
//! A key without a row passes through under its own name: librdkafka shares most
//! settings with the Java client (`bootstrap.servers`, `security.protocol`,
//! `sasl.mechanism`, `client.id`, `group.id`, `linger.ms`, `batch.size`,
//! `compression.type`, `request.timeout.ms`, `retry.backoff.ms`, `fetch.min.bytes`,
//! `fetch.max.bytes`, `max.partition.fetch.bytes`, `session.timeout.ms`,
//! `heartbeat.interval.ms`, `max.poll.interval.ms`, `delivery.timeout.ms`, ...), and
//! librdkafka-only keys written into the file pass through the same way. librdkafka
//! then validates every resulting setting.

use super::pem;
use super::role::ClientRole;

const ALL: &[ClientRole] = &[
    ClientRole::Consumer,
    ClientRole::Producer,
    ClientRole::Admin,
];
const CONSUMER: &[ClientRole] = &[ClientRole::Consumer];
const PRODUCER: &[ClientRole] = &[ClientRole::Producer];

/// Turns a (trimmed) Java value into the librdkafka value. `Ok(None)`: nothing to set
/// (librdkafka's default applies). `Err`: why the value cannot be used and what to write.
pub(crate) type Convert = fn(&str) -> Result<Option<String>, String>;

/// Settings translated together by dedicated code, because one Java key alone does not
/// decide the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handler {
    /// `sasl.jaas.config`.
    Jaas,
    /// `ssl.truststore.location`, `.password`, `.type`.
    TrustStore,
    /// `ssl.keystore.location`, `.password`, `.type`, and `ssl.key.password`.
    KeyStore,
    /// `compression.<codec>.level`, which applies only to the chosen `compression.type`.
    CompressionLevel,
}

/// What happens to a key.
pub(crate) enum Action {
    /// Same meaning under librdkafka name `to` (possibly the same name), with the value
    /// converted when the two clients spell it differently.
    Rename {
        to: &'static str,
        convert: Option<Convert>,
    },
    /// Java-only: ignored, with the reason shown as a warning.
    Drop(&'static str),
    /// eosmirror sets this itself. A value outside `allowed` (empty: any value) would
    /// break exactly-once replication and is an error; otherwise the line is ignored.
    Owned {
        allowed: &'static [&'static str],
        why: &'static str,
    },
    /// Cannot be honoured; an error with this fix.
    Unsupported(&'static str),
    /// Translated by dedicated code together with related keys.
    Special(Handler),
}

/// One row: a key (or key prefix), the client roles it applies to, and its action. In
/// another role the key is ignored with a warning, as the Java client ignores it.
pub(crate) struct KeyRule {
    pub(crate) key: &'static str,
    pub(crate) prefix: bool,
    pub(crate) roles: &'static [ClientRole],
    pub(crate) action: Action,
}

const fn row(key: &'static str, roles: &'static [ClientRole], action: Action) -> KeyRule {
    KeyRule {
        key,
        prefix: false,
        roles,
        action,
    }
}

const fn prefix(key: &'static str, roles: &'static [ClientRole], action: Action) -> KeyRule {
    KeyRule {
        key,
        prefix: true,
        roles,
        action,
    }
}

const fn rename(to: &'static str) -> Action {
    Action::Rename { to, convert: None }
}

const fn convert(to: &'static str, f: Convert) -> Action {
    Action::Rename {
        to,
        convert: Some(f),
    }
}

const SERDE: &str = "eosmirror copies record keys and values as raw bytes; Java \
                     (de)serializer classes do not apply";
const JAVA_CLASS: &str = "names a Java class, which cannot run inside eosmirror";
const SERDE_SETTINGS: &str = "a setting of Java serializers or interceptors (Schema Registry, \
                              Confluent monitoring), not of the client: eosmirror copies \
                              records as raw bytes";
const PARTITIONER: &str = "Java partitioner setting; librdkafka has no counterpart (its own \
                           partitioner setting is `partitioner`)";
const METRICS: &str = "Java client metrics (JMX / metric reporters); eosmirror exports its \
                       own metrics";
const JSSE: &str = "Java TLS (JSSE) implementation setting; librdkafka uses OpenSSL";
const TLS_VERSIONS: &str = "librdkafka has no TLS version list; OpenSSL negotiates TLS 1.2 or \
                            1.3";
const LOGIN_REFRESH: &str = "Java login refresh tuning; librdkafka refreshes credentials on \
                             its own schedule";
const KERBEROS_RENEW: &str = "Java Kerberos ticket renewal; librdkafka runs \
                              sasl.kerberos.kinit.cmd every \
                              sasl.kerberos.min.time.before.relogin instead";
const TOKEN_VALIDATION: &str = "Java-side OAuth token validation; librdkafka does not \
                                validate the tokens it obtains";
const NO_COUNTERPART: &str = "Java client setting with no librdkafka counterpart";
const PRODUCER_QUEUE: &str =
    "the lanes' producer queues are a quarter of --max.memory.bytes, split between the lanes; set that instead";
const AUTO_COMMIT: &str = "eosmirror commits consumer offsets inside each producer \
                           transaction; auto-commit would mark records as replicated before \
                           their transaction commits";

/// The rule table. Exact keys and prefixes; the first matching row wins.
static RULES: &[KeyRule] = &[
    // Same meaning, different librdkafka name or value spelling.
    row("max.request.size", PRODUCER, rename("message.max.bytes")),
    row("fetch.max.wait.ms", CONSUMER, rename("fetch.wait.max.ms")),
    row(
        "receive.buffer.bytes",
        ALL,
        convert("socket.receive.buffer.bytes", socket_buffer),
    ),
    row(
        "send.buffer.bytes",
        ALL,
        convert("socket.send.buffer.bytes", socket_buffer),
    ),
    row(
        "buffer.memory",
        PRODUCER,
        Action::Owned {
            allowed: &[],
            why: PRODUCER_QUEUE,
        },
    ),
    row(
        "queue.buffering.max.kbytes",
        PRODUCER,
        Action::Owned {
            allowed: &[],
            why: PRODUCER_QUEUE,
        },
    ),
    row(
        "transaction.timeout.ms",
        PRODUCER,
        Action::Owned {
            allowed: &[],
            why: "every lane's transactions use --transaction.timeout.ms; set that instead",
        },
    ),
    row(
        "bootstrap.servers",
        ALL,
        convert("bootstrap.servers", comma_list),
    ),
    // The old Scala clients' name, still in MirrorMaker 1 producer files.
    row(
        "metadata.broker.list",
        ALL,
        convert("bootstrap.servers", comma_list),
    ),
    row(
        "ssl.endpoint.identification.algorithm",
        ALL,
        convert(
            "ssl.endpoint.identification.algorithm",
            endpoint_identification,
        ),
    ),
    row(
        "ssl.cipher.suites",
        ALL,
        convert("ssl.cipher.suites", cipher_suites),
    ),
    row(
        "partition.assignment.strategy",
        CONSUMER,
        Action::Owned {
            allowed: &[],
            why: "each lane assigns itself its source partitions; no source consumer group \
                  rebalances, so no assignor is used",
        },
    ),
    row(
        "ssl.truststore.certificates",
        ALL,
        convert("ssl.ca.pem", pem_text),
    ),
    row(
        "ssl.keystore.certificate.chain",
        ALL,
        convert("ssl.certificate.pem", pem_text),
    ),
    row("ssl.keystore.key", ALL, convert("ssl.key.pem", pem_text)),
    // Translated together with related keys.
    row("sasl.jaas.config", ALL, Action::Special(Handler::Jaas)),
    row(
        "ssl.truststore.location",
        ALL,
        Action::Special(Handler::TrustStore),
    ),
    row(
        "ssl.truststore.password",
        ALL,
        Action::Special(Handler::TrustStore),
    ),
    row(
        "ssl.truststore.type",
        ALL,
        Action::Special(Handler::TrustStore),
    ),
    row(
        "ssl.keystore.location",
        ALL,
        Action::Special(Handler::KeyStore),
    ),
    row(
        "ssl.keystore.password",
        ALL,
        Action::Special(Handler::KeyStore),
    ),
    row("ssl.keystore.type", ALL, Action::Special(Handler::KeyStore)),
    row("ssl.key.password", ALL, Action::Special(Handler::KeyStore)),
    row(
        "compression.gzip.level",
        PRODUCER,
        Action::Special(Handler::CompressionLevel),
    ),
    row(
        "compression.lz4.level",
        PRODUCER,
        Action::Special(Handler::CompressionLevel),
    ),
    row(
        "compression.zstd.level",
        PRODUCER,
        Action::Special(Handler::CompressionLevel),
    ),
    row(
        "statistics.interval.ms",
        ALL,
        Action::Owned {
            allowed: &[],
            why: "the lanes' librdkafka statistics are exported on /metrics; \
                  set --statistics.interval.ms instead",
        },
    ),
    // Owned by eosmirror: exactly-once replication depends on them.
    row(
        "isolation.level",
        CONSUMER,
        Action::Owned {
            allowed: &["read_committed"],
            why: "exactly-once replication must read with isolation.level=read_committed, \
                  or it would copy records of aborted and still-open transactions",
        },
    ),
    row(
        "enable.auto.commit",
        CONSUMER,
        Action::Owned {
            allowed: &[],
            why: AUTO_COMMIT,
        },
    ),
    row(
        "auto.commit.enable",
        CONSUMER,
        Action::Owned {
            allowed: &[],
            why: AUTO_COMMIT,
        },
    ),
    row(
        "auto.commit.interval.ms",
        CONSUMER,
        Action::Owned {
            allowed: &[],
            why: AUTO_COMMIT,
        },
    ),
    row(
        "enable.auto.offset.store",
        CONSUMER,
        Action::Owned {
            allowed: &[],
            why: "eosmirror stores offsets only for records whose copies it has produced",
        },
    ),
    row(
        "auto.offset.reset",
        CONSUMER,
        Action::Owned {
            allowed: &[],
            why: "eosmirror copies a partition it has no position for from its first \
                  record (the source's log start), whatever this says: it resumes from \
                  positions on the target, never from source group offsets",
        },
    ),
    row(
        "transactional.id",
        PRODUCER,
        Action::Owned {
            allowed: &[],
            why: "eosmirror derives the transactional.id so that a restarted instance \
                  fences its predecessor",
        },
    ),
    row(
        "enable.idempotence",
        PRODUCER,
        Action::Owned {
            allowed: &["true"],
            why: "transactions require the idempotent producer",
        },
    ),
    row(
        "acks",
        PRODUCER,
        Action::Owned {
            allowed: &["all", "-1"],
            why: "the idempotent, transactional producer requires acks=all",
        },
    ),
    row(
        "request.required.acks",
        PRODUCER,
        Action::Owned {
            allowed: &["all", "-1"],
            why: "the idempotent, transactional producer requires acks=all",
        },
    ),
    // Cannot be honoured.
    prefix(
        "config.providers",
        ALL,
        Action::Unsupported(
            "Java config providers (${provider:path:key} placeholders) are not supported; \
             write the values into the file directly and remove the config.providers lines",
        ),
    ),
    // Java-only.
    row("key.serializer", ALL, Action::Drop(SERDE)),
    row("value.serializer", ALL, Action::Drop(SERDE)),
    row("key.deserializer", ALL, Action::Drop(SERDE)),
    row("value.deserializer", ALL, Action::Drop(SERDE)),
    row("interceptor.classes", ALL, Action::Drop(JAVA_CLASS)),
    prefix("schema.registry.", ALL, Action::Drop(SERDE_SETTINGS)),
    prefix("basic.auth.", ALL, Action::Drop(SERDE_SETTINGS)),
    prefix("bearer.auth.", ALL, Action::Drop(SERDE_SETTINGS)),
    prefix(
        "confluent.monitoring.interceptor.",
        ALL,
        Action::Drop(SERDE_SETTINGS),
    ),
    row("auto.register.schemas", ALL, Action::Drop(SERDE_SETTINGS)),
    row("use.latest.version", ALL, Action::Drop(SERDE_SETTINGS)),
    row("specific.avro.reader", ALL, Action::Drop(SERDE_SETTINGS)),
    row(
        "key.subject.name.strategy",
        ALL,
        Action::Drop(SERDE_SETTINGS),
    ),
    row(
        "value.subject.name.strategy",
        ALL,
        Action::Drop(SERDE_SETTINGS),
    ),
    row("partitioner.class", ALL, Action::Drop(PARTITIONER)),
    row("partitioner.ignore.keys", ALL, Action::Drop(PARTITIONER)),
    row(
        "partitioner.adaptive.partitioning.enable",
        ALL,
        Action::Drop(PARTITIONER),
    ),
    row(
        "partitioner.availability.timeout.ms",
        ALL,
        Action::Drop(PARTITIONER),
    ),
    row("metric.reporters", ALL, Action::Drop(METRICS)),
    row("metrics.num.samples", ALL, Action::Drop(METRICS)),
    row("metrics.sample.window.ms", ALL, Action::Drop(METRICS)),
    row("metrics.recording.level", ALL, Action::Drop(METRICS)),
    row("auto.include.jmx.reporter", ALL, Action::Drop(METRICS)),
    row("ssl.protocol", ALL, Action::Drop(TLS_VERSIONS)),
    row("ssl.enabled.protocols", ALL, Action::Drop(TLS_VERSIONS)),
    row("ssl.keymanager.algorithm", ALL, Action::Drop(JSSE)),
    row("ssl.trustmanager.algorithm", ALL, Action::Drop(JSSE)),
    row("ssl.secure.random.implementation", ALL, Action::Drop(JSSE)),
    row("ssl.provider", ALL, Action::Drop(JSSE)),
    row("ssl.engine.factory.class", ALL, Action::Drop(JAVA_CLASS)),
    row("security.providers", ALL, Action::Drop(JAVA_CLASS)),
    row("sasl.login.class", ALL, Action::Drop(JAVA_CLASS)),
    row(
        "sasl.login.callback.handler.class",
        ALL,
        Action::Drop(JAVA_CLASS),
    ),
    row(
        "sasl.client.callback.handler.class",
        ALL,
        Action::Drop(JAVA_CLASS),
    ),
    row(
        "sasl.oauthbearer.jwt.retriever.class",
        ALL,
        Action::Drop(JAVA_CLASS),
    ),
    row(
        "sasl.oauthbearer.jwt.validator.class",
        ALL,
        Action::Drop(JAVA_CLASS),
    ),
    prefix("sasl.login.refresh.", ALL, Action::Drop(LOGIN_REFRESH)),
    prefix(
        "sasl.login.retry.backoff.",
        ALL,
        Action::Drop(LOGIN_REFRESH),
    ),
    row(
        "sasl.login.connect.timeout.ms",
        ALL,
        Action::Drop(LOGIN_REFRESH),
    ),
    row(
        "sasl.login.read.timeout.ms",
        ALL,
        Action::Drop(LOGIN_REFRESH),
    ),
    row(
        "sasl.kerberos.ticket.renew.jitter",
        ALL,
        Action::Drop(KERBEROS_RENEW),
    ),
    row(
        "sasl.kerberos.ticket.renew.window.factor",
        ALL,
        Action::Drop(KERBEROS_RENEW),
    ),
    prefix(
        "sasl.oauthbearer.jwks.endpoint.",
        ALL,
        Action::Drop(TOKEN_VALIDATION),
    ),
    prefix(
        "sasl.oauthbearer.expected.",
        ALL,
        Action::Drop(TOKEN_VALIDATION),
    ),
    row(
        "sasl.oauthbearer.clock.skew.seconds",
        ALL,
        Action::Drop(TOKEN_VALIDATION),
    ),
    row(
        "sasl.oauthbearer.scope.claim.name",
        ALL,
        Action::Drop(TOKEN_VALIDATION),
    ),
    row(
        "sasl.oauthbearer.sub.claim.name",
        ALL,
        Action::Drop(TOKEN_VALIDATION),
    ),
    row(
        "max.block.ms",
        ALL,
        Action::Drop(
            "librdkafka never blocks when producing; eosmirror waits for queue space itself",
        ),
    ),
    row(
        "max.poll.records",
        ALL,
        Action::Drop("librdkafka has no per-poll record limit; eosmirror sizes its own batches"),
    ),
    row(
        "default.api.timeout.ms",
        ALL,
        Action::Drop("Java client API call timeout; eosmirror sets a timeout on each call"),
    ),
    row(
        "exclude.internal.topics",
        ALL,
        Action::Drop("eosmirror's own topic selection decides what is replicated"),
    ),
    row("metadata.max.idle.ms", ALL, Action::Drop(NO_COUNTERPART)),
    row(
        "socket.connection.setup.timeout.max.ms",
        ALL,
        Action::Drop(NO_COUNTERPART),
    ),
    prefix("internal.", ALL, Action::Drop("Java client internals")),
];

/// The row for `key`, if any.
pub(crate) fn lookup(key: &str) -> Option<&'static KeyRule> {
    RULES.iter().find(|r| {
        if r.prefix {
            key.starts_with(r.key)
        } else {
            key == r.key
        }
    })
}

/// The keys of one [`Handler`], in the order the handler reads them.
pub(crate) fn handler_keys(handler: Handler) -> impl Iterator<Item = &'static str> {
    RULES
        .iter()
        .filter(move |r| matches!(r.action, Action::Special(h) if h == handler))
        .map(|r| r.key)
}

/// Splits a Java LIST value: comma separated, whitespace around items ignored.
fn split_list(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

fn comma_list(value: &str) -> Result<Option<String>, String> {
    let items = split_list(value);
    Ok((!items.is_empty()).then(|| items.join(",")))
}

/// Java: -1 means the operating system's default; librdkafka spells that 0.
fn socket_buffer(value: &str) -> Result<Option<String>, String> {
    match value.parse::<i64>() {
        Ok(-1) => Ok(Some("0".into())),
        Ok(n) if n >= 0 => Ok(Some(n.to_string())),
        _ => Err("expected -1 (the operating system's default) or a number of bytes".into()),
    }
}

/// Java: an empty value disables host name verification; librdkafka spells that `none`.
/// Java takes the algorithm name in any case; librdkafka only `https` (RFC 2818 host
/// name rules, the only ones Kafka clients use).
fn endpoint_identification(value: &str) -> Result<Option<String>, String> {
    if value.is_empty() {
        Ok(Some("none".into()))
    } else if value.eq_ignore_ascii_case("https") {
        Ok(Some("https".into()))
    } else {
        Err("librdkafka checks host names only the HTTPS way: write \
             ssl.endpoint.identification.algorithm=https, or leave the value empty to skip \
             the host name check"
            .into())
    }
}

/// Java lists IANA cipher suite names; OpenSSL (and so librdkafka) uses its own names.
fn cipher_suites(value: &str) -> Result<Option<String>, String> {
    let items = split_list(value);
    if items
        .iter()
        .any(|s| s.starts_with("TLS_") || s.starts_with("SSL_"))
    {
        return Err(
            "these are Java (IANA) cipher suite names, which OpenSSL does not \
                    accept. `openssl ciphers -stdname` prints each OpenSSL name next to its \
                    IANA name; list the OpenSSL names instead (e.g. \
                    ECDHE-RSA-AES256-GCM-SHA384), or remove the line to use OpenSSL's \
                    defaults"
                .into(),
        );
    }
    Ok((!items.is_empty()).then(|| items.join(":")))
}

fn pem_text(value: &str) -> Result<Option<String>, String> {
    pem::normalize(value).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_keys_are_unique_and_shadowed_by_no_prefix() {
        for (i, r) in RULES.iter().enumerate() {
            let first = RULES
                .iter()
                .position(|o| {
                    if o.prefix {
                        r.key.starts_with(o.key)
                    } else {
                        o.key == r.key
                    }
                })
                .unwrap();
            assert_eq!(
                first, i,
                "row for `{}` is shadowed by an earlier row",
                r.key
            );
        }
    }

    #[test]
    fn lookup_exact_and_prefix() {
        assert!(matches!(
            lookup("max.request.size").unwrap().action,
            Action::Rename {
                to: "message.max.bytes",
                ..
            }
        ));
        assert!(matches!(
            lookup("internal.leave.group.on.close").unwrap().action,
            Action::Drop(_)
        ));
        assert!(matches!(
            lookup("config.providers.file.class").unwrap().action,
            Action::Unsupported(_)
        ));
        assert!(lookup("linger.ms").is_none());
        assert!(lookup("max.request").is_none());
    }

    #[test]
    fn handler_key_groups() {
        let keys: Vec<_> = handler_keys(Handler::TrustStore).collect();
        assert_eq!(
            keys,
            [
                "ssl.truststore.location",
                "ssl.truststore.password",
                "ssl.truststore.type"
            ]
        );
        assert_eq!(handler_keys(Handler::CompressionLevel).count(), 3);
    }

    #[test]
    fn value_conversions() {
        assert_eq!(socket_buffer("-1"), Ok(Some("0".into())));
        assert_eq!(socket_buffer("65536"), Ok(Some("65536".into())));
        assert!(socket_buffer("-2").is_err() && socket_buffer("big").is_err());
        assert_eq!(comma_list(" a:1 , b:2,, "), Ok(Some("a:1,b:2".into())));
        assert_eq!(comma_list(""), Ok(None));
        assert_eq!(endpoint_identification(""), Ok(Some("none".into())));
        assert_eq!(endpoint_identification("https"), Ok(Some("https".into())));
        assert_eq!(endpoint_identification("HTTPS"), Ok(Some("https".into())));
        assert!(endpoint_identification("ldaps").is_err());
    }

    #[test]
    fn cipher_suite_names() {
        assert_eq!(
            cipher_suites("ECDHE-RSA-AES256-GCM-SHA384, ECDHE-RSA-AES128-GCM-SHA256"),
            Ok(Some(
                "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256".into()
            ))
        );
        assert_eq!(cipher_suites(""), Ok(None));
        let err = cipher_suites("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384").unwrap_err();
        assert!(err.contains("openssl ciphers -stdname"), "{err}");
    }
}

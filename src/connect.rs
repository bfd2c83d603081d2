//! Reaching a cluster at start-up, and saying why when that fails.
//!
//! librdkafka reports connection problems (authentication, TLS, refused
//! connections) through its error callback while a metadata request simply
//! times out. This context keeps those errors, so the user is told
//! "authentication failed" at once instead of "timed out" after 30 s.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

/// What librdkafka reported for a client: the last error, and the first
/// one that retrying cannot fix (later "all brokers down" events must not
/// hide an authentication failure).
#[derive(Default)]
struct ReportedErrors(Mutex<Reported>);

#[derive(Default, Clone)]
struct Reported {
    last: Option<String>,
    permanent: Option<String>,
    /// librdkafka's "disconnected while requesting ApiVersion ... incorrect
    /// security.protocol" reports so far.
    plaintext_at_tls: u32,
    /// Connection failures librdkafka logged (facility FAIL).
    failures: Vec<String>,
}

impl ClientContext for ReportedErrors {
    fn error(&self, error: KafkaError, reason: &str) {
        let mut reported = self.0.lock().expect("error slot poisoned");
        // A disconnect at the very first request means a plaintext client at a TLS
        // port, unless it is a network fault: trusted once it repeats.
        if reason.contains("incorrect security.protocol") {
            reported.plaintext_at_tls += 1;
        }
        let permanent = is_permanent(&error) || reported.plaintext_at_tls >= 3;
        if permanent && reported.permanent.is_none() {
            reported.permanent = Some(reason.to_string());
        }
        reported.last = Some(reason.to_string());
    }

    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        // Connection failures that never reach `error` (a TLS alert or a disconnect
        // while reading) are only logged, with facility FAIL: keep them too.
        if fac == "FAIL" {
            self.0
                .lock()
                .expect("error slot poisoned")
                .failures
                .push(without_thread_name(message).to_string());
        }
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", "librdkafka: {fac} {message}")
            }
            RDKafkaLogLevel::Warning => {
                tracing::warn!(target: "librdkafka", "librdkafka: {fac} {message}")
            }
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", "librdkafka: {fac} {message}")
            }
            RDKafkaLogLevel::Debug => {
                tracing::debug!(target: "librdkafka", "librdkafka: {fac} {message}")
            }
        }
    }
}

impl ConsumerContext for ReportedErrors {}

/// A librdkafka log message without the `[thrd:<name>]: ` it starts with:
/// the text after it names the broker (`<address>/<id>: ...`).
fn without_thread_name(message: &str) -> &str {
    message
        .strip_prefix("[thrd:")
        .and_then(|rest| rest.split_once("]: "))
        .map_or(message, |(_, text)| text)
}

impl ReportedErrors {
    fn get(&self) -> Reported {
        self.0.lock().expect("error slot poisoned").clone()
    }
}

/// Errors that retrying cannot fix: wrong credentials or TLS setup.
fn is_permanent(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::Authentication
                | RDKafkaErrorCode::SaslAuthenticationFailed
                | RDKafkaErrorCode::SSL
        )
    )
}

/// A permanent cause among the failures librdkafka only logged: the broker's TLS
/// alert about the client certificate, or a plaintext client's connection closed at the
/// first request by a port that (as a probe confirms) speaks TLS.
fn logged_cause(reported: &Reported, config: &ClientConfig) -> Option<String> {
    let alert = |f: &&String| {
        let f = f.to_ascii_lowercase();
        f.contains("alert bad certificate")
            || f.contains("certificate required")
            || f.contains("alert unknown ca")
    };
    if let Some(f) = reported.failures.iter().find(alert) {
        return Some(f.clone());
    }
    let protocol = config.get("security.protocol").unwrap_or("plaintext");
    let plaintext = !protocol.to_ascii_lowercase().contains("ssl");
    let closed_at_first_request = reported
        .failures
        .iter()
        .any(|f| f.contains("Disconnected") && f.contains("APIVERSION_QUERY"));
    if plaintext && closed_at_first_request {
        let first = config.get("bootstrap.servers")?.split(',').next()?.trim();
        let address = first.rsplit("://").next()?;
        if speaks_tls(address) {
            return Some(format!(
                "{address} closed the connection at the first request: incorrect \
                 security.protocol (the port completes a TLS handshake)"
            ));
        }
    }
    None
}

/// Whether `address` (host:port) completes a TLS handshake (or answers with a TLS
/// alert). Certificates are not checked: only the protocol matters here.
fn speaks_tls(address: &str) -> bool {
    use std::net::{TcpStream, ToSocketAddrs};
    let Some(socket) = address.to_socket_addrs().ok().and_then(|mut a| a.next()) else {
        return false;
    };
    let Ok(stream) = TcpStream::connect_timeout(&socket, Duration::from_secs(3)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(3)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(3)));
    let Ok(mut builder) = openssl::ssl::SslConnector::builder(openssl::ssl::SslMethod::tls())
    else {
        return false;
    };
    builder.set_verify(openssl::ssl::SslVerifyMode::NONE);
    let connector = builder.build();
    let Ok(mut configured) = connector.configure() else {
        return false;
    };
    configured.set_verify_hostname(false);
    match configured.connect("localhost", stream) {
        Ok(_) => true,
        Err(e) => e.to_string().to_ascii_lowercase().contains("alert"),
    }
}

/// `Some(true)` when the cluster is reachable once the host name check is off: the
/// broker's certificate is trusted but does not name the host connected to.
fn host_name_is_the_problem(config: &ClientConfig) -> bool {
    if config
        .get("ssl.endpoint.identification.algorithm")
        .is_some_and(|v| v == "none")
    {
        return false;
    }
    let mut probe = config.clone();
    probe.set("ssl.endpoint.identification.algorithm", "none");
    let Ok(consumer) =
        probe.create_with_context::<_, BaseConsumer<ReportedErrors>>(ReportedErrors::default())
    else {
        return false;
    };
    consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .is_ok()
}

/// What a permanent connection failure (librdkafka's `reason`) means, as one sentence
/// naming the client setting to change. `host_name_only` is asked, when a broker
/// certificate failed verification, whether the host name check alone failed.
///
/// Why: librdkafka's texts name its own settings (`ssl.ca.location`) and guess; users
/// wrote Java settings, and each failure here has one fix.
pub(crate) fn diagnose(
    reason: &str,
    config: &ClientConfig,
    host_name_only: impl FnOnce() -> bool,
) -> String {
    let lower = reason.to_ascii_lowercase();
    let get = |k: &str| config.get(k).unwrap_or_default().to_string();
    let protocol = get("security.protocol").to_ascii_uppercase();
    let mechanism = config
        .get("sasl.mechanism")
        .or_else(|| config.get("sasl.mechanisms"))
        .unwrap_or("GSSAPI")
        .to_string();
    let bootstrap = get("bootstrap.servers");
    if let Some(offered) = reason.split("broker's supported mechanisms: ").nth(1) {
        let offered = offered.split(" (").next().unwrap_or(offered).trim();
        return format!(
            "SASL mechanism not enabled on the broker: the listener does not offer \
             sasl.mechanism={mechanism} (it offers {offered}); set sasl.mechanism to one of \
             those, with the matching login module in sasl.jaas.config (PlainLoginModule for \
             PLAIN, ScramLoginModule for SCRAM-SHA-256/512)"
        );
    }
    if lower.contains("sasl authentication error") || lower.contains("authentication failed") {
        return format!(
            "authentication failed: the broker rejected the username or password \
             (sasl.mechanism={mechanism}); fix the credentials (username, password) in \
             sasl.jaas.config"
        );
    }
    if lower.contains("certificate verify failed") || lower.contains("could not be verified") {
        if host_name_only() {
            return format!(
                "host name mismatch: the broker's certificate is trusted but does not name \
                 the host in bootstrap.servers={bootstrap}; use a host name the certificate \
                 holds, or set ssl.endpoint.identification.algorithm= (empty) to skip the \
                 host name check"
            );
        }
        return "untrusted certificate: the broker's certificate is not signed by a CA in the \
                trust store; set ssl.truststore.location (and ssl.truststore.password) to a \
                trust store holding the CA that signed the broker's certificate"
            .into();
    }
    if lower.contains("incorrect security.protocol") {
        let tls = if protocol.starts_with("SASL") {
            "SASL_SSL"
        } else {
            "SSL"
        };
        return format!(
            "the listener at {bootstrap} expects TLS but security.protocol={} does not use \
             it; set security.protocol={tls}",
            if protocol.is_empty() {
                "PLAINTEXT"
            } else {
                &protocol
            }
        );
    }
    if lower.contains("wrong version number")
        || lower.contains("plaintext broker listener")
        || lower.contains("packet length too long")
        || lower.contains("record layer failure")
    {
        let plain = if protocol.starts_with("SASL") {
            "SASL_PLAINTEXT"
        } else {
            "PLAINTEXT"
        };
        return format!(
            "the listener at {bootstrap} does not speak TLS but security.protocol={protocol} \
             uses it; set security.protocol={plain}"
        );
    }
    let has_client_cert = [
        "ssl.certificate.pem",
        "ssl.certificate.location",
        "ssl.keystore.location",
    ]
    .iter()
    .any(|k| config.get(k).is_some());
    let rejected = lower.contains("certificate required")
        || lower.contains("client ssl authentication might be required")
        || lower.contains("unexpected message")
        || lower.contains("bad certificate")
        || lower.contains("unknown ca");
    if rejected && !has_client_cert {
        return "the broker requires a client certificate (mTLS): set ssl.keystore.location \
                and ssl.keystore.password to the client's key store"
            .into();
    }
    if rejected {
        return "the broker rejected the client certificate: set ssl.keystore.location to a \
                key store whose certificate is signed by a CA the broker trusts"
            .into();
    }
    "check the security settings (security.protocol, sasl.*, ssl.*)".into()
}

/// Connects to a cluster and returns its id; fails with the reason (and the
/// file to fix) when the cluster cannot be reached within `limit`, or at
/// once on an authentication or TLS failure.
pub fn cluster_id(
    config: &ClientConfig,
    cluster: &str,
    file: &Path,
    limit: Duration,
) -> anyhow::Result<String> {
    let consumer: BaseConsumer<ReportedErrors> = config
        .create_with_context(ReportedErrors::default())
        .map_err(|e| {
            anyhow!(
                "creating a client for the {cluster} cluster ({}): {e}",
                file.display()
            )
        })?;
    let bootstrap = config.get("bootstrap.servers").unwrap_or_default();
    let deadline = Instant::now() + limit;
    let fail = |why: String| {
        anyhow!(
            "cannot reach the {cluster} cluster at {bootstrap} (settings in {}): {why}",
            file.display()
        )
    };
    let metadata = loop {
        // Long enough for a busy broker's first answer.
        match consumer.fetch_metadata(None, METADATA_ATTEMPT) {
            Ok(metadata) => break metadata,
            Err(e) => {
                // Error events reach the context only when the client's
                // queue is served; the client has no assignment, so these
                // polls return nothing else. Log events share that queue
                // (rdkafka's log.queue), and serving one returns `None` like
                // an empty queue: stopping at the first `None` left the
                // error event behind the log line of the same failure
                // unread, so a TLS failure ended as a 30 s timeout. Each
                // poll serves at most one event; a zero-timeout poll of an
                // empty queue costs next to nothing.
                for _ in 0..1_000 {
                    let _ = consumer.poll(Duration::ZERO);
                }
                let reported = consumer.context().get();
                if let Some(reason) = reported
                    .permanent
                    .clone()
                    .or_else(|| logged_cause(&reported, config))
                {
                    let diagnosis = diagnose(&reason, config, || host_name_is_the_problem(config));
                    return Err(fail(format!("{diagnosis} (librdkafka: {reason})")));
                }
                // A first answer that came after its attempt gave up still
                // taught the client the advertised addresses, which it
                // alone uses from then on: their connection failures say
                // what is wrong.
                if let Some(broker) = unreachable_advertised(&reported.failures, bootstrap) {
                    return Err(advertised_error(cluster, bootstrap, file, &broker));
                }
                if Instant::now() >= deadline {
                    let why = reported.last.unwrap_or_else(|| e.to_string());
                    let error = fail(format!(
                        "{why} (gave up after {limit:?}); check the address, the network and security settings"
                    ));
                    return Err(GaveUp(error.to_string()).into());
                }
            }
        }
    };
    check_advertised(&metadata, cluster, bootstrap, file)?;
    consumer
        .client()
        .fetch_cluster_id(limit)
        .ok_or_else(|| anyhow!("the {cluster} cluster at {bootstrap} did not report a cluster id"))
}

/// The start-up check ran out of time without a named cause (a network
/// fault, a firewall, brokers down): the error of [`cluster_id`] then is
/// this type, so a caller (`plan`) can tell "cannot tell" from a known
/// misconfiguration.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct GaveUp(String);

/// How long one metadata request of the start-up check may take; error
/// events (a wrong password, a TLS failure) are read between attempts.
const METADATA_ATTEMPT: Duration = Duration::from_secs(5);

/// How long the start-up check waits for each advertised broker address.
const ADVERTISED_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Clients talk to the addresses brokers *advertise*, not to the bootstrap
/// address. A broker whose `advertised.listeners` names an address this
/// machine cannot reach lets the bootstrap succeed and then fails every
/// request ("Error while fetching metadata" in Java clients); say so at
/// start-up, naming the address, instead of retrying forever.
fn check_advertised(
    metadata: &rdkafka::metadata::Metadata,
    cluster: &str,
    bootstrap: &str,
    file: &Path,
) -> anyhow::Result<()> {
    use std::net::{TcpStream, ToSocketAddrs};
    for broker in metadata.brokers() {
        let address = format!("{}:{}", broker.host(), broker.port());
        let reachable = address
            .to_socket_addrs()
            .ok()
            .and_then(|mut all| all.next())
            .map(|socket| TcpStream::connect_timeout(&socket, ADVERTISED_CONNECT_TIMEOUT));
        let why = match reachable {
            Some(Ok(_)) => continue,
            Some(Err(e)) => e.to_string(),
            None => "the name does not resolve".to_string(),
        };
        let broker = AdvertisedBroker {
            id: broker.id(),
            address,
            why,
        };
        return Err(advertised_error(cluster, bootstrap, file, &broker));
    }
    Ok(())
}

/// A broker whose advertised address this machine cannot reach.
#[derive(Debug, PartialEq, Eq)]
struct AdvertisedBroker {
    id: i32,
    address: String,
    why: String,
}

fn advertised_error(
    cluster: &str,
    bootstrap: &str,
    file: &Path,
    broker: &AdvertisedBroker,
) -> anyhow::Error {
    let AdvertisedBroker { id, address, why } = broker;
    anyhow!(
        "the {cluster} cluster answers at {bootstrap} (settings in {}), but broker {id} advertises {address}, which this machine cannot reach ({why}); clients use advertised addresses for everything after bootstrap. Fix advertised.listeners on that broker (an address reachable from here), or make {address} reachable from this machine",
        file.display()
    )
}

/// A failed connection to an advertised broker address among librdkafka's
/// logged failures (`<address>/<broker id>: Connect to ... failed: <why>`),
/// other than a bootstrap address.
fn unreachable_advertised(failures: &[String], bootstrap: &str) -> Option<AdvertisedBroker> {
    let strip_scheme = |a: &str| a.rsplit("://").next().unwrap_or(a).trim().to_string();
    let bootstraps: Vec<String> = bootstrap.split(',').map(strip_scheme).collect();
    failures.iter().find_map(|failure| {
        let (name, rest) = failure.split_once(": ")?;
        let (address, id) = name.rsplit_once('/')?;
        let id = id.parse().ok()?;
        let address = strip_scheme(address);
        let (_, why) = rest.split_once(" failed: ")?;
        (rest.starts_with("Connect to") && !bootstraps.contains(&address)).then(|| {
            AdvertisedBroker {
                id,
                address,
                why: why.split(" (after").next().unwrap_or(why).to_string(),
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logged_failures_are_kept_without_the_thread_name() {
        let context = ReportedErrors::default();
        context.log(
            RDKafkaLogLevel::Error,
            "FAIL",
            "[thrd:127.0.0.1:19095/1]: 127.0.0.1:19095/1: Connect to ipv4#127.0.0.1:19095 failed: Connection refused (after 0ms in state CONNECT)",
        );
        context.log(RDKafkaLogLevel::Error, "FAIL", "no thread name");
        let failures = context.get().failures;
        assert_eq!(
            failures,
            [
                "127.0.0.1:19095/1: Connect to ipv4#127.0.0.1:19095 failed: Connection refused (after 0ms in state CONNECT)",
                "no thread name",
            ]
        );
        assert_eq!(
            unreachable_advertised(&failures, "127.0.0.1:19094").map(|b| b.address),
            Some("127.0.0.1:19095".to_string())
        );
    }

    #[test]
    fn a_logged_connect_failure_of_an_advertised_broker_is_named() {
        let failures = vec![
            "127.0.0.1:19094/bootstrap: Connect to ipv4#127.0.0.1:19094 failed: Connection refused (after 0ms in state CONNECT)".to_string(),
            "127.0.0.1:19095/1: Connect to ipv4#127.0.0.1:19095 failed: Connection refused (after 0ms in state CONNECT, 1 identical error(s) suppressed)".to_string(),
        ];
        assert_eq!(
            unreachable_advertised(&failures, "127.0.0.1:19094"),
            Some(AdvertisedBroker {
                id: 1,
                address: "127.0.0.1:19095".into(),
                why: "Connection refused".into(),
            })
        );
    }

    #[test]
    fn bootstrap_addresses_and_other_failures_are_not_advertised_ones() {
        let failures = vec![
            // A single broker that advertises its bootstrap address, down.
            "127.0.0.1:19092/1: Connect to ipv4#127.0.0.1:19092 failed: Connection refused (after 0ms in state CONNECT)".to_string(),
            "sasl_ssl://127.0.0.1:29097/1: SASL authentication error: Authentication failed".to_string(),
        ];
        assert_eq!(
            unreachable_advertised(&failures, "SASL_SSL://127.0.0.1:29097, 127.0.0.1:19092"),
            None
        );
    }
}

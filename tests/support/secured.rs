//! The local target's secured listeners (SASL_SSL, mTLS) and the TLS
//! material and credentials generated for them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::clusters::bed;

/// The local target's secured listeners and the TLS material and credentials
/// `tests/kafka/cluster up` generates for them (never committed).
#[derive(Debug, Clone)]
pub struct SecuredTarget {
    /// SASL_SSL listener offering only PLAIN (like a managed cloud cluster).
    pub sasl_ssl_plain: String,
    /// SASL_SSL listener offering SCRAM-SHA-256 and SCRAM-SHA-512.
    pub sasl_ssl_scram: String,
    /// SSL listener that requires a client certificate (mTLS).
    pub ssl_mtls: String,
    /// Where the CA, certificates and stores are.
    pub tls_dir: PathBuf,
    credentials: BTreeMap<String, String>,
}

impl SecuredTarget {
    /// A file of the generated TLS material, e.g. `client.truststore.jks`.
    pub fn file(&self, name: &str) -> String {
        self.tls_dir.join(name).display().to_string()
    }

    /// A generated credential: `PLAIN_USER`, `PLAIN_PASSWORD`, `SCRAM_USER`,
    /// `SCRAM_PASSWORD`, `CLIENT_TRUSTSTORE_PASSWORD`,
    /// `CLIENT_KEYSTORE_PASSWORD`, `CLIENT_JKS_KEY_PASSWORD`.
    pub fn cred(&self, key: &str) -> &str {
        self.credentials
            .get(key)
            .unwrap_or_else(|| panic!("no {key} in {}/credentials.env", self.tls_dir.display()))
    }

    /// Every generated password: none may ever appear in eosmirror's output.
    pub fn passwords(&self) -> Vec<String> {
        self.credentials
            .iter()
            .filter(|(k, _)| k.contains("PASSWORD"))
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// Where `tests/kafka/cluster` keeps the local clusters, one folder each.
fn kafka_work_dir() -> PathBuf {
    std::env::var_os("EOSMIRROR_KAFKA_WORK")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/kafka-local"))
}

/// The log directory of the local `cluster` ("source" or "target"), or
/// `None` when the suite runs against external clusters.
pub fn local_log_dir(cluster: &str) -> Option<PathBuf> {
    bed().source.proxied?;
    Some(kafka_work_dir().join(cluster).join("data"))
}

/// The local target's secured listeners, or `None` when the suite runs against
/// external clusters.
pub fn secured_target() -> Option<SecuredTarget> {
    let bed = bed();
    bed.target.proxied?;
    let tls_dir = kafka_work_dir().join("target/tls");
    let text = std::fs::read_to_string(tls_dir.join("credentials.env")).unwrap_or_else(|e| {
        panic!(
            "{}/credentials.env: {e}; the running target predates its secured listeners: \
             restart it (tests/kafka/cluster down; tests/kafka/cluster up)",
            tls_dir.display()
        )
    });
    let credentials = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let port = |offset: u16| format!("127.0.0.1:{}", 29090 + offset);
    let secured = SecuredTarget {
        sasl_ssl_plain: port(7),
        sasl_ssl_scram: port(8),
        ssl_mtls: port(9),
        tls_dir,
        credentials,
    };
    assert!(
        std::net::TcpStream::connect(&secured.ssl_mtls).is_ok(),
        "the target has no secured listeners yet: restart it \
         (tests/kafka/cluster down; tests/kafka/cluster up)"
    );
    Some(secured)
}

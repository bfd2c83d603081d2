//! Connecting every command to the clusters with `run`'s properties files:
//! loading and translating a file, the connection-only settings that
//! metadata, admin and reading clients get, and the reachability check.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;
use rdkafka::config::ClientConfig;

use crate::config::{self, ClientRole};
use crate::connect::cluster_id;
use crate::groups::kafka::GroupClient;
use crate::read::Side;

/// Keys that describe how to reach and authenticate to a cluster; the only
/// ones given to metadata, admin and position-reading clients. The
/// `enable.ssl.*` and `enable.sasl.*` switches (certificate verification
/// off, an unsecured OAUTHBEARER token) and the OIDC token endpoint's
/// `https.*` trust decide whether a client can connect at all.
fn is_connection_key(key: &str) -> bool {
    key == "bootstrap.servers"
        || key == "client.id"
        || key == "security.protocol"
        || key.starts_with("sasl.")
        || key.starts_with("ssl.")
        || key.starts_with("enable.ssl.")
        || key.starts_with("enable.sasl.")
        || key.starts_with("https.")
        || key.starts_with("socket.")
        || key == "broker.address.family"
        || key == "metadata.max.age.ms"
}

/// Loads a Java properties file and translates it for librdkafka, logging
/// every Java-only key that is dropped and the system CA store a TLS file
/// without a trust store gets. Every command's clients start here.
pub(crate) fn load_client_config(path: &Path, role: ClientRole) -> anyhow::Result<ClientConfig> {
    let translated = config::load_client_config(path, role)?;
    for dropped in &translated.dropped {
        tracing::warn!(file = %path.display(), "{dropped}");
    }
    for duplicate in &translated.duplicates {
        tracing::warn!(
            file = %path.display(),
            "{} is set on lines {} and {}: the value of line {} is used, as Java does",
            duplicate.key,
            duplicate.previous_line,
            duplicate.line,
            duplicate.line
        );
    }
    if let Some(store) = &translated.system_trust {
        tracing::info!(
            file = %path.display(),
            "TLS without ssl.truststore.location: trusting the system CA store {store}, as Java does"
        );
    }
    let config = translated.client_config();
    if config.get("bootstrap.servers").is_none() {
        bail!(
            "{}: bootstrap.servers is missing; add e.g. bootstrap.servers=host:9092",
            path.display()
        );
    }
    Ok(config)
}

pub(crate) fn connection_only(config: &ClientConfig) -> ClientConfig {
    let mut out = ClientConfig::new();
    // `config_map` masks secret values, so it only supplies the keys.
    for key in config
        .config_map()
        .into_keys()
        .filter(|k| is_connection_key(k))
    {
        if let Some(value) = config.get(key) {
            out.set(key, value);
        }
    }
    out
}

/// How long a command waits for a cluster to answer.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Connection settings of one cluster, checked reachable.
#[derive(Clone)]
pub struct Cluster {
    /// "source" or "target".
    pub name: &'static str,
    pub connection: ClientConfig,
}

impl Cluster {
    /// Loads `file`, keeps the connection settings and checks the cluster
    /// answers (naming an authentication or TLS problem at once).
    pub fn connect(name: &'static str, file: &Path, role: ClientRole) -> anyhow::Result<Cluster> {
        let config = load_client_config(file, role)?;
        let connection = connection_only(&config);
        cluster_id(&connection, name, file, CONNECT_TIMEOUT)?;
        Ok(Cluster { name, connection })
    }

    /// A streaming reader side; each reader holds at most
    /// `reader_memory_kbytes` of prefetched records.
    pub fn side(&self, reader_memory_kbytes: usize, stall_limit: Duration) -> Side {
        Side::new(
            self.name,
            self.connection.clone(),
            reader_memory_kbytes,
            stall_limit,
        )
    }

    pub fn groups(&self) -> GroupClient {
        GroupClient {
            cluster: self.name,
            connection: self.connection.clone(),
            timeout: CONNECT_TIMEOUT,
        }
    }
}

/// Where a command finds both clusters and which mirror between them it
/// means: `run`'s own properties files and alias, so an operator passes
/// every command the running mirror's. Plain data, so engines never see
/// the command line's types.
#[derive(Debug, Clone)]
pub struct Endpoints {
    /// Java client properties of the source cluster (`--consumer.config`).
    pub source_config: PathBuf,
    /// Java client properties of the target cluster (`--producer.config`).
    pub target_config: PathBuf,
    /// The mirror's `--source.alias`: it names the internal topics where
    /// positions, the offset mapping and group offsets are found.
    pub source_alias: String,
}

/// Both clusters of a command.
pub fn connect_both(endpoints: &Endpoints) -> anyhow::Result<(Cluster, Cluster)> {
    Ok((
        Cluster::connect("source", &endpoints.source_config, ClientRole::Consumer)?,
        Cluster::connect("target", &endpoints.target_config, ClientRole::Producer)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_switches_reach_every_client() {
        let mut full = ClientConfig::new();
        for (key, value) in [
            ("bootstrap.servers", "127.0.0.1:9092"),
            ("enable.ssl.certificate.verification", "false"),
            ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
            ("https.ca.location", "/etc/ssl/ca.pem"),
            ("linger.ms", "5"),
        ] {
            full.set(key, value);
        }
        let connection = connection_only(&full);
        for key in [
            "bootstrap.servers",
            "enable.ssl.certificate.verification",
            "enable.sasl.oauthbearer.unsecure.jwt",
            "https.ca.location",
        ] {
            assert_eq!(connection.get(key), full.get(key), "{key}");
        }
        assert_eq!(connection.get("linger.ms"), None);
    }
}

//! A cluster's admin client for discovery, kept for the whole run.
//!
//! Discovery asks both clusters for their topics every
//! `--refresh.interval.ms` and checks the target's topics with admin calls.
//! New clients each time cost connections (a TLS handshake and SASL
//! authentication on a secured cluster, which cloud clusters also
//! rate-limit), threads, and their first metadata: on the local clusters
//! the refreshes of an idle instance with 5,000 partitions took 0.4% of a
//! core. librdkafka reconnects a kept client by itself after an outage.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

use super::target::{metadata_of, ClusterMetadata, TopicError};

/// One cluster's client for discovery: admin calls, and metadata requests
/// on the same connections (an admin client keeps no partition state).
pub struct ClusterClient {
    /// "source" or "target", for errors.
    cluster: &'static str,
    admin: AdminClient<DefaultClientContext>,
}

impl ClusterClient {
    pub fn new(config: &ClientConfig, cluster: &'static str) -> Result<ClusterClient, TopicError> {
        let admin = config
            .create()
            .map_err(|source| TopicError::Metadata { cluster, source })?;
        Ok(ClusterClient { cluster, admin })
    }

    /// The cluster's topics and brokers. Blocking; call from a blocking
    /// thread.
    pub fn metadata(&self, timeout: Duration) -> Result<ClusterMetadata, TopicError> {
        metadata_of(self.admin.inner(), self.cluster, timeout)
    }

    /// Partition counts per topic. Blocking; call from a blocking thread.
    pub fn partition_counts(&self, timeout: Duration) -> Result<BTreeMap<String, i32>, TopicError> {
        Ok(self.metadata(timeout)?.partition_counts())
    }

    /// For the admin calls that make the target ready.
    pub fn admin(&self) -> &AdminClient<DefaultClientContext> {
        &self.admin
    }
}

/// The clients of both clusters that discovery keeps.
pub struct DiscoveryClients {
    pub source: ClusterClient,
    pub target: ClusterClient,
}

impl DiscoveryClients {
    pub fn new(
        source: &ClientConfig,
        target: &ClientConfig,
    ) -> Result<DiscoveryClients, TopicError> {
        Ok(DiscoveryClients {
            source: ClusterClient::new(source, "source")?,
            target: ClusterClient::new(target, "target")?,
        })
    }
}

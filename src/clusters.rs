//! Connecting the operational commands (`verify`, `translate`, `cutover`,
//! `failover`) to both clusters with `run`'s properties files.

use std::path::Path;
use std::time::Duration;

use rdkafka::config::ClientConfig;

use crate::cli::common::ConnectionArgs;
use crate::config::ClientRole;
use crate::connect::cluster_id;
use crate::groups::kafka::GroupClient;
use crate::read::Side;
use crate::run::{connection_only, load_client_config};

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

    /// A streaming reader side with the given prefetch bound.
    pub fn side(&self, queue_kbytes: usize, stall_limit: Duration) -> Side {
        Side {
            name: self.name,
            connection: self.connection.clone(),
            queue_kbytes,
            stall_limit,
        }
    }

    pub fn groups(&self) -> GroupClient {
        GroupClient {
            cluster: self.name,
            connection: self.connection.clone(),
            timeout: CONNECT_TIMEOUT,
        }
    }
}

/// Both clusters of a command.
pub fn connect_both(args: &ConnectionArgs) -> anyhow::Result<(Cluster, Cluster)> {
    Ok((
        Cluster::connect("source", &args.consumer_config, ClientRole::Consumer)?,
        Cluster::connect("target", &args.producer_config, ClientRole::Producer)?,
    ))
}

//! The fault proxies of one path (source or target): one [`FaultProxy`] per
//! broker listener, all given the same fault at once.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use tokio::runtime::Runtime;

use crate::proxy::{Fault, FaultProxy, ProxyError, ProxyStats};

/// How long starting a proxy retries a port another test holds.
const BIND_PATIENCE: Duration = Duration::from_secs(300);

/// The proxies in front of one cluster.
pub struct ProxyGroup {
    proxies: Vec<FaultProxy>,
    /// Which cluster, for messages.
    pub name: &'static str,
}

impl ProxyGroup {
    /// Starts a proxy per (listen, upstream) pair, retrying while a listen
    /// port is taken (other tests may hold it briefly).
    pub fn start(
        rt: &Runtime,
        name: &'static str,
        pairs: &[(SocketAddr, SocketAddr)],
    ) -> Result<ProxyGroup> {
        let mut proxies = Vec::new();
        for &(listen, upstream) in pairs {
            let deadline = Instant::now() + BIND_PATIENCE;
            let mut said = false;
            loop {
                match rt.block_on(FaultProxy::start_to_remote(listen, upstream)) {
                    Ok(p) => {
                        proxies.push(p);
                        break;
                    }
                    Err(ProxyError::Bind { source, .. })
                        if source.kind() == ErrorKind::AddrInUse && Instant::now() < deadline =>
                    {
                        if !said {
                            eprintln!("eosmirror-chaos: {listen} is taken (another test's proxy?); retrying for up to {BIND_PATIENCE:?}");
                            said = true;
                        }
                        std::thread::sleep(Duration::from_millis(250));
                    }
                    Err(e) => bail!("{name} proxy {listen} -> {upstream}: {e}"),
                }
            }
        }
        Ok(ProxyGroup { proxies, name })
    }

    /// Applies `fault` to every proxy of the group.
    pub fn set(&self, fault: Fault) {
        for p in &self.proxies {
            p.set_fault(fault);
        }
    }

    /// Resets every connection of every proxy.
    pub fn reset(&self) {
        for p in &self.proxies {
            p.reset_connections();
        }
    }

    /// Summed counters.
    pub fn stats(&self) -> ProxyStats {
        let mut s = ProxyStats::default();
        for p in &self.proxies {
            let o = p.stats();
            s.accepted += o.accepted;
            s.active += o.active;
            s.bytes_up += o.bytes_up;
            s.bytes_down += o.bytes_down;
            s.resets += o.resets;
            s.end_txn_responses_dropped += o.end_txn_responses_dropped;
        }
        s
    }

    /// Stops all proxies and frees their ports.
    pub fn shutdown(self, rt: &Runtime) {
        for p in self.proxies {
            rt.block_on(p.shutdown());
        }
    }
}

//! A fault proxy on a broker's proxied listener (the port the broker
//! advertises there), so every connection a client makes through that
//! listener crosses it. One proxy can own a port at a time: a test binary's
//! proxies take [`PROXY_PORTS`] in turn, and because other test binaries
//! may use the same ports, binding is retried for a while.

use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use eosmirror_chaos::proxy::{FaultProxy, ProxyError};

use super::ProxiedListener;

/// Serializes the proxies of one test binary.
static PROXY_PORTS: Mutex<()> = Mutex::new(());

/// How long binding waits for another test binary to free the port.
const BIND_PATIENCE: Duration = Duration::from_secs(600);

/// A running fault proxy with the runtime it runs on and the lock that
/// makes it the only proxy of this test binary.
pub struct Proxy {
    proxy: Option<FaultProxy>,
    runtime: tokio::runtime::Runtime,
    _ports: MutexGuard<'static, ()>,
}

impl Proxy {
    /// Listens on the advertised port of `listener` and forwards to the
    /// broker.
    pub fn start(listener: ProxiedListener) -> Proxy {
        let ports = PROXY_PORTS.lock().unwrap_or_else(PoisonError::into_inner);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("build proxy runtime");
        let listen = SocketAddr::from(([127, 0, 0, 1], listener.advertised_port));
        let upstream = SocketAddr::from(([127, 0, 0, 1], listener.broker_port));
        let deadline = Instant::now() + BIND_PATIENCE;
        let proxy = loop {
            match runtime.block_on(FaultProxy::start(listen, upstream)) {
                Ok(proxy) => break proxy,
                Err(ProxyError::Bind { .. }) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_secs(1));
                }
                Err(e) => panic!("starting the fault proxy {listen} -> {upstream}: {e}"),
            }
        };
        Proxy {
            proxy: Some(proxy),
            runtime,
            _ports: ports,
        }
    }

    pub fn get(&self) -> &FaultProxy {
        self.proxy.as_ref().expect("proxy running")
    }

    /// `host:port` clients bootstrap at to go through the proxy.
    pub fn bootstrap(&self) -> String {
        self.get().local_addr().to_string()
    }
}

impl Drop for Proxy {
    /// Frees the port before the lock is released.
    fn drop(&mut self) {
        if let Some(proxy) = self.proxy.take() {
            self.runtime.block_on(proxy.shutdown());
        }
    }
}

//! A loopback TCP proxy that injects network faults.
//!
//! [`FaultProxy`] listens on one address and forwards every accepted
//! connection to an upstream address, applying the current [`Fault`] to the
//! bytes in both directions. Faults can be changed at any time and apply to
//! live connections immediately.
//!
//! Besides these network faults, [`FaultProxy::drop_end_txn_responses`]
//! follows the Kafka frames of each connection and drops the response to a
//! transaction's commit (EndTxn), so the broker commits and the client never
//! learns it: the one moment of the transaction protocol that happens
//! inside librdkafka, out of reach of the replicator's own crash points.
//!
//! The proxy only listens on loopback: it exists to misbehave, and must only
//! ever disturb clients on the test machine. [`FaultProxy::start`] also
//! refuses a non-loopback upstream; [`FaultProxy::start_to_remote`] is the
//! explicit opt-in for a chaos run in front of the user's own clusters.

mod fault;
mod kafka;
mod pipe;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tracing::{debug, warn};

pub use fault::Fault;

use fault::Control;
use pipe::TokenBucket;

/// How long the accept loop backs off after an accept error (e.g. out of file
/// descriptors), so a persistent error does not spin a core.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Why a proxy could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The proxy only binds and connects on loopback, so that a test can
    /// never disturb a real network.
    #[error("{0} is not a loopback address; the fault proxy only uses 127.0.0.0/8 and ::1")]
    NotLoopback(SocketAddr),
    /// The listen address could not be bound, typically because the port is
    /// in use (a broker or another proxy already owns it).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address we tried to listen on.
        addr: SocketAddr,
        /// The underlying socket error.
        #[source]
        source: io::Error,
    },
}

/// Counters for test assertions, e.g. "the replicator reconnected after the
/// reset" or "no bytes crossed while blackholed".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Connections accepted since start, so tests can see reconnects.
    pub accepted: u64,
    /// Connections currently open through the proxy.
    pub active: u64,
    /// Bytes written to the upstream (client to server), after faults.
    pub bytes_up: u64,
    /// Bytes written back to clients (server to client), after faults.
    pub bytes_down: u64,
    /// Connections aborted with an RST, by [`FaultProxy::reset_connections`]
    /// or by healing a blackhole.
    pub resets: u64,
    /// EndTxn responses dropped (each closing its connection), see
    /// [`FaultProxy::drop_end_txn_responses`].
    pub end_txn_responses_dropped: u64,
}

/// A running fault-injection proxy.
///
/// Stop it with [`FaultProxy::shutdown`]; dropping it also aborts all of its
/// tasks (without waiting), so a panicking test leaves nothing running.
#[derive(Debug)]
pub struct FaultProxy {
    /// The bound listen address (the real port when started with port 0).
    local_addr: SocketAddr,
    /// State shared with the accept loop and connection tasks.
    shared: Arc<Shared>,
    /// Tells the accept loop to stop; `None` once shutdown has begun.
    stop: Option<oneshot::Sender<()>>,
    /// The accept loop, which owns all connection tasks.
    accept: Option<JoinHandle<()>>,
}

/// State shared by the handle, the accept loop and every connection.
#[derive(Debug)]
struct Shared {
    /// Where accepted connections are forwarded to.
    upstream: SocketAddr,
    /// The current fault and reset generation; a watch channel so that
    /// connections waiting out a blackhole wake up as soon as it changes.
    control: watch::Sender<Control>,
    /// Client-to-server traffic.
    up: Lane,
    /// Server-to-client traffic.
    down: Lane,
    /// See [`ProxyStats::accepted`].
    accepted: AtomicU64,
    /// See [`ProxyStats::active`].
    active: AtomicU64,
    /// See [`ProxyStats::resets`].
    resets: AtomicU64,
    /// EndTxn responses still to drop.
    end_txn_drops_armed: AtomicU64,
    /// See [`ProxyStats::end_txn_responses_dropped`].
    end_txn_responses_dropped: AtomicU64,
}

/// Per-direction state, shared by all connections. Links are full duplex,
/// so each direction gets its own bandwidth budget.
#[derive(Debug, Default)]
struct Lane {
    /// Bytes forwarded in this direction.
    bytes: AtomicU64,
    /// Bandwidth budget for this direction, across all connections.
    bucket: Mutex<TokenBucket>,
}

impl FaultProxy {
    /// Binds `listen` and starts forwarding its connections to `upstream`,
    /// initially without faults.
    ///
    /// Must be called inside a tokio runtime: the accept loop and connection
    /// tasks are spawned on it. `upstream` is only dialed when a client
    /// connects, so the proxy may be started before the server.
    pub async fn start(listen: SocketAddr, upstream: SocketAddr) -> Result<FaultProxy, ProxyError> {
        if !upstream.ip().is_loopback() {
            return Err(ProxyError::NotLoopback(upstream));
        }
        FaultProxy::start_to_remote(listen, upstream).await
    }

    /// Like [`FaultProxy::start`], but `upstream` may be any address: for a
    /// chaos run against the user's own (staging) clusters, whose brokers
    /// advertise this proxy's loopback address on a dedicated listener. The
    /// proxy still only listens on loopback, so only this machine's clients
    /// are affected.
    pub async fn start_to_remote(
        listen: SocketAddr,
        upstream: SocketAddr,
    ) -> Result<FaultProxy, ProxyError> {
        if !listen.ip().is_loopback() {
            return Err(ProxyError::NotLoopback(listen));
        }
        let bind_err = |source| ProxyError::Bind {
            addr: listen,
            source,
        };
        let listener = TcpListener::bind(listen).await.map_err(bind_err)?;
        let local_addr = listener.local_addr().map_err(bind_err)?;

        let shared = Arc::new(Shared {
            upstream,
            control: watch::Sender::new(Control::default()),
            up: Lane::default(),
            down: Lane::default(),
            accepted: AtomicU64::new(0),
            active: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            end_txn_drops_armed: AtomicU64::new(0),
            end_txn_responses_dropped: AtomicU64::new(0),
        });
        let (stop, stopped) = oneshot::channel();
        let accept = tokio::spawn(accept_loop(listener, shared.clone(), stopped));
        debug!(%local_addr, %upstream, "fault proxy started");
        Ok(FaultProxy {
            local_addr,
            shared,
            stop: Some(stop),
            accept: Some(accept),
        })
    }

    /// The address clients should connect to; needed when started on port 0.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Replaces the current fault; live connections are affected at once.
    ///
    /// Healing a blackhole (going from a fault with `blackhole` set to one
    /// without) resets every connection that lived through it, as a real
    /// partition would: their in-flight bytes were lost, so they could never
    /// resume cleanly. Clients see "connection reset" and reconnect.
    pub fn set_fault(&self, fault: Fault) {
        self.shared.control.send_modify(|control| {
            if control.fault.blackhole && !fault.blackhole {
                control.generation += 1;
            }
            control.fault = fault;
        });
    }

    /// Aborts every live connection with an RST on both sides, simulating a
    /// broker crash or a middlebox dropping state. New connections are
    /// accepted as usual.
    pub fn reset_connections(&self) {
        self.shared
            .control
            .send_modify(|control| control.generation += 1);
    }

    /// Drops the broker's responses to the next `n` EndTxn requests (commits
    /// and aborts of transactions), on any connection, each time closing
    /// that connection instead: the broker has ended the transaction and the
    /// client never learns the outcome. Bytes before the dropped response
    /// are delivered. Calls add up.
    pub fn drop_end_txn_responses(&self, n: u64) {
        self.shared
            .end_txn_drops_armed
            .fetch_add(n, Ordering::Relaxed);
    }

    /// A snapshot of the proxy's counters.
    pub fn stats(&self) -> ProxyStats {
        let shared = &self.shared;
        ProxyStats {
            accepted: shared.accepted.load(Ordering::Relaxed),
            active: shared.active.load(Ordering::Relaxed),
            bytes_up: shared.up.bytes.load(Ordering::Relaxed),
            bytes_down: shared.down.bytes.load(Ordering::Relaxed),
            resets: shared.resets.load(Ordering::Relaxed),
            end_txn_responses_dropped: shared.end_txn_responses_dropped.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting, closes every connection and waits for all tasks to
    /// finish, so the listen port is free again when this returns.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(accept) = self.accept.take() {
            if let Err(err) = accept.await {
                warn!(%err, "fault proxy accept loop failed");
            }
        }
    }
}

impl Drop for FaultProxy {
    /// Aborting the accept loop drops its `JoinSet`, which aborts every
    /// connection task too.
    fn drop(&mut self) {
        if let Some(accept) = &self.accept {
            accept.abort();
        }
    }
}

/// Accepts connections until told to stop, then closes them all.
///
/// Connection tasks live in a `JoinSet` owned by this loop, so aborting the
/// loop (on drop) takes them down with it.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: oneshot::Receiver<()>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((client, peer)) => {
                    debug!(%peer, "fault proxy accepted connection");
                    shared.accepted.fetch_add(1, Ordering::Relaxed);
                    // Read the generation now: a reset requested after this
                    // accept must hit this connection even if its task has
                    // not started yet.
                    let generation = shared.control.borrow().generation;
                    let active = pipe::ActiveGuard::new(shared.clone());
                    conns.spawn(pipe::run(client, shared.clone(), generation, active));
                }
                Err(err) => {
                    warn!(%err, "fault proxy accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            // Reap finished connections so the set does not grow forever.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    conns.shutdown().await;
}

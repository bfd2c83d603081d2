//! The faults a proxy can inject, and how connections observe them.

use std::future;
use std::time::Duration;

use tokio::sync::watch;

/// What the proxy currently does to traffic; see [`super::FaultProxy::set_fault`].
///
/// A struct rather than an enum so that latency and a bandwidth cap can be
/// combined, as on a slow WAN link. Build one from [`Fault::FORWARD`] or
/// [`Fault::BLACKHOLE`] with the `with_*` methods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fault {
    /// Forward nothing in either direction while connections stay open, like
    /// a network partition. Each direction reads a bounded amount (about
    /// 1 MiB) and then stops reading, so senders feel TCP backpressure. New
    /// connections are accepted but not dialed upstream. Overrides the
    /// other fields.
    pub blackhole: bool,
    /// One-way latency added to every byte, in each direction, so a round
    /// trip grows by twice this. Bytes are pipelined, so latency does not by
    /// itself cap throughput.
    pub delay: Duration,
    /// Cap on each direction's throughput, shared by all connections of the
    /// proxy; `None` is unlimited. 0 is treated as 1 byte per second.
    pub bytes_per_sec: Option<u64>,
}

impl Fault {
    /// Forward everything untouched: the healthy network.
    pub const FORWARD: Fault = Fault {
        blackhole: false,
        delay: Duration::ZERO,
        bytes_per_sec: None,
    };

    /// Forward nothing: a network partition (see [`Fault::blackhole`]).
    pub const BLACKHOLE: Fault = Fault {
        blackhole: true,
        ..Fault::FORWARD
    };

    /// This fault with one-way latency `delay` added.
    pub const fn with_delay(self, delay: Duration) -> Fault {
        Fault { delay, ..self }
    }

    /// This fault with each direction capped at `bytes_per_sec`.
    pub const fn with_bandwidth(self, bytes_per_sec: u64) -> Fault {
        Fault {
            bytes_per_sec: Some(bytes_per_sec),
            ..self
        }
    }
}

/// What the proxy's handle broadcasts to its connections.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Control {
    /// The fault to apply now.
    pub(super) fault: Fault,
    /// Bumped to reset connections: each connection remembers the
    /// generation it was accepted in and is reset once it changes. This
    /// reaches every live connection without a registry of them.
    pub(super) generation: u64,
}

/// Waits until traffic may flow (no blackhole) and returns the fault then in
/// force.
///
/// Never returns once the connection's generation is over, so no byte slips
/// through between a heal and the reset it triggers; the connection task
/// performs the reset.
pub(super) async fn forwarding(control: &mut watch::Receiver<Control>, generation: u64) -> Fault {
    let current = control
        .wait_for(|c| !c.fault.blackhole || c.generation != generation)
        .await
        .map(|c| *c);
    match current {
        Ok(c) if c.generation == generation => c.fault,
        // Reset pending, or the proxy is gone: either way, this connection
        // is about to be torn down.
        _ => future::pending().await,
    }
}

/// Completes when the connection accepted in `generation` must be reset.
pub(super) async fn reset_requested(control: &mut watch::Receiver<Control>, generation: u64) {
    if control
        .wait_for(|c| c.generation != generation)
        .await
        .is_err()
    {
        // The proxy is gone and its tasks are being aborted.
        future::pending::<()>().await;
    }
}

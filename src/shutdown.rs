//! Graceful shutdown, explicit: one flag every worker checks between
//! records, and a notification the async side can wait on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// A cloneable handle to the process-wide shutdown request.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    flag: Arc<AtomicBool>,
    notify: Arc<Notify>,
}

impl Shutdown {
    /// Asks everything to stop: workers commit their open transaction and
    /// return.
    pub fn trigger(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn requested(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Resolves once shutdown is requested.
    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.requested() {
                return;
            }
            notified.await;
        }
    }

    /// Triggers shutdown on SIGTERM or SIGINT (Ctrl-C).
    pub fn listen_for_signals(&self) -> std::io::Result<()> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let this = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = terminate.recv() => tracing::info!("SIGTERM received; shutting down"),
                _ = interrupt.recv() => tracing::info!("SIGINT received; shutting down"),
            }
            this.trigger();
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wait_returns_after_trigger_even_if_triggered_first() {
        let s = Shutdown::default();
        s.trigger();
        s.wait().await;
        let s = Shutdown::default();
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.wait().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        s.trigger();
        waiter.await.unwrap();
        assert!(s.requested());
    }
}

//! Graceful shutdown, explicit: one flag every worker checks between
//! records, and a notification the async side can wait on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Signals this soon after the first count as the same request.
const SAME_SIGNAL_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);

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

    /// Triggers shutdown on SIGTERM or SIGINT (Ctrl-C). Another signal, a
    /// second or more after the first, ends the process at once, as the
    /// shell's 128 + signal: tokio keeps the signals caught for the rest of
    /// the process, so without this a stop waiting on an unanswering
    /// cluster could only be killed with SIGKILL. Ending there is as safe as
    /// a kill: what was not committed is resolved by the next start.
    pub fn listen_for_signals(&self) -> std::io::Result<()> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let this = self.clone();
        tokio::spawn(async move {
            let mut first: Option<std::time::Instant> = None;
            loop {
                let (name, code) = tokio::select! {
                    _ = terminate.recv() => ("SIGTERM", 128 + libc::SIGTERM),
                    _ = interrupt.recv() => ("SIGINT", 128 + libc::SIGINT),
                };
                match first {
                    // One Ctrl-C can arrive twice (the terminal signals the
                    // process group, a wrapper forwards it too).
                    Some(at) if at.elapsed() < SAME_SIGNAL_WINDOW => {}
                    Some(_) => {
                        tracing::warn!("{name} received again; exiting now, before the stop finished (the next start resumes from what the target committed)");
                        std::process::exit(code);
                    }
                    None => {
                        first = Some(std::time::Instant::now());
                        tracing::info!(
                            "{name} received; shutting down (send it again to exit at once)"
                        );
                        this.trigger();
                    }
                }
            }
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

//! The eosmirror processes a chaos run has started and not yet reaped, so
//! that a runner stopped by SIGINT or SIGTERM stops them too: without it,
//! `kill <runner>` left an eosmirror copying on, since destructors do not
//! run when a signal ends the process.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use tokio::runtime::Runtime;
use tokio::signal::unix::{signal, SignalKind};

/// Pids of running children.
static RUNNING: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Notes a started child.
pub fn started(pid: u32) {
    RUNNING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(pid);
}

/// Forgets a child once it is reaped (its pid may then be reused).
pub fn reaped(pid: u32) {
    RUNNING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&pid);
}

/// On SIGINT or SIGTERM: SIGKILL every running child, then exit with the
/// shell's code for that signal (130 or 143). Brokers a fault had stopped
/// stay stopped; `tests/kafka/cluster up` starts them again.
pub fn stop_on_signal(rt: &Runtime) -> std::io::Result<()> {
    let _guard = rt.enter();
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    rt.spawn(async move {
        let code = tokio::select! {
            _ = interrupt.recv() => 130,
            _ = terminate.recv() => 143,
        };
        let pids = RUNNING
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for &pid in &pids {
            // SAFETY: kill(2) on a child started by this process and not
            // reaped yet, so the pid is still ours.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
        }
        eprintln!(
            "eosmirror-chaos: stopped by a signal; killed {} eosmirror process(es)",
            pids.len()
        );
        std::process::exit(code);
    });
    Ok(())
}

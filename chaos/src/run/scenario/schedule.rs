//! The fault phase: a seeded pause, then an event of one or more faults
//! drawn together; network faults are set on the proxies, held and healed
//! here, and the recovery after the heal is measured.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::kinds::{side_name, FaultKind, Side};
use super::process::AfterHeal;
use super::state::{Run, RECOVERY_LIMIT};
use crate::proxy::Fault;
use crate::run::report::FaultEvent;

impl<'a> Run<'a> {
    /// The fault phase: events until the duration is over (or a scripted
    /// fault's script, then the rest of the duration without faults).
    pub(super) fn faults(&mut self) -> Result<()> {
        if let Some(kind) = self.kinds.iter().copied().find(|k| k.is_scripted()) {
            let pause = Duration::from_millis(self.rng.range(1000, 4000));
            self.sleep(pause);
            match kind {
                FaultKind::SourceTopicRecreated => self.source_topic_recreated()?,
                _ => self.open_transaction_at_cutover()?,
            }
            let rest = self.cfg.duration.saturating_sub(self.fault_phase.elapsed());
            self.sleep(rest);
            return Ok(());
        }
        while self.fault_phase.elapsed() < self.cfg.duration {
            let pause = Duration::from_millis(self.rng.range(1000, 4000));
            self.sleep(pause);
            let event = self.draw_event();
            if event.is_empty() {
                // Only the one-off gap was left: run on without faults.
                let rest = self.cfg.duration.saturating_sub(self.fault_phase.elapsed());
                self.sleep(rest);
                break;
            }
            self.event(&event)?;
        }
        Ok(())
    }

    /// The fault kinds of the next event: one, or two that do not clash
    /// ([`FaultKind::clashes_with`]).
    fn draw_event(&mut self) -> Vec<FaultKind> {
        let kinds: Vec<FaultKind> = self
            .kinds
            .iter()
            .copied()
            .filter(|k| *k != FaultKind::SourceGap || !self.gap_done)
            .collect();
        if kinds.is_empty() {
            return kinds;
        }
        let mut first = *self.rng.pick(&kinds);
        if first.needs_brokers() && !self.rng.chance(self.cfg.broker_fault_percent) {
            let others: Vec<FaultKind> = kinds
                .iter()
                .copied()
                .filter(|k| !k.needs_brokers())
                .collect();
            if !others.is_empty() {
                first = *self.rng.pick(&others);
            }
        }
        let mut event = vec![first];
        if kinds.len() > 2 && self.rng.chance(40) {
            let second = *self.rng.pick(&kinds);
            let unwanted =
                second.needs_brokers() && !self.rng.chance(self.cfg.broker_fault_percent);
            let clash = unwanted || event.iter().any(|k| k.clashes_with(second));
            if !clash {
                event.push(second);
            }
        }
        // Network faults first, so they are in force while a process fault
        // happens.
        event.sort_by_key(|k| k.is_process());
        event
    }

    /// Injects `event`, holds, heals, and measures the recovery.
    fn event(&mut self, event: &[FaultKind]) -> Result<()> {
        let at = self.fault_phase.elapsed().as_secs_f64();
        let names: Vec<String> = event.iter().map(|k| k.name().to_string()).collect();
        let mut detail = Vec::new();
        let tt = self.cfg.transaction_timeout_ms;
        // Network faults: set now, healed after `hold`.
        let mut hold = Duration::ZERO;
        // Per reset fault: its path, how often and how many times.
        let mut resets: Vec<(Side, Duration, u64)> = Vec::new();
        for k in event.iter().filter(|k| !k.is_process()) {
            let side = k.path().expect("network fault");
            match k {
                FaultKind::TargetBlackhole | FaultKind::SourceBlackhole => {
                    let h = Duration::from_millis(self.rng.range(2000, tt + 6000));
                    self.proxy(side).set(Fault::BLACKHOLE);
                    detail.push(format!(
                        "{} blackholed {:.1}s",
                        side_name(side),
                        h.as_secs_f64()
                    ));
                    hold = hold.max(h);
                }
                FaultKind::TargetReset | FaultKind::SourceReset => {
                    let every = Duration::from_millis(self.rng.range(300, 2000));
                    let n = self.rng.range(2, 7);
                    detail.push(format!(
                        "{} reset {n}× every {:.1}s",
                        side_name(side),
                        every.as_secs_f64()
                    ));
                    resets.push((side, every, n));
                    hold = hold.max(every * n as u32);
                }
                _ => {
                    let mut f = Fault::FORWARD;
                    let mut what = Vec::new();
                    let (delay, cap) = match self.rng.range(0, 3) {
                        0 => (true, false),
                        1 => (false, true),
                        _ => (true, true),
                    };
                    if delay {
                        let d = self.rng.range(10, 300);
                        f = f.with_delay(Duration::from_millis(d));
                        what.push(format!("+{d}ms"));
                    }
                    if cap {
                        let b = self.rng.range(32, 1024) * 1024;
                        f = f.with_bandwidth(b);
                        what.push(format!("{}KiB/s", b / 1024));
                    }
                    let h = Duration::from_millis(self.rng.range(3000, 10_000));
                    self.proxy(side).set(f);
                    detail.push(format!(
                        "{} {} for {:.1}s",
                        side_name(side),
                        what.join(" "),
                        h.as_secs_f64()
                    ));
                    hold = hold.max(h);
                }
            }
        }
        let net_start = Instant::now();
        self.say(&format!("inject {}", names.join(" + ")));
        // The process fault, if any, runs its own course meanwhile.
        let mut process_checks: Vec<AfterHeal<'a>> = Vec::new();
        if let Some(k) = event.iter().copied().find(|k| k.is_process()) {
            if let Err(e) = self.process_fault(k, &mut detail, &mut process_checks) {
                // Heal the network before giving up, or eosmirror stays cut off.
                for k in event.iter().filter(|k| !k.is_process()) {
                    self.proxy(k.path().expect("network fault"))
                        .set(Fault::FORWARD);
                }
                return Err(e);
            }
        }
        // Hold the rest of the network faults' time, resetting as drawn:
        // every reset drawn is made, even after a process fault that
        // outlasted the hold (they then follow each other closely).
        let reset_before: Vec<u64> = resets
            .iter()
            .map(|(side, ..)| self.proxy(*side).stats().resets)
            .collect();
        let mut next_reset: Vec<(Side, Duration, Instant, u64)> = resets
            .iter()
            .map(|(s, e, n)| (*s, *e, net_start + *e, *n))
            .collect();
        while net_start.elapsed() < hold || next_reset.iter().any(|(.., left)| *left > 0) {
            for (side, every, next, left) in next_reset.iter_mut() {
                if *left > 0 && Instant::now() >= *next {
                    self.proxy(*side).reset();
                    *next = (*next + *every).max(Instant::now() + Duration::from_millis(200));
                    *left -= 1;
                }
            }
            self.sleep(Duration::from_millis(50));
        }
        for ((side, ..), before) in resets.iter().zip(reset_before) {
            let cut = self.proxy(*side).stats().resets - before;
            detail.push(format!("{cut} {} connections reset", side_name(*side)));
            self.connections_reset += cut;
        }
        for k in event.iter().filter(|k| !k.is_process()) {
            self.proxy(k.path().expect("network fault"))
                .set(Fault::FORWARD);
        }
        let healed = Instant::now();
        let snapshot = self.committed_now();
        self.say(&format!("healed {}", names.join(" + ")));
        for check in process_checks {
            check(self);
        }
        let recovery = self.recovery(healed, &snapshot, true, RECOVERY_LIMIT);
        self.say(&format!("recovered in {:?} ms", recovery));
        self.faults.push(FaultEvent {
            at_secs: at,
            kinds: names,
            detail: detail.join("; "),
            recovery_ms: recovery,
        });
        Ok(())
    }
}

//! Scenarios: which faults, on what schedule, and what must come out.
//!
//! A scenario runs the workload, eosmirror and the live checker, then
//! repeats fault events until its duration is over: a seeded pause, one or
//! more faults injected together for a seeded time, the heal, and the wait
//! until everything the workload had committed at the heal is visible on
//! the target (the recovery time). Because each pause starts after the
//! previous recovery, the same seed gives the same schedule of faults,
//! whatever the machine's speed.
//!
//! One file per part: the fault kinds ([`FaultKind`]) and the scenario
//! catalogue; the state of a scenario in progress (`state`), its setup, the
//! schedule of fault events, the process faults and the one-off scripts
//! (source gap, recreated topic, cutover), and the end: the final catch-up
//! and judgement (`finish`) with the translated group check.

mod catalogue;
mod cutover;
mod finish;
mod gap;
mod group;
mod kinds;
mod process;
mod reads;
mod recreated;
mod schedule;
mod setup;
mod state;

use std::time::Instant;

use tokio::runtime::Runtime;

use super::report::{ScenarioReport, Status};
use super::rng::Rng;
use super::Config;
use kinds::unavailable;
use state::Run;

pub use catalogue::{find, Scenario, SCENARIOS};
pub use kinds::FaultKind;

/// Runs one scenario and reports it.
pub fn run(cfg: &Config, rt: &Runtime, sc: &Scenario) -> ScenarioReport {
    let seed = Rng::derive(cfg.seed, sc.name).next();
    let kinds: Vec<FaultKind> = sc
        .kinds
        .iter()
        .copied()
        .filter(|k| unavailable(cfg, *k).is_none())
        .collect();
    if kinds.is_empty() {
        let reason = unavailable(cfg, sc.kinds[0]).unwrap_or_default();
        return ScenarioReport::skipped(sc.name, sc.about, sc.expected, seed, reason);
    }
    let started = Instant::now();
    let mut s = match Run::setup(cfg, rt, sc, seed, kinds) {
        Ok(s) => s,
        Err(e) => {
            let mut r =
                ScenarioReport::skipped(sc.name, sc.about, sc.expected, seed, String::new());
            r.status = Status::Failed;
            r.skip_reason = None;
            r.deviations.push(format!("setup failed: {e:#}"));
            return r;
        }
    };
    if let Err(e) = s.faults() {
        s.deviations.push(format!("fault phase failed: {e:#}"));
    }
    s.finish(started)
}

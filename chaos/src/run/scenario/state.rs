//! One scenario in progress: what it runs and has seen so far, and the
//! helpers every phase uses (watching eosmirror, sleeping while watching,
//! waiting for the recovery after a heal).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::runtime::Runtime;

use super::catalogue::Scenario;
use super::kinds::{FaultKind, Side};
use crate::ledger::Ledger;
use crate::run::faults::ProxyGroup;
use crate::run::mirror::{Mirror, MirrorSpec};
use crate::run::report::FaultEvent;
use crate::run::rng::Rng;
use crate::run::tail::Tail;
use crate::run::workload::{lock, Workload};
use crate::run::Config;

/// How long recovery after one fault may take before it is a deviation.
pub(super) const RECOVERY_LIMIT: Duration = Duration::from_secs(180);
/// How long the final catch-up may take.
pub(super) const CATCH_UP_LIMIT: Duration = Duration::from_secs(300);
/// Partitions per workload stream that must receive new records after a
/// heal before recovery is timed against "copying flows again" (all of a
/// stream's partitions when it has fewer). With 1,000 partitions, waiting for
/// a new record in every one took the 200 records/s workload 98–117 s after
/// every heal, which timed the workload's coverage, not eosmirror.
const FRESH_PARTITIONS_PER_STREAM: usize = 16;

/// One scenario in progress.
pub(super) struct Run<'a> {
    pub(super) cfg: &'a Config,
    pub(super) rt: &'a Runtime,
    pub(super) sc: &'a Scenario,
    pub(super) seed: u64,
    pub(super) rng: Rng,
    pub(super) kinds: Vec<FaultKind>,
    pub(super) topic: String,
    pub(super) dir: PathBuf,
    pub(super) source_proxy: Option<ProxyGroup>,
    pub(super) target_proxy: Option<ProxyGroup>,
    pub(super) spec: MirrorSpec,
    /// Extra `eosmirror run` arguments (e.g. `--on.source.gap skip`).
    pub(super) extra: Vec<String>,
    pub(super) mirror: Option<Mirror>,
    pub(super) started_mirrors: usize,
    pub(super) workload: Option<Workload>,
    pub(super) tail: Tail,
    pub(super) group: String,
    pub(super) faults: Vec<FaultEvent>,
    pub(super) deviations: Vec<String>,
    pub(super) outcomes: Vec<String>,
    /// Connections the reset faults cut (the proxies' count): none at all
    /// means the scenario never tested what it names.
    pub(super) connections_reset: u64,
    pub(super) fault_phase: Instant,
    pub(super) gap_done: bool,
    /// The workload's run id (in every record it writes).
    pub(super) run_id: u64,
    /// The ledger of a workload a script finished early.
    pub(super) finished: Option<Arc<Mutex<Ledger>>>,
}

impl<'a> Run<'a> {
    pub(super) fn say(&self, text: &str) {
        if !self.cfg.quiet {
            eprintln!(
                "[{} +{:.0}s] {text}",
                self.sc.name,
                self.fault_phase.elapsed().as_secs_f64()
            );
        }
    }

    pub(super) fn start_mirror(&mut self) -> Result<()> {
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        self.mirror = Some(self.spec.start(self.started_mirrors, &extra)?);
        self.started_mirrors += 1;
        Ok(())
    }

    pub(super) fn mirror_tail(&self) -> String {
        self.mirror.as_ref().map(|m| m.tail(30)).unwrap_or_default()
    }

    /// Checks that eosmirror still runs; if it exited on its own, that is a
    /// deviation: it is noted and eosmirror restarted, so the run goes on.
    pub(super) fn watch(&mut self) {
        let Some(m) = self.mirror.as_mut() else {
            return;
        };
        if m.is_running() {
            return;
        }
        let text = format!(
            "eosmirror exited by itself (code {:?}, log {}); last lines:\n{}",
            m.exit,
            m.log.display(),
            m.tail(15)
        );
        self.say(&text);
        self.deviations.push(text);
        if let Err(e) = self.start_mirror() {
            self.deviations.push(format!("restarting eosmirror: {e:#}"));
        }
    }

    /// Sleeps `d` in small steps, watching eosmirror.
    pub(super) fn sleep(&mut self, d: Duration) {
        let end = Instant::now() + d;
        while Instant::now() < end {
            self.watch();
            std::thread::sleep(
                Duration::from_millis(100).min(end.saturating_duration_since(Instant::now())),
            );
        }
    }

    pub(super) fn committed_now(&self) -> BTreeMap<(u32, u8), u64> {
        let w = self.workload.as_ref().expect("workload running");
        lock(&w.ledger).committed_pseq.clone()
    }

    /// Waits until everything in `snapshot` is on the target; the time since
    /// `healed`, or `None` (a deviation) after `limit`.
    ///
    /// With `fresh`, the target moves on to the first records the workload
    /// commits after the heal (see [`moved_on`]): recovery then also means
    /// "copying flows again", which matters when nothing was left to copy at
    /// the heal (e.g. the source broker was down, so the workload could not
    /// write either).
    pub(super) fn recovery(
        &mut self,
        healed: Instant,
        snapshot: &BTreeMap<(u32, u8), u64>,
        fresh: bool,
        limit: Duration,
    ) -> Option<u64> {
        let mut target = (!fresh).then(|| snapshot.clone());
        loop {
            if target.is_none() {
                let now = self.committed_now();
                if moved_on(snapshot, &now) {
                    target = Some(now);
                }
            }
            if target.as_ref().is_some_and(|t| self.tail.covers(t)) {
                return Some(healed.elapsed().as_millis() as u64);
            }
            if healed.elapsed() > limit {
                let text = format!(
                    "not recovered within {limit:?} of the heal: {}; eosmirror's last lines:\n{}",
                    if target.is_none() {
                        "the workload committed nothing new"
                    } else {
                        "records the workload had committed are not on the target"
                    },
                    self.mirror_tail()
                );
                self.deviations.push(text);
                return None;
            }
            self.watch();
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(super) fn proxy(&self, side: Side) -> &ProxyGroup {
        match side {
            Side::Source => self.source_proxy.as_ref(),
            Side::Target => self.target_proxy.as_ref(),
        }
        .expect("proxy started for this path")
    }
}

/// Whether the workload committed records after `snapshot` (committed
/// sequence per partition and stream) in enough partitions of every stream
/// it holds: all of them, or [`FRESH_PARTITIONS_PER_STREAM`] when a stream
/// has more.
fn moved_on(snapshot: &BTreeMap<(u32, u8), u64>, now: &BTreeMap<(u32, u8), u64>) -> bool {
    let mut per_stream: BTreeMap<u8, (usize, usize)> = BTreeMap::new();
    for (key, before) in snapshot {
        let (held, advanced) = per_stream.entry(key.1).or_default();
        *held += 1;
        if now.get(key).is_some_and(|n| n > before) {
            *advanced += 1;
        }
    }
    per_stream
        .values()
        .all(|&(held, advanced)| advanced >= held.min(FRESH_PARTITIONS_PER_STREAM))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seqs(entries: &[((u32, u8), u64)]) -> BTreeMap<(u32, u8), u64> {
        entries.iter().copied().collect()
    }

    #[test]
    fn few_partitions_must_all_move_on() {
        let before = seqs(&[((0, 0), 5), ((1, 0), 7), ((0, 1), 2)]);
        let partly = seqs(&[((0, 0), 6), ((1, 0), 7), ((0, 1), 3)]);
        assert!(!moved_on(&before, &partly));
        let all = seqs(&[((0, 0), 6), ((1, 0), 8), ((0, 1), 3)]);
        assert!(moved_on(&before, &all));
    }

    #[test]
    fn many_partitions_need_enough_of_each_stream() {
        let before: BTreeMap<_, _> = (0..1000u32)
            .flat_map(|p| [((p, 0u8), 1u64), ((p, 1u8), 1u64)])
            .collect();
        let mut now = before.clone();
        for p in 0..FRESH_PARTITIONS_PER_STREAM as u32 {
            now.insert((p, 0), 2);
        }
        // Stream 1 has not committed anything new yet.
        assert!(!moved_on(&before, &now));
        for p in 0..FRESH_PARTITIONS_PER_STREAM as u32 - 1 {
            now.insert((500 + p, 1), 2);
        }
        assert!(!moved_on(&before, &now));
        now.insert((999, 1), 2);
        assert!(moved_on(&before, &now));
    }
}

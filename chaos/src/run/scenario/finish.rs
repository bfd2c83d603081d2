//! A scenario's end: the workload stops, the copy catches up, eosmirror
//! stops, and the judge's verdict, the deviations and the expected outcomes
//! make the report.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::kinds::FaultKind;
use super::reads::source_held;
use super::state::{Run, CATCH_UP_LIMIT};
use crate::checker::{compare_topic, TopicPair};
use crate::judge::Verdict;
use crate::ledger::Ledger;
use crate::run::report::{GroupCheck, Percentiles, ScenarioReport, Status};
use crate::run::workload::lock;

impl<'a> Run<'a> {
    /// Stops the workload, waits for the copy, stops eosmirror, judges.
    pub(super) fn finish(mut self, started: Instant) -> ScenarioReport {
        let ledger = match self.workload.take() {
            Some(workload) => workload.finish(),
            None => self.finished.take().expect("a finished workload's ledger"),
        };
        let snapshot = lock(&ledger).committed_pseq.clone();
        let t = Instant::now();
        if self.recovery(t, &snapshot, false, CATCH_UP_LIMIT).is_some() {
            self.say(&format!(
                "caught up {:.1}s after the workload stopped",
                t.elapsed().as_secs_f64()
            ));
        }
        self.watch();
        if let Some(m) = self.mirror.as_mut() {
            match m.stop(Duration::from_secs(90)) {
                Some(0) => {}
                other => self.deviations.push(format!(
                    "eosmirror did not stop cleanly on SIGTERM ({other:?}); last lines:\n{}",
                    m.tail(15)
                )),
            }
        }
        if let Err(e) = self.tail.reach_end(Duration::from_secs(120)) {
            self.deviations.push(format!("{e:#}"));
        }
        self.tail.stop();
        let ledger = lock(&ledger).clone();
        let verdict = self.verdict(&ledger);
        let group = self.check_group();
        for p in [self.source_proxy.take(), self.target_proxy.take()]
            .into_iter()
            .flatten()
        {
            p.shutdown(self.rt);
        }
        let mut fault_counts = BTreeMap::new();
        for f in &self.faults {
            for k in &f.kinds {
                *fault_counts.entry(k.clone()).or_insert(0) += 1;
            }
        }
        let recoveries: Vec<u64> = self.faults.iter().filter_map(|f| f.recovery_ms).collect();
        if verdict.total.absent_at_source > 0 {
            self.say(&format!(
                "{} records acknowledged to the workload are on neither cluster: the source lost them, not eosmirror",
                verdict.total.absent_at_source
            ));
        }
        if verdict.total.duplicated_at_source > 0 {
            self.say(&format!(
                "{} records are held twice by the source itself, and the copy is exact: the source duplicated them, not eosmirror",
                verdict.total.duplicated_at_source
            ));
        }
        let resets_injected = self.faults.iter().any(|f| {
            f.kinds
                .iter()
                .any(|k| k == FaultKind::TargetReset.name() || k == FaultKind::SourceReset.name())
        });
        if resets_injected && self.connections_reset == 0 {
            let cut_nothing = "the reset faults cut no connection (eosmirror had none open through the proxy when they fired)";
            if self.sc.name == "combined" {
                // Drawn at random among others: a blackhole or a broker kill
                // just before may have closed every connection already.
                self.say(&format!("{cut_nothing}; the other faults were tested"));
            } else {
                self.deviations.push(format!(
                    "{cut_nothing}: what the scenario names was not tested"
                ));
            }
        }
        if verdict.total.unreplicated > 0 {
            self.deviations.push(format!(
                "{} committed records never reached the target (the copy did not catch up)",
                verdict.total.unreplicated
            ));
        }
        let failed = verdict.total.anomalies() > 0
            || !self.deviations.is_empty()
            || matches!(group, GroupCheck::Failed(_))
            || (self
                .sc
                .kinds
                .iter()
                .any(|k| *k == FaultKind::SourceGap || k.is_scripted())
                && self.outcomes.is_empty())
            || (self.sc.name == "zombie" && !self.outcomes.iter().any(|o| o.contains("zombie")));
        ScenarioReport {
            name: self.sc.name.into(),
            about: self.sc.about.into(),
            expected: self.sc.expected.into(),
            seed: self.seed,
            status: if failed {
                Status::Failed
            } else {
                Status::Passed
            },
            skip_reason: None,
            topic: self.topic.clone(),
            dir: self.dir.display().to_string(),
            duration_secs: started.elapsed().as_secs_f64(),
            faults: self.faults.clone(),
            fault_counts,
            written: ledger.written,
            verdict,
            recovery: Percentiles::of(&recoveries),
            outcomes: self.outcomes.clone(),
            deviations: self.deviations.clone(),
            group,
        }
    }

    /// The judge's verdict. Records it counts lost are looked up in the
    /// source's log: one the source does not hold either was lost before
    /// eosmirror could read it, and is reported as absent at the source.
    ///
    /// Then the copy is compared with the source record for record, which
    /// the judge's ledger cannot do alone: it knows writes whose outcome at
    /// the source was uncertain (a commit cut off by a broker kill) only as
    /// allowed, not as committed or aborted, and it orders records only per
    /// key and per producer. Any difference is a deviation; with none,
    /// duplicates the judge counted are the source's own. Not done when
    /// the source topic was recreated (its old records are gone by design);
    /// after a gap, partition 0 is left out (the copy holds records the
    /// source deleted after they were copied) and the judge's duplicates
    /// stand, as that partition cannot tell whose they are.
    fn verdict(&mut self, ledger: &Ledger) -> Verdict {
        let mut verdict = self.verdict_of_lost(ledger);
        if self.sc.kinds.contains(&FaultKind::SourceTopicRecreated) {
            return verdict;
        }
        let gap = self.sc.kinds.contains(&FaultKind::SourceGap);
        let topics = TopicPair {
            source: self.topic.clone(),
            target: self.topic.clone(),
        };
        match compare_topic(
            &self.cfg.source.checker_side(),
            &self.cfg.target.checker_side(),
            &topics,
            Duration::from_secs(120),
        ) {
            Ok(reports) => {
                let differences: Vec<String> = reports
                    .iter()
                    .filter(|r| !(gap && r.partition == 0))
                    .filter_map(|r| {
                        r.first_difference
                            .as_ref()
                            .map(|d| format!("partition {}: {d:?}", r.partition))
                    })
                    .collect();
                if differences.is_empty() {
                    if !gap {
                        verdict.duplicates_held_by_source();
                    }
                } else {
                    self.deviations.push(format!(
                        "the copy differs from the source record for record: {}",
                        differences.join("; ")
                    ));
                }
            }
            Err(e) => self.deviations.push(format!(
                "could not compare the copy with the source record for record: {e}"
            )),
        }
        verdict
    }

    /// The judge's verdict, with lost records looked up in the source's log
    /// (see [`Run::verdict`]).
    fn verdict_of_lost(&mut self, ledger: &Ledger) -> Verdict {
        let verdict = self.tail.with_judge(|j| j.verdict(ledger, None));
        if verdict.total.lost == 0 || self.sc.kinds.contains(&FaultKind::SourceTopicRecreated) {
            return verdict;
        }
        let mut partitions: BTreeSet<i32> = verdict
            .partitions
            .iter()
            .filter(|(_, t)| t.lost > 0)
            .map(|(&p, _)| p)
            .collect();
        // The gap deleted partition 0's log below the doomed records, so
        // the source holds none of its earlier records: a record eosmirror
        // lost there would pass as lost at the source. The ledger already
        // knows the doomed ones as deleted; every other loss there counts.
        if self.sc.kinds.contains(&FaultKind::SourceGap) {
            partitions.remove(&0);
        }
        if partitions.is_empty() {
            return verdict;
        }
        match source_held(&self.cfg.source, &self.topic, &partitions, self.run_id) {
            Ok(held) => self.tail.with_judge(|j| j.verdict(ledger, Some(&held))),
            Err(e) => {
                self.deviations.push(format!(
                    "could not read the source to check the lost records: {e:#}"
                ));
                verdict
            }
        }
    }
}

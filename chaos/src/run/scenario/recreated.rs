//! The recreated-topic script: the source topic deleted and created again
//! under the same name must stop eosmirror with an error naming it.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::kinds::FaultKind;
use super::state::{Run, RECOVERY_LIMIT};
use crate::run::report::FaultEvent;
use crate::run::workload::{lock, write_strangers};

impl<'a> Run<'a> {
    /// Scenario 11: the source topic deleted and created again under the
    /// same name while eosmirror runs, then written to by another run (so
    /// the judge counts any copy of the new topic as unexpected).
    pub(super) fn source_topic_recreated(&mut self) -> Result<()> {
        let at = self.fault_phase.elapsed().as_secs_f64();
        // Everything of the old topic is copied first: what it held when
        // deleted is then gone from the source, not lost by eosmirror.
        let ledger = self.workload.take().expect("workload running").finish();
        let snapshot = lock(&ledger).committed_pseq.clone();
        self.finished = Some(ledger);
        if self
            .recovery(Instant::now(), &snapshot, false, RECOVERY_LIMIT)
            .is_none()
        {
            return Ok(());
        }
        // More records than the old topic had: resuming at the old
        // positions would then skip the new topic's first records and
        // append the rest to the old copy, silently.
        let old_end = self
            .cfg
            .source
            .ends(&self.topic, self.cfg.partitions)?
            .into_iter()
            .max()
            .unwrap_or(0);
        let strangers = old_end as usize + 20;
        self.cfg.source.delete_topic(&self.topic)?;
        // The broker refuses the name for a moment after the deletion.
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Err(e) = self
            .cfg
            .source
            .create_topic(&self.topic, self.cfg.partitions)
        {
            if Instant::now() > deadline {
                return Err(e.context("recreating the source topic"));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        write_strangers(
            &self.cfg.source,
            &self.topic,
            self.cfg.partitions,
            strangers,
            !self.run_id,
        )?;
        let recreated = Instant::now();
        self.say("source topic deleted and recreated; eosmirror must stop naming it");
        let mut m = self.mirror.take().expect("eosmirror running");
        let code = m.wait_exit(Duration::from_secs(120));
        let named = m
            .output()
            .contains("the source topic was deleted and created again");
        match code {
            Some(c) if c != 0 && named => self.outcomes.push(format!(
                "eosmirror exited {c} naming the recreated topic {}",
                self.topic
            )),
            Some(c) => self.deviations.push(format!(
                "eosmirror exited {c} without naming the recreated topic; last lines:\n{}",
                m.tail(15)
            )),
            None => {
                m.kill();
                self.deviations.push(format!(
                    "eosmirror went on for 120 s after the source topic was recreated (silence); last lines:\n{}",
                    m.tail(15)
                ));
            }
        }
        self.faults.push(FaultEvent {
            at_secs: at,
            kinds: vec![FaultKind::SourceTopicRecreated.name().into()],
            detail: format!(
                "source topic deleted and recreated, {strangers} records per partition of another run written to it"
            ),
            recovery_ms: code.map(|_| recreated.elapsed().as_millis() as u64),
        });
        Ok(())
    }
}

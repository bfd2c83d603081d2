//! The open-transaction script: `eosmirror cutover` must not complete while
//! a source transaction is open, and must once it commits.

use std::fs;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::kinds::FaultKind;
use super::state::{Run, RECOVERY_LIMIT};
use crate::run::report::FaultEvent;

impl<'a> Run<'a> {
    /// Scenario 12: cutover while a source transaction is held open, then
    /// again after it commits.
    pub(super) fn open_transaction_at_cutover(&mut self) -> Result<()> {
        let at = self.fault_phase.elapsed().as_secs_f64();
        let workload = self.workload.as_mut().expect("workload running");
        // Cutover is for a stopped stream: the producers stop first.
        workload.pause(Duration::from_secs(120))?;
        let snapshot = self.committed_now();
        self.recovery(Instant::now(), &snapshot, false, RECOVERY_LIMIT);
        let partition = self.rng.range(0, self.cfg.partitions as u64) as i32;
        let held = self
            .workload
            .as_mut()
            .expect("workload running")
            .hold_transaction(partition, 10)?;
        self.say(&format!(
            "source transaction held open on partition {partition}; cutover must not complete"
        ));
        let (code, report) = self.cutover(0, Duration::from_secs(5))?;
        let named = format!("{}-{partition} (offsets [", self.topic);
        if code != Some(0) && report.contains("NOT COMPLETE") && report.contains(&named) {
            self.outcomes.push(format!(
                "cutover did not complete while a transaction held {}-{partition}, and named it",
                self.topic
            ));
        } else {
            self.deviations.push(format!(
                "cutover with a source transaction open on {}-{partition} exited {code:?}:\n{report}",
                self.topic
            ));
        }
        held.commit()?;
        let committed = Instant::now();
        let (code, report) = self.cutover(1, Duration::from_secs(120))?;
        let completed = code == Some(0) && report.contains("cutover: COMPLETE");
        if completed {
            self.outcomes
                .push("cutover completed once the transaction committed".into());
        } else {
            self.deviations.push(format!(
                "cutover after the transaction committed exited {code:?}:\n{report}"
            ));
        }
        self.faults.push(FaultEvent {
            at_secs: at,
            kinds: vec![FaultKind::OpenSourceTransaction.name().into()],
            detail: format!("10 records of partition {partition} in a transaction held open through one cutover, committed before a second"),
            recovery_ms: completed.then(|| committed.elapsed().as_millis() as u64),
        });
        self.workload.as_ref().expect("workload running").resume();
        Ok(())
    }

    /// Runs `eosmirror cutover` for the workload's group (directly to both
    /// clusters); its exit code and report, also kept in `cutover-<n>.log`.
    fn cutover(&self, n: usize, timeout: Duration) -> Result<(Option<i32>, String)> {
        let out = std::process::Command::new(&self.cfg.eosmirror)
            .arg("cutover")
            .arg("--consumer.config")
            .arg(self.dir.join("consumer-direct.properties"))
            .arg("--producer.config")
            .arg(self.dir.join("producer-direct.properties"))
            .args(["--source.alias", &self.spec.alias, "--include", &self.topic])
            .args(["--groups", &self.group])
            .args(["--timeout.ms", &timeout.as_millis().to_string()])
            .output()?;
        let report = String::from_utf8_lossy(&out.stdout).into_owned();
        fs::write(
            self.dir.join(format!("cutover-{n}.log")),
            [&out.stdout[..], &out.stderr[..]].concat(),
        )?;
        Ok((out.status.code(), report))
    }
}

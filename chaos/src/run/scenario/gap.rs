//! The source-gap script: records deleted at the source before eosmirror
//! copied them must stop their partition with an error naming them.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::state::{Run, RECOVERY_LIMIT};

impl<'a> Run<'a> {
    /// Scenario 10: records deleted at the source before they were copied.
    pub(super) fn source_gap(&mut self, detail: &mut Vec<String>) -> Result<()> {
        self.gap_done = true;
        let workload = self.workload.as_ref().expect("workload running");
        workload.pause(Duration::from_secs(120))?;
        let snapshot = self.committed_now();
        let caught_up = Instant::now();
        self.recovery(caught_up, &snapshot, false, RECOVERY_LIMIT);
        if let Some(m) = self.mirror.as_mut() {
            if m.stop(Duration::from_secs(60)) != Some(0) {
                self.deviations.push(format!(
                    "eosmirror did not stop cleanly before the gap; last lines:\n{}",
                    m.tail(15)
                ));
            }
        }
        let before = self.cfg.source.ends(&self.topic, 1)?[0];
        let doomed = self
            .workload
            .as_mut()
            .expect("workload")
            .write_doomed(0, 20)?;
        let after = self.cfg.source.ends(&self.topic, 1)?[0];
        self.cfg.source.delete_records(&self.topic, 0, after)?;
        detail.push(format!(
            "{} records at offsets {before}..{after} of partition 0 deleted uncopied",
            doomed.len()
        ));
        self.say(&format!(
            "deleted {before}..{after} of partition 0 before eosmirror could copy them"
        ));
        // Expected: partition 0 stopped with a named error, not silence;
        // the others copied on (the judge checks them); at shutdown, an
        // exit status that says a partition was stopped.
        self.start_mirror()?;
        let m = self.mirror.as_mut().expect("started");
        let named = format!("{}-0: source records at offsets ", self.topic);
        let named_line = |out: &str| {
            out.lines()
                .find(|l| l.contains(&named) && l.contains("were deleted"))
                .map(str::to_string)
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while named_line(&m.output()).is_none() && m.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        let code = m.stop(Duration::from_secs(60));
        let line = named_line(&m.output());
        match (code, line) {
            (Some(c), Some(line)) if c != 0 => {
                let range = line
                    .split(&named)
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .unwrap_or_default()
                    .to_string();
                let end_ok = range.ends_with(&format!("..{after}"));
                if end_ok {
                    self.outcomes.push(format!("eosmirror stopped partition 0 naming the gap {}-0 offsets {range} and exited {c} at shutdown", self.topic));
                } else {
                    self.deviations.push(format!("eosmirror named the gap as {range}, but records up to {after} were deleted"));
                }
            }
            (Some(c), _) => self.deviations.push(format!(
                "eosmirror exited {c} without naming the gap ({named}…were deleted) within 120 s; last lines:\n{}",
                m.tail(15)
            )),
            (None, _) => {
                m.kill();
                self.deviations.push(format!("eosmirror did not stop on SIGTERM after the gap; last lines:\n{}", m.tail(15)));
            }
        }
        // Accept the loss and go on.
        self.extra = vec!["--on.source.gap".into(), "skip".into()];
        self.start_mirror()?;
        self.workload.as_ref().expect("workload").resume();
        Ok(())
    }
}

//! The translated group check: after `eosmirror translate --apply`, the
//! workload's group resumes on the target exactly where it stopped on the
//! source.

use std::fs;

use anyhow::Result;

use super::kinds::FaultKind;
use super::reads::{committed, holds_from, FirstRecords};
use super::state::Run;
use crate::run::mirror::has_translate;
use crate::run::report::GroupCheck;

impl<'a> Run<'a> {
    /// Translated group offsets: after `eosmirror translate --apply`, a
    /// consumer of the workload's group on the target starts exactly at the
    /// copy of the first record the group had not consumed on the source.
    pub(super) fn check_group(&self) -> GroupCheck {
        if !has_translate(&self.cfg.eosmirror) {
            return GroupCheck::NotRun("eosmirror has no translate command".into());
        }
        if self.sc.kinds.contains(&FaultKind::SourceTopicRecreated) {
            return GroupCheck::NotRun(
                "the source topic was recreated: the group's offsets were offsets of the deleted one"
                    .into(),
            );
        }
        match self.translate_and_compare() {
            Ok(Ok(detail)) => GroupCheck::Passed(detail),
            Ok(Err(detail)) => GroupCheck::Failed(detail),
            Err(e) => GroupCheck::Failed(format!("{e:#}")),
        }
    }

    fn translate_and_compare(&self) -> Result<std::result::Result<String, String>> {
        let out = std::process::Command::new(&self.cfg.eosmirror)
            .arg("translate")
            .arg("--consumer.config")
            .arg(self.dir.join("consumer-direct.properties"))
            .arg("--producer.config")
            .arg(self.dir.join("producer-direct.properties"))
            .args([
                "--source.alias",
                &self.spec.alias,
                "--group",
                &self.group,
                "--topic",
                &self.topic,
                "--apply",
            ])
            .output()?;
        fs::write(
            self.dir.join("translate.log"),
            [&out.stdout[..], &out.stderr[..]].concat(),
        )?;
        if !out.status.success() {
            return Ok(Err(format!(
                "eosmirror translate --apply failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let mut problems = Vec::new();
        let mut consumed = 0;
        let partitions = self.cfg.partitions;
        let source_offsets = committed(&self.cfg.source, &self.group, &self.topic, partitions)?;
        let target_offsets = committed(&self.cfg.target, &self.group, &self.topic, partitions)?;
        let source_starts = self.cfg.source.log_starts(&self.topic, partitions)?;
        let target_starts = self.cfg.target.log_starts(&self.topic, partitions)?;
        let source = FirstRecords::new(&self.cfg.source, &self.topic)?;
        let target = FirstRecords::new(&self.cfg.target, &self.topic)?;
        for p in 0..partitions {
            let low = source_starts[p as usize];
            // A partition without a committed offset starts at its log start.
            let src = source_offsets[p as usize].unwrap_or(low);
            let tgt = target_offsets[p as usize].unwrap_or(target_starts[p as usize]);
            // A group can have consumed records that were deleted later
            // (the source-gap scenario): it resumes at the log start then.
            let want = source.at(p, src.max(low))?;
            let have = target.at(p, tgt)?;
            consumed += src;
            // The group's committed offset deleted at the source after it
            // was copied: the source would reset to its log start, while
            // the target still holds those copies. The exact translation
            // resumes at them; accepted if the source's next record follows
            // (nothing the source still holds is skipped).
            let rereads_deleted_copies = src < low
                && match want {
                    Some(id) => holds_from(&self.cfg.target, &self.topic, p, tgt, id)?,
                    None => true,
                };
            if want != have && !rereads_deleted_copies {
                problems.push(format!(
                    "partition {p}: source group at offset {src} resumes at {want:?}; target group at {tgt} resumes at {have:?}"
                ));
            }
        }
        Ok(if problems.is_empty() {
            Ok(format!("{} partitions: the target group resumes exactly where the source group stopped (source offsets summed {consumed})", self.cfg.partitions))
        } else {
            Err(problems.join("; "))
        })
    }
}

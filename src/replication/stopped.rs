//! Partitions stopped by an error of their own.
//!
//! One bad partition (a gap, a rejected record, a recreated topic) must not
//! stop hundreds of others, nor keep its lane's transactions aborting: it
//! is taken out of its lane, reported by name (log, metric, and the run's
//! exit status), and the lane goes on copying the rest. Restarting
//! eosmirror (with the fix the error names) retries it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use eosmirror_state::SourcePartition;

use super::failure::WorkerError;
use crate::metrics as m;

/// How many stopped partitions the run's final error lists by name (the
/// log has every one).
const LISTED: usize = 10;

/// The stopped partitions of this run and why, shared by the supervisor and
/// the lanes.
#[derive(Debug, Default)]
pub struct StoppedPartitions {
    errors: Mutex<BTreeMap<SourcePartition, String>>,
}

impl StoppedPartitions {
    /// Stops `partition` for `error` (its first error wins).
    pub fn stop(&self, partition: &SourcePartition, error: &WorkerError) {
        let mut errors = self.errors.lock().expect("stopped partitions poisoned");
        if errors.contains_key(partition) {
            return;
        }
        tracing::error!(%partition, error = %error, "partition stopped; its lane copies the others. Restart eosmirror after the fix the error names to copy it again");
        errors.insert(partition.clone(), error.to_string());
        m::partition_stopped(partition);
        m::partitions_stopped(errors.len());
    }

    pub fn contains(&self, partition: &SourcePartition) -> bool {
        self.errors
            .lock()
            .expect("stopped partitions poisoned")
            .contains_key(partition)
    }

    pub fn is_empty(&self) -> bool {
        self.errors
            .lock()
            .expect("stopped partitions poisoned")
            .is_empty()
    }

    /// Every stopped partition and its error (for the status topic).
    pub fn entries(&self) -> Vec<(SourcePartition, String)> {
        self.errors
            .lock()
            .expect("stopped partitions poisoned")
            .iter()
            .map(|(p, e)| (p.clone(), e.clone()))
            .collect()
    }

    /// Whether every one of `partitions` (a non-empty set) is stopped:
    /// nothing is left to copy.
    pub fn all<'a>(&self, mut partitions: impl Iterator<Item = &'a SourcePartition>) -> bool {
        let errors = self.errors.lock().expect("stopped partitions poisoned");
        let mut any = false;
        let all = partitions.all(|p| {
            any = true;
            errors.contains_key(p)
        });
        any && all
    }

    /// The errors, for the run's final message: the first few in full.
    pub fn summary(&self) -> String {
        let errors = self.errors.lock().expect("stopped partitions poisoned");
        let mut text: Vec<String> = errors.values().take(LISTED).cloned().collect();
        if errors.len() > LISTED {
            text.push(format!("and {} more (see the log)", errors.len() - LISTED));
        }
        format!("{} partition(s) stopped: {}", errors.len(), text.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gap(p: i32) -> WorkerError {
        WorkerError::SourceGap {
            source_partition: SourcePartition::new("t", p),
            first: 1,
            end_exclusive: 2,
        }
    }

    #[test]
    fn all_means_every_one_of_a_non_empty_set() {
        let stopped = StoppedPartitions::default();
        let (a, b) = (SourcePartition::new("t", 0), SourcePartition::new("t", 1));
        assert!(!stopped.all([].iter()));
        stopped.stop(&a, &gap(0));
        assert!(stopped.contains(&a) && !stopped.contains(&b));
        assert!(!stopped.all([a.clone(), b.clone()].iter()));
        stopped.stop(&b, &gap(1));
        assert!(stopped.all([a, b].iter()));
    }

    #[test]
    fn the_first_error_wins_and_the_summary_is_bounded() {
        let stopped = StoppedPartitions::default();
        for p in 0..15 {
            stopped.stop(&SourcePartition::new("t", p), &gap(p));
        }
        stopped.stop(
            &SourcePartition::new("t", 0),
            &WorkerError::OrderViolated {
                source_partition: SourcePartition::new("t", 0),
                source_offset: 9,
            },
        );
        let summary = stopped.summary();
        assert!(
            summary.starts_with("15 partition(s) stopped: t-0: source records"),
            "{summary}"
        );
        assert!(summary.ends_with("and 5 more (see the log)"), "{summary}");
    }
}

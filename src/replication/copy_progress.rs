//! How far the copy is: records copied since the start and still to copy,
//! for the progress line a backfill logs every `--log.progress.ms`.
//!
//! Lanes report each partition's committed position (at every commit) and
//! its source end (with their lag report); the supervisor logs the sums.
//! Nothing here decides anything: it is a report.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use eosmirror_state::SourcePartition;

/// Records still to copy above which the run counts as a backfill and logs
/// a progress line every interval. Below it, a live mirror's normal lag.
pub const BACKFILL_MIN_REMAINING: u64 = 10_000;

/// Copied and remaining records over all partitions.
#[derive(Debug, Default)]
pub struct CopyProgress {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Per partition: next source offset to copy, source end last seen.
    partitions: HashMap<SourcePartition, (i64, i64)>,
    copied: u64,
}

/// What [`CopyProgress`] held at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// Records committed on the target since this process started.
    pub copied: u64,
    /// Records between the committed positions and the source ends.
    pub remaining: u64,
}

impl CopyProgress {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("copy progress poisoned")
    }

    /// A partition's position and source end (session start, lag report).
    pub fn position(&self, partition: &SourcePartition, next: i64, end: i64) {
        let mut inner = self.inner();
        match inner.partitions.get_mut(partition) {
            Some(known) => *known = (next, end),
            None => {
                inner.partitions.insert(partition.clone(), (next, end));
            }
        }
    }

    /// A commit moved a partition to `next`, copying `records` (on every
    /// commit: the key is cloned only for a partition seen the first time).
    pub fn committed(&self, partition: &SourcePartition, next: i64, records: u64) {
        let mut inner = self.inner();
        inner.copied += records;
        match inner.partitions.get_mut(partition) {
            Some((known_next, end)) => {
                *known_next = next;
                *end = (*end).max(next);
            }
            None => {
                inner.partitions.insert(partition.clone(), (next, next));
            }
        }
    }

    /// A partition left this process (stopped, or its lane ended).
    pub fn forget(&self, partition: &SourcePartition) {
        self.inner().partitions.remove(partition);
    }

    /// Each partition's next source offset and source end last seen (for
    /// the status topic's per-lane rates and remaining records).
    pub fn partitions(&self) -> Vec<(SourcePartition, i64, i64)> {
        self.inner()
            .partitions
            .iter()
            .map(|(p, &(next, end))| (p.clone(), next, end))
            .collect()
    }

    pub fn snapshot(&self) -> Snapshot {
        let inner = self.inner();
        Snapshot {
            copied: inner.copied,
            remaining: inner
                .partitions
                .values()
                .map(|&(next, end)| (end - next).max(0) as u64)
                .sum(),
        }
    }
}

/// One interval's progress report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Report {
    /// More than [`BACKFILL_MIN_REMAINING`] records to copy.
    Backfill {
        copied: u64,
        total: u64,
        remaining: u64,
        records_per_sec: f64,
        /// `None` when nothing was copied in the interval.
        eta: Option<Duration>,
    },
    /// The backfill reported before caught up.
    CaughtUp { copied: u64, remaining: u64 },
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Report::Backfill {
                copied,
                total,
                remaining,
                records_per_sec,
                eta,
            } => {
                write!(
                    f,
                    "backfill: copied {copied} of {total} records ({:.1}%), {records_per_sec:.0} records/s, {remaining} to go, ETA ",
                    100.0 * copied as f64 / total.max(1) as f64
                )?;
                match eta {
                    Some(eta) => write!(f, "{} s", eta.as_secs()),
                    None => write!(f, "unknown (nothing copied in this interval)"),
                }
            }
            Report::CaughtUp { copied, remaining } => write!(
                f,
                "backfill done: caught up ({copied} records copied since start, {remaining} to go)"
            ),
        }
    }
}

/// The report for one interval, if one is due: during a backfill copied of
/// total, rate and ETA; once after it, that the copy caught up.
pub fn report(
    before: Snapshot,
    now: Snapshot,
    interval: Duration,
    in_backfill: &mut bool,
) -> Option<Report> {
    let records_per_sec =
        now.copied.saturating_sub(before.copied) as f64 / interval.as_secs_f64().max(0.001);
    if now.remaining > BACKFILL_MIN_REMAINING {
        *in_backfill = true;
        return Some(Report::Backfill {
            copied: now.copied,
            total: now.copied + now.remaining,
            remaining: now.remaining,
            records_per_sec,
            eta: (records_per_sec > 0.0).then(|| {
                Duration::from_secs((now.remaining as f64 / records_per_sec).ceil() as u64)
            }),
        });
    }
    std::mem::take(in_backfill).then_some(Report::CaughtUp {
        copied: now.copied,
        remaining: now.remaining,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_positions_and_ends_over_partitions() {
        let progress = CopyProgress::default();
        let (a, b) = (SourcePartition::new("t", 0), SourcePartition::new("t", 1));
        progress.position(&a, 0, 30_000);
        progress.position(&b, 100, 100);
        assert_eq!(
            progress.snapshot(),
            Snapshot {
                copied: 0,
                remaining: 30_000
            }
        );
        progress.committed(&a, 12_000, 12_000);
        progress.committed(&b, 150, 50);
        assert_eq!(
            progress.snapshot(),
            Snapshot {
                copied: 12_050,
                remaining: 18_000
            }
        );
        progress.forget(&a);
        assert_eq!(progress.snapshot().remaining, 0);
    }

    #[test]
    fn a_backfill_logs_rate_and_eta_then_once_that_it_caught_up() {
        let mut backfill = false;
        let second = Duration::from_secs(1);
        let at = |copied, remaining| Snapshot { copied, remaining };
        assert_eq!(report(at(0, 500), at(10, 490), second, &mut backfill), None);
        let line = report(at(0, 40_000), at(10_000, 30_000), second, &mut backfill).unwrap();
        assert_eq!(
            line.to_string(),
            "backfill: copied 10000 of 40000 records (25.0%), 10000 records/s, 30000 to go, ETA 3 s"
        );
        let stalled = report(
            at(10_000, 30_000),
            at(10_000, 30_000),
            second,
            &mut backfill,
        );
        assert!(stalled
            .unwrap()
            .to_string()
            .ends_with("ETA unknown (nothing copied in this interval)"));
        let done = report(at(10_000, 30_000), at(40_000, 0), second, &mut backfill);
        assert_eq!(
            done.map(|d| d.to_string()).as_deref(),
            Some("backfill done: caught up (40000 records copied since start, 0 to go)")
        );
        assert_eq!(
            report(at(40_000, 0), at(40_000, 0), second, &mut backfill),
            None
        );
    }
}

//! How far the copy is: records copied since the start and still to copy,
//! for the progress line a backfill logs every `--log.progress.ms`.
//!
//! Lanes report each partition's committed position (at every commit) and
//! its source end (with their lag report); the supervisor logs the sums.
//! A lane's partitions count as its session reads their positions from
//! the target; until every lane of this process has read them all, the
//! total still grows, and the line says so. A lane that ends (moved to
//! another instance, stopped) takes its partitions out of the sums.
//! Nothing here decides anything: it is a report.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use eosmirror_state::SourcePartition;

use super::layout::Lane;

/// Records still to copy above which the run counts as a backfill and logs
/// a progress line every interval. Below it, a live mirror's normal lag.
pub const BACKFILL_MIN_REMAINING: u64 = 10_000;

/// Copied and remaining records over the partitions of this process's lanes.
#[derive(Debug, Default)]
pub struct CopyProgress {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    lanes: HashMap<Lane, LaneProgress>,
    copied: u64,
}

#[derive(Debug, Default)]
struct LaneProgress {
    /// Whether a session of the lane has read its partitions' positions.
    positions_read: bool,
    /// Per partition: next source offset to copy, source end last seen.
    partitions: HashMap<SourcePartition, (i64, i64)>,
}

/// What [`CopyProgress`] held at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// Records committed on the target since this process started.
    pub copied: u64,
    /// Records between the committed positions and the source ends.
    pub remaining: u64,
    /// Lanes of this process still reading their positions: their
    /// partitions are not all in `remaining` yet.
    pub lanes_reading: usize,
}

impl CopyProgress {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("copy progress poisoned")
    }

    /// A lane started in this process; its positions are not read yet.
    pub fn lane_started(&self, lane: Lane) {
        self.inner().lanes.entry(lane).or_default();
    }

    /// A session of `lane` read the positions of `partitions` (the lane's
    /// partitions now; any other it reported before left it).
    pub fn positions_read<'p>(
        &self,
        lane: Lane,
        partitions: impl IntoIterator<Item = &'p SourcePartition>,
    ) {
        let now: HashSet<&SourcePartition> = partitions.into_iter().collect();
        let mut inner = self.inner();
        let progress = inner.lanes.entry(lane).or_default();
        progress.positions_read = true;
        progress.partitions.retain(|p, _| now.contains(p));
    }

    /// The lane ended in this process: its partitions are no longer this
    /// process's to report.
    pub fn lane_ended(&self, lane: Lane) {
        self.inner().lanes.remove(&lane);
    }

    /// A partition's position and source end (session start, lag report).
    pub fn position(&self, lane: Lane, partition: &SourcePartition, next: i64, end: i64) {
        let mut inner = self.inner();
        let partitions = &mut inner.lanes.entry(lane).or_default().partitions;
        match partitions.get_mut(partition) {
            Some(known) => *known = (next, end),
            None => {
                partitions.insert(partition.clone(), (next, end));
            }
        }
    }

    /// A commit moved a partition to `next`, copying `records` (on every
    /// commit: the key is cloned only for a partition seen the first time).
    pub fn committed(&self, lane: Lane, partition: &SourcePartition, next: i64, records: u64) {
        let mut inner = self.inner();
        inner.copied += records;
        let partitions = &mut inner.lanes.entry(lane).or_default().partitions;
        match partitions.get_mut(partition) {
            Some((known_next, end)) => {
                *known_next = next;
                *end = (*end).max(next);
            }
            None => {
                partitions.insert(partition.clone(), (next, next));
            }
        }
    }

    /// A partition left this process (stopped).
    pub fn forget(&self, lane: Lane, partition: &SourcePartition) {
        if let Some(progress) = self.inner().lanes.get_mut(&lane) {
            progress.partitions.remove(partition);
        }
    }

    /// Each partition's next source offset and source end last seen (for
    /// the status topic's per-lane rates and remaining records).
    pub fn partitions(&self) -> Vec<(SourcePartition, i64, i64)> {
        self.inner()
            .lanes
            .values()
            .flat_map(|l| l.partitions.iter())
            .map(|(p, &(next, end))| (p.clone(), next, end))
            .collect()
    }

    pub fn snapshot(&self) -> Snapshot {
        let inner = self.inner();
        Snapshot {
            copied: inner.copied,
            remaining: inner
                .lanes
                .values()
                .flat_map(|l| l.partitions.values())
                .map(|&(next, end)| (end - next).max(0) as u64)
                .sum(),
            lanes_reading: inner.lanes.values().filter(|l| !l.positions_read).count(),
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
        /// Lanes whose partitions `total` does not count yet.
        lanes_reading: usize,
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
                lanes_reading,
            } => {
                write!(
                    f,
                    "backfill: copied {copied} of {total} records ({:.1}%), {records_per_sec:.0} records/s, {remaining} to go, ETA ",
                    100.0 * copied as f64 / total.max(1) as f64
                )?;
                match eta {
                    Some(eta) => write!(f, "{} s", eta.as_secs())?,
                    None => write!(f, "unknown (nothing copied in this interval)")?,
                }
                if lanes_reading > 0 {
                    write!(
                        f,
                        "; {lanes_reading} lane(s) still reading their positions, so the total will grow"
                    )?;
                }
                Ok(())
            }
            Report::CaughtUp { copied, remaining } => write!(
                f,
                "backfill done: caught up ({copied} records copied since start, {remaining} to go)"
            ),
        }
    }
}

/// The report for one interval, if one is due: during a backfill copied of
/// total, rate and ETA; once after it, that the copy caught up (never
/// while a lane still reads its positions: its records may be waiting).
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
            lanes_reading: now.lanes_reading,
        });
    }
    if now.lanes_reading > 0 {
        return None;
    }
    std::mem::take(in_backfill).then_some(Report::CaughtUp {
        copied: now.copied,
        remaining: now.remaining,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(copied: u64, remaining: u64, lanes_reading: usize) -> Snapshot {
        Snapshot {
            copied,
            remaining,
            lanes_reading,
        }
    }

    #[test]
    fn sums_positions_and_ends_over_the_lanes_partitions() {
        let progress = CopyProgress::default();
        let (a, b) = (SourcePartition::new("t", 0), SourcePartition::new("t", 1));
        let c = SourcePartition::new("t", 2);
        let (one, two) = (Lane(1), Lane(2));
        progress.lane_started(one);
        progress.lane_started(two);
        progress.position(one, &a, 0, 30_000);
        progress.position(one, &b, 100, 100);
        progress.positions_read(one, [&a, &b]);
        assert_eq!(progress.snapshot(), at(0, 30_000, 1));
        progress.position(two, &c, 0, 5_000);
        progress.positions_read(two, [&c]);
        assert_eq!(progress.snapshot(), at(0, 35_000, 0));
        progress.committed(one, &a, 12_000, 12_000);
        progress.committed(one, &b, 150, 50);
        assert_eq!(progress.snapshot(), at(12_050, 23_000, 0));
        progress.forget(one, &a);
        assert_eq!(progress.snapshot().remaining, 5_000);
        // A lane that moves away takes its partitions with it; one whose
        // partition left it drops that partition at its next session.
        progress.lane_ended(two);
        assert_eq!(progress.snapshot(), at(12_050, 0, 0));
        progress.position(one, &a, 0, 1_000);
        progress.positions_read(one, [&b]);
        assert_eq!(progress.partitions(), vec![(b, 150, 150)]);
    }

    #[test]
    fn a_backfill_logs_rate_and_eta_then_once_that_it_caught_up() {
        let mut backfill = false;
        let second = Duration::from_secs(1);
        assert_eq!(
            report(at(0, 500, 0), at(10, 490, 0), second, &mut backfill),
            None
        );
        let line = report(
            at(0, 40_000, 0),
            at(10_000, 30_000, 0),
            second,
            &mut backfill,
        )
        .unwrap();
        assert_eq!(
            line.to_string(),
            "backfill: copied 10000 of 40000 records (25.0%), 10000 records/s, 30000 to go, ETA 3 s"
        );
        let stalled = report(
            at(10_000, 30_000, 0),
            at(10_000, 30_000, 0),
            second,
            &mut backfill,
        );
        assert!(stalled
            .unwrap()
            .to_string()
            .ends_with("ETA unknown (nothing copied in this interval)"));
        let done = report(
            at(10_000, 30_000, 0),
            at(40_000, 0, 0),
            second,
            &mut backfill,
        );
        assert_eq!(
            done.map(|d| d.to_string()).as_deref(),
            Some("backfill done: caught up (40000 records copied since start, 0 to go)")
        );
        assert_eq!(
            report(at(40_000, 0, 0), at(40_000, 0, 0), second, &mut backfill),
            None
        );
    }

    #[test]
    fn while_lanes_read_positions_the_total_is_said_to_grow_and_never_caught_up() {
        let mut backfill = false;
        let second = Duration::from_secs(1);
        let line = report(
            at(0, 1_000_000, 3),
            at(50_000, 950_000, 3),
            second,
            &mut backfill,
        )
        .unwrap();
        assert!(
            line.to_string()
                .ends_with("; 3 lane(s) still reading their positions, so the total will grow"),
            "{line}"
        );
        // The lanes that read copied all they had; the others may not.
        assert_eq!(
            report(
                at(50_000, 950_000, 3),
                at(1_000_000, 0, 3),
                second,
                &mut backfill
            ),
            None
        );
        let done = report(
            at(1_000_000, 0, 3),
            at(1_000_000, 0, 0),
            second,
            &mut backfill,
        );
        assert!(matches!(done, Some(Report::CaughtUp { .. })), "{done:?}");
    }
}

//! End-to-end latency of a lane's copies: from a source record's timestamp
//! to the commit that makes its copy visible to read_committed consumers of
//! the target.
//!
//! Only records younger than [`MAX_AGE_MS`] when read count, so a backfill
//! or a producer's old CreateTime does not swamp what a live stream sees.
//! The timestamp is the source record's: its append time on topics with
//! `message.timestamp.type=LogAppendTime`, its producer's CreateTime
//! otherwise (then the producer's own batching is included).

use metrics::Histogram;

use crate::clock::unix_millis;

/// Records older than this when read are left out.
pub const MAX_AGE_MS: i64 = 60_000;

/// The timestamps of one batch's young records, until its commit.
/// Bounded by the batch's record limit: the lane clears it every batch.
#[derive(Debug, Default)]
pub struct BatchLatency {
    /// (cursor, source timestamp in ms) of each young record of the batch.
    samples: Vec<(usize, i64)>,
    /// Wall clock at the batch's first read: one clock read per batch, and
    /// a batch lasts at most the commit interval.
    read_at_ms: i64,
}

impl BatchLatency {
    /// A new batch begins.
    pub fn start(&mut self) {
        self.samples.clear();
        self.read_at_ms = unix_millis();
    }

    /// A record of `cursor` with source timestamp `timestamp_ms` was read.
    pub fn read(&mut self, cursor: usize, timestamp_ms: Option<i64>) {
        if let Some(ts) = timestamp_ms {
            if self.read_at_ms - ts < MAX_AGE_MS {
                self.samples.push((cursor, ts));
            }
        }
    }

    /// The batch committed: each young record's latency goes into its
    /// partition's histogram (`histogram_of(cursor)`).
    pub fn committed<'h>(&mut self, histogram_of: impl Fn(usize) -> &'h Histogram) {
        let now = unix_millis();
        for (cursor, ts) in self.samples.drain(..) {
            // A source clock ahead of ours would give a negative latency.
            histogram_of(cursor).record((now - ts).max(0) as f64 / 1000.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_young_records_with_timestamps_are_kept_until_the_commit() {
        let mut batch = BatchLatency::default();
        batch.start();
        let now = batch.read_at_ms;
        batch.read(0, Some(now - 150));
        batch.read(1, Some(now - MAX_AGE_MS - 1));
        batch.read(1, None);
        batch.read(2, Some(now + 5));
        assert_eq!(batch.samples, [(0, now - 150), (2, now + 5)]);
        let histogram = Histogram::noop();
        batch.committed(|_| &histogram);
        assert!(
            batch.samples.is_empty(),
            "a commit takes the batch's samples"
        );
    }
}

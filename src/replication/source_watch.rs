//! Notices a lane's source consumer that went silent: it delivers nothing
//! (no record, no error) while the source holds committed records past its
//! fetch positions.
//!
//! Seen once after the source broker was frozen and thawed under heavy
//! load: one lane's consumer never fetched again. The lane's loop kept
//! turning, so `/healthz` stayed green, and no watermark was cached, so its
//! lag read 0 — for 11 minutes, until the run was stopped. librdkafka
//! retries by itself after outages; a consumer that stays silent that long
//! is not retrying any more, and only a new one (a new lane session, which
//! re-reads its positions from the target) goes on.
//!
//! The check is cheap and rare: only after [`SILENCE_LIMIT`] of idle turns
//! (polls that returned nothing) does the lane ask the source for its
//! committed ends (the consumer's own `read_committed` ListOffsets, so a
//! partition held by an open source transaction is not behind). A source
//! that does not answer is an outage librdkafka is still riding out, not a
//! silent consumer.

use std::time::{Duration, Instant};

/// How long a lane may read nothing before it asks whether records wait:
/// far longer than any fetch (`fetch.wait.max.ms` is 500 ms by default).
pub const SILENCE_LIMIT: Duration = Duration::from_secs(60);

/// When a lane last committed (or chose not to read), and when it last
/// checked.
#[derive(Debug)]
pub struct SourceWatch {
    limit: Duration,
    /// The last committed batch, or the last moment the lane did not poll
    /// on purpose (throttled, backing off after an abort): silence only
    /// counts over the lane's idle turns.
    quiet_since: Instant,
    last_check: Instant,
}

impl SourceWatch {
    pub fn new(limit: Duration, now: Instant) -> SourceWatch {
        SourceWatch {
            limit,
            quiet_since: now,
            last_check: now,
        }
    }

    /// The lane committed a batch, or did not poll on purpose.
    pub fn active(&mut self, now: Instant) {
        self.quiet_since = now;
    }

    /// Whether the lane should compare positions with the source's ends
    /// now: quiet for the limit, and not checked within it (a source that
    /// is only idle is asked once per limit, not at every loop turn).
    pub fn due(&mut self, now: Instant) -> bool {
        let due = now.saturating_duration_since(self.quiet_since) >= self.limit
            && now.saturating_duration_since(self.last_check) >= self.limit;
        if due {
            self.last_check = now;
        }
        due
    }
}

/// The first partition whose committed end (`None`: unknown) lies past its
/// fetch position: a consumer that delivered nothing for the limit has
/// stopped reading it.
pub fn behind(positions: &[i64], ends: &[Option<i64>]) -> Option<usize> {
    positions
        .iter()
        .zip(ends)
        .position(|(&position, end)| end.is_some_and(|end| end > position))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_is_due_after_the_limit_of_quiet_and_once_per_limit() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut watch = SourceWatch::new(Duration::from_secs(60), t0);
        assert!(!watch.due(at(59)));
        watch.active(at(30));
        assert!(!watch.due(at(89)));
        assert!(watch.due(at(90)));
        assert!(!watch.due(at(120)), "checked at 90: the next check waits");
        assert!(watch.due(at(150)));
        watch.active(at(151));
        assert!(!watch.due(at(210)));
    }

    #[test]
    fn behind_means_committed_records_past_the_position() {
        assert_eq!(behind(&[10, 20], &[Some(10), Some(21)]), Some(1));
        // Caught up, or up to an open source transaction's first record.
        assert_eq!(behind(&[10, 20], &[Some(10), Some(20)]), None);
        // Unknown ends prove nothing.
        assert_eq!(behind(&[10], &[None]), None);
    }
}

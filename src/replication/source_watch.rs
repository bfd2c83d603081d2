//! Notices a lane's source consumer that went silent on a partition: it
//! delivers nothing of it (no record, no error) while the source holds
//! committed records past its fetch position.
//!
//! Seen after the source broker was frozen and thawed under heavy load:
//! one lane's consumer never fetched again, for 11 minutes, until the run
//! was stopped. Seen again after a source broker restart in a long chaos
//! run over 1,000 partitions: one partition of a lane stood still for five
//! minutes while its 249 neighbours flowed, so the lane kept committing and
//! a watch that only counted whole-lane silence never looked. librdkafka
//! retries by itself after outages; a partition that stands still that
//! long with records waiting is not being retried any more, and only a new
//! consumer (a new lane session, which re-reads its positions from the
//! target) goes on.
//!
//! The check is cheap and rare: once per [`SILENCE_LIMIT`], and only after
//! the lane turned [`MIN_TURNS`] times in it (a lane blocked on a slow
//! target has not polled, so its positions standing still prove nothing),
//! it compares the consumer's positions with the previous check's and asks
//! the source for its committed ends (the consumer's own `read_committed`
//! ListOffsets, so a partition held by an open source transaction is not
//! behind). A source that does not answer is an outage librdkafka is still
//! riding out, not a silent consumer.
//!
//! Standing still only counts while the consumer had slack: at least half
//! of the window's turns ended with nothing ready in its queue. A lane copying as
//! fast as it can holds a full prefetch queue, and librdkafka then serves
//! its partitions in list order (each time the queue fills, every partition
//! backs off and rejoins the fetch list in the same order), so in a large
//! backfill the partitions late in a lane of a thousand wait their turn for
//! as long as the others' backlog lasts: seen as four lanes restarted a
//! minute into a copy of 20M records over 5,000 partitions. A new consumer
//! would only start the same order again. A partition that is really stuck
//! is found in the first window after the backlog is copied.

use std::time::{Duration, Instant};

/// How long a partition with committed records waiting may stand still:
/// far longer than any fetch (`fetch.wait.max.ms` is 500 ms by default) or
/// any transaction of a healthy lane.
pub const SILENCE_LIMIT: Duration = Duration::from_secs(60);

/// Lane turns (committed batches or idle polls) a window needs before its
/// positions standing still count: a lane that waited out a blocked target
/// for the whole window did not poll.
pub const MIN_TURNS: u32 = 10;

/// The positions the lane's consumer had at the start of the current
/// window, and what the lane did since.
#[derive(Debug)]
pub struct SourceWatch {
    limit: Duration,
    /// Start of the window: the last check, or the last moment the lane
    /// did not poll on purpose (throttled, backing off after an abort).
    since: Instant,
    /// Lane turns since `since`.
    turns: u32,
    /// Of those, the turns that ended with nothing ready in the consumer's
    /// queue: the consumer kept up with the lane.
    slack_turns: u32,
    /// The consumer's positions at `since`, per cursor; `None` until the
    /// first check of a window sets them.
    positions: Option<Vec<i64>>,
}

impl SourceWatch {
    pub fn new(limit: Duration, now: Instant) -> SourceWatch {
        SourceWatch {
            limit,
            since: now,
            turns: 0,
            slack_turns: 0,
            positions: None,
        }
    }

    /// The lane committed a batch or polled and found nothing; `ready`:
    /// records were still waiting in the consumer's queue as it ended.
    pub fn turned(&mut self, ready: bool) {
        self.turns = self.turns.saturating_add(1);
        if !ready {
            self.slack_turns = self.slack_turns.saturating_add(1);
        }
    }

    /// The lane did not poll on purpose: positions standing still from
    /// here on are its own doing, so a new window starts.
    pub fn held(&mut self, now: Instant) {
        self.since = now;
        self.turns = 0;
        self.slack_turns = 0;
        self.positions = None;
    }

    /// Whether the lane should read its positions now: after enough turns
    /// when the window has none yet, then after the limit and enough turns.
    /// Never while the lane holds on purpose (every hold resets the turns),
    /// so a throttled lane reads no positions at all.
    pub fn due(&self, now: Instant) -> bool {
        self.turns >= MIN_TURNS
            && (self.positions.is_none() || now.saturating_duration_since(self.since) >= self.limit)
    }

    /// Starts a new window at `positions`; returns the previous window's
    /// positions when it was a full one (see [`SourceWatch::due`]) in which
    /// the consumer had slack: at least half of its turns ended with
    /// nothing ready.
    pub fn restart(&mut self, now: Instant, positions: Vec<i64>) -> Option<Vec<i64>> {
        let full = self.positions.is_some() && self.due(now);
        let slack = self.slack_turns.saturating_mul(2) >= self.turns;
        let previous = self.positions.replace(positions);
        self.since = now;
        self.turns = 0;
        self.slack_turns = 0;
        previous.filter(|_| full && slack)
    }
}

/// The first partition that stood still over a whole window (`before` and
/// `now` are its positions at the window's start and end) although its
/// committed end (`None`: unknown) lies past its position.
pub fn stuck(before: &[i64], now: &[i64], ends: &[Option<i64>]) -> Option<usize> {
    before
        .iter()
        .zip(now)
        .zip(ends)
        .position(|((&before, &now), end)| before == now && end.is_some_and(|end| end > now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_needs_the_limit_and_enough_turns() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut watch = SourceWatch::new(Duration::from_secs(60), t0);
        assert!(!watch.due(at(0)), "no positions before the lane turned");
        for _ in 0..MIN_TURNS {
            watch.turned(false);
        }
        assert!(watch.due(at(0)), "the first positions once it did");
        assert_eq!(watch.restart(at(0), vec![5]), None);
        for _ in 0..MIN_TURNS {
            watch.turned(false);
        }
        assert!(!watch.due(at(59)));
        assert!(watch.due(at(60)));
        assert_eq!(watch.restart(at(60), vec![5]), Some(vec![5]));
        // A lane blocked for the whole window (a slow target) turned once.
        watch.turned(false);
        assert!(!watch.due(at(130)));
    }

    #[test]
    fn holding_on_purpose_starts_a_new_window() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut watch = SourceWatch::new(Duration::from_secs(60), t0);
        watch.restart(at(0), vec![5]);
        for _ in 0..MIN_TURNS {
            watch.turned(false);
        }
        watch.held(at(30));
        assert!(!watch.due(at(100)), "a held lane reads no positions");
        for _ in 0..MIN_TURNS {
            watch.turned(false);
        }
        assert!(watch.due(at(31)), "turning again, it starts a new window");
        assert_eq!(watch.restart(at(31), vec![5]), None, "not a full window");
        for _ in 0..MIN_TURNS {
            watch.turned(false);
        }
        assert!(!watch.due(at(90)));
        assert_eq!(watch.restart(at(91), vec![5]), Some(vec![5]));
    }

    #[test]
    fn a_window_without_slack_proves_nothing() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut watch = SourceWatch::new(Duration::from_secs(60), t0);
        for _ in 0..MIN_TURNS {
            watch.turned(false);
        }
        watch.restart(at(0), vec![5]);
        // A backfill: the queue held records at the end of most turns.
        for turn in 0..100 {
            watch.turned(turn % 3 != 0);
        }
        assert!(watch.due(at(60)));
        assert_eq!(watch.restart(at(60), vec![5]), None);
        // The backlog copied: most turns find the queue empty again.
        for turn in 0..100 {
            watch.turned(turn % 3 == 0);
        }
        assert_eq!(watch.restart(at(120), vec![5]), Some(vec![5]));
    }

    #[test]
    fn stuck_means_standing_still_with_committed_records_waiting() {
        // Partition 1 stood still with records waiting while 0 moved on.
        assert_eq!(stuck(&[10, 20], &[15, 20], &[Some(30), Some(21)]), Some(1));
        // Moving, even if behind: the consumer is reading it.
        assert_eq!(stuck(&[10], &[15], &[Some(30)]), None);
        // Caught up, or up to an open source transaction's first record.
        assert_eq!(stuck(&[10, 20], &[10, 20], &[Some(10), Some(20)]), None);
        // Unknown ends prove nothing.
        assert_eq!(stuck(&[10], &[10], &[None]), None);
    }
}

//! Throttling of source reads: one token bucket per limit (bytes/s,
//! records/s), shared by every worker of the process.
//!
//! Workers ask for permission before they take a record from the source
//! consumer ([`Throttle::wait_ready`]) and pay for it after
//! ([`Throttle::charge`]). Payment may drive a bucket negative (debt): a
//! record or batch larger than a second's budget is still read, and the
//! next reader waits until the debt is repaid. So over any window of `T`
//! seconds the records read are at most `rate × T` plus one second's burst
//! plus one record per worker. Since librdkafka's prefetch queue (bounded by
//! `--max.memory.bytes`) only refills as records are taken from it, the
//! source is read at the throttled rate once that queue is full.
//!
//! The limits can change while running ([`Throttle::set_limits`]); the
//! `--throttle.file` is re-read on SIGHUP ([`reload_on_sighup`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::Properties;
use crate::metrics as m;
use crate::units::{parse_bytes, parse_count};

/// Key of the bytes/s limit in a `--throttle.file`.
pub const BYTES_KEY: &str = "bytes.per.sec";
/// Key of the records/s limit in a `--throttle.file`.
pub const RECORDS_KEY: &str = "records.per.sec";

/// Longest a blocked worker sleeps before it looks at the shutdown flag and
/// the limits again.
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// The configured limits; `None` = unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThrottleLimits {
    /// Key + value + header bytes per second (as `--batch.max.bytes` counts them).
    pub bytes_per_sec: Option<u64>,
    pub records_per_sec: Option<u64>,
}

impl ThrottleLimits {
    pub fn is_unlimited(&self) -> bool {
        self.bytes_per_sec.is_none() && self.records_per_sec.is_none()
    }

    /// Reads a throttle file: a Java properties file with the keys
    /// `bytes.per.sec` (a size, e.g. `5MB`) and `records.per.sec`. A key that
    /// is absent means no limit. Unknown keys are refused (a typo would
    /// otherwise silently lift a limit).
    pub fn load(path: &Path) -> Result<ThrottleLimits, ThrottleFileError> {
        let file = || path.to_path_buf();
        let props = Properties::load(path).map_err(|e| ThrottleFileError {
            file: file(),
            reason: e.to_string(),
        })?;
        let mut limits = ThrottleLimits::default();
        for p in props.iter() {
            let invalid = |reason: String| ThrottleFileError {
                file: file(),
                reason: format!("line {}: {}: {reason}", p.line(), p.key()),
            };
            match p.key() {
                BYTES_KEY => limits.bytes_per_sec = Some(parse_bytes(p.value()).map_err(invalid)?),
                RECORDS_KEY => {
                    limits.records_per_sec = Some(parse_count(p.value()).map_err(invalid)?)
                }
                other => {
                    return Err(ThrottleFileError {
                        file: file(),
                        reason: format!(
                        "line {}: unknown key {other:?} (expected {BYTES_KEY} or {RECORDS_KEY})",
                        p.line()
                    ),
                    })
                }
            }
        }
        Ok(limits)
    }
}

impl fmt::Display for ThrottleLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: Option<u64>| v.map_or("unlimited".to_string(), |v| v.to_string());
        write!(
            f,
            "{BYTES_KEY}={} {RECORDS_KEY}={}",
            show(self.bytes_per_sec),
            show(self.records_per_sec)
        )
    }
}

/// A throttle file that cannot be used; names the file and the line.
#[derive(Debug, thiserror::Error)]
#[error("throttle file {}: {reason}", file.display())]
pub struct ThrottleFileError {
    pub file: PathBuf,
    pub reason: String,
}

/// One limit: tokens refill at `rate` per second up to one second's worth;
/// taking may drive them negative (debt).
#[derive(Debug, Clone, Copy)]
struct Bucket {
    rate: f64,
    tokens: f64,
}

impl Bucket {
    fn new(rate: u64) -> Bucket {
        // Starts full: the first second may read one second's budget at once.
        Bucket {
            rate: rate as f64,
            tokens: rate as f64,
        }
    }

    fn burst(&self) -> f64 {
        self.rate
    }

    fn refill(&mut self, elapsed: Duration) {
        self.tokens = (self.tokens + self.rate * elapsed.as_secs_f64()).min(self.burst());
    }

    /// How long until the debt, if any, is repaid.
    fn delay(&self) -> Duration {
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }

    /// The same bucket under a new rate: the tokens (or the debt) stay,
    /// capped at the new burst.
    fn with_rate(self, rate: u64) -> Bucket {
        let rate = rate as f64;
        Bucket {
            rate,
            tokens: self.tokens.min(rate),
        }
    }
}

#[derive(Debug)]
struct State {
    limits: ThrottleLimits,
    bytes: Option<Bucket>,
    records: Option<Bucket>,
    refilled_at: Instant,
}

impl State {
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled_at);
        self.refilled_at = self.refilled_at.max(now);
        for bucket in [&mut self.bytes, &mut self.records].into_iter().flatten() {
            bucket.refill(elapsed);
        }
    }

    fn delay(&self) -> Duration {
        [self.bytes, self.records]
            .into_iter()
            .flatten()
            .map(|b| b.delay())
            .max()
            .unwrap_or(Duration::ZERO)
    }
}

/// The process-wide throttle, shared by all workers through an `Arc`.
#[derive(Debug)]
pub struct Throttle {
    state: Mutex<State>,
    /// Fast path: no lock at all while no limit is set.
    active: AtomicBool,
}

impl Throttle {
    /// A throttle with `limits`, publishing them as metrics.
    pub fn new(limits: ThrottleLimits) -> Throttle {
        Throttle::new_at(limits, Instant::now())
    }

    fn new_at(limits: ThrottleLimits, now: Instant) -> Throttle {
        m::throttle_limits(limits.bytes_per_sec, limits.records_per_sec);
        Throttle {
            state: Mutex::new(State {
                limits,
                bytes: limits.bytes_per_sec.map(Bucket::new),
                records: limits.records_per_sec.map(Bucket::new),
                refilled_at: now,
            }),
            active: AtomicBool::new(!limits.is_unlimited()),
        }
    }

    pub fn limits(&self) -> ThrottleLimits {
        self.lock().limits
    }

    /// Changes the limits at once for every worker; returns the old ones. A
    /// limit that stays keeps its tokens (or debt), capped at the new burst;
    /// a new limit starts with one second's budget.
    pub fn set_limits(&self, limits: ThrottleLimits) -> ThrottleLimits {
        self.set_limits_at(limits, Instant::now())
    }

    fn set_limits_at(&self, limits: ThrottleLimits, now: Instant) -> ThrottleLimits {
        let mut state = self.lock();
        state.refill(now);
        let update = |bucket: Option<Bucket>, rate: Option<u64>| match (bucket, rate) {
            (_, None) => None,
            (None, Some(rate)) => Some(Bucket::new(rate)),
            (Some(b), Some(rate)) => Some(b.with_rate(rate)),
        };
        state.bytes = update(state.bytes, limits.bytes_per_sec);
        state.records = update(state.records, limits.records_per_sec);
        let old = std::mem::replace(&mut state.limits, limits);
        self.active.store(!limits.is_unlimited(), Ordering::Relaxed);
        m::throttle_limits(limits.bytes_per_sec, limits.records_per_sec);
        old
    }

    /// Pays for what was read from the source. May leave a debt that later
    /// readers wait out.
    pub fn charge(&self, bytes: u64, records: u64) {
        if self.active.load(Ordering::Relaxed) {
            self.charge_at(bytes, records, Instant::now());
        }
    }

    fn charge_at(&self, bytes: u64, records: u64, now: Instant) {
        let mut state = self.lock();
        state.refill(now);
        if let Some(b) = &mut state.bytes {
            b.tokens -= bytes as f64;
        }
        if let Some(r) = &mut state.records {
            r.tokens -= records as f64;
        }
    }

    /// Whether any limit is set: unlimited readers skip the clock reads.
    pub fn is_limited(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// How long until reading may go on (zero: now).
    pub fn delay(&self) -> Duration {
        if !self.active.load(Ordering::Relaxed) {
            return Duration::ZERO;
        }
        self.delay_at(Instant::now())
    }

    fn delay_at(&self, now: Instant) -> Duration {
        let mut state = self.lock();
        state.refill(now);
        state.delay()
    }

    /// For worker threads: blocks until reading may go on, at most `max`,
    /// returning early (false) when `stop` is set. Returns whether reading
    /// may go on. Time spent waiting is counted in the metrics.
    pub fn wait_ready(&self, max: Duration, stop: &AtomicBool) -> bool {
        if !self.is_limited() {
            return true;
        }
        let started = Instant::now();
        let ready = loop {
            let delay = self.delay();
            if delay.is_zero() {
                break true;
            }
            let remaining = max.saturating_sub(started.elapsed());
            if remaining.is_zero() || stop.load(Ordering::Relaxed) {
                break false;
            }
            std::thread::sleep(delay.min(WAIT_SLICE).min(remaining));
        };
        let waited = started.elapsed();
        if !waited.is_zero() {
            m::throttle_waited(waited);
        }
        ready
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a few numbers, consistent after every statement.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Re-reads `file` on every SIGHUP and applies it; a file that cannot be
/// used is logged and the limits stay as they were. Must run inside a tokio
/// runtime.
pub fn reload_on_sighup(throttle: Arc<Throttle>, file: PathBuf) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            reload(&throttle, &file);
        }
    });
    Ok(())
}

/// One reload of the throttle file, logged either way.
pub fn reload(throttle: &Throttle, file: &Path) {
    match ThrottleLimits::load(file) {
        Ok(limits) => {
            let old = throttle.set_limits(limits);
            if old == limits {
                tracing::info!(file = %file.display(), "SIGHUP: throttle unchanged: {limits}");
            } else {
                tracing::info!(file = %file.display(), "throttle changed: {old} -> {limits}");
            }
        }
        Err(e) => {
            tracing::error!("SIGHUP: {e}; throttle stays {}", throttle.limits());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(bytes: Option<u64>, records: Option<u64>) -> ThrottleLimits {
        ThrottleLimits {
            bytes_per_sec: bytes,
            records_per_sec: records,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn throttle_file_keys_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("throttle.properties");
        std::fs::write(
            &path,
            "# limits\nbytes.per.sec = 5MB\nrecords.per.sec=2000\n",
        )
        .unwrap();
        assert_eq!(
            ThrottleLimits::load(&path).unwrap(),
            limits(Some(5_000_000), Some(2000))
        );
        std::fs::write(&path, "").unwrap();
        assert!(ThrottleLimits::load(&path).unwrap().is_unlimited());
        std::fs::write(&path, "records.per.sec=2000\nbytes.per.second=1\n").unwrap();
        let e = ThrottleLimits::load(&path).unwrap_err().to_string();
        assert!(
            e.contains("line 2") && e.contains("bytes.per.second"),
            "{e}"
        );
        std::fs::write(&path, "records.per.sec=fast\n").unwrap();
        let e = ThrottleLimits::load(&path).unwrap_err().to_string();
        assert!(e.contains("line 1: records.per.sec"), "{e}");
        let e = ThrottleLimits::load(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing"), "{e}");
        assert_eq!(
            limits(Some(5), None).to_string(),
            "bytes.per.sec=5 records.per.sec=unlimited"
        );
    }

    #[test]
    fn unlimited_never_waits() {
        let t = Throttle::new(ThrottleLimits::default());
        t.charge(u64::MAX / 2, 1_000_000);
        assert_eq!(t.delay(), Duration::ZERO);
        assert!(t.wait_ready(Duration::ZERO, &AtomicBool::new(false)));
    }

    #[test]
    fn burst_is_one_second_and_debt_is_waited_out() {
        let t0 = Instant::now();
        let t = Throttle::new_at(limits(Some(1000), None), t0);
        // A full second's budget is there at once.
        t.charge_at(1000, 1, t0);
        assert_eq!(t.delay_at(t0), Duration::ZERO);
        // A batch far larger than a second's budget is allowed: it leaves a
        // debt that the next reader waits out.
        t.charge_at(2500, 1, t0);
        assert_eq!(t.delay_at(t0), ms(2500));
        assert_eq!(t.delay_at(t0 + ms(2000)), ms(500));
        assert_eq!(t.delay_at(t0 + ms(2500)), Duration::ZERO);
        // Idle time builds up at most one second's budget.
        let later = t0 + Duration::from_secs(60);
        t.charge_at(1000, 1, later);
        assert_eq!(t.delay_at(later), Duration::ZERO);
        t.charge_at(1, 1, later);
        assert_eq!(t.delay_at(later), ms(1));
    }

    #[test]
    fn both_limits_the_stricter_one_decides() {
        let t0 = Instant::now();
        let t = Throttle::new_at(limits(Some(1_000_000), Some(10)), t0);
        t.charge_at(100, 15, t0);
        // records: 5 in debt at 10/s = 500 ms; bytes: far from the limit.
        assert_eq!(t.delay_at(t0), ms(500));
        // Bytes refilled to their burst (1 MB) meanwhile; 1.5 MB leaves a
        // 500 kB debt, while the records' debt is repaid.
        t.charge_at(1_500_000, 0, t0 + ms(500));
        assert_eq!(t.delay_at(t0 + ms(500)), ms(500));
    }

    #[test]
    fn changing_limits_keeps_debt_and_caps_tokens() {
        let t0 = Instant::now();
        let t = Throttle::new_at(limits(None, Some(100)), t0);
        t.charge_at(0, 300, t0);
        assert_eq!(t.delay_at(t0), ms(2000));
        // Faster: the same debt is repaid sooner.
        let old = t.set_limits_at(limits(None, Some(1000)), t0);
        assert_eq!(old, limits(None, Some(100)));
        assert_eq!(t.delay_at(t0), ms(200));
        // Lifted: no wait at all.
        t.set_limits_at(ThrottleLimits::default(), t0);
        assert_eq!(t.delay(), Duration::ZERO);
        t.charge(0, 1_000_000);
        assert_eq!(t.delay(), Duration::ZERO);
        // A new limit starts with one second's budget.
        let t1 = t0 + ms(10);
        t.set_limits_at(limits(Some(50), None), t1);
        t.charge_at(50, 1, t1);
        assert_eq!(t.delay_at(t1), Duration::ZERO);
        // Slower: tokens saved under a fast limit are capped at the new burst.
        let t = Throttle::new_at(limits(None, Some(1000)), t0);
        t.set_limits_at(limits(None, Some(10)), t0);
        t.charge_at(0, 20, t0);
        assert_eq!(t.delay_at(t0), ms(1000));
    }

    #[test]
    fn wait_ready_gives_up_at_max_and_on_stop() {
        let t = Throttle::new(limits(None, Some(1)));
        t.charge(0, 100);
        assert!(!t.wait_ready(ms(20), &AtomicBool::new(false)));
        let started = Instant::now();
        assert!(!t.wait_ready(Duration::from_secs(60), &AtomicBool::new(true)));
        assert!(started.elapsed() < Duration::from_secs(1));
        t.set_limits(ThrottleLimits::default());
        assert!(t.wait_ready(Duration::ZERO, &AtomicBool::new(false)));
    }

    /// Readers that wait for permission and pay per record get exactly the
    /// configured rate, whatever their batch sizes (a simulated clock: each
    /// read waits out the delay the throttle names, then pays).
    #[test]
    fn interleaved_readers_get_the_configured_rate() {
        let started = Instant::now();
        let throttle = Throttle::new_at(limits(Some(1000), None), started);
        let mut now = started;
        let mut last_read_at = now;
        for _ in 0..5 {
            for size in [100u64, 250, 3000] {
                now += throttle.delay_at(now);
                last_read_at = now;
                throttle.charge_at(size, 1, now);
            }
        }
        // 16 750 bytes: one second's burst, then 1000 B/s. The last read
        // starts once the debt before it is repaid: (16 750 − 3000 − 1000) /
        // 1000 s after the start, and not before.
        assert_eq!(last_read_at - started, Duration::from_millis(12_750));
        // Afterwards the remaining debt is what the last read left.
        assert_eq!(throttle.delay_at(now), Duration::from_secs(3));
    }

    #[test]
    fn a_slow_limit_paces_each_read() {
        let started = Instant::now();
        let throttle = Throttle::new_at(limits(None, Some(2)), started);
        let mut now = started;
        let mut at = Vec::new();
        for _ in 0..6 {
            now += throttle.delay_at(now);
            at.push((now - started).as_millis());
            throttle.charge_at(0, 1, now);
        }
        // The burst (2) plus the one read allowed into debt at once, then
        // one every 500 ms.
        assert_eq!(at, vec![0, 0, 0, 500, 1000, 1500]);
    }
}

//! Progress while verify reads: a self-overwriting line with rate and ETA
//! on a terminal, a plain line every ten seconds otherwise (logs, CI).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The running display; [`ProgressLine::finish`] stops it.
pub struct ProgressLine {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ProgressLine {
    /// Shows progress towards `total` offsets (both sides together), as
    /// counted in `read`, on standard error.
    pub fn start(total: u64, read: Arc<AtomicU64>) -> ProgressLine {
        let stop = Arc::new(AtomicBool::new(false));
        let terminal = std::io::stderr().is_terminal();
        let every = if terminal {
            Duration::from_millis(250)
        } else {
            Duration::from_secs(10)
        };
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let mut last_print = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                if last_print.elapsed() < every {
                    continue;
                }
                last_print = Instant::now();
                let line = describe(read.load(Ordering::Relaxed), total, started.elapsed());
                let mut err = std::io::stderr().lock();
                let _ = if terminal {
                    write!(err, "\r\x1b[2K{line}")
                } else {
                    writeln!(err, "{line}")
                };
            }
            if terminal {
                let _ = write!(std::io::stderr(), "\r\x1b[2K");
            }
        });
        ProgressLine {
            stop,
            thread: Some(thread),
        }
    }

    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn describe(done: u64, total: u64, elapsed: Duration) -> String {
    let rate = done as f64 / elapsed.as_secs_f64().max(1e-3);
    let percent = if total == 0 {
        100.0
    } else {
        100.0 * done as f64 / total as f64
    };
    let eta = if rate > 0.0 && done < total {
        format!("{:.0}s", (total - done) as f64 / rate)
    } else {
        "-".to_string()
    };
    format!("verify: {percent:5.1}% {done}/{total} offsets, {rate:.0} offsets/s, ETA {eta}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn line_shows_percent_rate_and_eta() {
        let line = super::describe(500, 1000, std::time::Duration::from_secs(5));
        assert_eq!(
            line,
            "verify:  50.0% 500/1000 offsets, 100 offsets/s, ETA 5s"
        );
    }
}

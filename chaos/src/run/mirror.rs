//! Running the real `eosmirror` binary: start, SIGKILL, SIGSTOP/SIGCONT,
//! SIGTERM, and reading its output.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::children;

/// What eosmirror prints when the fleet's group takes lanes from it.
pub const LANES_TAKEN: &str = "the fleet's group took lanes from this instance";

/// What eosmirror prints when the fleet's group assigns it lanes.
pub const LANES_ASSIGNED: &str = "the fleet's group assigned lanes to this instance";

/// Everything needed to start one eosmirror instance.
#[derive(Debug, Clone)]
pub struct MirrorSpec {
    /// The binary.
    pub binary: PathBuf,
    /// `--consumer.config` (source).
    pub consumer_config: PathBuf,
    /// `--producer.config` (target).
    pub producer_config: PathBuf,
    /// `--state.dir`.
    pub state_dir: PathBuf,
    /// `--source.alias`.
    pub alias: String,
    /// `--transactional.id.prefix`.
    pub prefix: String,
    /// `--include`.
    pub topic: String,
    /// `--transaction.timeout.ms`.
    pub transaction_timeout_ms: u64,
    /// `--commit.interval.ms`.
    pub commit_interval_ms: u64,
    /// `--fleet.session.timeout.ms`: how soon a killed instance's lanes
    /// move to its successor.
    pub fleet_session_timeout_ms: u64,
    /// Where logs go (`eosmirror-<n>.log`).
    pub log_dir: PathBuf,
}

/// A running (or exited) eosmirror process. Killed on drop.
#[derive(Debug)]
pub struct Mirror {
    child: Option<Child>,
    /// Combined stdout and stderr.
    pub log: PathBuf,
    /// Exit code once it exited (-1: killed by a signal).
    pub exit: Option<i32>,
}

impl MirrorSpec {
    /// Starts `eosmirror run` with this spec plus `extra` arguments; logs to
    /// `eosmirror-<n>.log`.
    pub fn start(&self, n: usize, extra: &[&str]) -> Result<Mirror> {
        let log = self.log_dir.join(format!("eosmirror-{n}.log"));
        let file = fs::File::create(&log).with_context(|| format!("create {}", log.display()))?;
        let child = Command::new(&self.binary)
            .arg("run")
            .arg("--consumer.config")
            .arg(&self.consumer_config)
            .arg("--producer.config")
            .arg(&self.producer_config)
            .arg("--state.dir")
            .arg(&self.state_dir)
            .args(["--include", &self.topic])
            .args(["--source.alias", &self.alias])
            .args(["--transactional.id.prefix", &self.prefix])
            .args([
                "--transaction.timeout.ms",
                &self.transaction_timeout_ms.to_string(),
            ])
            .args(["--commit.interval.ms", &self.commit_interval_ms.to_string()])
            .args([
                "--fleet.session.timeout.ms",
                &self.fleet_session_timeout_ms.to_string(),
            ])
            .args(["--refresh.interval.ms", "2000"])
            .args(extra)
            .env("EOSMIRROR_LOG", "info")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("start {}", self.binary.display()))?;
        children::started(child.id());
        Ok(Mirror {
            child: Some(child),
            log,
            exit: None,
        })
    }
}

impl Mirror {
    fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// Sends `signal` if the process still runs.
    pub fn signal(&mut self, signal: i32) {
        if self.is_running() {
            if let Some(pid) = self.pid() {
                // SAFETY: kill(2) on our own, not yet reaped child.
                unsafe {
                    libc::kill(pid, signal);
                }
            }
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            if let Ok(s) = c.wait() {
                self.exit.get_or_insert(s.code().unwrap_or(-1));
            }
            children::reaped(c.id());
        }
    }

    /// Whether it still runs (reaps it if it exited).
    pub fn is_running(&mut self) -> bool {
        let Some(c) = self.child.as_mut() else {
            return false;
        };
        match c.try_wait() {
            Ok(None) => true,
            Ok(Some(s)) => {
                self.exit = Some(s.code().unwrap_or(-1));
                children::reaped(c.id());
                self.child = None;
                false
            }
            Err(_) => false,
        }
    }

    /// Waits up to `limit` for it to exit by itself; its code, or `None`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        while self.is_running() {
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.exit
    }

    /// SIGTERM (SIGCONT first, in case it is frozen) and waits up to
    /// `limit`; SIGKILL after that. The exit code, `None` if it had to be
    /// killed.
    pub fn stop(&mut self, limit: Duration) -> Option<i32> {
        self.signal(libc::SIGCONT);
        self.signal(libc::SIGTERM);
        let code = self.wait_exit(limit);
        if code.is_none() {
            self.kill();
        }
        code
    }

    /// Its output so far.
    pub fn output(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `n` lines of its output.
    pub fn tail(&self, n: usize) -> String {
        let out = self.output();
        let lines: Vec<&str> = out.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether this eosmirror binary has the `translate` subcommand.
pub fn has_translate(binary: &Path) -> bool {
    Command::new(binary)
        .arg("--help")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim_start().starts_with("translate"))
        })
        .unwrap_or(false)
}

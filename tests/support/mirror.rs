//! Running the real `eosmirror` binary against the test bed, and judging its
//! copy independently of eosmirror's own code.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Cluster, Isolation, ReadRecord};

/// A running `eosmirror run` process; killed (SIGKILL) and reaped on drop, so
/// a failing test leaves nothing behind.
pub struct Mirror {
    child: Option<Child>,
    /// Combined stdout/stderr of the process.
    pub log: PathBuf,
}

/// Files and dirs one test's mirror runs share (properties, state, logs).
pub struct MirrorSetup {
    pub dir: tempfile::TempDir,
    pub consumer_config: PathBuf,
    pub producer_config: PathBuf,
    pub state_dir: PathBuf,
    /// Source alias of this setup's runs: its own internal topics, so an
    /// instance another test froze never holds back this test's position
    /// reads.
    pub alias: String,
}

impl MirrorSetup {
    /// Properties files pointing at `source` and `target` bootstrap addresses.
    pub fn new(source_bootstrap: &str, target_bootstrap: &str) -> MirrorSetup {
        let dir = tempfile::tempdir().expect("temp dir");
        let consumer_config = dir.path().join("consumer.properties");
        let producer_config = dir.path().join("producer.properties");
        fs::write(
            &consumer_config,
            format!("bootstrap.servers={source_bootstrap}\n"),
        )
        .unwrap();
        fs::write(
            &producer_config,
            format!("bootstrap.servers={target_bootstrap}\n"),
        )
        .unwrap();
        let state_dir = dir.path().join("state");
        MirrorSetup {
            dir,
            consumer_config,
            producer_config,
            state_dir,
            alias: super::unique_name("alias"),
        }
    }

    /// Starts `eosmirror run --include <include>` with the test defaults
    /// (1 s topic refresh, 100 ms commit interval) plus `extra` arguments.
    pub fn start(&self, include: &str, extra: &[&str]) -> Mirror {
        self.start_env(include, extra, &[])
    }

    /// Like [`MirrorSetup::start`], with extra environment variables for
    /// this process only.
    pub fn start_env(&self, include: &str, extra: &[&str], env: &[(&str, &str)]) -> Mirror {
        let mut args = vec![
            "--include",
            include,
            "--refresh.interval.ms",
            "1000",
            "--commit.interval.ms",
            "100",
        ];
        args.extend_from_slice(extra);
        self.start_args_env(&args, env)
    }

    /// Like [`MirrorSetup::start`] but without the test defaults (clap
    /// refuses a flag given twice), so `extra` can choose every setting.
    pub fn start_bare(&self, include: &str, extra: &[&str]) -> Mirror {
        let mut args = vec!["--include", include];
        args.extend_from_slice(extra);
        self.start_args(&args)
    }

    /// Starts `eosmirror run` with this setup's files and state dir and
    /// exactly `args` otherwise (no `--include` either).
    pub fn start_args(&self, args: &[&str]) -> Mirror {
        self.start_args_env(args, &[])
    }

    /// Like [`MirrorSetup::start_args`], with extra environment variables
    /// (e.g. `FAILPOINTS`, which arms crash points).
    pub fn start_args_env(&self, args: &[&str], env: &[(&str, &str)]) -> Mirror {
        static STARTED: AtomicU64 = AtomicU64::new(0);
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let log = self.dir.path().join(format!("eosmirror-{n}.log"));
        let log_file = fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_eosmirror"))
            .arg("run")
            .arg("--consumer.config")
            .arg(&self.consumer_config)
            .arg("--producer.config")
            .arg(&self.producer_config)
            .arg("--state.dir")
            .arg(&self.state_dir)
            .args(args)
            .env("EOSMIRROR_LOG", "info")
            // A restart after kill -9 waits for the dead instance's fleet
            // membership to expire (the test clusters allow 1 s and up).
            .env("EOSMIRROR_FLEET_SESSION_TIMEOUT_MS", "3000")
            // A `--source.alias` in `args` overrides it.
            .env("EOSMIRROR_SOURCE_ALIAS", &self.alias)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .expect("start eosmirror");
        Mirror {
            child: Some(child),
            log,
        }
    }

    /// Runs `eosmirror <command>` (verify, translate, cutover, ...) with
    /// this setup's files and alias plus `args`, to completion; returns the
    /// exit code, stdout and stderr.
    pub fn command(&self, command: &str, args: &[&str]) -> (i32, String, String) {
        self.command_env(command, args, &[])
    }

    /// Like [`MirrorSetup::command`], with extra environment variables.
    pub fn command_env(
        &self,
        command: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (i32, String, String) {
        let out = self
            .command_line(command, args)
            .envs(env.iter().copied())
            .output()
            .expect("run eosmirror");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Like [`MirrorSetup::command`], handing each log line (stderr) to
    /// `on_log` as soon as the command writes it, so a test can act at a
    /// known step of the command.
    pub fn command_watching(
        &self,
        command: &str,
        args: &[&str],
        env: &[(&str, &str)],
        mut on_log: impl FnMut(&str),
    ) -> (i32, String, String) {
        let mut child = KilledOnDrop(
            self.command_line(command, args)
                .envs(env.iter().copied())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start eosmirror"),
        );
        let child = &mut child.0;
        let mut stdout = child.stdout.take().expect("piped stdout");
        let reading = std::thread::spawn(move || {
            let mut out = String::new();
            stdout.read_to_string(&mut out).map(|_| out)
        });
        let mut stderr = String::new();
        for line in BufReader::new(child.stderr.take().expect("piped stderr")).lines() {
            let line = line.expect("read eosmirror's stderr");
            on_log(&line);
            stderr.push_str(&line);
            stderr.push('\n');
        }
        let status = child.wait().expect("wait for eosmirror");
        let stdout = reading
            .join()
            .expect("stdout reader")
            .expect("read eosmirror's stdout");
        (status.code().unwrap_or(-1), stdout, stderr)
    }

    /// Runs `eosmirror failover` for `groups` with a JSON report: it takes
    /// the target's settings only (the source is gone). Returns the exit
    /// code (`None`: killed), standard output and error.
    pub fn failover(&self, groups: &str) -> (Option<i32>, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_eosmirror"))
            .args(["failover", "--producer.config"])
            .arg(&self.producer_config)
            .args(["--source.alias", &self.alias, "--groups", groups])
            .args(["--format", "json"])
            .output()
            .expect("run eosmirror failover");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn command_line(&self, command: &str, args: &[&str]) -> Command {
        let mut line = Command::new(env!("CARGO_BIN_EXE_eosmirror"));
        line.arg(command)
            .arg("--consumer.config")
            .arg(&self.consumer_config)
            .arg("--producer.config")
            .arg(&self.producer_config)
            .args(["--source.alias", &self.alias])
            .args(args);
        line
    }

    /// Runs eosmirror to completion (for commands expected to exit by
    /// themselves) and returns its exit code and output.
    pub fn run_to_exit(&self, include: &str, extra: &[&str], limit: Duration) -> (i32, String) {
        self.run_to_exit_env(include, extra, &[], limit)
    }

    /// Like [`MirrorSetup::run_to_exit`], with extra environment variables.
    pub fn run_to_exit_env(
        &self,
        include: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        limit: Duration,
    ) -> (i32, String) {
        let mut mirror = self.start_env(include, extra, env);
        let code = mirror.wait_exit(limit);
        (code, mirror.output())
    }
}

impl Mirror {
    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid(), signal);
        }
    }

    /// SIGKILL: the process dies at whatever instant it is in.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits for the exit code.
    pub fn stop(&mut self, limit: Duration) -> i32 {
        self.signal(libc::SIGTERM);
        self.wait_exit(limit)
    }

    /// Waits for the process to exit by itself; panics (after killing it) if
    /// it does not within `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> i32 {
        self.wait_status(limit).code().unwrap_or(-1)
    }

    /// Like [`Mirror::wait_exit`], returning how the process ended: its exit
    /// code or the signal that ended it.
    pub fn wait_status(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        let child = self.child.as_mut().expect("running");
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            if Instant::now() > deadline {
                self.kill();
                panic!(
                    "eosmirror did not exit within {limit:?}; output:\n{}",
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Polls `ready` every `every` until it returns a value. Fails at once
    /// (with eosmirror's output) if eosmirror exits meanwhile, and after
    /// `limit` with the message `stuck` builds (given eosmirror's output).
    pub fn wait_until<T>(
        &mut self,
        limit: Duration,
        every: Duration,
        mut ready: impl FnMut() -> Option<T>,
        stuck: impl Fn(&str) -> String,
    ) -> T {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(value) = ready() {
                return value;
            }
            assert!(
                self.is_running(),
                "eosmirror exited early; output:\n{}",
                self.output()
            );
            assert!(Instant::now() < deadline, "{}", stuck(&self.output()));
            std::thread::sleep(every);
        }
    }

    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().unwrap().is_none(),
            None => false,
        }
    }

    pub fn output(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until eosmirror writes `needle` `times` more times from now
    /// (each within `limit`), e.g. to see a periodic step begin and end
    /// after something the test did.
    pub fn wait_for_new_lines(&mut self, needle: &str, times: usize, limit: Duration) {
        for _ in 0..times {
            let since = self.output().len();
            self.wait_for_output(since, &[needle], limit);
        }
    }

    /// Waits until eosmirror's output after its first `since` bytes has
    /// every one of `needles`, and returns that part. Fails if eosmirror
    /// exits meanwhile, or after `limit`.
    pub fn wait_for_output(&mut self, since: usize, needles: &[&str], limit: Duration) -> String {
        let log = self.log.clone();
        let since_then = move || {
            let output = fs::read_to_string(&log).unwrap_or_default();
            output.get(since..).unwrap_or_default().to_string()
        };
        self.wait_until(
            limit,
            Duration::from_millis(250),
            || Some(since_then()).filter(|o| needles.iter().all(|n| o.contains(n))),
            |output| {
                let tail: Vec<&str> = output.get(since..).unwrap_or_default().lines().collect();
                format!(
                    "eosmirror never printed all of {needles:?} within {limit:?}; its output since then:\n{}",
                    tail[tail.len().saturating_sub(40)..].join("\n")
                )
            },
        )
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.kill();
    }
}

impl MirrorSetup {
    /// The common test shape: runs `eosmirror run --include <include>`
    /// (plus `extra`) until every topic in `topics` is copied, stops it with
    /// SIGTERM (it must exit 0), judges each copy with [`assert_exact_copy`]
    /// and returns eosmirror's output.
    pub fn copy_and_check(&self, include: &str, extra: &[&str], topics: &[&str]) -> String {
        self.copy_and_check_env(include, extra, &[], topics)
    }

    /// Like [`MirrorSetup::copy_and_check`], with extra environment variables
    /// for the eosmirror process.
    pub fn copy_and_check_env(
        &self,
        include: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        topics: &[&str],
    ) -> String {
        let bed = super::bed();
        let mut mirror = self.start_env(include, extra, env);
        for topic in topics {
            wait_for_copy(
                &bed.source,
                &bed.target,
                topic,
                Duration::from_secs(120),
                &mut mirror,
            );
        }
        let code = mirror.stop(Duration::from_secs(30));
        let output = mirror.output();
        assert_eq!(code, 0, "eosmirror did not stop cleanly:\n{output}");
        for topic in topics {
            assert_exact_copy(&bed.source, &bed.target, topic);
        }
        output
    }
}

/// Committed records per partition, in offset order.
pub fn by_partition(records: Vec<ReadRecord>) -> BTreeMap<i32, Vec<ReadRecord>> {
    let mut map: BTreeMap<i32, Vec<ReadRecord>> = BTreeMap::new();
    for r in records {
        map.entry(r.partition).or_default().push(r);
    }
    map
}

/// Why a target is not an exact copy, partition by partition.
pub fn copy_differences(source: &Cluster, target: &Cluster, topic: &str) -> Vec<String> {
    let src = by_partition(source.read_all(topic, Isolation::ReadCommitted));
    let tgt = match target.partition_count(topic) {
        Some(_) => by_partition(target.read_all(topic, Isolation::ReadCommitted)),
        None => return vec![format!("{topic}: missing on the target")],
    };
    let mut problems = Vec::new();
    let partitions: std::collections::BTreeSet<i32> =
        src.keys().chain(tgt.keys()).copied().collect();
    for p in partitions {
        let empty = Vec::new();
        let s = src.get(&p).unwrap_or(&empty);
        let t = tgt.get(&p).unwrap_or(&empty);
        if s.len() != t.len() {
            problems.push(format!(
                "{topic}-{p}: source has {} committed records, target {}",
                s.len(),
                t.len()
            ));
        }
        for (i, (a, b)) in s.iter().zip(t).enumerate() {
            let same = a.key == b.key
                && a.value == b.value
                && a.headers == b.headers
                && a.timestamp_ms() == b.timestamp_ms()
                && matches!(b.timestamp, rdkafka::Timestamp::CreateTime(_));
            if !same {
                problems.push(format!(
                    "{topic}-{p}: record #{i} differs (source offset {}, target offset {})",
                    a.offset, b.offset
                ));
                break;
            }
        }
    }
    problems
}

/// Panics unless the target holds exactly the source's committed records.
pub fn assert_exact_copy(source: &Cluster, target: &Cluster, topic: &str) {
    let problems = copy_differences(source, target, topic);
    assert!(
        problems.is_empty(),
        "not an exact copy:\n{}",
        problems.join("\n")
    );
}

/// Waits until the target holds as many committed records per partition as
/// the source (does not judge content: `assert_exact_copy` does).
pub fn wait_for_copy(
    source: &Cluster,
    target: &Cluster,
    topic: &str,
    limit: Duration,
    mirror: &mut Mirror,
) {
    let want = count_committed(source, topic);
    mirror.wait_until(
        limit,
        Duration::from_millis(500),
        || {
            (target.partition_count(topic).is_some() && count_committed(target, topic) == want)
                .then_some(())
        },
        |output| {
            format!(
                "copy of {topic} incomplete after {limit:?}: {:?}\neosmirror output tail:\n{}",
                copy_differences(source, target, topic),
                tail(output, 40)
            )
        },
    );
}

/// Committed record count per partition.
pub fn count_committed(cluster: &Cluster, topic: &str) -> BTreeMap<i32, usize> {
    by_partition(cluster.read_all(topic, Isolation::ReadCommitted))
        .into_iter()
        .map(|(p, rs)| (p, rs.len()))
        .collect()
}

/// The `eosmirror: error:` line that ends a failed run's output.
pub fn error_line(output: &str) -> Option<&str> {
    output.lines().find(|l| l.starts_with("eosmirror: error:"))
}

/// Lane session restarts an instance logged whose line contains `detail`
/// (a `reason="..."` field or a word of the error).
pub fn lane_restarts<'a>(output: &'a str, detail: &str) -> Vec<&'a str> {
    output
        .lines()
        .filter(|l| l.contains("restarting lane session") && l.contains(detail))
        .collect()
}

/// Session restarts an instance logged because its producer was fenced.
pub fn fenced_restarts(output: &str) -> Vec<&str> {
    lane_restarts(output, "reason=\"fenced\"")
}

/// Most fences of one lane allowed from a thawed zombie's one
/// init_transactions call (with librdkafka's retries inside it): seen up to
/// three; a loop of mutual fencing would be many more.
pub const MAX_ZOMBIE_FENCES: usize = 5;

/// The `lane=lane-<k>` field of a log line.
pub fn lane_of(line: &str) -> Option<&str> {
    line.split_whitespace()
        .find(|w| w.starts_with("lane=lane-"))
}

/// Fenced session restarts per lane in an instance's output.
pub fn fences_per_lane(output: &str) -> std::collections::BTreeMap<Option<&str>, usize> {
    let mut per_lane = std::collections::BTreeMap::new();
    for line in fenced_restarts(output) {
        *per_lane.entry(lane_of(line)).or_default() += 1;
    }
    per_lane
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Removes a path if it exists.
pub fn remove(path: &Path) {
    if path.is_dir() {
        fs::remove_dir_all(path).unwrap();
    } else if path.exists() {
        fs::remove_file(path).unwrap();
    }
}

/// A command's process, killed by its pid if the test ends before it does
/// (an `on_log` that panics): a dropped `Child` would run on.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

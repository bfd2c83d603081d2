//! The two clusters as the chaos runner sees them: client settings for its
//! own clients and for eosmirror's properties files, admin helpers, and
//! control of local brokers (kill with SIGKILL, restart).

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use crate::checker::Side;

/// How long admin calls wait on a broker.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(60);

/// One cluster: where it is, how to talk to it, and where a fault proxy
/// sits in front of it.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// "source" or "target".
    pub name: &'static str,
    /// Direct bootstrap servers (the runner's own clients use these).
    pub bootstrap: String,
    /// Client properties (`key=value`, librdkafka names) for every client,
    /// e.g. security settings; also written into eosmirror's files.
    pub properties: Vec<(String, String)>,
    /// Proxies to run: (listen, upstream). The broker must advertise the
    /// listen address on the upstream listener, so that every connection a
    /// client bootstraps through it stays behind the proxy. Empty: network
    /// faults on this path are not possible.
    pub proxies: Vec<(SocketAddr, SocketAddr)>,
}

impl ClusterSpec {
    /// Settings for the runner's own clients.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        for (k, v) in &self.properties {
            c.set(k, v);
        }
        c.set("bootstrap.servers", &self.bootstrap);
        c
    }

    /// This cluster as one side of a record-by-record comparison.
    pub fn checker_side(&self) -> Side {
        Side {
            name: self.name,
            config: self.client_config(),
        }
    }

    /// Bootstrap servers behind the proxies.
    pub fn proxied_bootstrap(&self) -> Option<String> {
        (!self.proxies.is_empty()).then(|| {
            self.proxies
                .iter()
                .map(|(l, _)| l.to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
    }

    /// Writes a properties file for eosmirror pointing at `bootstrap`.
    pub fn write_properties(&self, path: &Path, bootstrap: &str) -> Result<()> {
        let mut text = format!("bootstrap.servers={bootstrap}\n");
        for (k, v) in &self.properties {
            if k != "bootstrap.servers" {
                text.push_str(&format!("{k}={v}\n"));
            }
        }
        fs::write(path, text).with_context(|| format!("write {}", path.display()))
    }

    fn admin(&self) -> Result<AdminClient<DefaultClientContext>> {
        Ok(self.client_config().create()?)
    }

    /// Creates `topic` (no time-based retention: the workload writes old
    /// timestamps too) and waits until its metadata shows it and its leader
    /// answers for every partition. The controller's metadata comes first:
    /// with 1,000 partitions the broker created the last logs 6 s later. In
    /// a run that wrote meanwhile, the idempotent workload producer's first
    /// record of two partitions was reported delivered but is not in the
    /// source log, which starts at that producer's sequence 1 (the cause
    /// inside librdkafka or the broker was not pinned down).
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<()> {
        let admin = self.admin()?;
        let new =
            NewTopic::new(topic, partitions, TopicReplication::Fixed(-1)).set("retention.ms", "-1");
        let options = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
        for r in block_on(admin.create_topics([&new], &options))? {
            r.map_err(|(t, e)| anyhow!("{}: create topic {t}: {e}", self.name))?;
        }
        let deadline = Instant::now() + ADMIN_TIMEOUT;
        while self.partitions(topic)? != Some(partitions) {
            if Instant::now() > deadline {
                bail!("{}: topic {topic} did not appear", self.name);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let c: BaseConsumer = self.client_config().create()?;
        while let Err(e) = list_offsets(&c, topic, partitions, Offset::End) {
            if Instant::now() > deadline {
                bail!("{}: {topic}: {e}", self.name);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Deletes `topic` and waits until its metadata is gone.
    pub fn delete_topic(&self, topic: &str) -> Result<()> {
        let options = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
        for r in block_on(self.admin()?.delete_topics(&[topic], &options))? {
            r.map_err(|(t, e)| anyhow!("{}: delete topic {t}: {e}", self.name))?;
        }
        let deadline = Instant::now() + ADMIN_TIMEOUT;
        while self.partitions(topic)?.is_some() {
            if Instant::now() > deadline {
                bail!("{}: topic {topic} was not deleted", self.name);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Partition count of `topic`, `None` if it does not exist.
    pub fn partitions(&self, topic: &str) -> Result<Option<i32>> {
        let c: BaseConsumer = self.client_config().create()?;
        let md = c.fetch_metadata(Some(topic), ADMIN_TIMEOUT)?;
        Ok(md
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
            .map(|t| t.partitions().len() as i32))
    }

    /// Log start offsets (low watermarks) of partitions `0..partitions` of
    /// `topic`, indexed by partition: one ListOffsets round (a client and a
    /// round trip per partition took tens of seconds at 1,000 partitions).
    pub fn log_starts(&self, topic: &str, partitions: i32) -> Result<Vec<i64>> {
        list_offsets(
            &self.client_config().create()?,
            topic,
            partitions,
            Offset::Beginning,
        )
    }

    /// Ends of partitions `0..partitions` of `topic` as `read_committed`
    /// sees them (last stable offsets), indexed by partition: one
    /// ListOffsets round.
    pub fn ends(&self, topic: &str, partitions: i32) -> Result<Vec<i64>> {
        list_offsets(
            &self.client_config().create()?,
            topic,
            partitions,
            Offset::End,
        )
    }

    /// DeleteRecords: everything of the partition below `before`.
    pub fn delete_records(&self, topic: &str, partition: i32, before: i64) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(before))?;
        let options = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
        let result = block_on(self.admin()?.delete_records(&tpl, &options))?;
        for e in result.elements() {
            e.error().map_err(|e| {
                anyhow!("{}: delete records of {topic}-{partition}: {e}", self.name)
            })?;
        }
        Ok(())
    }
}

/// The offsets of partitions `0..partitions` of `topic` at `at`
/// (`Offset::Beginning` or `Offset::End`), indexed by partition: one
/// ListOffsets request per leader (librdkafka's `offsets_for_times` takes
/// these two as special timestamps). A partition without an answer (its
/// leader not ready yet) is an error naming it.
fn list_offsets(c: &BaseConsumer, topic: &str, partitions: i32, at: Offset) -> Result<Vec<i64>> {
    let mut request = TopicPartitionList::new();
    for p in 0..partitions {
        request.add_partition_offset(topic, p, at)?;
    }
    let answer = c.offsets_for_times(request, ADMIN_TIMEOUT)?;
    (0..partitions)
        .map(|p| {
            let element = answer
                .find_partition(topic, p)
                .ok_or_else(|| anyhow!("{topic}-{p}: no answer listing offsets"))?;
            element
                .error()
                .map_err(|e| anyhow!("{topic}-{p}: listing offsets: {e}"))?;
            match element.offset() {
                Offset::Offset(o) => Ok(o),
                other => Err(anyhow!("{topic}-{p}: listing offsets answered {other:?}")),
            }
        })
        .collect()
}

/// Whether a broker at `bootstrap` answers a metadata request.
fn answers(bootstrap: &str) -> bool {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap);
    let Ok(consumer) = c.create::<BaseConsumer>() else {
        return false;
    };
    consumer
        .fetch_metadata(None, Duration::from_secs(3))
        .is_ok_and(|m| !m.brokers().is_empty())
}

/// Runs an admin future to completion.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build runtime")
        .block_on(future)
}

/// Control of the local clusters started by `tests/kafka/cluster`: the
/// tool keeps each broker's pid in `<work>/<name>/broker.pid`; `up`
/// restarts whichever broker is stopped and waits until it is ready.
#[derive(Debug, Clone)]
pub struct LocalBrokers {
    /// The `cluster` tool.
    pub tool: PathBuf,
    /// Its work dir (`EOSMIRROR_KAFKA_WORK`).
    pub work: PathBuf,
}

impl LocalBrokers {
    /// Finds the tool's work dir (from `cluster env`) and checks that both
    /// clusters run.
    pub fn open(tool: &Path) -> Result<LocalBrokers> {
        let out = Command::new(tool)
            .arg("env")
            .output()
            .with_context(|| format!("run {} env", tool.display()))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let work = text
            .lines()
            .find_map(|l| l.strip_prefix("EOSMIRROR_KAFKA_WORK="))
            .ok_or_else(|| anyhow!("{} env printed no EOSMIRROR_KAFKA_WORK", tool.display()))?;
        Ok(LocalBrokers {
            tool: tool.to_path_buf(),
            work: PathBuf::from(work),
        })
    }

    /// The running broker's pid, checked against its command line the way
    /// the tool checks it (a stale pid file is not a broker).
    pub fn pid(&self, name: &str) -> Option<i32> {
        let dir = self.work.join(name);
        let pid: i32 = fs::read_to_string(dir.join("broker.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let props = dir.join("server.properties");
        String::from_utf8_lossy(&cmdline)
            .contains(&*props.to_string_lossy())
            .then_some(pid)
    }

    /// SIGKILLs the broker of cluster `name` and waits until it is gone.
    pub fn kill(&self, name: &str) -> Result<i32> {
        let pid = self
            .pid(name)
            .ok_or_else(|| anyhow!("the {name} broker is not running"))?;
        // SAFETY: kill(2) on the pid the cluster tool recorded for this
        // broker, verified against its command line just above.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            // The broker was started by the tool's shell, not by us: it is
            // reaped by init, so /proc/<pid> goes away (or turns zombie).
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.contains(") Z ") {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(pid)
    }

    /// `cluster up`: restarts stopped brokers and waits until they are ready.
    ///
    /// A broker killed with SIGKILL recovers every log at start-up, which on
    /// a small machine with many test topics can take minutes: up to 10
    /// minutes per attempt, three attempts (the tool stops what it started
    /// when an attempt fails). Readiness is also judged here — both brokers
    /// running and answering a metadata request at `bootstraps` — because
    /// the tool looks for its start-up line only after the log offset it
    /// noted, and misses it when the broker log rolls over during start-up;
    /// once ready, the tool's own wait is ended.
    pub fn up(&self, log: &Path, bootstraps: &[&str]) -> Result<()> {
        let mut last = String::new();
        for attempt in 1..=3 {
            let file = fs::File::create(log)?;
            let mut child = Command::new(&self.tool)
                .arg("up")
                .env("EOSMIRROR_KAFKA_READY_TIMEOUT", "600")
                .stdout(file.try_clone()?)
                .stderr(file)
                .spawn()?;
            let deadline = Instant::now() + Duration::from_secs(660);
            let ok = loop {
                if let Some(status) = child.try_wait()? {
                    break status.success();
                }
                if self.both_running() && bootstraps.iter().all(|b| answers(b)) {
                    // SAFETY: kill(2) on our own child (the tool's shell,
                    // waiting for a start-up line it will not see); the
                    // brokers run in their own sessions and are unaffected.
                    unsafe {
                        libc::kill(child.id() as i32, libc::SIGTERM);
                    }
                    let _ = child.wait();
                    break true;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break false;
                }
                std::thread::sleep(Duration::from_millis(500));
            };
            if ok {
                return Ok(());
            }
            last = fs::read_to_string(log).unwrap_or_default();
            eprintln!(
                "eosmirror-chaos: {} up failed (attempt {attempt} of 3)",
                self.tool.display()
            );
        }
        let tail: Vec<&str> = last.lines().rev().take(5).collect();
        bail!(
            "{} up failed three times; last lines: {}",
            self.tool.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        )
    }

    /// Whether both brokers run.
    pub fn both_running(&self) -> bool {
        self.pid("source").is_some() && self.pid("target").is_some()
    }
}

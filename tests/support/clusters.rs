//! The two clusters of the test bed: where they are (local ones, started on
//! demand, or any two given by environment), how a client reaches them,
//! and names no other test uses on them.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

/// One Kafka cluster of the test bed.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// "source" or "target", for messages.
    pub name: &'static str,
    /// Direct bootstrap address (tools and checkers connect here).
    pub bootstrap: String,
    /// Bootstrap address behind the fault-injection listener: the broker
    /// advertises this address on its proxied listener, so a client that
    /// bootstraps here sends all its traffic through whatever listens on it.
    /// `None` for external clusters.
    pub proxied: Option<ProxiedListener>,
    /// Bootstrap address of a SASL_PLAINTEXT listener with mechanism PLAIN
    /// and the user in [`SASL_USER`]; `None` for external clusters.
    pub sasl_plain: Option<String>,
}

/// The test user of the local clusters' SASL listeners (see
/// tests/kafka/cluster): a throwaway credential for tests only.
pub const SASL_USER: (&str, &str) = ("eosmirror", "eosmirror-test-secret");

/// The two sides of the fault-injection listener of a local broker.
#[derive(Debug, Clone, Copy)]
pub struct ProxiedListener {
    /// Where the broker really listens; a proxy forwards here.
    pub broker_port: u16,
    /// What the broker advertises; a proxy listens here.
    pub advertised_port: u16,
}

/// Source and target clusters.
#[derive(Debug)]
pub struct TestBed {
    pub source: Cluster,
    pub target: Cluster,
}

/// The shared bed, set up once per test binary.
pub fn bed() -> &'static TestBed {
    static BED: OnceLock<TestBed> = OnceLock::new();
    BED.get_or_init(|| {
        match (
            std::env::var("EOSMIRROR_SOURCE_BOOTSTRAP"),
            std::env::var("EOSMIRROR_TARGET_BOOTSTRAP"),
        ) {
            (Ok(source), Ok(target)) => TestBed {
                source: Cluster {
                    name: "source",
                    bootstrap: source,
                    proxied: None,
                    sasl_plain: None,
                },
                target: Cluster {
                    name: "target",
                    bootstrap: target,
                    proxied: None,
                    sasl_plain: None,
                },
            },
            (Err(_), Err(_)) => {
                ensure_local_clusters();
                TestBed {
                    source: local_cluster("source", 19090),
                    target: local_cluster("target", 29090),
                }
            }
            _ => panic!(
                "set both EOSMIRROR_SOURCE_BOOTSTRAP and EOSMIRROR_TARGET_BOOTSTRAP, or neither"
            ),
        }
    })
}

fn local_cluster(name: &'static str, port_base: u16) -> Cluster {
    Cluster {
        name,
        bootstrap: format!("127.0.0.1:{}", port_base + 2),
        proxied: Some(ProxiedListener {
            broker_port: port_base + 4,
            advertised_port: port_base + 5,
        }),
        sasl_plain: Some(format!("127.0.0.1:{}", port_base + 6)),
    }
}

/// The repository's cluster tool.
pub fn cluster_tool() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/cluster")
}

/// Starts the local clusters unless they already run; if this process started
/// them, it stops them when it exits (also after failed tests).
fn ensure_local_clusters() {
    let running = Command::new(cluster_tool())
        .arg("status")
        .output()
        .expect("run tests/kafka/cluster status")
        .status
        .success();
    if running {
        return;
    }
    let status = Command::new(cluster_tool())
        .arg("up")
        .status()
        .expect("run tests/kafka/cluster up");
    assert!(status.success(), "tests/kafka/cluster up failed");
    extern "C" fn stop_clusters() {
        let _ = Command::new(cluster_tool()).arg("down").status();
    }
    // SAFETY: registers a plain function with no captured state; it runs once
    // at process exit, when the test harness has finished all tests.
    unsafe {
        libc::atexit(stop_clusters);
    }
}

/// A name no other test (in this or any earlier run) uses.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{prefix}-{}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        nanos % 1_000_000_000_000
    )
}

/// The client settings and admin client every helper starts from.
impl Cluster {
    /// Client settings every helper starts from.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap);
        config
    }

    pub fn admin(&self) -> AdminClient<DefaultClientContext> {
        self.client_config().create().expect("create admin client")
    }
}

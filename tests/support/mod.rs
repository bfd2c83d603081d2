//! The integration-test bed: two real Kafka clusters and helpers that write and
//! read them with full fidelity.
//!
//! By default the clusters are the local ones started by `tests/kafka/cluster`
//! (source 127.0.0.1:19092, target 127.0.0.1:29092). If they are not running,
//! the first test to ask starts them and the test binary stops them again when
//! it exits; under `tests/run` they are already up and are left alone. Set
//! `EOSMIRROR_SOURCE_BOOTSTRAP` and `EOSMIRROR_TARGET_BOOTSTRAP` to run the
//! suite against any two clusters instead (tests that need the fault-injection
//! listeners are then skipped by the tests themselves).
//!
//! Helpers are synchronous on purpose: tests drive real processes and brokers,
//! and blocking calls keep each test a plain sequence of steps.
#![allow(dead_code)] // each test binary uses a different subset of the helpers

pub mod mirror;
pub mod proxy;
pub mod workload;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, Timestamp, TopicPartitionList};

/// The target offset holding the copy of the first committed source record
/// at or after `offset` (found by content); past the last record, the offset
/// after the last copy (where the next copy will be found).
pub fn copy_offset(
    source: &[ReadRecord],
    target: &[ReadRecord],
    partition: i32,
    offset: i64,
) -> i64 {
    match source
        .iter()
        .find(|r| r.partition == partition && r.offset >= offset)
    {
        Some(s) => {
            target
                .iter()
                .find(|t| t.partition == partition && t.key == s.key && t.value == s.value)
                .expect("copied")
                .offset
        }
        None => target
            .iter()
            .filter(|t| t.partition == partition)
            .map(|t| t.offset + 1)
            .max()
            .unwrap(),
    }
}

/// How long any single helper waits on a broker before the test fails loudly.
const BROKER_TIMEOUT: Duration = Duration::from_secs(60);

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

/// Which records a reader sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    ReadCommitted,
    ReadUncommitted,
}

impl Isolation {
    fn as_config(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read_committed",
            Isolation::ReadUncommitted => "read_uncommitted",
        }
    }
}

/// What happens to a producer transaction at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnOutcome {
    Commit,
    Abort,
}

/// A producer transaction left open by [`Cluster::open_transaction`].
pub struct OpenTransaction {
    producer: ThreadedProducer<DefaultProducerContext>,
}

impl OpenTransaction {
    pub fn commit(self) {
        self.producer
            .commit_transaction(BROKER_TIMEOUT)
            .expect("commit the open transaction");
    }
}

/// A record to write, with every field Kafka carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRecord {
    pub partition: i32,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// In order; duplicates and null values allowed.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Explicit CreateTime in ms; `None` lets the producer stamp it.
    pub timestamp: Option<i64>,
}

impl TestRecord {
    /// A record with a key and value and nothing else.
    pub fn new(partition: i32, key: &str, value: &str) -> TestRecord {
        TestRecord {
            partition,
            key: Some(key.as_bytes().to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: Vec::new(),
            timestamp: None,
        }
    }
}

/// A record as read back, with its position and timestamp type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: Timestamp,
}

impl ReadRecord {
    /// Everything a consumer was given for one record.
    pub fn from_message<M: Message>(m: &M) -> ReadRecord {
        ReadRecord {
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
            headers: m
                .headers()
                .map(|hs| {
                    hs.iter()
                        .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                        .collect()
                })
                .unwrap_or_default(),
            timestamp: m.timestamp(),
        }
    }

    /// The timestamp in ms whatever its type: a copy carries a source
    /// LogAppendTime as CreateTime.
    pub fn timestamp_ms(&self) -> Option<i64> {
        self.timestamp.to_millis()
    }

    /// Whether this is the stored form of `sent` (same content; a sent record
    /// without explicit timestamp matches any CreateTime).
    pub fn matches(&self, sent: &TestRecord) -> bool {
        let timestamp_ok = match sent.timestamp {
            Some(ms) => self.timestamp == Timestamp::CreateTime(ms),
            None => matches!(self.timestamp, Timestamp::CreateTime(_)),
        };
        self.partition == sent.partition
            && self.key == sent.key
            && self.value == sent.value
            && self.headers == sent.headers
            && timestamp_ok
    }
}

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

    /// Creates a uniquely named topic and returns its name.
    pub fn create_topic(&self, prefix: &str, partitions: i32) -> String {
        let name = unique_name(prefix);
        self.create_topic_with(&name, partitions, &[]);
        name
    }

    /// Creates topic `name` with topic-level configs; waits until its metadata
    /// is visible so that producers and consumers can use it at once.
    ///
    /// A request that times out is sent again through a new client, for up
    /// to [`BROKER_TIMEOUT`]: after a broker was frozen (tests/failover.rs) or
    /// stalled by the disk, its first requests can go unanswered while a new
    /// connection is served at once. A retry that finds the topic created is
    /// a success: the name is this test's own.
    pub fn create_topic_with(&self, name: &str, partitions: i32, configs: &[(&str, &str)]) {
        let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
        // Test records often carry old timestamps; time-based retention would
        // delete them within seconds (segments roll on their first record's
        // timestamp). Tests that want retention set it explicitly.
        if !configs.iter().any(|(k, _)| *k == "retention.ms") {
            topic = topic.set("retention.ms", "-1");
        }
        for (k, v) in configs {
            topic = topic.set(k, v);
        }
        let attempt_timeout = Duration::from_secs(15);
        let options = AdminOptions::new()
            .operation_timeout(Some(attempt_timeout))
            .request_timeout(Some(attempt_timeout));
        let deadline = Instant::now() + BROKER_TIMEOUT;
        loop {
            match block_on(self.admin().create_topics([&topic], &options)) {
                Ok(results) => {
                    for result in results {
                        match result {
                            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                            Err((topic, code)) => {
                                panic!("{}: create topic {topic}: {code}", self.name)
                            }
                        }
                    }
                    break;
                }
                Err(e) if is_timeout(&e) && Instant::now() < deadline => {
                    eprintln!("{}: create topic {name}: {e}; retrying", self.name);
                }
                Err(e) => panic!("{}: create topic {name}: {e}", self.name),
            }
        }
        let deadline = Instant::now() + BROKER_TIMEOUT;
        while self.partition_count(name) != Some(partitions) {
            assert!(
                Instant::now() < deadline,
                "{}: topic {name} never appeared",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Number of partitions of `topic`, or `None` if the cluster doesn't have it.
    pub fn partition_count(&self, topic: &str) -> Option<i32> {
        let consumer: BaseConsumer = self.client_config().create().expect("create consumer");
        let metadata = consumer
            .fetch_metadata(Some(topic), BROKER_TIMEOUT)
            .unwrap_or_else(|e| panic!("{}: metadata for {topic}: {e}", self.name));
        let t = metadata.topics().iter().find(|t| t.name() == topic)?;
        match t.error() {
            None => Some(t.partitions().len() as i32),
            Some(e) if RDKafkaErrorCode::from(e) == RDKafkaErrorCode::UnknownTopicOrPartition => {
                None
            }
            Some(e) => panic!(
                "{}: metadata for {topic}: {:?}",
                self.name,
                RDKafkaErrorCode::from(e)
            ),
        }
    }

    /// Writes records with a plain idempotent producer and waits until all are acknowledged.
    pub fn produce(&self, topic: &str, records: &[TestRecord]) {
        self.produce_with(topic, records, &[]);
    }

    /// Like [`Cluster::produce`], with extra producer settings (e.g. a
    /// compression codec).
    pub fn produce_with(&self, topic: &str, records: &[TestRecord], settings: &[(&str, &str)]) {
        let mut config = self.client_config();
        config.set("enable.idempotence", "true");
        for (k, v) in settings {
            config.set(*k, *v);
        }
        let producer: ThreadedProducer<DefaultProducerContext> =
            config.create().expect("create producer");
        send_all(&producer, topic, records);
        producer.flush(BROKER_TIMEOUT).expect("flush producer");
    }

    /// Writes records in one transaction that ends as `outcome` says.
    pub fn produce_transaction(&self, topic: &str, records: &[TestRecord], outcome: TxnOutcome) {
        let mut config = self.client_config();
        config.set("transactional.id", unique_name("testbed-txn"));
        let producer: ThreadedProducer<DefaultProducerContext> =
            config.create().expect("create transactional producer");
        producer
            .init_transactions(BROKER_TIMEOUT)
            .expect("init_transactions");
        producer.begin_transaction().expect("begin_transaction");
        send_all(&producer, topic, records);
        match outcome {
            TxnOutcome::Commit => producer.commit_transaction(BROKER_TIMEOUT).expect("commit"),
            TxnOutcome::Abort => {
                // Flush first so the aborted records really reach the log.
                producer.flush(BROKER_TIMEOUT).expect("flush before abort");
                producer.abort_transaction(BROKER_TIMEOUT).expect("abort")
            }
        }
    }

    /// Begins a transaction, writes `records` in it (flushed: they are in
    /// the log, past the last stable offset) and leaves it open, as a
    /// two-phase-commit sink between checkpoints does. Dropping the handle
    /// without [`OpenTransaction::commit`] leaves it to the broker's
    /// transaction timeout (5 minutes).
    pub fn open_transaction(&self, topic: &str, records: &[TestRecord]) -> OpenTransaction {
        let mut config = self.client_config();
        config
            .set("transactional.id", unique_name("testbed-open-txn"))
            .set("transaction.timeout.ms", "300000");
        let producer: ThreadedProducer<DefaultProducerContext> =
            config.create().expect("create transactional producer");
        producer
            .init_transactions(BROKER_TIMEOUT)
            .expect("init_transactions");
        producer.begin_transaction().expect("begin_transaction");
        send_all(&producer, topic, records);
        producer
            .flush(BROKER_TIMEOUT)
            .expect("flush the open transaction");
        OpenTransaction { producer }
    }

    /// Reads every partition of `topic` from the beginning up to its high
    /// watermark taken when the read starts, as seen by `isolation`, in
    /// partition then offset order. A fixed end keeps a read of a topic that
    /// is still being written from chasing it; under `read_committed`,
    /// transactions open at that moment are waited for.
    pub fn read_all(&self, topic: &str, isolation: Isolation) -> Vec<ReadRecord> {
        let partitions = self
            .partition_count(topic)
            .unwrap_or_else(|| panic!("{}: no topic {topic} to read", self.name));
        let mut watermarks = self.watermark_client();
        let ranges: BTreeMap<i32, (i64, i64)> = (0..partitions)
            .map(|p| (p, self.watermarks_with(&mut watermarks, topic, p)))
            .collect();
        let ends: BTreeMap<i32, i64> = ranges.iter().map(|(&p, &(_, high))| (p, high)).collect();
        let consumer: BaseConsumer = self
            .client_config()
            // A group id lets librdkafka report positions; nothing is committed.
            .set("group.id", unique_name("testbed-reader"))
            .set("enable.auto.commit", "false")
            .set("isolation.level", isolation.as_config())
            .create()
            .expect("create consumer");
        let mut assignment = TopicPartitionList::new();
        // Explicit start offsets: librdkafka resolves `Beginning` with one
        // request per partition, which takes minutes for 1,000 partitions.
        for (&p, &(low, _)) in &ranges {
            assignment
                .add_partition_offset(topic, p, Offset::Offset(low))
                .expect("add partition");
        }
        consumer.assign(&assignment).expect("assign");

        let mut by_partition: BTreeMap<i32, Vec<ReadRecord>> = BTreeMap::new();
        let deadline = Instant::now() + BROKER_TIMEOUT;
        let mut last_check = Instant::now();
        loop {
            // Positions are checked when nothing more arrives, or every
            // 200 ms: a position query lists every partition (1,000s), far
            // too much to do per record.
            match consumer.poll(Duration::from_millis(100)) {
                None => {}
                // librdkafka reconnects by itself; the deadline still holds.
                Some(Err(e)) if is_transient(&e) => {
                    eprintln!("{}: reading {topic}: {e}; still reading", self.name)
                }
                Some(Err(e)) => panic!("{}: reading {topic}: {e}", self.name),
                Some(Ok(m)) => {
                    by_partition
                        .entry(m.partition())
                        .or_default()
                        .push(ReadRecord::from_message(&m));
                    if last_check.elapsed() < Duration::from_millis(200) {
                        continue;
                    }
                }
            }
            last_check = Instant::now();
            // The position moves past transaction markers and aborted
            // records too, which are never returned as messages.
            let positions = consumer.position().expect("positions");
            let behind: Vec<i32> = ends
                .iter()
                .filter(|(&p, &end)| {
                    let at = match positions.find_partition(topic, p).map(|e| e.offset()) {
                        Some(Offset::Offset(o)) => o,
                        _ => 0,
                    };
                    at < end
                })
                .map(|(&p, _)| p)
                .collect();
            if behind.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{}: reading {topic} did not reach the end of partitions {behind:?}",
                self.name,
            );
        }
        by_partition.into_values().flatten().collect()
    }
}

fn send_all(
    producer: &ThreadedProducer<DefaultProducerContext>,
    topic: &str,
    records: &[TestRecord],
) {
    for r in records {
        let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
        for (key, value) in &r.headers {
            headers = headers.insert(Header {
                key,
                value: value.as_deref(),
            });
        }
        let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic)
            .partition(r.partition)
            .headers(headers);
        if let Some(key) = &r.key {
            record = record.key(key.as_slice());
        }
        if let Some(value) = &r.value {
            record = record.payload(value.as_slice());
        }
        if let Some(ts) = r.timestamp {
            record = record.timestamp(ts);
        }
        let mut pending = record;
        loop {
            match producer.send(pending) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    std::thread::sleep(Duration::from_millis(10));
                    pending = back;
                }
                Err((e, _)) => panic!("produce to {topic}: {e}"),
            }
        }
    }
}

/// Whether a client call failed because the broker did not answer in time.
fn is_timeout(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::OperationTimedOut | RDKafkaErrorCode::RequestTimedOut)
    )
}

/// Whether a consumer's error only reports lost connections, which
/// librdkafka re-establishes by itself (a broker stalled by the disk).
fn is_transient(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure)
    )
}

/// Runs an admin future to completion from a synchronous test.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build runtime")
        .block_on(future)
}

/// Admin helpers for edge-case tests: truncating, growing and describing topics.
impl Cluster {
    /// DeleteRecords: removes every record of `topic`/`partition` below
    /// `before_offset`, which becomes the partition's low watermark.
    pub fn delete_records(&self, topic: &str, partition: i32, before_offset: i64) {
        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset(topic, partition, Offset::Offset(before_offset))
            .expect("add partition");
        let options = AdminOptions::new().operation_timeout(Some(BROKER_TIMEOUT));
        let result =
            block_on(self.admin().delete_records(&offsets, &options)).unwrap_or_else(|e| {
                panic!("{}: delete records of {topic}-{partition}: {e}", self.name)
            });
        for element in result.elements() {
            if let Err(e) = element.error() {
                panic!(
                    "{}: delete records of {topic}-{partition} before {before_offset}: {e}",
                    self.name
                );
            }
        }
        let (low, _) = self.watermarks(topic, partition);
        assert_eq!(
            low, before_offset,
            "{}: {topic}-{partition} low watermark after DeleteRecords",
            self.name
        );
    }

    /// Deletes `topic` (a test's large topic, so later tests do not pay for
    /// its partitions); waits until the metadata no longer lists it.
    pub fn delete_topic(&self, topic: &str) {
        let options = AdminOptions::new().operation_timeout(Some(BROKER_TIMEOUT));
        let results = block_on(self.admin().delete_topics(&[topic], &options))
            .unwrap_or_else(|e| panic!("{}: delete topic {topic}: {e}", self.name));
        for result in results {
            if let Err((topic, code)) = result {
                panic!("{}: delete topic {topic}: {code}", self.name);
            }
        }
        let deadline = Instant::now() + BROKER_TIMEOUT;
        while self.partition_count(topic).is_some() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Low and high watermark of `topic`/`partition`.
    pub fn watermarks(&self, topic: &str, partition: i32) -> (i64, i64) {
        self.watermarks_with(&mut self.watermark_client(), topic, partition)
    }

    fn watermark_client(&self) -> BaseConsumer {
        self.client_config()
            .set("isolation.level", "read_uncommitted")
            .create()
            .expect("create consumer")
    }

    /// Watermarks through `client`, retried while the broker answers with
    /// an error (a partition whose leader is still being elected, e.g. just
    /// created, or after another test restarted the broker), up to
    /// [`BROKER_TIMEOUT`]. After a failure the next try uses a new client,
    /// so metadata the old one cached while the broker stalled cannot make
    /// every try fail.
    fn watermarks_with(
        &self,
        client: &mut BaseConsumer,
        topic: &str,
        partition: i32,
    ) -> (i64, i64) {
        let deadline = Instant::now() + BROKER_TIMEOUT;
        loop {
            match client.fetch_watermarks(topic, partition, BROKER_TIMEOUT) {
                Ok(range) => return range,
                Err(e) if Instant::now() < deadline => {
                    eprintln!(
                        "{}: watermarks of {topic}-{partition}: {e}; retrying",
                        self.name
                    );
                    std::thread::sleep(Duration::from_millis(500));
                    *client = self.watermark_client();
                }
                Err(e) => panic!("{}: watermarks of {topic}-{partition}: {e}", self.name),
            }
        }
    }

    /// Grows `topic` to `total` partitions; waits until metadata shows them.
    pub fn add_partitions(&self, topic: &str, total: usize) {
        let new = rdkafka::admin::NewPartitions::new(topic, total);
        let options = AdminOptions::new().operation_timeout(Some(BROKER_TIMEOUT));
        let results = block_on(self.admin().create_partitions([&new], &options))
            .unwrap_or_else(|e| panic!("{}: add partitions to {topic}: {e}", self.name));
        for result in results {
            if let Err((topic, code)) = result {
                panic!("{}: add partitions to {topic}: {code}", self.name);
            }
        }
        let deadline = Instant::now() + BROKER_TIMEOUT;
        while self.partition_count(topic) != Some(total as i32) {
            assert!(
                Instant::now() < deadline,
                "{}: {topic} never showed {total} partitions",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The settings set on `topic` itself (DescribeConfigs entries whose
    /// source is the topic), by name.
    pub fn topic_overrides(&self, topic: &str) -> BTreeMap<String, String> {
        use rdkafka::admin::{ConfigSource, ResourceSpecifier};
        let options = AdminOptions::new().request_timeout(Some(BROKER_TIMEOUT));
        let results = block_on(
            self.admin()
                .describe_configs([&ResourceSpecifier::Topic(topic)], &options),
        )
        .unwrap_or_else(|e| panic!("{}: describe configs of {topic}: {e}", self.name));
        let mut overrides = BTreeMap::new();
        for result in results {
            let resource = result
                .unwrap_or_else(|e| panic!("{}: describe configs of {topic}: {e}", self.name));
            for entry in resource.entries {
                if entry.source == ConfigSource::DynamicTopic {
                    overrides.insert(entry.name, entry.value.unwrap_or_default());
                }
            }
        }
        overrides
    }
}

/// A loopback address nothing listens on right now (e.g. for
/// `--metrics.address`).
pub fn free_local_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().unwrap().to_string()
}

/// The body of `http://address/metrics`, retrying while the endpoint starts.
pub fn scrape_metrics(address: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match http_get(address, "/metrics") {
            (200, body) => return body,
            other => assert!(
                Instant::now() < deadline,
                "metrics endpoint {address} did not answer: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `GET http://address/path`: the status code and the body; status 0 when
/// nothing answers (the endpoint is not up yet).
pub fn http_get(address: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let attempt = (|| -> std::io::Result<String> {
        let mut stream = std::net::TcpStream::connect(address)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
        )?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        Ok(response)
    })();
    let Ok(response) = attempt else {
        return (0, String::new());
    };
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, body)| body.to_string());
    (status, body)
}

/// The value of the Prometheus sample `name` whose labels include all of
/// `labels` (a sample without labels matches an empty `labels`).
pub fn metric_value(metrics: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    metrics
        .lines()
        .filter(|line| {
            line.starts_with(&format!("{name}{{")) || line.starts_with(&format!("{name} "))
        })
        .filter(|line| {
            labels
                .iter()
                .all(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
        })
        .find_map(|line| line.rsplit(' ').next()?.parse().ok())
}

/// The local target's secured listeners and the TLS material and credentials
/// `tests/kafka/cluster up` generates for them (never committed).
#[derive(Debug, Clone)]
pub struct SecuredTarget {
    /// SASL_SSL listener offering only PLAIN (like a managed cloud cluster).
    pub sasl_ssl_plain: String,
    /// SASL_SSL listener offering SCRAM-SHA-256 and SCRAM-SHA-512.
    pub sasl_ssl_scram: String,
    /// SSL listener that requires a client certificate (mTLS).
    pub ssl_mtls: String,
    /// Where the CA, certificates and stores are.
    pub tls_dir: PathBuf,
    credentials: BTreeMap<String, String>,
}

impl SecuredTarget {
    /// A file of the generated TLS material, e.g. `client.truststore.jks`.
    pub fn file(&self, name: &str) -> String {
        self.tls_dir.join(name).display().to_string()
    }

    /// A generated credential: `PLAIN_USER`, `PLAIN_PASSWORD`, `SCRAM_USER`,
    /// `SCRAM_PASSWORD`, `CLIENT_TRUSTSTORE_PASSWORD`,
    /// `CLIENT_KEYSTORE_PASSWORD`, `CLIENT_JKS_KEY_PASSWORD`.
    pub fn cred(&self, key: &str) -> &str {
        self.credentials
            .get(key)
            .unwrap_or_else(|| panic!("no {key} in {}/credentials.env", self.tls_dir.display()))
    }

    /// Every generated password: none may ever appear in eosmirror's output.
    pub fn passwords(&self) -> Vec<String> {
        self.credentials
            .iter()
            .filter(|(k, _)| k.contains("PASSWORD"))
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// The local target's secured listeners, or `None` when the suite runs against
/// external clusters.
pub fn secured_target() -> Option<SecuredTarget> {
    let bed = bed();
    bed.target.proxied?;
    let work = std::env::var_os("EOSMIRROR_KAFKA_WORK")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/kafka-local"));
    let tls_dir = work.join("target/tls");
    let text = std::fs::read_to_string(tls_dir.join("credentials.env")).unwrap_or_else(|e| {
        panic!(
            "{}/credentials.env: {e}; the running target predates its secured listeners: \
             restart it (tests/kafka/cluster down; tests/kafka/cluster up)",
            tls_dir.display()
        )
    });
    let credentials = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let port = |offset: u16| format!("127.0.0.1:{}", 29090 + offset);
    let secured = SecuredTarget {
        sasl_ssl_plain: port(7),
        sasl_ssl_scram: port(8),
        ssl_mtls: port(9),
        tls_dir,
        credentials,
    };
    assert!(
        std::net::TcpStream::connect(&secured.ssl_mtls).is_ok(),
        "the target has no secured listeners yet: restart it \
         (tests/kafka/cluster down; tests/kafka/cluster up)"
    );
    Some(secured)
}

/// Consumer-group offsets, as a stopped consumer group leaves them.
impl Cluster {
    /// Commits `offsets` (topic, partition, offset) for `group` without
    /// joining it.
    pub fn commit_group(&self, group: &str, offsets: &[(&str, i32, i64)]) {
        let consumer: BaseConsumer = self
            .client_config()
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("create consumer");
        let mut list = TopicPartitionList::new();
        for (topic, partition, offset) in offsets {
            list.add_partition_offset(topic, *partition, Offset::Offset(*offset))
                .expect("add partition");
        }
        consumer
            .commit(&list, rdkafka::consumer::CommitMode::Sync)
            .unwrap_or_else(|e| panic!("{}: commit offsets of {group}: {e}", self.name));
    }

    /// `group`'s committed offsets for partitions `0..partitions` of
    /// `topic` (partitions without one are left out).
    pub fn group_offsets(&self, group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
        let consumer: BaseConsumer = self
            .client_config()
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("create consumer");
        let mut list = TopicPartitionList::new();
        for p in 0..partitions {
            list.add_partition(topic, p);
        }
        consumer
            .committed_offsets(list, BROKER_TIMEOUT)
            .unwrap_or_else(|e| panic!("{}: offsets of {group}: {e}", self.name))
            .elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(o) => Some((e.partition(), o)),
                _ => None,
            })
            .collect()
    }
}

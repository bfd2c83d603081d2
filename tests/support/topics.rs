//! Topic admin: creating topics (riding out a stalled broker), their
//! partition counts, and truncating, growing, deleting and describing them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use eosmirror::wire::{TopicId, TopicIdRequest};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::broker::{block_on, is_timeout, is_transient, BROKER_TIMEOUT};
use super::clusters::{unique_name, Cluster};

/// Creating topics and counting their partitions.
impl Cluster {
    /// Creates a uniquely named topic and returns its name.
    pub fn create_topic(&self, prefix: &str, partitions: i32) -> String {
        let name = unique_name(prefix);
        self.create_topic_with(&name, partitions, &[]);
        name
    }

    /// Creates topic `name` with topic-level configs; waits until its metadata
    /// is visible so that producers and consumers can use it at once.
    ///
    /// A request that times out or loses its connection is sent again
    /// through a new client, for up to [`BROKER_TIMEOUT`]: after a broker was
    /// frozen (tests/failover.rs) or stalled by the disk, its first requests
    /// can go unanswered or see their connection closed while a new
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
                    let mut unregistered = false;
                    for result in results {
                        match result {
                            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                            // A broker just started, or thawed after a
                            // SIGSTOP longer than its controller session,
                            // is not registered (unfenced) yet: the
                            // controller has no broker for one replica.
                            Err((_, RDKafkaErrorCode::InvalidReplicationFactor))
                                if Instant::now() < deadline =>
                            {
                                unregistered = true
                            }
                            Err((topic, code)) => {
                                panic!("{}: create topic {topic}: {code}", self.name)
                            }
                        }
                    }
                    if !unregistered {
                        break;
                    }
                    eprintln!(
                        "{}: create topic {name}: no broker registered yet; retrying",
                        self.name
                    );
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) if (is_timeout(&e) || is_transient(&e)) && Instant::now() < deadline => {
                    eprintln!("{}: create topic {name}: {e}; retrying", self.name);
                    std::thread::sleep(Duration::from_millis(200));
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

    /// The id the cluster gave `topic` (panics if it has no such topic).
    pub fn topic_id(&self, topic: &str) -> TopicId {
        let consumer: BaseConsumer = self.client_config().create().expect("create consumer");
        let ids = TopicIdRequest::send(consumer.client(), &[topic], BROKER_TIMEOUT)
            .wait()
            .unwrap_or_else(|e| panic!("{}: the id of {topic}: {e}", self.name));
        ids.get(topic)
            .copied()
            .flatten()
            .unwrap_or_else(|| panic!("{}: no topic {topic}", self.name))
    }

    /// Number of partitions of `topic`, or `None` if the cluster doesn't have it.
    pub fn partition_count(&self, topic: &str) -> Option<i32> {
        self.try_partition_count(topic)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Cluster::partition_count`], returning what failed instead of
    /// panicking.
    pub fn try_partition_count(&self, topic: &str) -> Result<Option<i32>, String> {
        let consumer: BaseConsumer = self
            .client_config()
            .create()
            .map_err(|e| format!("{}: consumer: {e}", self.name))?;
        let metadata = consumer
            .fetch_metadata(Some(topic), BROKER_TIMEOUT)
            .map_err(|e| format!("{}: metadata for {topic}: {e}", self.name))?;
        let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) else {
            return Ok(None);
        };
        match t.error() {
            None => Ok(Some(t.partitions().len() as i32)),
            Some(e) if RDKafkaErrorCode::from(e) == RDKafkaErrorCode::UnknownTopicOrPartition => {
                Ok(None)
            }
            Some(e) => Err(format!(
                "{}: metadata for {topic}: {:?}",
                self.name,
                RDKafkaErrorCode::from(e)
            )),
        }
    }
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
        if let Err(e) = self.try_delete_topic(topic) {
            panic!("{e}");
        }
    }

    /// Like [`Cluster::delete_topic`], returning what failed instead of
    /// panicking (for a guard that cleans up while a test panics).
    pub fn try_delete_topic(&self, topic: &str) -> Result<(), String> {
        let options = AdminOptions::new().operation_timeout(Some(BROKER_TIMEOUT));
        let admin = self
            .client_config()
            .create::<AdminClient<DefaultClientContext>>()
            .map_err(|e| format!("{}: admin client: {e}", self.name))?;
        let results = block_on(admin.delete_topics(&[topic], &options))
            .map_err(|e| format!("{}: delete topic {topic}: {e}", self.name))?;
        for result in results {
            if let Err((topic, code)) = result {
                return Err(format!("{}: delete topic {topic}: {code}", self.name));
            }
        }
        let deadline = Instant::now() + BROKER_TIMEOUT;
        while self.try_partition_count(topic)?.is_some() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
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

    /// Sets `topic`'s own settings to exactly `key=value` (AlterConfigs
    /// replaces the others it had).
    pub fn set_topic_config(&self, topic: &str, key: &str, value: &str) {
        use rdkafka::admin::{AlterConfig, ResourceSpecifier};
        let options = AdminOptions::new().request_timeout(Some(BROKER_TIMEOUT));
        let alter = AlterConfig::new(ResourceSpecifier::Topic(topic)).set(key, value);
        let results = block_on(self.admin().alter_configs([&alter], &options))
            .unwrap_or_else(|e| panic!("{}: alter configs of {topic}: {e}", self.name));
        for result in results {
            if let Err((_, code)) = result {
                panic!("{}: alter configs of {topic}: {code}", self.name);
            }
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

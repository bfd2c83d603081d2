//! Direct broker queries and topic config changes, independent of
//! eosmirror's code.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::admin::{AdminOptions, AlterConfig, ResourceSpecifier};
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::support::Cluster;

/// (low, high) watermarks of one partition.
pub(crate) fn watermarks(cluster: &Cluster, topic: &str, partition: i32) -> (i64, i64) {
    let consumer: BaseConsumer = cluster.client_config().create().expect("consumer");
    consumer
        .fetch_watermarks(topic, partition, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{}: watermarks of {topic}-{partition}: {e}", cluster.name))
}

/// The cluster id a broker reports.
pub(crate) fn cluster_id(cluster: &Cluster) -> String {
    let consumer: BaseConsumer = cluster.client_config().create().expect("consumer");
    consumer
        .client()
        .fetch_cluster_id(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("{}: no cluster id", cluster.name))
}

/// Sets topic configs on `cluster`, keeping the topic's other dynamic
/// configs (the admin API available replaces the whole set).
pub(crate) fn alter_topic(cluster: &Cluster, topic: &str, settings: &[(&str, &str)]) {
    let admin = cluster.admin();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(60)));
    let described = runtime
        .block_on(admin.describe_configs([&ResourceSpecifier::Topic(topic)], &options))
        .expect("describe configs");
    let mut merged: BTreeMap<String, String> = BTreeMap::new();
    for resource in described {
        let resource = resource.expect("describe topic configs");
        for entry in resource.entries {
            if entry.source == rdkafka::admin::ConfigSource::DynamicTopic {
                if let Some(value) = entry.value {
                    merged.insert(entry.name, value);
                }
            }
        }
    }
    for (k, v) in settings {
        merged.insert(k.to_string(), v.to_string());
    }
    let mut alter = AlterConfig::new(ResourceSpecifier::Topic(topic));
    for (k, v) in &merged {
        alter = alter.set(k, v);
    }
    let results = runtime
        .block_on(admin.alter_configs([&alter], &options))
        .expect("alter configs");
    for result in results {
        if let Err((_, code)) = result {
            panic!("{}: alter configs of {topic}: {code}", cluster.name);
        }
    }
}

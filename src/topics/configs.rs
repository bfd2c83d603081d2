//! Topic settings as a cluster reports them (DescribeConfigs): every check
//! that depends on one (a LogAppendTime target, a compacted topic in
//! `verify`, the internal topics' retention, the groups topic's record size
//! limit, the source settings carried to the target) asks through here.

use std::time::Duration;

use rdkafka::admin::{
    AdminClient, AdminOptions, ConfigResource, ConfigResourceResult, ResourceSpecifier,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::KafkaResult;

/// How long a DescribeConfigs request may take.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Describes `topics` in one request; each answer (the topic's settings, or
/// the broker's error for that topic alone) paired with its topic.
/// `Err` when the request as a whole failed.
pub(crate) async fn describe_topics<'t>(
    admin: &AdminClient<DefaultClientContext>,
    topics: &[&'t str],
) -> KafkaResult<Vec<(&'t str, ConfigResourceResult)>> {
    if topics.is_empty() {
        return Ok(Vec::new());
    }
    let resources: Vec<ResourceSpecifier<'_>> =
        topics.iter().map(|t| ResourceSpecifier::Topic(t)).collect();
    let options = AdminOptions::new().request_timeout(Some(DESCRIBE_TIMEOUT));
    let answers = admin.describe_configs(resources.iter(), &options).await?;
    // librdkafka answers each resource asked, in the order asked (a
    // response with another count fails the request).
    Ok(topics.iter().copied().zip(answers).collect())
}

/// The value of the setting `name` of a described topic.
pub(crate) fn setting<'r>(topic: &'r ConfigResource, name: &str) -> Option<&'r str> {
    topic.get(name)?.value.as_deref()
}

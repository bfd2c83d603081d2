//! Reaching a cluster at start-up, and saying why when that fails.
//!
//! librdkafka reports connection problems (authentication, TLS, refused
//! connections) through its error callback while a metadata request simply
//! times out. This context keeps those errors, so the user is told
//! "authentication failed" at once instead of "timed out" after 30 s.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

/// What librdkafka reported for a client: the last error, and the first
/// one that retrying cannot fix (later "all brokers down" events must not
/// hide an authentication failure).
#[derive(Default)]
struct ReportedErrors(Mutex<Reported>);

#[derive(Default, Clone)]
struct Reported {
    last: Option<String>,
    permanent: Option<String>,
}

impl ClientContext for ReportedErrors {
    fn error(&self, error: KafkaError, reason: &str) {
        let mut reported = self.0.lock().expect("error slot poisoned");
        if is_permanent(&error) && reported.permanent.is_none() {
            reported.permanent = Some(reason.to_string());
        }
        reported.last = Some(reason.to_string());
    }
}

impl ConsumerContext for ReportedErrors {}

impl ReportedErrors {
    fn get(&self) -> Reported {
        self.0.lock().expect("error slot poisoned").clone()
    }
}

/// Errors that retrying cannot fix: wrong credentials or TLS setup.
fn is_permanent(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::Authentication
                | RDKafkaErrorCode::SaslAuthenticationFailed
                | RDKafkaErrorCode::SSL
        )
    )
}

/// Connects to a cluster and returns its id; fails with the reason (and the
/// file to fix) when the cluster cannot be reached within `limit`, or at
/// once on an authentication or TLS failure.
pub fn cluster_id(
    config: &ClientConfig,
    cluster: &str,
    file: &Path,
    limit: Duration,
) -> anyhow::Result<String> {
    let consumer: BaseConsumer<ReportedErrors> = config
        .create_with_context(ReportedErrors::default())
        .map_err(|e| {
            anyhow!(
                "creating a client for the {cluster} cluster ({}): {e}",
                file.display()
            )
        })?;
    let bootstrap = config.get("bootstrap.servers").unwrap_or_default();
    let deadline = Instant::now() + limit;
    let fail = |why: String| {
        anyhow!(
            "cannot reach the {cluster} cluster at {bootstrap} (settings in {}): {why}",
            file.display()
        )
    };
    loop {
        match consumer.fetch_metadata(None, Duration::from_secs(2)) {
            Ok(_) => break,
            Err(e) => {
                // Error events reach the context only when the client's
                // queue is served; the client has no assignment, so these
                // polls return nothing else.
                for _ in 0..100 {
                    if consumer.poll(Duration::ZERO).is_none() {
                        break;
                    }
                }
                let reported = consumer.context().get();
                if let Some(reason) = reported.permanent {
                    return Err(fail(format!(
                        "{reason}; check the credentials and security settings"
                    )));
                }
                if Instant::now() >= deadline {
                    let why = reported.last.unwrap_or_else(|| e.to_string());
                    return Err(fail(format!(
                        "{why} (gave up after {limit:?}); check the address, the network and security settings"
                    )));
                }
            }
        }
    }
    consumer
        .client()
        .fetch_cluster_id(limit)
        .ok_or_else(|| anyhow!("the {cluster} cluster at {bootstrap} did not report a cluster id"))
}

//! Talking to a broker from a synchronous test: how long to wait, which
//! errors are worth a retry, and running admin futures.

use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

/// How long any single helper waits on a broker before the test fails loudly.
pub(super) const BROKER_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether a client call failed because the broker did not answer in time.
pub(super) fn is_timeout(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::OperationTimedOut | RDKafkaErrorCode::RequestTimedOut)
    )
}

/// Whether a consumer's error only reports lost connections, which
/// librdkafka re-establishes by itself (a broker stalled by the disk).
pub(super) fn is_transient(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure)
    )
}

/// Runs an admin future to completion from a synchronous test.
pub(super) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build runtime")
        .block_on(future)
}

//! Every Kafka error a worker can meet, classified in one place.
//!
//! The worker only ever asks [`classify`] what to do; it never matches on
//! error codes itself. The classes follow librdkafka's transactional API
//! contract:
//!
//! - **Retriable**: the call may simply be repeated (e.g. a commit that timed
//!   out); the transaction is still intact.
//! - **AbortBatch**: the transaction is doomed but the producer is fine:
//!   abort it, seek the source back to the last committed position, retry.
//! - **RestartSession**: the producer is unusable or the outcome is unknown:
//!   drop it, create a new one, `init_transactions` (which fences the old one
//!   and resolves its open transaction), re-read the position from the
//!   target.
//! - **Fenced**: another producer with our transactional id took over. Either
//!   another instance owns the lane (we stop), or our own transaction
//!   timed out and the coordinator bumped the epoch (we restart). The lane
//!   tells the two apart by asking the fleet's group coordinator
//!   (`membership.rs`) before it re-initialises.
//! - **LaneLost**: the group coordinator refused the transaction's offset
//!   commit (KIP-447) because this member's generation is stale: the lane may
//!   have moved. Like Fenced, the group decides before anything is touched.
//! - **Fatal**: a record the target will never accept, or a configuration
//!   problem: stop and report; retrying cannot help.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// What a worker does about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    Retriable,
    AbortBatch,
    RestartSession,
    Fenced,
    LaneLost,
    Fatal,
}

/// Codes that mean a record or request can never succeed as is.
fn is_permanent_rejection(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode::*;
    matches!(
        code,
        MessageSizeTooLarge
            | InvalidRecord
            | InvalidTimestamp
            | InvalidMessage
            | MessageBatchTooLarge
            | TopicAuthorizationFailed
            | TransactionalIdAuthorizationFailed
            | ClusterAuthorizationFailed
            | SaslAuthenticationFailed
            | UnsupportedForMessageFormat
            | UnsupportedVersion
            | InvalidTransactionTimeout
            | InvalidConfig
            | PolicyViolation
    )
}

/// Codes of a transactional offset commit from a stale group member.
fn is_stale_membership(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode::*;
    matches!(code, IllegalGeneration | UnknownMemberId | FencedInstanceId)
}

fn is_fencing(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode::*;
    matches!(
        code,
        ProducerFenced | InvalidProducerEpoch | Fenced | InvalidProducerIdMapping
    )
}

/// Classifies an error from a transactional producer call or a delivery report.
pub fn classify(error: &KafkaError) -> Disposition {
    match error {
        KafkaError::Transaction(e) => {
            let code = e.code();
            if is_fencing(code) {
                Disposition::Fenced
            } else if is_stale_membership(code) {
                Disposition::LaneLost
            } else if e.is_fatal() {
                if is_permanent_rejection(code) {
                    Disposition::Fatal
                } else {
                    Disposition::RestartSession
                }
            } else if e.txn_requires_abort() {
                Disposition::AbortBatch
            } else if e.is_retriable() {
                Disposition::Retriable
            } else if is_permanent_rejection(code) {
                Disposition::Fatal
            } else {
                Disposition::RestartSession
            }
        }
        // A failed flush inside commit: the data may or may not be written;
        // only the transaction's end decides, so abort and retry.
        KafkaError::Flush(_) => Disposition::AbortBatch,
        KafkaError::MessageProduction(code) => classify_code(*code),
        _ => match error.rdkafka_error_code() {
            Some(code) => classify_code(code),
            None => Disposition::RestartSession,
        },
    }
}

/// Classifies an error code seen in a delivery report.
pub fn classify_code(code: RDKafkaErrorCode) -> Disposition {
    if is_fencing(code) {
        Disposition::Fenced
    } else if is_stale_membership(code) {
        Disposition::LaneLost
    } else if is_permanent_rejection(code) {
        Disposition::Fatal
    } else {
        // Any other failed delivery dooms the transaction but not the producer.
        Disposition::AbortBatch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_codes() {
        assert_eq!(
            classify_code(RDKafkaErrorCode::MessageSizeTooLarge),
            Disposition::Fatal
        );
        assert_eq!(
            classify_code(RDKafkaErrorCode::InvalidTimestamp),
            Disposition::Fatal
        );
        assert_eq!(
            classify_code(RDKafkaErrorCode::ProducerFenced),
            Disposition::Fenced
        );
        assert_eq!(
            classify_code(RDKafkaErrorCode::IllegalGeneration),
            Disposition::LaneLost
        );
        assert_eq!(
            classify_code(RDKafkaErrorCode::MessageTimedOut),
            Disposition::AbortBatch
        );
        assert_eq!(
            classify_code(RDKafkaErrorCode::NotLeaderForPartition),
            Disposition::AbortBatch
        );
    }

    #[test]
    fn flush_failure_aborts() {
        assert_eq!(
            classify(&KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut)),
            Disposition::AbortBatch
        );
    }

    #[test]
    fn production_errors_use_the_code() {
        assert_eq!(
            classify(&KafkaError::MessageProduction(
                RDKafkaErrorCode::MessageSizeTooLarge
            )),
            Disposition::Fatal
        );
    }
}

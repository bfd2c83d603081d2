//! Which topic a name stands for: Kafka's topic ids, read with librdkafka's
//! DescribeTopics admin call.
//!
//! A topic deleted and created again under the same name is a different
//! topic with a new id, and its offsets start over. Offsets recorded for the
//! old one must never be applied to the new one (librdkafka does not reset a
//! consumer on a topic-id change either), so positions carry the ids and are
//! checked against them. rdkafka has no safe wrapper for DescribeTopics; the
//! FFI is confined to this file, and every librdkafka object it creates is
//! destroyed here.

use std::collections::BTreeMap;
use std::ffi::{c_char, CStr, CString};
use std::fmt;
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaRespErr;
use serde::{Deserialize, Serialize};

use crate::ffi::{admin_result, Owned};

/// A Kafka topic id (a UUID the controller gives a topic when it is
/// created; never reused).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TopicId(pub [u8; 16]);

impl TopicId {
    fn from_bits(most: i64, least: i64) -> TopicId {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&most.to_be_bytes());
        bytes[8..].copy_from_slice(&least.to_be_bytes());
        TopicId(bytes)
    }
}

/// Kafka's own rendering (URL-safe base64 without padding), so an id in an
/// error message matches what `kafka-topics.sh --describe` prints.
impl fmt::Display for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let standard = openssl::base64::encode_block(&self.0);
        let url_safe: String = standard
            .trim_end_matches('=')
            .chars()
            .map(|c| match c {
                '+' => '-',
                '/' => '_',
                c => c,
            })
            .collect();
        f.write_str(&url_safe)
    }
}

impl fmt::Debug for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TopicId({self})")
    }
}

/// A DescribeTopics request in flight: sent by [`TopicIdRequest::send`],
/// answered by [`TopicIdRequest::wait`], so the caller can do other work
/// (a lane flushes its batch) while the cluster answers.
pub struct TopicIdRequest {
    queue: Owned<rd::rd_kafka_queue_t>,
    timeout_ms: i32,
}

impl TopicIdRequest {
    /// Asks the cluster `client` is connected to for the ids of `topics`
    /// (one request for all of them).
    pub fn send<C: ClientContext>(
        client: &Client<C>,
        topics: &[&str],
        timeout: Duration,
    ) -> TopicIdRequest {
        let names: Vec<CString> = topics
            .iter()
            .map(|t| CString::new(*t).expect("Kafka topic names contain no NUL"))
            .collect();
        let mut pointers: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let rk = client.native_ptr();
        let timeout_ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: the collection and options are created and destroyed here
        // (the request copies both); `names` outlives the collection; the
        // queue is owned by the returned request.
        unsafe {
            let collection = Owned::new(
                rd::rd_kafka_TopicCollection_of_topic_names(pointers.as_mut_ptr(), pointers.len()),
                rd::rd_kafka_TopicCollection_destroy,
            );
            let queue = Owned::new(rd::rd_kafka_queue_new(rk), rd::rd_kafka_queue_destroy);
            let options = Owned::new(
                rd::rd_kafka_AdminOptions_new(
                    rk,
                    rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBETOPICS,
                ),
                rd::rd_kafka_AdminOptions_destroy,
            );
            let mut errstr = [0 as c_char; 256];
            rd::rd_kafka_AdminOptions_set_request_timeout(
                options.ptr(),
                timeout_ms,
                errstr.as_mut_ptr(),
                errstr.len(),
            );
            rd::rd_kafka_DescribeTopics(rk, collection.ptr(), options.ptr(), queue.ptr());
            TopicIdRequest { queue, timeout_ms }
        }
    }

    /// The id of each topic asked for; `None` for one that does not exist.
    pub fn wait(self) -> Result<BTreeMap<String, Option<TopicId>>, KafkaError> {
        let mut found = BTreeMap::new();
        // SAFETY: the event is polled from our own queue, read, and
        // destroyed before this returns.
        unsafe {
            let event = admin_result(self.queue.ptr(), self.timeout_ms)?;
            let result = rd::rd_kafka_event_DescribeTopics_result(event.ptr());
            let mut count = 0usize;
            let descriptions = rd::rd_kafka_DescribeTopics_result_topics(result, &mut count);
            for i in 0..count {
                let description = *descriptions.add(i);
                let name = CStr::from_ptr(rd::rd_kafka_TopicDescription_name(description))
                    .to_string_lossy()
                    .into_owned();
                let error = rd::rd_kafka_TopicDescription_error(description);
                let code = if error.is_null() {
                    RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR
                } else {
                    rd::rd_kafka_error_code(error)
                };
                match code {
                    RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR => {
                        let id = rd::rd_kafka_TopicDescription_topic_id(description);
                        found.insert(
                            name,
                            Some(TopicId::from_bits(
                                rd::rd_kafka_Uuid_most_significant_bits(id),
                                rd::rd_kafka_Uuid_least_significant_bits(id),
                            )),
                        );
                    }
                    RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART => {
                        found.insert(name, None);
                    }
                    code => return Err(KafkaError::AdminOp(code.into())),
                }
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_kafka() {
        // Kafka's Uuid.toString of (msb 0x0123456789abcdef,
        // lsb 0xfedcba9876543210): URL-safe base64 of the 16 bytes.
        let id = TopicId::from_bits(0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210_u64 as i64);
        assert_eq!(id.to_string(), "ASNFZ4mrze_-3LqYdlQyEA");
        assert_eq!(id.to_string().len(), 22);
    }
}

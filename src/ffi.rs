//! Ownership of librdkafka objects made through FFI (where rdkafka has no
//! safe wrapper): each is destroyed exactly once, on every path out.

use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};
use rdkafka::error::KafkaError;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr};

/// A librdkafka object and the function that destroys it.
pub(crate) struct Owned<T> {
    ptr: *mut T,
    destroy: unsafe extern "C" fn(*mut T),
}

impl<T> Owned<T> {
    /// Takes ownership of `ptr` (null is allowed: nothing to destroy).
    pub(crate) fn new(ptr: *mut T, destroy: unsafe extern "C" fn(*mut T)) -> Owned<T> {
        Owned { ptr, destroy }
    }

    pub(crate) fn ptr(&self) -> *mut T {
        self.ptr
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: created by the matching librdkafka constructor and
            // destroyed once, here.
            unsafe { (self.destroy)(self.ptr) }
        }
    }
}

/// Waits on `queue` for the result event of the one admin request sent to
/// it: the request's own `timeout_ms` ends it, the extra second only covers
/// the result's way back through the queue. No event is a time-out; an
/// event carrying an error is that error.
///
/// # Safety
/// `queue` is a live librdkafka queue that only this request's result is
/// delivered to.
pub(crate) unsafe fn admin_result(
    queue: *mut rd::rd_kafka_queue_t,
    timeout_ms: i32,
) -> Result<Owned<rd::rd_kafka_event_t>, KafkaError> {
    let event = Owned::new(
        rd::rd_kafka_queue_poll(queue, timeout_ms.saturating_add(1_000)),
        rd::rd_kafka_event_destroy,
    );
    if event.ptr().is_null() {
        return Err(KafkaError::AdminOp(RDKafkaErrorCode::OperationTimedOut));
    }
    let code = rd::rd_kafka_event_error(event.ptr());
    if code != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Err(KafkaError::AdminOp(code.into()));
    }
    Ok(event)
}

/// How many events (records, mostly) wait in the queue a consumer polls:
/// its group's queue, or the main queue without a group, as rdkafka's
/// `BaseConsumer::poll` chooses.
pub(crate) fn polled_queue_length<C: ClientContext>(client: &Client<C>) -> usize {
    let rk = client.native_ptr();
    // SAFETY: `rk` is live for the borrow of `client`; each queue handle is
    // a new reference, destroyed before returning.
    unsafe {
        let mut queue = Owned::new(
            rd::rd_kafka_queue_get_consumer(rk),
            rd::rd_kafka_queue_destroy,
        );
        if queue.ptr().is_null() {
            queue = Owned::new(rd::rd_kafka_queue_get_main(rk), rd::rd_kafka_queue_destroy);
        }
        if queue.ptr().is_null() {
            0
        } else {
            rd::rd_kafka_queue_length(queue.ptr())
        }
    }
}

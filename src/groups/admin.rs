//! Group offsets through Kafka's admin API (librdkafka's
//! ListConsumerGroupOffsets, AlterConsumerGroupOffsets and
//! DescribeConsumerGroups), for many groups at once on one client.
//!
//! Why not a consumer per group: rdkafka's safe API fetches and commits a
//! group's offsets only through a consumer whose `group.id` is that group,
//! and such a client costs about 150 ms of librdkafka timers to create, use
//! and close. With the admin API every group's request is in flight at the
//! same time on one client, so a thousand groups take about as long as a
//! few. rdkafka has no safe wrapper for these calls; the FFI is confined to
//! this file, and every librdkafka object it creates is destroyed here.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::time::{Duration, Instant};

use rdkafka::admin::AdminClient;
use rdkafka::bindings as rd;
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr};
use rdkafka::{Offset, TopicPartitionList};

use super::{GroupError, GroupMembership, MemberAssignment, TopicPartition};
use crate::ffi::Owned;

/// Groups described per DescribeConsumerGroups request.
const DESCRIBE_BATCH: usize = 100;

/// One admin client of one cluster, for group offset requests.
pub struct GroupAdmin {
    client: AdminClient<DefaultClientContext>,
    cluster: &'static str,
    timeout: Duration,
}

/// The outcome of one request per group.
pub type PerGroup<T> = BTreeMap<String, Result<T, GroupError>>;

/// A librdkafka admin request kind: its API, result event type and how its
/// result is read.
#[derive(Clone, Copy)]
enum Operation {
    List,
    ListOffsets,
    AlterOffsets,
    Describe,
}

impl Operation {
    fn api(self) -> rd::rd_kafka_admin_op_t {
        match self {
            Operation::List => rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS,
            Operation::ListOffsets => {
                rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS
            }
            Operation::AlterOffsets => {
                rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS
            }
            Operation::Describe => {
                rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS
            }
        }
    }

    /// The event type of this request's result.
    fn result_event(self) -> c_int {
        match self {
            Operation::List => rd::RD_KAFKA_EVENT_LISTCONSUMERGROUPS_RESULT,
            Operation::ListOffsets => rd::RD_KAFKA_EVENT_LISTCONSUMERGROUPOFFSETS_RESULT,
            Operation::AlterOffsets => rd::RD_KAFKA_EVENT_ALTERCONSUMERGROUPOFFSETS_RESULT,
            Operation::Describe => rd::RD_KAFKA_EVENT_DESCRIBECONSUMERGROUPS_RESULT,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Operation::List => "listing",
            Operation::ListOffsets => "fetching committed offsets",
            Operation::AlterOffsets => "committing offsets",
            Operation::Describe => "describing",
        }
    }
}

fn code_error(code: RDKafkaRespErr) -> KafkaError {
    KafkaError::AdminOp(RDKafkaErrorCode::from(code))
}

/// # Safety
/// `s` is null or a NUL-terminated string valid for the call.
unsafe fn text(s: *const c_char) -> String {
    if s.is_null() {
        String::new()
    } else {
        CStr::from_ptr(s).to_string_lossy().into_owned()
    }
}

/// One partition of a librdkafka list: where, the offset, the error.
type Entry = (TopicPartition, i64, RDKafkaRespErr);

/// The (topic, partition, offset, error) entries of a librdkafka list.
///
/// # Safety
/// `list` is null or a valid partition list for the call.
unsafe fn entries(list: *const rd::rd_kafka_topic_partition_list_t) -> Vec<Entry> {
    if list.is_null() {
        return Vec::new();
    }
    let list = &*list;
    (0..list.cnt.max(0) as usize)
        .map(|i| {
            let e = &*list.elems.add(i);
            ((text(e.topic), e.partition), e.offset, e.err)
        })
        .collect()
}

impl GroupAdmin {
    pub fn new(
        cluster: &'static str,
        connection: &ClientConfig,
        timeout: Duration,
    ) -> Result<GroupAdmin, GroupError> {
        let client = connection.create().map_err(|source| GroupError {
            cluster,
            group: "*".to_string(),
            operation: "creating an admin client",
            source: Box::new(source),
        })?;
        Ok(GroupAdmin {
            client,
            cluster,
            timeout,
        })
    }

    /// The client, for a round's other requests to the same cluster (one
    /// client per cluster per round).
    pub fn client(&self) -> &AdminClient<DefaultClientContext> {
        &self.client
    }

    fn error(&self, group: &str, operation: Operation, source: KafkaError) -> GroupError {
        GroupError {
            cluster: self.cluster,
            group: group.to_string(),
            operation: operation.name(),
            source: Box::new(source),
        }
    }

    /// Sends one request per item through `submit` (given the client, the
    /// options carrying the item's index as opaque, and the queue), then
    /// collects one result event per request, with `read` turning an event
    /// into per-group outcomes.
    fn run<T, I>(
        &self,
        operation: Operation,
        items: &[I],
        submit: impl Fn(
            *mut rd::rd_kafka_t,
            &I,
            *mut rd::rd_kafka_AdminOptions_t,
            *mut rd::rd_kafka_queue_t,
        ),
        group_of: impl Fn(&I) -> Vec<String>,
        read: impl Fn(*mut rd::rd_kafka_event_t) -> Vec<(String, Result<T, KafkaError>)>,
    ) -> PerGroup<T> {
        let rk = self.client.inner().native_ptr();
        // SAFETY: rk is a live client for the lifetime of `self`.
        let queue = Owned::new(
            unsafe { rd::rd_kafka_queue_new(rk) },
            rd::rd_kafka_queue_destroy,
        );
        let timeout_ms = self.timeout.as_millis().min(i32::MAX as u128) as c_int;
        for (index, item) in items.iter().enumerate() {
            // SAFETY: options are created, handed to the request (which
            // copies them) and destroyed here.
            unsafe {
                let options = rd::rd_kafka_AdminOptions_new(rk, operation.api());
                let mut errstr = [0 as c_char; 256];
                rd::rd_kafka_AdminOptions_set_request_timeout(
                    options,
                    timeout_ms,
                    errstr.as_mut_ptr(),
                    errstr.len(),
                );
                rd::rd_kafka_AdminOptions_set_opaque(options, index as *mut c_void);
                submit(rk, item, options, queue.ptr());
                rd::rd_kafka_AdminOptions_destroy(options);
            }
        }
        let mut out = PerGroup::new();
        let mut pending: Vec<bool> = vec![true; items.len()];
        let deadline = Instant::now() + self.timeout + Duration::from_secs(5);
        while pending.iter().any(|p| *p) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // SAFETY: the queue is live; a non-null event is owned by `event`.
            let raw = unsafe {
                rd::rd_kafka_queue_poll(queue.ptr(), left.as_millis().min(1000) as c_int)
            };
            if raw.is_null() {
                continue;
            }
            let event = Owned::new(raw, rd::rd_kafka_event_destroy);
            // Only this request kind's results are read below; anything
            // else on the queue is dropped.
            // SAFETY: event is live.
            if unsafe { rd::rd_kafka_event_type(event.ptr()) } != operation.result_event() {
                continue;
            }
            // SAFETY: the opaque is the index set above.
            let index = unsafe { rd::rd_kafka_event_opaque(event.ptr()) } as usize;
            let Some(slot) = pending.get_mut(index) else {
                continue;
            };
            *slot = false;
            // SAFETY: event is live.
            let request_error = unsafe { rd::rd_kafka_event_error(event.ptr()) };
            if request_error != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
                for group in group_of(&items[index]) {
                    out.insert(
                        group.clone(),
                        Err(self.error(&group, operation, code_error(request_error))),
                    );
                }
                continue;
            }
            for (group, result) in read(event.ptr()) {
                let result = result.map_err(|e| self.error(&group, operation, e));
                out.insert(group, result);
            }
        }
        for (index, still) in pending.iter().enumerate() {
            if *still {
                for group in group_of(&items[index]) {
                    out.insert(
                        group.clone(),
                        Err(self.error(
                            &group,
                            operation,
                            KafkaError::AdminOp(RDKafkaErrorCode::RequestTimedOut),
                        )),
                    );
                }
            }
        }
        out
    }

    /// Names of all consumer groups on the cluster (one request per broker,
    /// no per-group description), as the answer of the pseudo-group `*`.
    pub fn list(&self) -> PerGroup<Vec<String>> {
        self.run(
            Operation::List,
            &[()],
            |rk, _, options, queue| unsafe {
                // SAFETY: plain call on a live client and queue.
                rd::rd_kafka_ListConsumerGroups(rk, options, queue);
            },
            |_| vec!["*".to_string()],
            |event| unsafe {
                // SAFETY: event is a live ListConsumerGroups result; the
                // listings live as long as the event.
                let result = rd::rd_kafka_event_ListConsumerGroups_result(event);
                // A broker that did not answer (restarting, still loading
                // its coordinator state) leaves its groups out of the valid
                // listings: a partial list would sync or move only some.
                let mut failed = 0usize;
                let errors = rd::rd_kafka_ListConsumerGroups_result_errors(result, &mut failed);
                if failed > 0 {
                    let code = rd::rd_kafka_error_code(*errors);
                    return vec![("*".to_string(), Err(code_error(code)))];
                }
                let mut count = 0usize;
                let listings = rd::rd_kafka_ListConsumerGroups_result_valid(result, &mut count);
                let names = (0..count)
                    .map(|i| text(rd::rd_kafka_ConsumerGroupListing_group_id(*listings.add(i))))
                    .collect();
                vec![("*".to_string(), Ok(names))]
            },
        )
    }

    /// Committed offsets of each group for `partitions`; partitions without
    /// a committed offset are left out.
    pub fn committed(
        &self,
        groups: &[String],
        partitions: &[TopicPartition],
    ) -> PerGroup<BTreeMap<TopicPartition, i64>> {
        if partitions.is_empty() {
            return groups
                .iter()
                .map(|g| (g.clone(), Ok(BTreeMap::new())))
                .collect();
        }
        let mut query = TopicPartitionList::new();
        for (topic, partition) in partitions {
            query.add_partition(topic, *partition);
        }
        let names: Vec<CString> = groups
            .iter()
            .map(|g| CString::new(g.as_str()).unwrap_or_default())
            .collect();
        self.run(
            Operation::ListOffsets,
            &names,
            |rk, name, options, queue| unsafe {
                // SAFETY: the request copies the name and the list; it is
                // destroyed right after being submitted.
                let mut request =
                    rd::rd_kafka_ListConsumerGroupOffsets_new(name.as_ptr(), query.ptr());
                rd::rd_kafka_ListConsumerGroupOffsets(rk, &mut request, 1, options, queue);
                rd::rd_kafka_ListConsumerGroupOffsets_destroy(request);
            },
            |name| vec![name.to_string_lossy().into_owned()],
            |event| unsafe {
                // SAFETY: event is a live ListConsumerGroupOffsets result.
                let result = rd::rd_kafka_event_ListConsumerGroupOffsets_result(event);
                group_results(rd::rd_kafka_ListConsumerGroupOffsets_result_groups, result)
                    .into_iter()
                    .map(|(group, outcome)| {
                        // A partition's error (e.g. offsets still loading
                        // after a broker restart) fails the group: treating
                        // it as "no offset" would be silently wrong.
                        let offsets = outcome.and_then(|list| {
                            if let Some((_, _, err)) = list.iter().find(|(_, _, err)| {
                                *err != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR
                            }) {
                                return Err(code_error(*err));
                            }
                            Ok(list
                                .into_iter()
                                .filter(|(_, offset, _)| *offset >= 0)
                                .map(|(tp, offset, _)| (tp, offset))
                                .collect())
                        });
                        (group, offsets)
                    })
                    .collect()
            },
        )
    }

    /// Commits each group's offsets (one request per group). The broker
    /// refuses a commit for a group with active members.
    pub fn commit(
        &self,
        commits: &BTreeMap<String, BTreeMap<TopicPartition, i64>>,
    ) -> PerGroup<()> {
        let mut requests = Vec::new();
        for (group, offsets) in commits {
            let mut list = TopicPartitionList::new();
            for ((topic, partition), offset) in offsets {
                if let Err(e) =
                    list.add_partition_offset(topic, *partition, Offset::Offset(*offset))
                {
                    let mut out = PerGroup::new();
                    out.insert(
                        group.clone(),
                        Err(self.error(group, Operation::AlterOffsets, e)),
                    );
                    return out;
                }
            }
            requests.push((CString::new(group.as_str()).unwrap_or_default(), list));
        }
        self.run(
            Operation::AlterOffsets,
            &requests,
            |rk, (name, list), options, queue| unsafe {
                // SAFETY: as for ListConsumerGroupOffsets.
                let mut request =
                    rd::rd_kafka_AlterConsumerGroupOffsets_new(name.as_ptr(), list.ptr());
                rd::rd_kafka_AlterConsumerGroupOffsets(rk, &mut request, 1, options, queue);
                rd::rd_kafka_AlterConsumerGroupOffsets_destroy(request);
            },
            |(name, _)| vec![name.to_string_lossy().into_owned()],
            |event| unsafe {
                // SAFETY: event is a live AlterConsumerGroupOffsets result.
                let result = rd::rd_kafka_event_AlterConsumerGroupOffsets_result(event);
                group_results(rd::rd_kafka_AlterConsumerGroupOffsets_result_groups, result)
                    .into_iter()
                    .map(|(group, outcome)| {
                        let done = outcome.and_then(|list| {
                            match list.iter().find(|(_, _, err)| {
                                *err != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR
                            }) {
                                Some((_, _, err)) => Err(code_error(*err)),
                                None => Ok(()),
                            }
                        });
                        (group, done)
                    })
                    .collect()
            },
        )
    }

    /// State and active members of one group, in one attempt (callers that
    /// ask again on their own schedule, like the fleet's selection watch).
    pub fn describe_one(&self, group: &str) -> Result<GroupMembership, GroupError> {
        self.describe(&[group.to_string()])
            .remove(group)
            .unwrap_or_else(|| Err(GroupError::unanswered(self.cluster, group)))
    }

    /// State and active members of each group.
    pub fn describe(&self, groups: &[String]) -> PerGroup<GroupMembership> {
        let batches: Vec<Vec<CString>> = groups
            .chunks(DESCRIBE_BATCH)
            .map(|chunk| {
                chunk
                    .iter()
                    .map(|g| CString::new(g.as_str()).unwrap_or_default())
                    .collect()
            })
            .collect();
        self.run(
            Operation::Describe,
            &batches,
            |rk, names, options, queue| unsafe {
                // SAFETY: the names outlive the call, which copies them.
                let mut pointers: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
                rd::rd_kafka_DescribeConsumerGroups(
                    rk,
                    pointers.as_mut_ptr(),
                    pointers.len(),
                    options,
                    queue,
                );
            },
            |names| {
                names
                    .iter()
                    .map(|n| n.to_string_lossy().into_owned())
                    .collect()
            },
            |event| unsafe {
                // SAFETY: event is a live DescribeConsumerGroups result; the
                // descriptions live as long as the event.
                let result = rd::rd_kafka_event_DescribeConsumerGroups_result(event);
                let mut count = 0usize;
                let descriptions =
                    rd::rd_kafka_DescribeConsumerGroups_result_groups(result, &mut count);
                (0..count)
                    .map(|i| {
                        let d = *descriptions.add(i);
                        let group = text(rd::rd_kafka_ConsumerGroupDescription_group_id(d));
                        let error = rd::rd_kafka_ConsumerGroupDescription_error(d);
                        if !error.is_null() {
                            return (group, Err(code_error(rd::rd_kafka_error_code(error))));
                        }
                        let state = rd::rd_kafka_ConsumerGroupDescription_state(d);
                        let assignments: Vec<MemberAssignment> = (0
                            ..rd::rd_kafka_ConsumerGroupDescription_member_count(d))
                            .map(|m| {
                                let member = rd::rd_kafka_ConsumerGroupDescription_member(d, m);
                                let assignment = rd::rd_kafka_MemberDescription_assignment(member);
                                let partitions = if assignment.is_null() {
                                    Vec::new()
                                } else {
                                    entries(rd::rd_kafka_MemberAssignment_partitions(assignment))
                                        .into_iter()
                                        .map(|(tp, _, _)| tp)
                                        .collect()
                                };
                                MemberAssignment {
                                    client_id: text(rd::rd_kafka_MemberDescription_client_id(
                                        member,
                                    )),
                                    host: text(rd::rd_kafka_MemberDescription_host(member))
                                        .trim_start_matches('/')
                                        .to_string(),
                                    partitions,
                                }
                            })
                            .collect();
                        let members = assignments
                            .iter()
                            .map(|m| format!("{}@{}", m.client_id, m.host))
                            .collect();
                        (
                            group,
                            Ok(GroupMembership {
                                state: state_name(state).to_string(),
                                members,
                                assignments,
                            }),
                        )
                    })
                    .collect()
            },
        )
    }
}

type GroupResults<R> =
    unsafe extern "C" fn(*const R, *mut usize) -> *mut *const rd::rd_kafka_group_result_t;

/// Each group of a group-offsets result, with its partition entries or
/// its error.
///
/// # Safety
/// `result` is a live result of the kind `groups_of` reads.
unsafe fn group_results<R>(
    groups_of: GroupResults<R>,
    result: *const R,
) -> Vec<(String, Result<Vec<Entry>, KafkaError>)> {
    if result.is_null() {
        return Vec::new();
    }
    let mut count = 0usize;
    let groups = groups_of(result, &mut count);
    (0..count)
        .map(|i| {
            let g = *groups.add(i);
            let name = text(rd::rd_kafka_group_result_name(g));
            let error = rd::rd_kafka_group_result_error(g);
            if !error.is_null() {
                return (name, Err(code_error(rd::rd_kafka_error_code(error))));
            }
            (name, Ok(entries(rd::rd_kafka_group_result_partitions(g))))
        })
        .collect()
}

/// The broker's name of a group state.
fn state_name(state: rd::rd_kafka_consumer_group_state_t) -> &'static str {
    use rd::rd_kafka_consumer_group_state_t as S;
    match state {
        S::RD_KAFKA_CONSUMER_GROUP_STATE_PREPARING_REBALANCE => "PreparingRebalance",
        S::RD_KAFKA_CONSUMER_GROUP_STATE_COMPLETING_REBALANCE => "CompletingRebalance",
        S::RD_KAFKA_CONSUMER_GROUP_STATE_STABLE => "Stable",
        S::RD_KAFKA_CONSUMER_GROUP_STATE_DEAD => "Dead",
        S::RD_KAFKA_CONSUMER_GROUP_STATE_EMPTY => "Empty",
        _ => "Unknown",
    }
}

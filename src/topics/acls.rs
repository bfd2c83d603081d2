//! The ACLs a principal has on a cluster, read with librdkafka's
//! DescribeAcls admin call, for `eosmirror plan`.
//!
//! rdkafka 0.39 has no safe wrapper for DescribeAcls; the FFI is confined to
//! this file, and every librdkafka object it creates is destroyed here
//! (`crate::ffi::Owned`). Read-only: DescribeAcls changes nothing.

use std::ffi::{c_char, CStr, CString};
use std::fmt;
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};
use rdkafka::error::KafkaError;

use crate::ffi::{admin_result, Owned};

/// One ACL binding as the broker reports it, with librdkafka's names
/// (`TRANSACTIONAL_ID`, `PREFIXED`, `WRITE`, `ALLOW`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclEntry {
    pub permission: String,
    pub operation: String,
    pub resource_type: String,
    pub name: String,
    pub pattern: String,
    pub principal: String,
    pub host: String,
}

impl fmt::Display for AclEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} on {} {} ({}) for {} from {}",
            self.permission,
            self.operation,
            self.resource_type,
            self.name,
            self.pattern,
            self.principal,
            self.host
        )
    }
}

/// The ACL bindings of `principal` (e.g. `User:alice`), or of everyone when
/// `None`. Beware: librdkafka 2.12 reads the response's error code and then
/// drops it (`rd_kafka_DescribeAclsResponse_parse`), so a broker without an
/// authorizer (SECURITY_DISABLED) or one that denies the request
/// (CLUSTER_AUTHORIZATION_FAILED) answers an empty list here, like a
/// principal without ACLs; only transport errors and timeouts fail.
pub fn describe<C: ClientContext>(
    client: &Client<C>,
    principal: Option<&str>,
    timeout: Duration,
) -> Result<Vec<AclEntry>, KafkaError> {
    let principal = principal
        .map(|p| {
            CString::new(p).map_err(|_| KafkaError::AdminOpCreation("NUL in principal".into()))
        })
        .transpose()?;
    let rk = client.native_ptr();
    let timeout_ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    let mut errstr = [0 as c_char; 512];
    // SAFETY: the filter, options, queue and event are created and destroyed
    // here (the request copies the filter and options); `principal` outlives
    // the filter; the result is read before the event is destroyed.
    unsafe {
        let filter = Owned::new(
            rd::rd_kafka_AclBindingFilter_new(
                rd::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_ANY,
                std::ptr::null(),
                rd::rd_kafka_ResourcePatternType_t::RD_KAFKA_RESOURCE_PATTERN_ANY,
                principal.as_ref().map_or(std::ptr::null(), |p| p.as_ptr()),
                std::ptr::null(),
                rd::rd_kafka_AclOperation_t::RD_KAFKA_ACL_OPERATION_ANY,
                rd::rd_kafka_AclPermissionType_t::RD_KAFKA_ACL_PERMISSION_TYPE_ANY,
                errstr.as_mut_ptr(),
                errstr.len(),
            ),
            rd::rd_kafka_AclBinding_destroy,
        );
        if filter.ptr().is_null() {
            let why = CStr::from_ptr(errstr.as_ptr())
                .to_string_lossy()
                .into_owned();
            return Err(KafkaError::AdminOpCreation(why));
        }
        let queue = Owned::new(rd::rd_kafka_queue_new(rk), rd::rd_kafka_queue_destroy);
        let options = Owned::new(
            rd::rd_kafka_AdminOptions_new(
                rk,
                rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBEACLS,
            ),
            rd::rd_kafka_AdminOptions_destroy,
        );
        rd::rd_kafka_AdminOptions_set_request_timeout(
            options.ptr(),
            timeout_ms,
            errstr.as_mut_ptr(),
            errstr.len(),
        );
        rd::rd_kafka_DescribeAcls(rk, filter.ptr(), options.ptr(), queue.ptr());
        let event = admin_result(queue.ptr(), timeout_ms)?;
        let result = rd::rd_kafka_event_DescribeAcls_result(event.ptr());
        let mut count = 0usize;
        let bindings = rd::rd_kafka_DescribeAcls_result_acls(result, &mut count);
        let text = |p: *const c_char| {
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        let mut entries = Vec::with_capacity(count);
        for i in 0..count {
            let acl = *bindings.add(i);
            entries.push(AclEntry {
                permission: text(rd::rd_kafka_AclPermissionType_name(
                    rd::rd_kafka_AclBinding_permission_type(acl),
                )),
                operation: text(rd::rd_kafka_AclOperation_name(
                    rd::rd_kafka_AclBinding_operation(acl),
                )),
                resource_type: text(rd::rd_kafka_ResourceType_name(
                    rd::rd_kafka_AclBinding_restype(acl),
                )),
                name: text(rd::rd_kafka_AclBinding_name(acl)),
                pattern: text(rd::rd_kafka_ResourcePatternType_name(
                    rd::rd_kafka_AclBinding_resource_pattern_type(acl),
                )),
                principal: text(rd::rd_kafka_AclBinding_principal(acl)),
                host: text(rd::rd_kafka_AclBinding_host(acl)),
            });
        }
        Ok(entries)
    }
}

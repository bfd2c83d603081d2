//! The integration-test bed: two real Kafka clusters and helpers that write and
//! read them with full fidelity.
//!
//! By default the clusters are the local ones started by `tests/kafka/cluster`
//! (source 127.0.0.1:19092, target 127.0.0.1:29092). If they are not running,
//! the first test to ask starts them and the test binary stops them again when
//! it exits; under `tests/run` they are already up and are left alone. Set
//! `EOSMIRROR_SOURCE_BOOTSTRAP` and `EOSMIRROR_TARGET_BOOTSTRAP` to run the
//! suite against any two clusters instead (tests that need the fault-injection
//! listeners are then skipped by the tests themselves).
//!
//! Helpers are synchronous on purpose: tests drive real processes and brokers,
//! and blocking calls keep each test a plain sequence of steps.
//!
//! One file per concept: the clusters of the bed and how to reach them
//! (`clusters`), timeouts and errors of broker requests (`broker`), test
//! records (`records`), topic admin (`topics`), producing (`produce`),
//! reading back (`read`), consumer-group offsets (`groups`), a long
//! progress history written directly (`history`), the metrics
//! endpoint (`metrics`) and the target's secured listeners (`secured`);
//! `mirror`, `proxy` and `workload` run eosmirror, fault proxies and a
//! steady producer.
#![allow(dead_code)] // each test binary uses a different subset of the helpers

mod broker;
mod clusters;
mod groups;
mod history;
mod metrics;
pub mod mirror;
mod produce;
pub mod proxy;
mod read;
mod records;
mod secured;
mod topics;
pub mod workload;

// Each test binary uses a different subset of these names, like the helpers.
#[allow(unused_imports)]
pub use self::{
    clusters::{bed, cluster_tool, unique_name, Cluster, ProxiedListener, TestBed, SASL_USER},
    metrics::{free_local_address, http_get, metric_value, scrape_metrics},
    produce::{OpenTransaction, TxnOutcome},
    read::Isolation,
    records::{copy_offset, ReadRecord, TestRecord},
    secured::{local_log_dir, secured_target, SecuredTarget},
};

//! Fault injection for eosmirror's tests.
//!
//! Exactly-once replication is only interesting when things break, so the
//! integration and chaos tests need to break the network between eosmirror
//! and its Kafka clusters on demand. Each local broker advertises an extra
//! listener whose port is served by a [`proxy::FaultProxy`]; every connection
//! a client bootstraps through that port therefore crosses the proxy, and the
//! test can blackhole, delay, throttle or reset it from Rust code.

pub mod checker;
pub mod proxy;

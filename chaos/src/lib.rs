//! Fault injection and exactly-once checking for eosmirror, sharing no code
//! with it (this crate does not depend on the `eosmirror` crate), so one can
//! check the other.
//!
//! - [`proxy`]: a loopback TCP proxy that blackholes, resets, delays and
//!   throttles connections; each local broker advertises an extra listener
//!   whose port a proxy serves, so every connection a client bootstraps
//!   through it crosses the proxy;
//! - [`checker`]: record-by-record comparison of a source topic and its copy;
//! - [`record`], [`ledger`], [`judge`]: the chaos workload's self-describing
//!   records, its bounded log of what it committed, and the streaming
//!   checker that classifies a copy (lost, duplicated, reordered, altered,
//!   aborted read, unexpected) from the target alone plus that log;
//! - [`latency`]: end-to-end latency of a running copy, measured from outside;
//! - [`run`]: the chaos suite itself (workload, faults, scenarios, report),
//!   behind `eosmirror-chaos run`.

// Every public item is documented: the crate is the independent judge of
// eosmirror's claims, and its meaning must be readable without eosmirror.
#![warn(missing_docs)]

pub mod checker;
pub mod judge;
pub mod latency;
pub mod ledger;
pub mod proxy;
pub mod ranges;
pub mod record;
pub mod run;

//! eosmirror: exactly-once Kafka-to-Kafka replication.
//!
//! The layout mirrors the design (see ARCHITECTURE.md): `cli` parses the
//! command line, `commands` turns each command's flags into the plain
//! options of the engines it drives, `config` turns Java client properties
//! into librdkafka settings, `topics` selects source topics and prepares
//! the target, `replication` is the data path (transactional lanes, each
//! copying many source partitions), `verify`, `groups` and `runbook` check
//! the copy and move consumers onto it, `metrics` and `shutdown` are the
//! operational edges.
//!
//! The library exists for the `eosmirror` binary and its tests, and its
//! public surface is only what they use: the command line and the commands
//! run from it, the crash and fault points tests arm, the parsers of user files the fuzz
//! targets call, and the records kept
//! on the target ([`wire`]) that tests forge. Every engine is internal, so
//! the compiler reports what nothing uses.

#![warn(missing_docs)]

pub mod cli;
pub mod commands;
/// Public for its user-file parsers only, which the fuzz targets in `fuzz/`
/// (a crate of their own) call.
pub mod config;
pub mod failpoints;
pub mod wire;

pub use error_chain::one_line;

mod clock;
mod clusters;
mod connect;
mod endpoint;
mod error_chain;
mod ffi;
mod groups;
mod health;
mod malloc;
mod metrics;
mod offsets;
mod pattern;
mod plan;
mod read;
mod replication;
mod runbook;
mod shutdown;
mod status;
mod topics;
mod units;
mod verify;

//! eosmirror: exactly-once Kafka-to-Kafka replication.
//!
//! The layout mirrors the design (see ARCHITECTURE.md): `cli` parses the
//! command line, `commands` turns each command's flags into the plain
//! options of the engines it drives, `config` turns Java client properties
//! into librdkafka settings, `topics` selects source topics and prepares
//! the target, `replication` is the data path (one transactional worker per
//! source partition), `metrics` and `shutdown` are the operational edges.

pub mod cli;
pub mod clock;
pub mod clusters;
pub mod commands;
pub mod config;
pub mod connect;
pub mod endpoint;
pub mod error_chain;
pub mod failpoints;
mod ffi;
pub mod groups;
pub mod health;
pub mod metrics;
pub mod offsets;
pub mod pattern;
pub mod plan;
pub mod read;
pub mod replication;
pub mod shutdown;
pub mod status;
pub mod topics;
pub mod verify;

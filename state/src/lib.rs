//! Local state of eosmirror: a sled-backed **cache** of replication progress.
//!
//! The target Kafka cluster is the single source of truth: a source record
//! counts as replicated only if it was committed to the target together with
//! the progress record naming it. This crate merely remembers, per source
//! partition,
//!
//! - the last recorded position ([`Checkpoint`]) and the topic incarnation
//!   it belongs to, so a restarting worker knows where in the progress topic
//!   to look instead of searching it, and
//! - the exact source → target offset mapping of recorded commits
//!   ([`OffsetRun`]s), so offset translation ([`StateStore::translate`]) is a
//!   local lookup.
//!
//! Deleting the state directory is always safe: workers rebuild their
//! positions from the target. Accordingly [`StateStore::open`] repairs
//! anything damaged by moving it aside and starting empty, and refuses only
//! what must not be touched: a store that belongs to other clusters or is
//! in use by another process.
//!
//! Keys are big-endian with sign bits flipped so sled's byte order is numeric
//! order and lookups are ranges, not scans; values are serde + bincode 2
//! (standard configuration) under a format version kept in the store header.

#![warn(missing_docs)]

mod checkpoint;
mod codec;
mod error;
mod header;
mod key;
mod store;
mod translation;

pub use checkpoint::{Checkpoint, TopicIncarnation};
pub use error::StateError;
pub use header::ClusterIdentity;
pub use key::SourcePartition;
pub use store::{OpenOutcome, StateStore};
pub use translation::{OffsetLookup, OffsetRun, Tail};

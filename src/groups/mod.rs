//! Consumer groups across the two clusters: reading a source group's
//! committed offsets, translating them exactly through the offset mapping,
//! and committing the translations to the same group on the target.

pub mod admin;
pub mod apply;
pub mod kafka;
pub mod record;
pub mod sync;
pub mod translation;

/// A partition of a topic, as groups commit offsets for it.
pub type TopicPartition = (String, i32);

//! The replication data path: one worker per source partition, each copying
//! its partition to the same-numbered target partition in Kafka
//! transactions that also carry the progress record.

pub mod delivery;
pub mod errors;
pub mod failure;
pub mod limits;
pub mod progress;
pub mod resume;
pub mod supervisor;
pub mod throttle;
pub mod worker;

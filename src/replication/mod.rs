//! The replication data path: source partitions spread over a fixed number
//! of lanes; each lane copies its partitions to the same-numbered target
//! partitions in Kafka transactions that also carry one progress record per
//! partition touched.

pub mod client_settings;
pub mod client_stats;
pub mod copy_progress;
pub mod delivery;
pub mod errors;
pub mod failure;
pub mod lane;
pub mod latency;
pub mod layout;
pub mod limits;
pub mod lineage;
pub mod member_id;
pub mod membership;
pub mod other_deployments;
pub mod park;
pub mod positions;
pub mod progress;
pub mod selection;
pub mod source_watch;
pub mod status_topic;
pub mod stopped;
pub mod supervisor;
pub mod throttle;
pub mod transaction;
pub mod watermarks;

//! The records eosmirror keeps on the target, public so integration tests
//! can forge them (a progress record that lies, a lineage that does not
//! match) and check that every reader names the problem; and the request
//! for a topic's id, which a forged lineage names.

pub use crate::replication::progress::{InternalTopics, Lineage, ProgressRecord};
pub use crate::topics::identity::{TopicId, TopicIdRequest};

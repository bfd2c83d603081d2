//! Which kind of client a configuration file is for.

use std::fmt;

/// Which kind of client a configuration file is for.
///
/// Why: some keys mean something only to one kind (`isolation.level` to a consumer,
/// `acks` to a producer), and eosmirror owns different keys in each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientRole {
    /// The consumer reading the source cluster (`--consumer.config`).
    Consumer,
    /// The transactional producer writing the target cluster (`--producer.config`).
    Producer,
    /// An admin client (topic and metadata management).
    Admin,
}

impl fmt::Display for ClientRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClientRole::Consumer => "consumer",
            ClientRole::Producer => "producer",
            ClientRole::Admin => "admin client",
        })
    }
}

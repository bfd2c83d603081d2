//! The store header: which clusters a state dir belongs to, and which
//! on-disk format it uses.
//!
//! The format version is encoded first so it can be read even when the rest
//! of the header has a layout this build does not know.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::codec;

/// On-disk format this build reads and writes. Bump it whenever a key or
/// value layout changes; stores with any other version are rebuilt (they are
/// only a cache).
pub(crate) const FORMAT_VERSION: u32 = 2;

/// The replication flow a state dir belongs to. Offsets cached for one pair
/// of clusters are meaningless — and dangerous — for another, so a store
/// only opens for the identity it was created with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterIdentity {
    /// Operator-chosen name of the source cluster (also used in
    /// transactional ids and the progress topic name).
    pub source_alias: String,
    /// Kafka cluster id of the source cluster, as reported by its brokers.
    pub source_cluster_id: String,
    /// Kafka cluster id of the target cluster, as reported by its brokers.
    pub target_cluster_id: String,
}

impl fmt::Display for ClusterIdentity {
    /// One line naming all three fields, for error messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "source alias {:?} (cluster id {:?}) -> target cluster id {:?}",
            self.source_alias, self.source_cluster_id, self.target_cluster_id
        )
    }
}

/// The value stored under [`Header::KEY`] in sled's default tree.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Header {
    /// Layout of everything in the store; always [`FORMAT_VERSION`] when
    /// written by this build.
    pub(crate) format_version: u32,
    /// Whose state this is.
    pub(crate) identity: ClusterIdentity,
}

impl Header {
    /// Key of the header in sled's default tree.
    pub(crate) const KEY: &'static [u8] = b"eosmirror-header";

    /// The header this build writes into a fresh store.
    pub(crate) fn current(identity: &ClusterIdentity) -> Self {
        Header {
            format_version: FORMAT_VERSION,
            identity: identity.clone(),
        }
    }

    /// Decodes a stored header, refusing any format version but ours. The
    /// error is a reason for rebuilding the store.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, String> {
        let (version, _) = codec::decode_prefix::<u32>(bytes)
            .map_err(|e| format!("the store header does not decode: {e}"))?;
        if version != FORMAT_VERSION {
            return Err(format!(
                "unknown store format version {version} (this build uses {FORMAT_VERSION})"
            ));
        }
        codec::decode(bytes).map_err(|e| format!("the store header does not decode: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> ClusterIdentity {
        ClusterIdentity {
            source_alias: "dc1".into(),
            source_cluster_id: "src-id".into(),
            target_cluster_id: "tgt-id".into(),
        }
    }

    #[test]
    fn roundtrips() {
        let header = Header::current(&identity());
        assert_eq!(Header::decode(&codec::encode(&header)), Ok(header));
    }

    #[test]
    fn rejects_other_versions_and_garbage() {
        let future = Header {
            format_version: FORMAT_VERSION + 1,
            identity: identity(),
        };
        let err = Header::decode(&codec::encode(&future)).unwrap_err();
        assert!(err.contains("unknown store format version"), "{err}");
        assert!(Header::decode(b"").is_err());
        assert!(Header::decode(&[1, 0xFF]).is_err());
    }
}

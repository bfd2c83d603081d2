//! Lanes: how source partitions are spread over transactional producers.
//!
//! A deployment (one `--source.alias`) has a fixed number of lanes. Each
//! source partition belongs to exactly one lane, by a fixed function of its
//! topic name and partition number: FNV-1a of the topic name plus the
//! partition number, modulo the lane count. It never uses std's randomly
//! seeded hasher, which would move partitions between lanes from one
//! process to the next, and it spreads the partitions of one topic
//! round-robin over the lanes.
//!
//! Lane `k` owns one transactional producer (`<prefix>.<alias>.lane-<k>`) and
//! writes its progress and position records to partition `k` of the
//! internal topics. So the internal topics have exactly as many partitions
//! as there are lanes: their partition count *is* the layout recorded on
//! the target, and every instance of the alias has to agree with it.

use std::fmt;

use eosmirror_state::SourcePartition;

/// Lanes when `--lanes` is not given. Enough transactions in flight to keep
/// the target's brokers and transaction coordinator busy (the 8-partition
/// benchmark is at the target's transactional ingest limit with 4), few
/// enough that threads, connections and transactions per second stay small
/// whatever the partition count.
pub const DEFAULT_LANES: u32 = 4;

/// Upper bound on `--lanes`: each lane is a consumer, a producer and a
/// thread, and a partition of each internal topic.
pub const MAX_LANES: u32 = 256;

/// One lane of a deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lane(pub u32);

impl Lane {
    /// The partition of the progress and position topics this lane writes.
    pub fn internal_partition(self) -> i32 {
        self.0 as i32
    }
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lane-{}", self.0)
    }
}

/// The lane count of a deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    lanes: u32,
}

/// `--lanes` outside `1..=MAX_LANES`.
#[derive(Debug, thiserror::Error)]
#[error("--lanes {0}: expected 1 to {MAX_LANES}")]
pub struct LaneCountError(pub u32);

impl Layout {
    pub fn new(lanes: u32) -> Result<Layout, LaneCountError> {
        if (1..=MAX_LANES).contains(&lanes) {
            Ok(Layout { lanes })
        } else {
            Err(LaneCountError(lanes))
        }
    }

    pub fn lanes(self) -> u32 {
        self.lanes
    }

    /// Partitions of each internal topic written by lanes.
    pub fn internal_partitions(self) -> i32 {
        self.lanes as i32
    }

    /// The lane that copies `partition`; the same in every process.
    pub fn lane_of(self, partition: &SourcePartition) -> Lane {
        let spread = fnv1a(partition.topic.as_bytes()).wrapping_add(partition.partition as u64);
        Lane((spread % u64::from(self.lanes)) as u32)
    }
}

/// 64-bit FNV-1a: a fixed, well-known hash (no seed, same on every machine).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    bytes.iter().fold(OFFSET_BASIS, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv1a() {
        // Published FNV-1a test vectors: a changed function would move every
        // partition of every deployment to another lane.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn partitions_of_a_topic_go_round_robin() {
        let layout = Layout::new(4).unwrap();
        let lanes: Vec<u32> = (0..8)
            .map(|p| layout.lane_of(&SourcePartition::new("orders", p)).0)
            .collect();
        for pair in lanes.windows(2) {
            assert_eq!(pair[1], (pair[0] + 1) % 4, "{lanes:?}");
        }
    }

    #[test]
    fn many_partitions_spread_evenly() {
        let layout = Layout::new(8).unwrap();
        let mut counts = [0usize; 8];
        for t in 0..50 {
            for p in 0..20 {
                let lane = layout.lane_of(&SourcePartition::new(format!("topic-{t}"), p));
                counts[lane.0 as usize] += 1;
            }
        }
        assert!(
            counts.iter().all(|&c| (100..=150).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn lane_counts_are_bounded() {
        assert!(Layout::new(0).is_err());
        assert!(Layout::new(MAX_LANES + 1).is_err());
        assert_eq!(
            Layout::new(1)
                .unwrap()
                .lane_of(&SourcePartition::new("x", 7)),
            Lane(0)
        );
    }
}

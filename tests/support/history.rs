//! A long offset-translation history written straight into eosmirror's
//! progress topic, for the readers that must read only its tail.

use eosmirror::wire::{Lineage, ProgressRecord};
use eosmirror_state::{OffsetRun, SourcePartition};

use super::clusters::Cluster;
use super::records::TestRecord;

impl Cluster {
    /// Creates `progress` with one partition and writes to it first a
    /// record no eosmirror can decode, standing for the older history a
    /// tail reader must never reach, then one commit per record, as one
    /// eosmirror transaction each would record it: source offset `i` of
    /// `topic`-0 copied to target offset `i + shift`, for `i` in
    /// `0..commits`. The commits name `source`'s and this cluster's
    /// `topic` as they are, as a copy of them would.
    pub fn write_long_history(
        &self,
        source: &Cluster,
        progress: &str,
        topic: &str,
        commits: i64,
        shift: i64,
    ) {
        let lineage = Lineage {
            source_cluster_id: "history-test".into(),
            source_topic_id: source.topic_id(topic),
            target_topic_id: self.topic_id(topic),
        };
        self.create_topic_with(progress, 1, &[("retention.ms", "-1")]);
        let unreadable = TestRecord {
            partition: 0,
            key: Some(b"unreadable".to_vec()),
            value: Some(vec![0xff; 8]),
            headers: vec![],
            timestamp: None,
        };
        self.produce(progress, &[unreadable]);
        let partition = SourcePartition::new(topic, 0);
        let history: Vec<TestRecord> = (0..commits)
            .map(|i| TestRecord {
                partition: 0,
                key: Some(ProgressRecord::key(&partition)),
                value: Some(
                    ProgressRecord {
                        source: partition.clone(),
                        lineage: lineage.clone(),
                        runs: vec![OffsetRun {
                            source_start: i,
                            target_start: i + shift,
                            len: 1,
                        }],
                        next_source_offset: i + 1,
                        next_target_offset: i + shift + 1,
                        instance: 7,
                        committed_at_ms: 0,
                    }
                    .encode(),
                ),
                headers: vec![],
                timestamp: None,
            })
            .collect();
        self.produce(progress, &history);
    }
}

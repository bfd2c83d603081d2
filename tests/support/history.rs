//! A long offset-translation history (and a position) written straight
//! into eosmirror's internal topics, for the readers that must read only
//! what they need of it.

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
        let lineage = self.lineage_of(source, topic);
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
                        copies_end: i + 1,
                        next_target_offset: i + shift + 1,
                        instance: 7,
                        committed_at_ms: 0,
                        begins_history: i == 0,
                    }
                    .encode(),
                ),
                headers: vec![],
                timestamp: None,
            })
            .collect();
        self.produce(progress, &history);
    }

    /// Creates `position_topic` with one partition and writes to it the
    /// position of `topic`-0 at `next_source` and `next_target` with no
    /// copies, as a claim records it: all that is left of a partition idle
    /// for longer than the progress topic's retention.
    pub fn write_position(
        &self,
        source: &Cluster,
        position_topic: &str,
        topic: &str,
        next_source: i64,
        next_target: i64,
    ) {
        self.create_topic_with(position_topic, 1, &[("retention.ms", "-1")]);
        let record = self.commit_record(source, topic, None, next_source, next_target);
        self.produce(position_topic, &[record]);
    }

    /// The record of one commit of `topic`-0, for the progress or the
    /// position topic: `run` (source start, target start, length) copied,
    /// if any, and the position after it.
    pub fn commit_record(
        &self,
        source: &Cluster,
        topic: &str,
        run: Option<(i64, i64, u64)>,
        next_source: i64,
        next_target: i64,
    ) -> TestRecord {
        let partition = SourcePartition::new(topic, 0);
        let position = ProgressRecord {
            source: partition.clone(),
            lineage: self.lineage_of(source, topic),
            runs: run
                .map(|(source_start, target_start, len)| OffsetRun {
                    source_start,
                    target_start,
                    len,
                })
                .into_iter()
                .collect(),
            next_source_offset: next_source,
            // Without a run, the copies end at the position: a record that
            // says nothing below it is known.
            copies_end: run.map_or(next_source, |(start, _, len)| start + len as i64),
            next_target_offset: next_target,
            instance: 7,
            committed_at_ms: 0,
            begins_history: false,
        };
        TestRecord {
            partition: 0,
            key: Some(ProgressRecord::key(&partition)),
            value: Some(position.encode()),
            headers: vec![],
            timestamp: None,
        }
    }

    /// The lineage of a copy of `source`'s `topic` into this cluster's.
    fn lineage_of(&self, source: &Cluster, topic: &str) -> Lineage {
        Lineage {
            source_cluster_id: "history-test".into(),
            source_topic_id: source.topic_id(topic),
            target_topic_id: self.topic_id(topic),
        }
    }
}

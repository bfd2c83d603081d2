//! State dirs seen from outside eosmirror: one made for other clusters,
//! and the dirs eosmirror moved aside as damaged.

use std::fs;
use std::path::{Path, PathBuf};

use eosmirror_state::{
    Checkpoint, ClusterIdentity, OpenOutcome, SourcePartition, StateStore, Tail, TopicIncarnation,
};

/// A state dir created for `identity`, holding one checkpoint for `topic`.
pub(crate) fn make_state_dir(dir: &Path, identity: &ClusterIdentity, topic: &str) {
    let (store, outcome) = StateStore::open(dir, identity).expect("create state dir");
    assert_eq!(outcome, OpenOutcome::Created);
    store
        .record_commit(
            &SourcePartition::new(topic, 0),
            Tail {
                next_source_offset: 1_000,
                next_target_offset: 1_001,
            },
            &Checkpoint {
                incarnation: TopicIncarnation {
                    source_topic_id: [1; 16],
                    target_topic_id: [2; 16],
                },
                next_source_offset: 1_000,
                next_target_offset: 1_001,
                progress_offset: 5,
            },
            &[],
        )
        .unwrap();
    store.flush().unwrap();
}

/// Entries next to the state dir whose names mark a moved-aside state dir.
pub(crate) fn moved_aside(state_dir: &Path) -> Vec<PathBuf> {
    let name = state_dir.file_name().unwrap().to_str().unwrap().to_string();
    let mut found: Vec<PathBuf> = fs::read_dir(state_dir.parent().unwrap())
        .unwrap()
        .filter_map(|e| {
            let path = e.ok()?.path();
            let file = path.file_name()?.to_str()?;
            file.starts_with(&format!("{name}.corrupt-"))
                .then_some(path)
        })
        .collect();
    found.sort();
    found
}

//! [`StateStore`]: the sled-backed cache of checkpoints and offset runs.
//!
//! Layout inside the sled database:
//! - default tree, key [`Header::KEY`]: the [`Header`] (format version and
//!   cluster identity);
//! - tree `checkpoints`: [`SourcePartition::key`] → [`Checkpoint`];
//! - tree `offset-runs`: [`SourcePartition::run_key`] of the run's first
//!   source offset → [`OffsetRun`];
//! - tree `run-counts`: [`SourcePartition::key`] → how many runs of the
//!   partition `offset-runs` holds (big-endian `u64`; a store written before
//!   the tree existed counts a partition's runs once, on its next commit).
//!
//! Every value is encoded by [`codec`]. The target cluster is the source of
//! truth, so anything wrong with this store on open is repaired by moving the
//! directory aside and starting empty — except when the directory belongs to
//! other clusters or to a running process, where guessing would be wrong.

use std::convert::Infallible;
use std::fmt;
use std::fs;
use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::Transactional;

use crate::codec;
use crate::header::Header;
use crate::translation::debug_assert_runs_fit;
use crate::{
    Checkpoint, ClusterIdentity, OffsetLookup, OffsetRun, SourcePartition, StateError, Tail,
};

/// Name of the sled tree holding one [`Checkpoint`] per source partition.
const CHECKPOINTS_TREE: &str = "checkpoints";
/// Name of the sled tree holding the [`OffsetRun`]s of every partition.
const RUNS_TREE: &str = "offset-runs";
/// Name of the sled tree holding each partition's number of runs.
const RUN_COUNTS_TREE: &str = "run-counts";
/// The most offset runs kept per partition: the newest, as a suffix of the
/// partition's runs. A transactional source adds a run per source
/// transaction, so without a limit the store would grow for as long as the
/// run lasts. Offsets before the oldest run kept are translated from the
/// progress topic instead (as for another instance's lanes). About 60 bytes
/// a run on disk: at most ~60 MiB per 1,000 partitions.
const MAX_RUNS_PER_PARTITION: u64 = 1_024;
/// sled 0.34.7 reports a held file lock only through this message text.
const SLED_LOCK_MESSAGE: &str = "could not acquire lock";
/// A handle dropped just before (in this process, or by a process that is
/// exiting) releases sled's file lock only once sled's background flusher
/// has stopped; that takes a moment. Only a lock held longer than this is
/// reported as [`StateError::Locked`].
const LOCK_WAIT: Duration = Duration::from_secs(3);
/// sled's page cache (its default is 1 GiB). The cache holds checkpoints and
/// recent offset runs; what it misses is read from disk, and the whole
/// store is only a hint for the target's positions.
const CACHE_CAPACITY_BYTES: u64 = 32 << 20;
/// How often a translation re-reads while commits keep changing the
/// checkpoint under it, before it leaves the answer to the progress topic.
const SNAPSHOT_ATTEMPTS: usize = 8;

/// How [`StateStore::open`] found the directory, so the caller can log it
/// and knows whether cached positions are available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenOutcome {
    /// There was no store (missing or empty directory): a fresh one was
    /// created. Every partition starts from the target's progress topic.
    Created,
    /// An intact store for the same clusters was reopened.
    Reopened,
    /// The directory was unusable; it was renamed to `moved_to` (kept for
    /// post-mortems) and a fresh store was created in its place.
    Rebuilt {
        /// Where the unusable directory now is.
        moved_to: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
}

/// Why an existing directory could not be reopened as it is.
enum Unusable {
    /// Damaged or not a store at all: move it aside and rebuild.
    Corrupt(String),
    /// Must not be touched: report to the caller.
    Refused(StateError),
}

/// Local cache of replication progress: per source partition, the last
/// committed position ([`Checkpoint`]) and the exact source → target offset
/// mapping ([`OffsetRun`]s) of the commits recorded since the cache began.
///
/// It makes restarts cheap (a worker knows where to look in the progress
/// topic) and answers offset translation without reading the target.
/// Deleting it is always safe.
///
/// The store is `Send + Sync`; share it between workers with an `Arc`. Each
/// partition must have a single writer (its worker), which the replicator
/// guarantees anyway.
pub struct StateStore {
    /// The state directory, kept for error messages.
    dir: PathBuf,
    /// The clusters this store belongs to, as recorded in its header.
    identity: ClusterIdentity,
    /// The sled database (needed for the header and for flushing).
    db: sled::Db,
    /// See [`CHECKPOINTS_TREE`].
    checkpoints: sled::Tree,
    /// See [`RUNS_TREE`].
    runs: sled::Tree,
    /// See [`RUN_COUNTS_TREE`].
    run_counts: sled::Tree,
}

/// Files sled writes into every database directory it opens.
const SLED_FILES: &[&str] = &["conf", "db"];

impl StateStore {
    /// Opens the store in `dir` for the flow `identity`, creating it if
    /// `dir` is missing or empty.
    ///
    /// A store that is damaged, has no eosmirror header, or has an unknown
    /// format version is renamed to `<dir>.corrupt-<unix-seconds>[-n]` and
    /// replaced by a fresh store ([`OpenOutcome::Rebuilt`]). A store created
    /// for other clusters is refused ([`StateError::ForeignStateDir`]), and
    /// so are one locked by another process ([`StateError::Locked`]) and a
    /// path that holds no sled database at all ([`StateError::NotAStateDir`]);
    /// none is touched.
    pub fn open(
        dir: &Path,
        identity: &ClusterIdentity,
    ) -> Result<(StateStore, OpenOutcome), StateError> {
        // Normalise away a trailing slash, which would put the aside path
        // *inside* the directory.
        let dir: PathBuf = dir.components().collect();
        let reason = match Self::reopen(&dir, identity) {
            Ok(Some(store)) => return Ok((store, OpenOutcome::Reopened)),
            Ok(None) => return Ok((Self::create(dir, identity)?, OpenOutcome::Created)),
            Err(Unusable::Refused(error)) => return Err(error),
            Err(Unusable::Corrupt(reason)) => reason,
        };
        let moved_to = aside_path(&dir, unix_seconds());
        fs::rename(&dir, &moved_to).map_err(|source| StateError::MoveAsideFailed {
            dir: dir.clone(),
            to: moved_to.clone(),
            reason: reason.clone(),
            source,
        })?;
        let store = Self::create(dir, identity)?;
        Ok((store, OpenOutcome::Rebuilt { moved_to, reason }))
    }

    /// Opens an existing store, or returns `None` if there is none yet.
    fn reopen(dir: &Path, identity: &ClusterIdentity) -> Result<Option<StateStore>, Unusable> {
        let inaccessible = |source| {
            Unusable::Refused(StateError::Inaccessible {
                dir: dir.to_owned(),
                source,
            })
        };
        match fs::metadata(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(inaccessible(e)),
            Ok(meta) if !meta.is_dir() => {
                return Err(Unusable::Refused(StateError::NotAStateDir {
                    dir: dir.to_owned(),
                    found: "a file",
                }))
            }
            Ok(_) => {}
        }
        // An empty directory is a new store (e.g. a freshly mounted volume).
        if fs::read_dir(dir).map_err(inaccessible)?.next().is_none() {
            return Ok(None);
        }
        // sled's own files mark a store (a damaged one is moved aside);
        // without them the files are someone else's.
        if !SLED_FILES.iter().any(|file| dir.join(file).exists()) {
            return Err(Unusable::Refused(StateError::NotAStateDir {
                dir: dir.to_owned(),
                found: "a directory of other files",
            }));
        }

        let db = match open_sled(dir) {
            Ok(db) => db,
            Err(StateError::Storage { source, .. }) => {
                return Err(Unusable::Corrupt(format!("sled cannot open it: {source}")))
            }
            Err(refused) => return Err(Unusable::Refused(refused)),
        };
        let header = db
            .get(Header::KEY)
            .map_err(|e| Unusable::Corrupt(format!("sled cannot read the store header: {e}")))?
            .ok_or_else(|| {
                Unusable::Corrupt(
                    "the store header is missing: not an eosmirror state dir, \
                     or its creation was interrupted"
                        .into(),
                )
            })?;
        let header = Header::decode(&header).map_err(Unusable::Corrupt)?;
        if header.identity != *identity {
            return Err(Unusable::Refused(StateError::ForeignStateDir {
                dir: dir.to_owned(),
                expected: Box::new(identity.clone()),
                found: Box::new(header.identity),
            }));
        }

        let store = Self::from_db(dir.to_owned(), header.identity, db)
            .map_err(|e| Unusable::Corrupt(format!("sled cannot open a tree: {e}")))?;
        // One checkpoint per partition: cheap to check all now, so a damaged
        // one leads to a rebuild instead of an error in a worker later.
        for entry in store.checkpoints.iter() {
            let (_, value) = entry
                .map_err(|e| Unusable::Corrupt(format!("sled cannot read a checkpoint: {e}")))?;
            codec::decode::<Checkpoint>(&value)
                .map_err(|e| Unusable::Corrupt(format!("a checkpoint does not decode: {e}")))?;
        }
        Ok(Some(store))
    }

    /// Creates a fresh store with a header for `identity` and makes the
    /// header durable before returning.
    fn create(dir: PathBuf, identity: &ClusterIdentity) -> Result<StateStore, StateError> {
        let db = open_sled(&dir)?;
        let store = Self::from_db(dir.clone(), identity.clone(), db)
            .map_err(|source| StateError::Storage { dir, source })?;
        store
            .db
            .insert(Header::KEY, codec::encode(&Header::current(identity)))
            .map_err(|e| store.storage(e))?;
        store.flush()?;
        Ok(store)
    }

    /// Opens the trees of an open database.
    fn from_db(dir: PathBuf, identity: ClusterIdentity, db: sled::Db) -> sled::Result<StateStore> {
        Ok(StateStore {
            checkpoints: db.open_tree(CHECKPOINTS_TREE)?,
            runs: db.open_tree(RUNS_TREE)?,
            run_counts: db.open_tree(RUN_COUNTS_TREE)?,
            dir,
            identity,
            db,
        })
    }

    /// The clusters this store belongs to.
    pub fn identity(&self) -> &ClusterIdentity {
        &self.identity
    }

    /// The last recorded position of `partition`, if any: where its worker
    /// starts looking in the progress topic.
    pub fn checkpoint(
        &self,
        partition: &SourcePartition,
    ) -> Result<Option<Checkpoint>, StateError> {
        self.checkpoints
            .get(partition.key())
            .map_err(|e| self.storage(e))?
            .map(|bytes| self.decode(&bytes, || format!("checkpoint of {partition}")))
            .transpose()
    }

    /// Records one committed Kafka transaction of `partition`: its new
    /// `checkpoint` and the offset `runs` it copied, atomically (a crash
    /// leaves both or neither). `follows` is the position the transaction
    /// started from.
    ///
    /// Call it after every successful commit, in commit order: translation
    /// treats the space between recorded runs as source gaps, so a commit
    /// missing from the cache would translate its offsets to later copies,
    /// skipping its records. Hence, unless nothing is stored or the stored
    /// checkpoint is of the same [`crate::TopicIncarnation`] with nothing
    /// copied between it and `follows`, nothing is written and [`StateError::CommitDoesNotFollow`] is
    /// returned: a worker that resumes elsewhere, or whose write of an
    /// earlier commit failed, must call [`StateStore::reset_partition`]
    /// first.
    ///
    /// A position only moves forward: if the stored checkpoint is ahead of
    /// `checkpoint` in source or target offset, nothing is written and
    /// [`StateError::PositionWentBackwards`] is returned.
    ///
    /// The partition keeps its newest [`MAX_RUNS_PER_PARTITION`] runs: the
    /// oldest go first, stored ones before any of `runs`, so what is kept
    /// is always an unbroken suffix of the partition's runs. (Keeping an
    /// older run while dropping a newer one would turn the dropped copies
    /// into a source gap and translate them wrong.)
    pub fn record_commit(
        &self,
        partition: &SourcePartition,
        follows: Tail,
        checkpoint: &Checkpoint,
        runs: &[OffsetRun],
    ) -> Result<(), StateError> {
        let key = partition.key();
        let value = codec::encode(checkpoint);
        // The partition's single writer is the caller: the stored runs to
        // drop, chosen here, are still the oldest inside the transaction.
        let mut stored_runs = self.run_count(&key)?;
        let mut excess = (stored_runs + runs.len() as u64).saturating_sub(MAX_RUNS_PER_PARTITION);
        let mut dropped: Vec<sled::IVec> = self
            .runs
            .scan_prefix(&key)
            .keys()
            .take(excess.min(stored_runs) as usize)
            .collect::<Result<_, _>>()
            .map_err(|e| self.storage(e))?;
        if (dropped.len() as u64) < excess.min(stored_runs) {
            // The count was too high (a store a binary without counts
            // reset): every stored run was just listed; count them.
            stored_runs = dropped.len() as u64;
            excess = (stored_runs + runs.len() as u64).saturating_sub(MAX_RUNS_PER_PARTITION);
            dropped.truncate(excess.min(stored_runs) as usize);
        }
        let skipped_new = ((excess - dropped.len() as u64) as usize).min(runs.len());
        let kept_runs = stored_runs - dropped.len() as u64 + (runs.len() - skipped_new) as u64;
        let run_entries: Vec<(Vec<u8>, Vec<u8>)> = runs[skipped_new..]
            .iter()
            .map(|run| (partition.run_key(run.source_start), codec::encode(run)))
            .collect();

        (&self.checkpoints, &self.runs, &self.run_counts)
            .transaction(|(checkpoints, runs_tree, run_counts)| {
                let stored = match checkpoints.get(&key)? {
                    Some(bytes) => Some(
                        self.decode::<Checkpoint>(&bytes, || format!("checkpoint of {partition}"))
                            .map_err(ConflictableTransactionError::Abort)?,
                    ),
                    None => None,
                };
                if let Some(stored) = stored.filter(|s| s.would_regress_to(checkpoint)) {
                    return Err(ConflictableTransactionError::Abort(
                        StateError::PositionWentBackwards {
                            partition: partition.clone(),
                            stored: Box::new(stored),
                            attempted: Box::new(*checkpoint),
                        },
                    ));
                }
                if let Some(stored) = stored.filter(|s| !s.is_followed_by(follows, checkpoint)) {
                    return Err(ConflictableTransactionError::Abort(
                        StateError::CommitDoesNotFollow {
                            partition: partition.clone(),
                            stored: Box::new(stored),
                            follows,
                        },
                    ));
                }
                debug_assert_runs_fit(runs, stored.as_ref(), checkpoint);

                checkpoints.insert(key.as_slice(), value.as_slice())?;
                for run_key in &dropped {
                    runs_tree.remove(run_key)?;
                }
                for (run_key, run_value) in &run_entries {
                    runs_tree.insert(run_key.as_slice(), run_value.as_slice())?;
                }
                run_counts.insert(key.as_slice(), &kept_runs.to_be_bytes())?;
                Ok(())
            })
            .map_err(|e| match e {
                TransactionError::Abort(error) => error,
                TransactionError::Storage(source) => self.storage(source),
            })
    }

    /// The partitions the cache holds a checkpoint of: one no longer copied
    /// (its topic deleted, or no longer selected) is forgotten by the
    /// caller, so the cache holds what is copied, not all ever copied.
    pub fn cached_partitions(&self) -> Result<Vec<SourcePartition>, StateError> {
        let mut partitions = Vec::new();
        for key in self.checkpoints.iter().keys() {
            let key = key.map_err(|e| self.storage(e))?;
            match SourcePartition::from_key(&key) {
                Some(partition) => partitions.push(partition),
                None => {
                    return Err(StateError::Corrupt {
                        dir: self.dir.clone(),
                        what: format!("checkpoint key {key:?}"),
                        detail: "it names no partition".into(),
                    })
                }
            }
        }
        Ok(partitions)
    }

    /// Forgets the checkpoint and all offset runs of `partition`, atomically,
    /// leaving other partitions alone. Used when the target (the source of
    /// truth) disagrees with the cache: the cache then restarts from the
    /// position read from the target.
    pub fn reset_partition(&self, partition: &SourcePartition) -> Result<(), StateError> {
        let key = partition.key();
        let mut removals = sled::Batch::default();
        for run_key in self.runs.scan_prefix(&key).keys() {
            removals.remove(run_key.map_err(|e| self.storage(e))?);
        }
        (&self.checkpoints, &self.runs, &self.run_counts)
            .transaction(|(checkpoints, runs, run_counts)| {
                checkpoints.remove(key.as_slice())?;
                runs.apply_batch(&removals)?;
                run_counts.remove(key.as_slice())?;
                Ok::<(), ConflictableTransactionError<Infallible>>(())
            })
            .map_err(|e| match e {
                TransactionError::Abort(never) => match never {},
                TransactionError::Storage(source) => self.storage(source),
            })
    }

    /// How many runs the partition with checkpoint key `key` has stored:
    /// counted once if the store has no count yet (written before counts).
    fn run_count(&self, key: &[u8]) -> Result<u64, StateError> {
        if let Some(bytes) = self.run_counts.get(key).map_err(|e| self.storage(e))? {
            if let Ok(count) = <[u8; 8]>::try_from(bytes.as_ref()) {
                return Ok(u64::from_be_bytes(count));
            }
        }
        let mut count = 0;
        for run_key in self.runs.scan_prefix(key).keys() {
            run_key.map_err(|e| self.storage(e))?;
            count += 1;
        }
        Ok(count)
    }

    /// Translates `source_offset` of `partition` into the target offset a
    /// consumer should resume from (see [`OffsetLookup::rule`]); `None` when
    /// the offset lies before the first run the cache knows (or the cache
    /// knows none for the partition): the progress topic has to answer.
    ///
    /// The answer comes from one consistent snapshot of the checkpoint and
    /// the runs (see [`StateStore::translate_between`]).
    pub fn translate(
        &self,
        partition: &SourcePartition,
        source_offset: i64,
    ) -> Result<Option<OffsetLookup>, StateError> {
        self.translate_between(partition, source_offset, || {})
    }

    /// [`StateStore::translate`], calling `between` between its reads (tests
    /// interleave commits there).
    ///
    /// sled makes each read atomic with respect to a whole
    /// [`StateStore::record_commit`], but not several reads together, so the
    /// checkpoint is read before and after the runs, like a seqlock. Every
    /// commit that adds runs moves the checkpoint forward, so two equal
    /// reads mean no commit came in between: the runs and the tail belong
    /// to one snapshot. After [`SNAPSHOT_ATTEMPTS`] disagreements the answer
    /// is `None` (the progress topic decides).
    fn translate_between(
        &self,
        partition: &SourcePartition,
        source_offset: i64,
        mut between: impl FnMut(),
    ) -> Result<Option<OffsetLookup>, StateError> {
        for _ in 0..SNAPSHOT_ATTEMPTS {
            let before = self.checkpoint(partition)?;
            between();
            let next_copy = self.next_copy(partition, source_offset)?;
            between();
            if self.checkpoint(partition)? != before {
                continue;
            }
            let (Some(checkpoint), Some(next_copy)) = (before, next_copy) else {
                return Ok(None);
            };
            let tail = Tail {
                next_source_offset: checkpoint.next_source_offset,
                next_target_offset: checkpoint.next_target_offset,
            };
            return Ok(Some(OffsetLookup::rule(next_copy, tail)));
        }
        Ok(None)
    }

    /// The target offset of the first copy at or after `source_offset`:
    /// `None` if the cache knows no run at or before it (it cannot tell),
    /// `Some(None)` if no copy follows it (yet).
    ///
    /// Two point lookups on the sorted run keys: the run starting at or
    /// before the offset, and if that run does not cover it, the next run.
    fn next_copy(
        &self,
        partition: &SourcePartition,
        source_offset: i64,
    ) -> Result<Option<Option<i64>>, StateError> {
        let at = partition.run_key(source_offset);
        let Some(floor) = self.run_in(partition, partition.run_key(i64::MIN)..=at.clone(), true)?
        else {
            return Ok(None);
        };
        if let Some(target) = floor.target_of(source_offset) {
            return Ok(Some(Some(target)));
        }
        // In a gap between runs, or past the last one.
        let after = (
            Bound::Excluded(at),
            Bound::Included(partition.run_key(i64::MAX)),
        );
        Ok(Some(
            self.run_in(partition, after, false)?
                .map(|next| next.target_start),
        ))
    }

    /// The last (`last == true`) or first run of `partition` whose key lies
    /// in `range`.
    fn run_in(
        &self,
        partition: &SourcePartition,
        range: impl std::ops::RangeBounds<Vec<u8>>,
        last: bool,
    ) -> Result<Option<OffsetRun>, StateError> {
        let mut runs = self.runs.range(range);
        let entry = if last { runs.next_back() } else { runs.next() };
        let Some(entry) = entry else { return Ok(None) };
        let (_, value) = entry.map_err(|e| self.storage(e))?;
        self.decode(&value, || format!("offset run of {partition}"))
            .map(Some)
    }

    /// Makes everything recorded so far durable. sled also flushes in the
    /// background; call this on graceful shutdown so a restart finds the
    /// latest positions.
    pub fn flush(&self) -> Result<(), StateError> {
        self.db.flush().map(drop).map_err(|e| self.storage(e))
    }

    /// Wraps a sled error with the directory it happened in.
    fn storage(&self, source: sled::Error) -> StateError {
        StateError::Storage {
            dir: self.dir.clone(),
            source,
        }
    }

    /// Decodes a stored value; `what` names it for the error message.
    fn decode<T: serde::de::DeserializeOwned>(
        &self,
        bytes: &[u8],
        what: impl FnOnce() -> String,
    ) -> Result<T, StateError> {
        codec::decode(bytes).map_err(|detail| StateError::Corrupt {
            dir: self.dir.clone(),
            what: what(),
            detail,
        })
    }
}

impl fmt::Debug for StateStore {
    /// sled's own `Debug` dumps whole trees; show only what identifies us.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateStore")
            .field("dir", &self.dir)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// Opens (or creates) the sled database in `dir`. A held lock and missing
/// permissions get their own errors because they are not corruption: moving
/// the directory aside would be wrong. Everything else is
/// [`StateError::Storage`].
fn open_sled(dir: &Path) -> Result<sled::Db, StateError> {
    let deadline = Instant::now() + LOCK_WAIT;
    let opened = loop {
        match sled::Config::new()
            .path(dir)
            .cache_capacity(CACHE_CAPACITY_BYTES)
            .open()
        {
            Err(sled::Error::Io(e))
                if e.to_string().contains(SLED_LOCK_MESSAGE) && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            result => break result,
        }
    };
    opened.map_err(|error| match error {
        sled::Error::Io(source) if source.to_string().contains(SLED_LOCK_MESSAGE) => {
            StateError::Locked {
                dir: dir.to_owned(),
                source,
            }
        }
        sled::Error::Io(source) if source.kind() == io::ErrorKind::PermissionDenied => {
            StateError::Inaccessible {
                dir: dir.to_owned(),
                source,
            }
        }
        source => StateError::Storage {
            dir: dir.to_owned(),
            source,
        },
    })
}

/// `<dir>.corrupt-<secs>`, or with `-1`, `-2`, … appended if that exists.
fn aside_path(dir: &Path, secs: u64) -> PathBuf {
    let with_suffix = |suffix: String| {
        let mut path = dir.as_os_str().to_owned();
        path.push(suffix);
        PathBuf::from(path)
    };
    std::iter::once(with_suffix(format!(".corrupt-{secs}")))
        .chain((1..).map(|n| with_suffix(format!(".corrupt-{secs}-{n}"))))
        .find(|path| fs::symlink_metadata(path).is_err())
        .expect("an unbounded sequence of names has a free one")
}

/// Seconds since the Unix epoch (0 if the clock is before it).
fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

#[cfg(test)]
mod tests;

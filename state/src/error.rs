//! Every way the state store can fail, worded for the operator who has to act
//! on it: each message names the state directory and says what to do.

use std::io;
use std::path::PathBuf;

use crate::{Checkpoint, ClusterIdentity, SourcePartition, Tail};

/// Errors returned by [`crate::StateStore`].
///
/// Corruption found while *opening* is not an error: the store moves the
/// directory aside and rebuilds (see [`crate::OpenOutcome::Rebuilt`]). The
/// variants below are the cases where guessing would be wrong or impossible.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The directory holds the state of a different replication flow.
    /// Rebuilding over it would destroy another flow's cache and hide a
    /// configuration mistake, so the store refuses and leaves it untouched.
    #[error(
        "state dir {dir} belongs to other clusters: it was created for {found}, \
         but this instance replicates {expected}. Point --state.dir at another \
         directory, or delete {dir} if the clusters really changed (it is only a cache)"
    )]
    ForeignStateDir {
        /// The state directory that was refused.
        dir: PathBuf,
        /// The identity this instance was started with (boxed to keep
        /// `Result<_, StateError>` small).
        expected: Box<ClusterIdentity>,
        /// The identity recorded in the directory's header.
        found: Box<ClusterIdentity>,
    },

    /// The path holds something that is no store at all (another
    /// program's files, a plain file: `--state.dir` pointed at the wrong
    /// path). Moving it aside would take the user's files away, and sled
    /// would write into it: refused, untouched.
    #[error(
        "--state.dir {dir} is {found}, not an eosmirror state dir. Point --state.dir at an empty or new directory; nothing in {dir} was changed"
    )]
    NotAStateDir {
        /// The path that was refused.
        dir: PathBuf,
        /// What is there, as a clause ("a file", "a directory of other files").
        found: &'static str,
    },

    /// Another process holds sled's lock on the directory. Moving the
    /// directory aside would pull it out from under a running instance, so
    /// this is reported instead of treated as corruption.
    #[error(
        "state dir {dir} is locked by another process. Stop the other \
         eosmirror instance, or give each instance its own --state.dir"
    )]
    Locked {
        /// The locked state directory.
        dir: PathBuf,
        /// The lock error reported by sled.
        source: io::Error,
    },

    /// The directory cannot be read or created (permissions, not a
    /// directory we may list, ...). Not corruption: nothing is moved.
    #[error(
        "cannot access state dir {dir}: {source}. Check that the eosmirror user \
         may read and write it, or point --state.dir elsewhere"
    )]
    Inaccessible {
        /// The state directory that could not be accessed.
        dir: PathBuf,
        /// The underlying I/O error.
        source: io::Error,
    },

    /// The directory is corrupt and should have been moved aside, but the
    /// rename failed (typically because it is a mount point).
    #[error(
        "state dir {dir} is corrupt ({reason}) but could not be moved aside to \
         {to}: {source}. Move or delete {dir} yourself (it is only a cache); if it \
         is a mount point, point --state.dir at a subdirectory of it"
    )]
    MoveAsideFailed {
        /// The corrupt state directory.
        dir: PathBuf,
        /// Where it should have been moved.
        to: PathBuf,
        /// Why it was considered corrupt.
        reason: String,
        /// The rename error.
        source: io::Error,
    },

    /// sled failed while the store was in use.
    #[error(
        "state dir {dir}: storage error: {source}. The state dir is only a cache: \
         if this persists, stop eosmirror, delete {dir} and restart"
    )]
    Storage {
        /// The state directory.
        dir: PathBuf,
        /// The sled error.
        source: sled::Error,
    },

    /// A stored value did not decode while the store was in use. (Values are
    /// checked when opening, too; this catches what went bad afterwards.)
    #[error(
        "state dir {dir}: the {what} does not decode ({detail}). The state dir is \
         only a cache: stop eosmirror, delete {dir} and restart"
    )]
    Corrupt {
        /// The state directory.
        dir: PathBuf,
        /// Which value failed, e.g. "checkpoint of orders-3".
        what: String,
        /// The decoder's complaint.
        detail: String,
    },

    /// A commit would move a partition's replicated position backwards. A
    /// position only ever moves forward, so this means two writers for one
    /// partition or a target that lost committed data. Returned rather than
    /// panicking so the caller can consult the target (the source of truth).
    #[error(
        "refusing to move the replicated position of {partition} backwards: the \
         state cache records {stored}, the new commit says {attempted}. Two \
         instances may be replicating this partition, or the target cluster lost \
         committed data. The target is authoritative: check it, then reset this \
         partition's cache or delete the state dir"
    )]
    PositionWentBackwards {
        /// The partition whose position would regress.
        partition: SourcePartition,
        /// The checkpoint already stored (boxed, as is `attempted`, so every
        /// `Result<_, StateError>` stays small).
        stored: Box<Checkpoint>,
        /// The checkpoint that was rejected.
        attempted: Box<Checkpoint>,
    },

    /// A commit did not start where the stored checkpoint ends (or is of
    /// other topics): a commit in between was not recorded (its write
    /// failed) or the worker resumed elsewhere without a reset. Recording it
    /// would make the missing commit's offsets read as a source gap.
    #[error(
        "the state cache of {partition} was not updated: it records {stored}, but \
         the new commit follows next source offset {}, next target offset {} (an \
         earlier commit was not recorded, or the topics changed). Reset this \
         partition's cache; it is rebuilt from the target",
        follows.next_source_offset, follows.next_target_offset
    )]
    CommitDoesNotFollow {
        /// The partition whose cache would get a hole.
        partition: SourcePartition,
        /// The checkpoint already stored (boxed to keep results small).
        stored: Box<Checkpoint>,
        /// Where the refused commit started.
        follows: Tail,
    },
}

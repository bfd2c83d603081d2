//! Crash points: named places in the transaction protocol where a test can
//! make the process die at once, as SIGKILL would, instead of hoping a
//! random SIGKILL lands there; and fault points, where a test makes a
//! client misbehave as a real one was once seen to.
//!
//! Compiled in only with the `failpoints` cargo feature (`tests/run` builds
//! the tested binary with it); without it [`crash_point!`] expands to
//! nothing and release builds hold no trace of them. A point is armed with
//! the `fail` crate's `FAILPOINTS` environment variable and its `return`
//! action, e.g. `FAILPOINTS='lane::before-commit=2*off->return'` dies at the
//! third hit. Hits are counted per process, over all lanes.
//!
//! Dying means `abort()`: no destructor, no flush, no transaction ended,
//! the sled cache left as it is; the process ends with SIGABRT, after one
//! line on stderr naming the point (so a test can tell it from any other
//! abort).
//!
//! Each constant documents the state the process is in at its point: what
//! the target holds, what the cache holds, and what a restart has to
//! resolve.

/// Every copy of the batch has been handed to the producer inside the open
/// transaction; some may still be queued in librdkafka, none is committed,
/// no progress record exists. A restart's `init_transactions` aborts
/// whatever reached the target, and the batch is read again.
pub const LANE_AFTER_SEND: &str = "lane::after-send";

/// Every copy of the batch is acknowledged: in the target's log inside the
/// open transaction (visible to `read_uncommitted` readers only), its
/// target offsets known, no progress record sent. The state a random
/// SIGKILL reaches only by chance: the copies are there, and must never
/// count.
pub const LANE_AFTER_FLUSH: &str = "lane::after-flush";

/// The batch's progress and position records are sent into the open
/// transaction too (queued; the commit flushes them): the transaction is
/// complete but not committed. A restart must not find these positions.
pub const LANE_AFTER_PROGRESS: &str = "lane::after-progress";

/// Right before `commit_transaction`, for every transaction: batches and
/// each session's claim. Everything is sent, nothing committed.
pub const TXN_BEFORE_COMMIT: &str = "txn::before-commit";

/// `commit_transaction` returned OK: the batch and its positions are
/// committed on the target, but the sled cache was not written, so it is
/// behind the target. A restart must take the target's positions and
/// forget the cache's runs (which would otherwise read as a gap).
pub const LANE_AFTER_COMMIT: &str = "lane::after-commit";

/// A session's `init_transactions` returned: any older producer of the
/// lane is fenced and its open transaction aborted, but this session has
/// neither read its positions nor claimed the lane. A restart fences this
/// producer in turn and reads the same positions.
pub const LANE_AFTER_INIT: &str = "lane::after-init";

/// A group-sync round committed translated offsets to idle target groups.
/// The most dangerous moment of a round: the target groups have moved, and
/// `failover` (which refuses to rewind a group) must find records of the
/// source offsets at least as new in the groups topic — so they are flushed
/// before the commit. This round's source ends are not recorded yet.
pub const GROUPS_AFTER_TARGET_COMMIT: &str = "groups::after-target-commit";

/// Not a crash but a fault: the fleet's consumer leaves the group and
/// stays out, the state a librdkafka consumer was once seen stuck in after a
/// session timeout under long target stalls (it never rejoined, and the
/// instance copied nothing for minutes). Checked once per membership check
/// while the instance owns a lane; the membership's watchdog has to notice
/// and rejoin with a new consumer.
pub const FLEET_DROP_OUT: &str = "fleet::drop-out";

/// A fault: after a committed batch, the lane's source consumer stops
/// fetching one of its partitions (paused) and delivers nothing more of
/// it, as one did after a source broker restart while the lane's other
/// partitions flowed. The lane's source watch has to notice and start a
/// new session.
pub const LANE_SOURCE_SILENT: &str = "lane::source-silent";

/// A fault: a reader's poll (verify, status, resume) returns "all brokers
/// are down" instead of its next record, as librdkafka reports a cluster
/// whose connections all failed for a moment (a loaded CI machine's source
/// broker once did this during verify). librdkafka reconnects by itself:
/// the read has to go on.
pub const READ_CONNECTION_LOST: &str = "read::connection-lost";

/// A fault, armed with a side's name (`return(source)`): every poll of a
/// range reader of that side reports all brokers down, as a cluster that
/// went away after verify planned its reads. verify must give up on that
/// side once, not wait the stall limit again for each partition.
pub const READ_RANGE_SIDE_AWAY: &str = "read::range-side-away";

/// A fault: `cutover` watches the source's producers 10 s longer between
/// its two samples of the high watermarks, so that a test can begin a
/// source transaction between them, where it is hard to hit.
pub const CUTOVER_SLOW_LOOK: &str = "cutover::slow-look";

/// A fault: `cutover` waits 10 s after verifying the copy before it reads
/// the groups' offsets, so that a test can write to the source and move a
/// group past the copy meanwhile, as a producer and a consumer stopped
/// late would.
pub const CUTOVER_SLOW_GROUPS: &str = "cutover::slow-groups";

/// A fault: a group-sync round waits 10 s after its records are flushed,
/// before it commits the target groups, so that a test can stop the
/// instance while a round is under way. The round must end before the
/// instance leaves the fleet's group (and hands group sync to another).
pub const GROUPS_SLOW_COMMIT: &str = "groups::slow-commit";

/// A fault, armed with a file's path (`return(<path>)`): discovery creates
/// the target topics it found missing, and adds the partitions it found
/// missing, once that file exists (at most 2 min after it read the
/// target's metadata), so that a test can do it meanwhile, as another
/// instance started at the same time would, however slow the machine.
pub const TOPICS_SLOW_CREATE: &str = "topics::slow-create";

/// A fault: the source's group listing holds no group, as a broker answers
/// for the groups of an offsets partition it cannot lead (offline, or its
/// leadership moving): no error, the groups left out. Group sync must not
/// take them for deleted.
pub const GROUPS_LISTING_EMPTY: &str = "groups::listing-empty";

/// A fault, armed with an argument (`return(<text>)`): the target refuses
/// to create the topics whose names contain the text (PolicyViolation), as
/// a cloud cluster's creation policy does, while it creates the others.
pub const TOPICS_REFUSE_CREATE: &str = "topics::refuse-create";

/// A fault, armed with an argument (`return(<text>)`): the source refuses
/// to describe the settings of the topics whose names contain the text
/// (TopicAuthorizationFailed), as it does without a DescribeConfigs ACL.
pub const TOPICS_REFUSE_DESCRIBE: &str = "topics::refuse-describe";

/// A fault: `run` does not compare its topic selection with the fleet's
/// other members before it joins the group, as when two instances start
/// at once and neither sees the other yet; the check at every refresh
/// must catch it.
pub const FLEET_SELECTION_UNSEEN: &str = "fleet::selection-unseen";

/// A fault: the commit of the batch a stopping lane ends with fails as
/// abortable, as one does when the target stops answering during a
/// shutdown. Checked only once the lane was asked to stop. The lane must
/// abort the transaction while the lane is still its own, or the target's
/// `read_committed` readers of its partitions wait for the transaction
/// timeout.
pub const LANE_STOP_COMMIT_FAILS: &str = "lane::stop-commit-fails";

/// A fault: after a commit, neither the local state's write of it nor the
/// reset of the partition that follows a failed write reaches the sled
/// cache, as when its disk is full. The cache misses a commit: the next
/// commit must not be recorded after the hole, or group sync would
/// translate the missing commit's offsets to later copies.
pub const LANE_CACHE_WRITE_FAILS: &str = "lane::cache-write-fails";

/// Dies here (SIGABRT) if the `FAILPOINTS` environment variable arms the
/// point named `$name` with `return` for this hit. Without the `failpoints`
/// feature it only type-checks the name, so every build checks every point.
macro_rules! crash_point {
    ($name:expr) => {
        #[cfg(feature = "failpoints")]
        $crate::failpoints::crash_if_armed($name);
        #[cfg(not(feature = "failpoints"))]
        let _: &str = $name;
    };
}
pub(crate) use crash_point;

/// Whether fault point `name` is armed with `return` for this hit (never,
/// without the `failpoints` feature).
pub(crate) fn fault_armed(name: &str) -> bool {
    #[cfg(feature = "failpoints")]
    fail::fail_point!(name, |_| true);
    let _ = name;
    false
}

/// The argument fault point `name` is armed with (`return(<argument>)`)
/// for this hit, if any (never, without the `failpoints` feature).
pub(crate) fn fault_argument(name: &str) -> Option<String> {
    #[cfg(feature = "failpoints")]
    fail::fail_point!(name, |argument| argument);
    let _ = name;
    None
}

/// Aborts the process if point `name` is armed for this hit.
#[cfg(feature = "failpoints")]
pub(crate) fn crash_if_armed(name: &str) {
    fail::fail_point!(name, |_| {
        eprintln!("eosmirror: crash point {name} reached: aborting");
        std::process::abort()
    });
}

//! glibc malloc's mmap threshold, fixed once a lane reads many partitions,
//! so librdkafka's fetch responses go back to the system when freed.
//!
//! A lane's consumer receives each fetch response (up to `fetch.max.bytes`,
//! several MiB) as one allocation, and the queued records of every
//! partition in it keep it alive until the lane has copied the last of
//! them. glibc gives a block of at least its mmap threshold (128 KiB) a
//! mapping of its own and unmaps it on free, but raises the threshold to
//! the size of every such block freed (up to 32 MiB): after the first
//! response the next ones came from the arenas, between the small
//! per-record allocations, and their space stayed resident once freed.
//! Fixed at 1 MiB (copies of 200 B records, two to nine of each):
//!
//! | partitions (4 lanes) | peak RSS, moving → fixed | CPU        |
//! |----------------------|--------------------------|------------|
//! | 5,000 (4M records)   | 470–525 → 430–465 MB     | same       |
//! | 1,000 (8M)           | 449–459 → 369–389 MB     | +3–5%      |
//! | 8 (16M)              | 316–323 → 277–278 MB     | +10%, 12% slower |
//!
//! At a few partitions per lane the copy is fast enough that faulting in
//! every response's fresh pages costs speed, and memory is far from its
//! bar; at many it is what takes peak RSS past 512 MB. So the threshold is
//! fixed only from `MANY_PARTITIONS` partitions in one lane on (1,000 over
//! the default 4 lanes), and never if the user set one
//! (`MALLOC_MMAP_THRESHOLD_`, read by glibc at start).

/// Partitions in one lane from which the threshold is fixed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MANY_PARTITIONS: usize = 250;

/// Blocks of at least this size get a mapping of their own.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD_BYTES: libc::c_int = 1 << 20;

/// Fixes the threshold (once per process) when a lane of `partitions`
/// starts reading. C libraries other than glibc are left as they are.
pub(crate) fn fit_to_lane(partitions: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static FIXED: std::sync::Once = std::sync::Once::new();
        if partitions < MANY_PARTITIONS {
            return;
        }
        FIXED.call_once(|| {
            if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some() {
                return;
            }
            // SAFETY: mallopt takes the allocator's lock and only changes
            // the size from which later blocks are mapped on their own.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
            }
        });
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = partitions;
}

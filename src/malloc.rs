//! glibc malloc's mmap threshold, fixed once the lanes read many partitions,
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
//! | partitions, lanes | records | peak RSS, moving → fixed | CPU-seconds           |
//! |-------------------|---------|--------------------------|-----------------------|
//! | 5,000, 4          | 4M      | 470–525 → 430–465 MB     | same                  |
//! | 1,000, 8          | 12M     | 512–530 → 426–457 MB     | 22.5–25.7 → 23.6–25.2 |
//! | 1,000, 4          | 8M      | 449–459 → 369–389 MB     | +3–5%                 |
//! | 400, 4            | 12M     | 412–442 → 363–383 MB     | 18.8 → 21.2–21.5, 5–10% slower |
//! | 8, 4              | 16M     | 316–323 → 277–278 MB     | +10%, 12% slower      |
//!
//! Where the copy is fast, faulting in every response's fresh pages costs
//! speed, and below 1,000 partitions memory stays under its 512 MB bar;
//! from there on the moving threshold is what takes peak RSS past it. So
//! the threshold is fixed only once a lane's partitions times the lane
//! count (the deployment's partitions, as lanes get even shares) reach
//! `MANY_PARTITIONS`, and never if the user set one
//! (`MALLOC_MMAP_THRESHOLD_`, read by glibc at start).

/// Partitions of the deployment from which the threshold is fixed: below
/// 1,000, so that every lane of a 1,000-partition deployment counts,
/// whatever its share (the hash spreads partitions evenly, not exactly).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MANY_PARTITIONS: usize = 800;

/// Blocks of at least this size get a mapping of their own.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD_BYTES: libc::c_int = 1 << 20;

/// Fixes the threshold (once per process) when a lane of `partitions`,
/// one of `lanes`, starts reading. C libraries other than glibc are left
/// as they are.
pub(crate) fn fit_to_lane(partitions: usize, lanes: u32) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static FIXED: std::sync::Once = std::sync::Once::new();
        if partitions.saturating_mul(lanes as usize) < MANY_PARTITIONS {
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
    let _ = (partitions, lanes);
}

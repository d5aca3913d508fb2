//! Giving memory back after a spike (issue 40 §2).
//!
//! glibc's allocator keeps what a process freed in its arenas for later use instead of
//! returning it to the system, so one large call (a long `session.resume`, a burst of big
//! frames) leaves a service's RSS at its peak long after the call. Every process of the
//! suite runs [`spawn_trimmer`]: every [`TRIM_INTERVAL`] it looks at its resident memory
//! and at what the allocator holds free ([`free_bytes`]) and, when the first grew by more
//! than [`TRIM_SLACK`] since the last trim and the second is above it, hands it back with
//! `malloc_trim(0)` (which also releases free pages inside the arenas, not only at their
//! top). A quiet process pays one `mallinfo2` call and one read of `/proc/self/statm` per
//! interval. On other platforms (or
//! another C library) both are no-ops.

use std::time::Duration;

/// How often the allocator's free bytes are looked at.
pub const TRIM_INTERVAL: Duration = Duration::from_secs(5);

/// Free bytes the allocator may keep: below this no trim is asked for.
pub const TRIM_SLACK: usize = 8 << 20;

/// Bytes the allocator holds free (in its arenas, released to it but not to the system);
/// `None` where that cannot be asked.
pub fn free_bytes() -> Option<usize> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's statistics.
        let info = unsafe { libc::mallinfo2() };
        Some(info.fordblks)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

/// Returns the allocator's free memory to the system now. True when some was released.
pub fn trim() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim is thread-safe and only releases memory the allocator owns
        // and no one uses.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Resident memory of this process, in bytes (`/proc/self/statm`); `None` elsewhere.
pub fn resident_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Trims the heap when the process's resident memory grew by more than [`TRIM_SLACK`]
/// since the last trim (or since start) and the allocator holds more than [`TRIM_SLACK`]
/// free. The mark is resident memory, not the free count: pages a trim released stay
/// counted free, so a second spike that reuses and frees them again would not raise the
/// free count, while it does raise resident memory. Runs until the runtime stops; needs a
/// tokio runtime. A process without [`free_bytes`] never trims.
pub fn spawn_trimmer() -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {
        let mut tick = tokio::time::interval(TRIM_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut mark = resident_bytes().unwrap_or(0);
        loop {
            tick.tick().await;
            let (Some(free), Some(rss)) = (free_bytes(), resident_bytes()) else {
                return;
            };
            if rss <= mark.saturating_add(TRIM_SLACK) || free <= TRIM_SLACK {
                mark = mark.min(rss);
                continue;
            }
            // malloc_trim walks every arena: off the async workers.
            let released = tokio::task::spawn_blocking(trim).await.unwrap_or(false);
            mark = resident_bytes().unwrap_or(rss);
            tracing::debug!(released, rss_before = rss, rss_after = mark, "heap trimmed");
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rss() -> usize {
        resident_bytes().unwrap()
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn memory_freed_inside_the_heap_is_given_back() {
        // 64 MiB in small blocks (below the mmap threshold, so they live in an arena); one
        // block in 16 stays, so what is freed lies inside the heap, not at its top, where
        // free() alone would have released it.
        let mut blocks: Vec<Vec<u8>> = (0..16_384).map(|_| vec![1u8; 4096]).collect();
        let before = free_bytes().unwrap();
        let mut i = 0;
        blocks.retain(|_| {
            i += 1;
            i % 16 == 0
        });
        let freed = free_bytes().unwrap();
        assert!(
            freed >= before + (32 << 20),
            "the allocator holds the freed blocks: {before} → {freed}"
        );
        let resident = rss();
        assert!(trim(), "malloc_trim released something");
        let after = rss();
        assert!(
            after + (16 << 20) < resident,
            "free pages went back to the system: RSS {resident} → {after}"
        );
        drop(blocks);
    }
}

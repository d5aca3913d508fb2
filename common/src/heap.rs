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
//! interval. Before it starts, [`configure`] sets two allocator options so that less is held
//! in the first place. On other platforms (or another C library) all of it is a no-op.

use std::time::Duration;

/// How often the allocator's free bytes are looked at.
pub const TRIM_INTERVAL: Duration = Duration::from_secs(5);

/// Free bytes the allocator may keep: below this no trim is asked for.
pub const TRIM_SLACK: usize = 8 << 20;

/// Most malloc arenas ([`configure`]): glibc's default is 8 per core, and each arena keeps
/// its own freed memory, so a burst handled on several threads leaves several heaps at their
/// peak.
pub const ARENA_MAX: i32 = 2;

/// Blocks of this many bytes and more get their own mapping ([`configure`]), returned to
/// the system when freed. glibc's default starts at 128 KiB but rises to the size of any
/// mapped block freed (up to 32 MiB), after which large request buffers live in the arenas
/// and stay resident after use.
pub const MMAP_THRESHOLD: i32 = 256 << 10;

/// Sets [`ARENA_MAX`] and [`MMAP_THRESHOLD`] (`mallopt`); called by [`spawn_trimmer`].
/// Measured with `snowpea-bench fuzz` (150 s, seed 5, debug build, docs/PERFORMANCE.md): RSS
/// after the run gateway 84 → 49 MB, svc-session 80 → 55 MB, svc-memory 38 → 30 MB.
pub fn configure() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator tuning; both values are in range.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX);
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        }
    }
}

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
/// tokio runtime. A process without [`free_bytes`] never trims. Calls [`configure`] first.
pub fn spawn_trimmer() -> tokio::task::JoinHandle<()> {
    configure();
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
    fn after_configure_a_large_block_is_given_back_when_freed() {
        configure();
        // glibc's own rule would have raised its threshold past 8 MiB at the first free
        // and kept the later blocks in the heap.
        for _ in 0..3 {
            drop(std::hint::black_box(vec![1u8; 8 << 20]));
        }
        let before = rss();
        let block = std::hint::black_box(vec![1u8; 8 << 20]);
        let with = rss();
        drop(block);
        let after = rss();
        assert!(
            with >= before + (6 << 20),
            "the block is resident: {before} → {with}"
        );
        assert!(
            after + (6 << 20) <= with,
            "freed, it left: {with} → {after}"
        );
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

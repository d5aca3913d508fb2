//! Bounded work per `memory.search` (issue 40): the inputs that used to make svc-memory
//! allocate out of proportion to them, answered with a bounded heap.
//!
//! Its own test binary, with one test, so that the counting allocator and SQLite's
//! process-wide high-water mark see only this search: the Rust heap's peak through
//! [`Counting`], SQLite's own heap (where FTS5 holds its position lists) through
//! `sqlite3_memory_highwater`. Before the fix a 10,000-character query for a run of one
//! letter held 287 MB in SQLite and a 100,000-character one about 2.4 GB.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use snowpea_svc_memory::namespace::Namespace;
use snowpea_svc_memory::store::memories::{insert, search, NewMemory};
use snowpea_svc_memory::store::Store;

/// The system allocator, counting the bytes live now and their peak since the last reset.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let grow = new_size - layout.size();
                let now = LIVE.fetch_add(grow, Ordering::Relaxed) + grow;
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Most bytes one search may add to the Rust heap or to SQLite's (position lists, page
/// cache growth): the 64 KiB memory itself is read whole, everything else is bounded by
/// `snowpea_proto::limits` (`SEARCH_WORD_CHARS`, `SEARCH_OCCURRENCES`).
const BUDGET: usize = 8 << 20;

fn put(s: &Store, text: &str, created_ms: i64) -> String {
    let m = NewMemory {
        id: snowpea_common::ids::new_id("mem"),
        namespace: Namespace::Default.key(),
        text: text.into(),
        created_ms,
        created_at: format!("t{created_ms}"),
        ..Default::default()
    };
    s.write(|tx| insert(tx, &m)).unwrap();
    m.id
}

/// Searches `query`, returning the ids found, the Rust heap's peak above what was live
/// before, and SQLite's heap high-water mark above its use before.
fn measured(s: &Store, query: &str) -> (Vec<String>, usize, usize) {
    // SAFETY: plain reads/resets of SQLite's global memory statistics.
    let sqlite_before = unsafe { rusqlite::ffi::sqlite3_memory_used() } as usize;
    unsafe { rusqlite::ffi::sqlite3_memory_highwater(1) };
    let live = LIVE.load(Ordering::Relaxed);
    PEAK.store(live, Ordering::Relaxed);
    let hits = s
        .read(|c| search(c, &[Namespace::Default], query, 10))
        .unwrap();
    let rust = PEAK.load(Ordering::Relaxed) - live;
    let sqlite = (unsafe { rusqlite::ffi::sqlite3_memory_highwater(0) } as usize)
        .saturating_sub(sqlite_before);
    (hits.into_iter().map(|m| m.id).collect(), rust, sqlite)
}

#[test]
fn a_run_of_one_letter_is_found_with_a_bounded_heap() {
    let t = tempfile::tempdir().unwrap();
    let s = Store::open(&t.path().join("memory.db")).unwrap();
    let run = put(&s, &"z".repeat(10_000), 1);
    // The longest memory there is (memory.write's 64 KiB), also one letter repeated.
    let longest = put(&s, &"z".repeat(64 * 1024), 2);
    let _other = put(&s, "the deploy script needs a token", 3);
    // Warm the caches (statements, page cache, document frequencies) so that only the
    // search's own work is measured.
    measured(&s, "zzz");

    for (what, query) in [
        ("10,000 × z", "z".repeat(10_000)),
        ("100,000 × z", "z".repeat(100_000)),
        // 30 different phrases, each at every position of both stored runs.
        ("30 runs of 3 to 32 z", {
            (3..=32)
                .map(|n| "z".repeat(n))
                .collect::<Vec<_>>()
                .join(" ")
        }),
        ("a run of a three-letter period", "abc".repeat(30_000)),
    ] {
        let (ids, rust, sqlite) = measured(&s, &query);
        println!("{what}: Rust heap +{rust} bytes, SQLite heap +{sqlite} bytes");
        if what != "a run of a three-letter period" {
            assert!(
                ids.contains(&run) && ids.contains(&longest),
                "{what}: both runs of z are found, got {ids:?}"
            );
        } else {
            assert!(ids.is_empty(), "{what}: nothing holds it, got {ids:?}");
        }
        assert!(
            rust < BUDGET,
            "{what}: the Rust heap grew by {rust} bytes (budget {BUDGET})"
        );
        assert!(
            sqlite < BUDGET,
            "{what}: SQLite's heap grew by {sqlite} bytes (budget {BUDGET})"
        );
    }
}

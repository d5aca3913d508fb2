//! The per-workdir listing cache of `file.complete` (docs/PERFORMANCE.md "file.complete").
//!
//! A call answers from the cached [`Listing`] at once. At most every
//! [`Timing::check_every`] a call also starts one background check (never on the request
//! path, never under the lock): the listing's [`Stamp`] is compared with the tree (one
//! `stat` per directory) and the workdir is re-listed only when something changed, or when
//! the listing is older than [`Timing::relist_every`] (a safety net for changes a stamp
//! cannot see, such as a global git exclude). Re-listings are spaced by at least
//! [`RELIST_COST_FACTOR`] times the last listing's duration, so a tree that changes all the
//! time costs at most a small share of a core. Only a call finding no listing, or one not
//! checked for [`Timing::max_stale`], waits (for the check, and a listing if it changed).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::Semaphore;

use super::index::Index;
use super::list;
use super::stamp::Stamp;
use snowpea_session_error::{Error, Result};

/// Most workdirs whose listing is kept at once (the least recently used goes first).
const CACHE_WORKDIRS: usize = 8;
/// Most bytes of listings kept at once ([`Index::heap_bytes`]); past it the least recently
/// used go first (the newest one is always kept).
pub const CACHE_BYTES: usize = 32 << 20;
/// Listings made at once: a listing holds its whole tree's paths twice while it is built,
/// so concurrent calls for large trees queue here instead of each holding one (issue 40).
const LISTINGS_AT_ONCE: usize = 1;
/// A listing not used for this long is dropped.
const IDLE_DROP: Duration = Duration::from_secs(600);
/// Re-listings of one workdir are at least this many times its last listing's duration
/// apart.
pub const RELIST_COST_FACTOR: u32 = 20;

/// When a listing is checked and re-read.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// A listing is used without any check for this long after its last check.
    pub check_every: Duration,
    /// After this long without a check, a call waits for the check instead of answering
    /// from the listing at once.
    pub max_stale: Duration,
    /// A listing this old is re-read even when its stamp shows no change.
    pub relist_every: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            check_every: Duration::from_secs(5),
            max_stale: Duration::from_secs(120),
            relist_every: Duration::from_secs(120),
        }
    }
}

/// One workdir's candidates with what is needed to tell whether they are still current.
#[derive(Debug)]
pub struct Listing {
    /// The prepared candidates.
    pub index: Index,
    stamp: Stamp,
    listed_at: Instant,
    took: Duration,
}

#[derive(Debug)]
struct Entry {
    listing: Arc<Listing>,
    checked_at: Instant,
    next_check: Instant,
    used_at: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<PathBuf, Entry>,
    checking: HashSet<PathBuf>,
}

/// The cache (cheap to clone; clones share it).
#[derive(Debug, Clone)]
pub struct Cache {
    timing: Timing,
    inner: Arc<Mutex<Inner>>,
    listings: Arc<Semaphore>,
}

impl Default for Cache {
    fn default() -> Self {
        Cache::new(Timing::default())
    }
}

/// What a check found.
enum Checked {
    /// Nothing changed.
    Same,
    /// Changed, but the last listing is too recent to list again.
    Later(Instant),
    /// A new listing.
    New(Listing),
}

impl Cache {
    /// An empty cache with `timing`.
    pub fn new(timing: Timing) -> Self {
        Cache {
            timing,
            inner: Arc::default(),
            listings: Arc::new(Semaphore::new(LISTINGS_AT_ONCE)),
        }
    }

    /// Runs a listing (or check) `f` on the blocking pool once a listing slot is free
    /// ([`LISTINGS_AT_ONCE`]); the wait and the run share [`list::LIST_TIMEOUT`] plus a margin.
    async fn listing<T: Send + 'static>(
        &self,
        workdir: &Path,
        f: impl FnOnce(&Path) -> T + Send + 'static,
    ) -> Result<T> {
        let slot = tokio::time::timeout(
            list::LIST_TIMEOUT + Duration::from_secs(5),
            self.listings.clone().acquire_owned(),
        )
        .await
        .map_err(|_| {
            Error::Unavailable(format!(
                "listing {}: other listings are still running; try again shortly",
                workdir.display()
            ))
        })?;
        let out = blocking(workdir, f).await;
        drop(slot);
        out
    }

    /// The cached listing of `workdir`, if any (marked used).
    fn cached(&self, workdir: &Path, now: Instant) -> Option<(Arc<Listing>, Instant, Instant)> {
        let mut inner = self.lock();
        inner.entries.get_mut(workdir).map(|e| {
            e.used_at = now;
            (e.listing.clone(), e.checked_at, e.next_check)
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The listing of `workdir` (canonical). Errors: `unavailable` when listing takes longer
    /// than [`list::LIST_TIMEOUT`] (plus a margin).
    pub async fn get(&self, workdir: &Path) -> Result<Arc<Listing>> {
        let now = Instant::now();
        let Some((listing, checked_at, next_check)) = self.cached(workdir, now) else {
            // A call that waited for the slot may find the listing another call made.
            let listing = self
                .listing(workdir, {
                    let cache = self.clone();
                    let dir = workdir.to_path_buf();
                    move |w| match cache.cached(&dir, Instant::now()) {
                        Some((listing, ..)) => (listing, false),
                        None => (Arc::new(list_now(w)), true),
                    }
                })
                .await?;
            if listing.1 {
                self.store(workdir, listing.0.clone(), now);
            }
            return Ok(listing.0);
        };
        if now < next_check {
            return Ok(listing);
        }
        if now.duration_since(checked_at) < self.timing.max_stale {
            self.check_later(workdir, listing.clone());
            return Ok(listing);
        }
        let timing = self.timing;
        let old = listing.clone();
        let checked = self
            .listing(workdir, move |w| check(w, &old, timing, true))
            .await?;
        Ok(self.apply(workdir, listing, checked))
    }

    /// Starts one background check of `workdir` unless one is running.
    fn check_later(&self, workdir: &Path, listing: Arc<Listing>) {
        if !self.lock().checking.insert(workdir.to_path_buf()) {
            return;
        }
        let cache = self.clone();
        let dir = workdir.to_path_buf();
        tokio::spawn(async move {
            let timing = cache.timing;
            let old = listing.clone();
            match cache
                .listing(&dir, move |w| check(w, &old, timing, false))
                .await
            {
                Ok(checked) => {
                    cache.apply(&dir, listing, checked);
                }
                Err(e) => {
                    tracing::warn!(error = %e, workdir = %dir.display(), "file.complete refresh failed")
                }
            }
            cache.lock().checking.remove(&dir);
        });
    }

    /// Records what a check of `old` found; the listing to answer from.
    fn apply(&self, workdir: &Path, old: Arc<Listing>, checked: Checked) -> Arc<Listing> {
        let now = Instant::now();
        match checked {
            Checked::New(listing) => {
                let listing = Arc::new(listing);
                self.store(workdir, listing.clone(), now);
                listing
            }
            Checked::Same | Checked::Later(_) => {
                let next = match checked {
                    Checked::Later(at) => at,
                    _ => now + self.timing.check_every,
                };
                let mut inner = self.lock();
                if let Some(e) = inner.entries.get_mut(workdir) {
                    if Arc::ptr_eq(&e.listing, &old) {
                        e.checked_at = now;
                        e.next_check = next;
                    }
                }
                old
            }
        }
    }

    fn store(&self, workdir: &Path, listing: Arc<Listing>, used_at: Instant) {
        let now = Instant::now();
        let mut inner = self.lock();
        inner
            .entries
            .retain(|_, e| now.duration_since(e.used_at) < IDLE_DROP);
        if inner.entries.len() >= CACHE_WORKDIRS && !inner.entries.contains_key(workdir) {
            if let Some(oldest) = inner
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used_at)
                .map(|(k, _)| k.clone())
            {
                inner.entries.remove(&oldest);
            }
        }
        let entry = Entry {
            listing,
            checked_at: now,
            next_check: now + self.timing.check_every,
            used_at,
        };
        // Replaced and evicted listings are dropped after the lock is released.
        let replaced = inner.entries.insert(workdir.to_path_buf(), entry);
        let evicted = evict_past_budget(&mut inner.entries, workdir, CACHE_BYTES);
        drop(inner);
        drop(replaced);
        drop(evicted);
    }
}

/// Removes the least recently used listings (never `keep`) until the rest hold at most
/// `budget` bytes; returns them, to be dropped outside the lock.
fn evict_past_budget(
    entries: &mut HashMap<PathBuf, Entry>,
    keep: &Path,
    budget: usize,
) -> Vec<Entry> {
    let mut total: usize = entries.values().map(|e| e.listing.index.heap_bytes()).sum();
    let mut evicted = Vec::new();
    while total > budget {
        let Some(oldest) = entries
            .iter()
            .filter(|(k, _)| k.as_path() != keep)
            .min_by_key(|(_, e)| e.used_at)
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        if let Some(e) = entries.remove(&oldest) {
            total -= e.listing.index.heap_bytes();
            evicted.push(e);
        }
    }
    evicted
}

/// Lists `workdir` and stamps the listing. Blocking.
fn list_now(workdir: &Path) -> Listing {
    let started = SystemTime::now();
    let t = Instant::now();
    let (index, source) = list::list(workdir);
    let stamp = Stamp::take(workdir, &index, source, started);
    Listing {
        index,
        stamp,
        listed_at: Instant::now(),
        took: t.elapsed(),
    }
}

/// Checks `old` against the tree and re-lists when it changed (spaced by
/// [`RELIST_COST_FACTOR`] unless `now_or_never`). Blocking.
fn check(workdir: &Path, old: &Listing, timing: Timing, now_or_never: bool) -> Checked {
    let due = old.listed_at.elapsed() >= timing.relist_every;
    if !due && old.stamp.unchanged(workdir, &old.index) {
        return Checked::Same;
    }
    let earliest = old.listed_at + (old.took * RELIST_COST_FACTOR).max(timing.check_every);
    if !now_or_never && Instant::now() < earliest {
        return Checked::Later(earliest);
    }
    Checked::New(list_now(workdir))
}

/// Runs `f(workdir)` on the blocking pool with a timeout.
async fn blocking<T: Send + 'static>(
    workdir: &Path,
    f: impl FnOnce(&Path) -> T + Send + 'static,
) -> Result<T> {
    let dir = workdir.to_path_buf();
    tokio::time::timeout(
        list::LIST_TIMEOUT + Duration::from_secs(5),
        tokio::task::spawn_blocking(move || f(&dir)),
    )
    .await
    .map_err(|_| Error::Unavailable(format!("listing {} took too long", workdir.display())))?
    .map_err(|e| Error::Internal(anyhow::anyhow!("file.complete listing: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(listing: Listing, used_at: Instant) -> Entry {
        Entry {
            listing: Arc::new(listing),
            checked_at: used_at,
            next_check: used_at,
            used_at,
        }
    }

    fn listing_of(n: usize) -> Listing {
        let entries = (0..n)
            .map(|i| (format!("dir/file-{i:06}.rs"), false))
            .collect();
        let index = Index::new(entries, usize::MAX);
        let dir = std::env::temp_dir();
        let stamp = Stamp::take(&dir, &index, list::Source::Walk, SystemTime::now());
        Listing {
            index,
            stamp,
            listed_at: Instant::now(),
            took: Duration::ZERO,
        }
    }

    /// Listings past the byte budget go, least recently used first; the newest stays even
    /// when it alone is over the budget.
    #[test]
    fn listings_past_the_byte_budget_are_evicted_oldest_first() {
        let t0 = Instant::now();
        let mut entries = HashMap::new();
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            entries.insert(
                PathBuf::from(name),
                entry(listing_of(1000), t0 + Duration::from_secs(i as u64)),
            );
        }
        let one = entries[Path::new("a")].listing.index.heap_bytes();
        assert!(one > 1000 * 30, "an index holds its paths: {one}");
        let evicted = evict_past_budget(&mut entries, Path::new("c"), 2 * one);
        assert_eq!(evicted.len(), 1);
        assert!(!entries.contains_key(Path::new("a")), "the oldest went");
        let evicted = evict_past_budget(&mut entries, Path::new("b"), one / 2);
        assert_eq!(evicted.len(), 1);
        assert_eq!(entries.len(), 1);
        assert!(entries.contains_key(Path::new("b")), "the kept one stays");
    }

    /// Calls for a workdir not listed yet wait for one listing and share it.
    #[tokio::test]
    async fn concurrent_first_calls_share_one_listing() {
        let t = tempfile::tempdir().unwrap();
        for i in 0..50 {
            std::fs::write(t.path().join(format!("f{i}.txt")), "x").unwrap();
        }
        let w = std::fs::canonicalize(t.path()).unwrap();
        let cache = Cache::new(Timing::default());
        let calls = (0..8).map(|_| {
            let (cache, w) = (cache.clone(), w.clone());
            tokio::spawn(async move { cache.get(&w).await.unwrap() })
        });
        let got: Vec<Arc<Listing>> = futures::future::join_all(calls)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert!(
            got.iter().all(|l| Arc::ptr_eq(l, &got[0])),
            "one listing for all"
        );
        assert_eq!(got[0].index.len(), 50);
    }

    fn backdate(dir: &Path) {
        let old = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::open(dir).unwrap().set_modified(old).unwrap();
    }

    /// A quiet tree is not re-listed; a changed one is, but no sooner than the backoff
    /// allows unless the caller is waiting anyway.
    #[test]
    fn checks_re_list_only_changed_trees_and_back_off() {
        let t = tempfile::tempdir().unwrap();
        let w = t.path();
        std::fs::create_dir_all(w.join("d")).unwrap();
        std::fs::write(w.join("d/f.rs"), "x").unwrap();
        backdate(&w.join("d"));
        backdate(w);
        let timing = Timing {
            check_every: Duration::from_secs(3600),
            ..Default::default()
        };
        let first = list_now(w);
        assert!(matches!(check(w, &first, timing, false), Checked::Same));
        std::fs::write(w.join("d/g.rs"), "x").unwrap();
        assert!(matches!(
            check(w, &first, timing, false),
            Checked::Later(at) if at >= first.listed_at + timing.check_every
        ));
        let Checked::New(second) = check(w, &first, timing, true) else {
            panic!("a changed tree is re-listed when the caller waits");
        };
        let paths: Vec<&str> = second.index.iter().map(|c| c.path()).collect();
        assert_eq!(paths, ["d", "d/f.rs", "d/g.rs"]);
        // Older than relist_every: re-listed even though nothing changed.
        let due = Timing {
            check_every: Duration::ZERO,
            relist_every: Duration::ZERO,
            ..timing
        };
        backdate(&w.join("d"));
        let quiet = list_now(w);
        assert!(matches!(check(w, &quiet, timing, true), Checked::Same));
        assert!(matches!(check(w, &quiet, due, true), Checked::New(_)));
    }
}

//! Matching and ranking of `file.complete` (spec "file.complete"; upstream-behaviour §2):
//! * an empty query lists the top level;
//! * a query with `/` lists that directory's children whose names start with what follows
//!   the last `/` (case-insensitive);
//! * any other query is fuzzy over every path: basename-prefix, then basename-contains,
//!   then subsequence of the whole path (all case-insensitive), shorter paths first, then
//!   by name.
//!
//! Hidden entries (a component starting with `.`) show only when the last query segment
//! starts with `.`; listings put directories first, then names in order.
//!
//! Cost per call: a directory listing reads only that directory's slice of the sorted
//! index; a fuzzy query tests each candidate's precomputed character mask first and keeps
//! the best `limit` hits in a bounded heap (no sort of every match).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::index::{char_mask, Candidate, Index};
use super::MAX_LIMIT;

/// Indices of the best `limit` candidates, best first, and whether more matched.
pub fn rank<'a>(all: &'a Index, query: &str, limit: usize) -> (Vec<usize>, bool) {
    let last = query.rsplit('/').next().unwrap_or("");
    let show_hidden = last.starts_with('.');
    let mut best = TopK::new(limit);
    if query.is_empty() || query.contains('/') {
        let (dir, prefix) = match query.rfind('/') {
            Some(i) => (&query[..i], &query[i + 1..]),
            None => ("", ""),
        };
        let prefix = prefix.to_lowercase();
        let mut consider = |i: usize, c: Candidate<'a>| {
            if c.parent() == dir
                && c.lower_basename().starts_with(&prefix)
                && (show_hidden || !c.basename().starts_with('.'))
            {
                best.offer(u8::from(!c.is_dir()), 0, i, c.path());
            }
        };
        if dir.is_empty() {
            (0..all.len()).for_each(|i| consider(i, all.get(i)));
        } else {
            all.prefix_range(&format!("{dir}/"))
                .for_each(|i| consider(i, all.get(i)));
        }
    } else {
        let q = query.to_lowercase();
        let mask = char_mask(&q);
        for (i, c) in all.iter().enumerate() {
            if !c.may_contain(mask) || (!show_hidden && c.hidden()) {
                continue;
            }
            let base = c.lower_basename();
            let tier = if base.starts_with(&q) {
                0
            } else if base.contains(&q) {
                1
            } else if is_subsequence(&q, c.lower()) {
                2
            } else {
                continue;
            };
            best.offer(tier, c.path().len(), i, c.path());
        }
    }
    best.finish()
}

/// True when the characters of `needle` appear in `hay` in order.
fn is_subsequence(needle: &str, hay: &str) -> bool {
    if needle.is_ascii() {
        // An ASCII byte in UTF-8 is always that character, so bytes suffice.
        let mut it = hay.bytes();
        return needle.bytes().all(|n| it.any(|h| h == n));
    }
    let mut it = hay.chars();
    needle.chars().all(|n| it.any(|h| h == n))
}

/// A hit: smaller is better (tier, then path length, then path).
#[derive(Debug, PartialEq, Eq)]
struct Hit<'a> {
    tier: u8,
    len: usize,
    path: &'a str,
    index: usize,
}

impl Ord for Hit<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.tier, self.len)
            .cmp(&(other.tier, other.len))
            .then_with(|| self.path.cmp(other.path))
    }
}

impl PartialOrd for Hit<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The best `limit` hits seen (a max-heap whose top is the worst kept) and how many matched.
struct TopK<'a> {
    limit: usize,
    heap: BinaryHeap<Hit<'a>>,
    matched: usize,
}

impl<'a> TopK<'a> {
    fn new(limit: usize) -> Self {
        TopK {
            limit,
            heap: BinaryHeap::with_capacity(limit.min(MAX_LIMIT)),
            matched: 0,
        }
    }

    fn offer(&mut self, tier: u8, len: usize, index: usize, path: &'a str) {
        self.matched += 1;
        if self.limit == 0 {
            return;
        }
        let hit = Hit {
            tier,
            len,
            path,
            index,
        };
        if self.heap.len() < self.limit {
            self.heap.push(hit);
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if hit < *worst {
                *worst = hit;
            }
        }
    }

    fn finish(self) -> (Vec<usize>, bool) {
        let more = self.matched > self.limit;
        let hits = self.heap.into_sorted_vec();
        (hits.into_iter().map(|h| h.index).collect(), more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked<'a>(all: &'a Index, q: &str, limit: usize) -> (Vec<&'a str>, bool) {
        let (hits, more) = rank(all, q, limit);
        (hits.iter().map(|i| all.get(*i).path()).collect(), more)
    }

    /// Lower-casing can change a path's byte length (`İ` → `i̇`); the basename is found in
    /// the lower-case copy by its own offset, so such paths match and never panic.
    #[test]
    fn paths_whose_lower_case_is_longer_match_by_their_own_basename() {
        let all = Index::of_files(&["İİİ/Ärger.txt", "İİİ/zzz.txt", "b/ärgern.md"]);
        let (paths, more) = ranked(&all, "är", 10);
        assert_eq!(paths, ["b/ärgern.md", "İİİ/Ärger.txt"], "shorter first");
        assert!(!more);
        let (paths, _) = ranked(&all, "İİİ/ä", 10);
        assert_eq!(paths, ["İİİ/Ärger.txt"]);
    }

    /// The bounded selection gives exactly the first `limit` of the full ranking, whatever
    /// the limit, with `more` when anything was left out.
    #[test]
    fn top_k_is_the_prefix_of_the_full_ranking() {
        let names: Vec<String> = (0..300)
            .map(|i| match i % 4 {
                0 => format!("src/mod_{i}.rs"),
                1 => format!("a/b/x_mod{i}.txt"),
                2 => format!("m/o/d/{i}.md"),
                _ => format!("other/{i}.rs"),
            })
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let all = Index::of_files(&refs);
        let (full, more) = ranked(&all, "mod", usize::MAX);
        assert!(!more);
        assert_eq!(full.len(), 225);
        assert!(full[0].starts_with("src/mod_"), "{full:?}");
        assert!(full[224].starts_with("m/o/d/"), "{full:?}");
        for limit in [1, 2, 30, 224] {
            let (top, more) = ranked(&all, "mod", limit);
            assert_eq!(top, full[..limit], "limit {limit}");
            assert!(more);
        }
        assert_eq!(ranked(&all, "mod", 225), (full.clone(), false));
        assert_eq!(ranked(&all, "qqq", 5), (vec![], false));
    }

    #[test]
    fn subsequence_over_ascii_and_other_text() {
        assert!(is_subsequence("hndlr", "pkg/handler_7.rs"));
        assert!(!is_subsequence("hndlrz", "pkg/handler_7.rs"));
        assert!(is_subsequence("äg", "ärger"));
        assert!(!is_subsequence("gä", "ärger"));
        assert!(is_subsequence("", "x"));
    }
}

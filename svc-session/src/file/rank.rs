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

use super::list::Candidate;

/// Indices of the best `limit` candidates, best first, and whether more matched.
pub fn rank(all: &[Candidate], query: &str, limit: usize) -> (Vec<usize>, bool) {
    let last = query.rsplit('/').next().unwrap_or("");
    let show_hidden = last.starts_with('.');
    let hidden = |s: &str| s.split('/').any(|c| c.starts_with('.'));
    // (tier, length, index): smaller is better.
    let mut hits: Vec<(u8, usize, usize)> = Vec::new();
    if query.is_empty() || query.contains('/') {
        let (dir, prefix) = match query.rfind('/') {
            Some(i) => (&query[..i], &query[i + 1..]),
            None => ("", ""),
        };
        let prefix = prefix.to_lowercase();
        for (i, c) in all.iter().enumerate() {
            if c.parent() == dir
                && c.lower_basename().starts_with(&prefix)
                && (show_hidden || !c.basename().starts_with('.'))
            {
                hits.push((u8::from(!c.is_dir), 0, i));
            }
        }
    } else {
        let q = query.to_lowercase();
        for (i, c) in all.iter().enumerate() {
            let base = c.lower_basename();
            let tier = if base.starts_with(&q) {
                0
            } else if base.contains(&q) {
                1
            } else if is_subsequence(&q, &c.lower) {
                2
            } else {
                continue;
            };
            if !show_hidden && hidden(&c.path) {
                continue;
            }
            hits.push((tier, c.path.len(), i));
        }
    }
    let more = hits.len() > limit;
    let by = |a: &(u8, usize, usize), b: &(u8, usize, usize)| {
        (a.0, a.1)
            .cmp(&(b.0, b.1))
            .then_with(|| all[a.2].path.cmp(&all[b.2].path))
    };
    if more {
        hits.select_nth_unstable_by(limit, by);
        hits.truncate(limit);
    }
    hits.sort_unstable_by(by);
    (hits.into_iter().map(|h| h.2).collect(), more)
}

/// True when the characters of `needle` appear in `hay` in order.
fn is_subsequence(needle: &str, hay: &str) -> bool {
    let mut it = hay.chars();
    needle.chars().all(|n| it.any(|h| h == n))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lower-casing can change a path's byte length (`İ` → `i̇`); the basename is found in
    /// the lower-case copy by its own offset, so such paths match and never panic.
    #[test]
    fn paths_whose_lower_case_is_longer_match_by_their_own_basename() {
        let all: Vec<Candidate> = ["İİİ/Ärger.txt", "İİİ/zzz.txt", "b/ärgern.md"]
            .iter()
            .map(|p| Candidate::for_test(p))
            .collect();
        let (hits, more) = rank(&all, "är", 10);
        let paths: Vec<&str> = hits.iter().map(|i| &*all[*i].path).collect();
        assert_eq!(paths, ["b/ärgern.md", "İİİ/Ärger.txt"], "shorter first");
        assert!(!more);
        let (hits, _) = rank(&all, "İİİ/ä", 10);
        assert_eq!(hits.len(), 1);
        assert_eq!(&*all[hits[0]].path, "İİİ/Ärger.txt");
    }
}

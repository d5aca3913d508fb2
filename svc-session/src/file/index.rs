//! The prepared index of one workdir listing (`file.complete`, docs/PERFORMANCE.md
//! "file.complete"): every candidate's path and its lower-case copy live in two shared
//! buffers, with the basename offsets, a "hidden" flag and a character mask computed once per
//! listing, so a keystroke allocates nothing per candidate and rejects most candidates with
//! one mask test. Dropping an index frees a handful of buffers, not one per path.

/// One candidate's offsets into the [`Index`] buffers.
#[derive(Debug, Clone, Copy)]
struct Item {
    /// Start of the path in `Index::text`.
    start: usize,
    /// Byte length of the path.
    len: u32,
    /// Byte offset of the basename inside the path.
    base: u32,
    /// Start of the lower-case path in `Index::lower`.
    lstart: usize,
    /// Byte length of the lower-case path (lower-casing may change byte lengths).
    llen: u32,
    /// Byte offset of the basename inside the lower-case path.
    lbase: u32,
    /// [`char_mask`] of the lower-case path.
    mask: u64,
    /// A directory.
    is_dir: bool,
    /// Some component starts with `.`.
    hidden: bool,
}

/// Every candidate of a workdir, sorted by path (bytes), without duplicates.
#[derive(Debug, Default)]
pub struct Index {
    text: String,
    lower: String,
    items: Vec<Item>,
}

/// One candidate of an [`Index`]: a path relative to the workdir, `/`-separated, without a
/// trailing `/`.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    index: &'a Index,
    item: Item,
}

impl Index {
    /// The index of `(path, is_dir)` pairs (any order; sorted and de-duplicated here, at most
    /// `max` kept).
    pub fn new(mut entries: Vec<(String, bool)>, max: usize) -> Index {
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        entries.truncate(max);
        let bytes: usize = entries.iter().map(|e| e.0.len()).sum();
        let mut ix = Index {
            text: String::with_capacity(bytes),
            lower: String::with_capacity(bytes + bytes / 8),
            items: Vec::with_capacity(entries.len()),
        };
        for (path, is_dir) in &entries {
            ix.push(path, *is_dir);
        }
        ix
    }

    fn push(&mut self, path: &str, is_dir: bool) {
        let start = self.text.len();
        self.text.push_str(path);
        let lstart = self.lower.len();
        // The whole path at once (`to_lowercase` of a string handles final sigma).
        let lower = path.to_lowercase();
        self.lower.push_str(&lower);
        let base = path.rfind('/').map(|i| i + 1).unwrap_or(0);
        let lbase = lower.rfind('/').map(|i| i + 1).unwrap_or(0);
        self.items.push(Item {
            start,
            len: path.len() as u32,
            base: base as u32,
            lstart,
            llen: lower.len() as u32,
            lbase: lbase as u32,
            mask: char_mask(&lower),
            is_dir,
            hidden: path.split('/').any(|c| c.starts_with('.')),
        });
    }

    /// Number of candidates.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when there is no candidate.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The `i`-th candidate (in path order). Panics when `i >= len()`.
    pub fn get(&self, i: usize) -> Candidate<'_> {
        Candidate {
            index: self,
            item: self.items[i],
        }
    }

    /// Bytes this index holds on the heap (its two path buffers and its items), for the
    /// cache's budget.
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity()
            + self.lower.capacity()
            + self.items.capacity() * std::mem::size_of::<Item>()
    }

    /// Every candidate in path order.
    pub fn iter(&self) -> impl Iterator<Item = Candidate<'_>> + '_ {
        self.items
            .iter()
            .map(|&item| Candidate { index: self, item })
    }

    /// The index range of the candidates whose path starts with `prefix` (contiguous,
    /// since candidates are sorted by path bytes).
    pub fn prefix_range(&self, prefix: &str) -> std::ops::Range<usize> {
        let lo = self.items.partition_point(|it| self.path_of(it) < prefix);
        let hi = lo + self.items[lo..].partition_point(|it| self.path_of(it).starts_with(prefix));
        lo..hi
    }

    fn path_of(&self, it: &Item) -> &str {
        &self.text[it.start..it.start + it.len as usize]
    }

    /// An index of files (tests of the ranking).
    #[cfg(test)]
    pub(crate) fn of_files(paths: &[&str]) -> Index {
        Index::new(
            paths.iter().map(|p| (p.to_string(), false)).collect(),
            usize::MAX,
        )
    }
}

impl<'a> Candidate<'a> {
    /// The relative path.
    pub fn path(&self) -> &'a str {
        self.index.path_of(&self.item)
    }

    /// The last component.
    pub fn basename(&self) -> &'a str {
        &self.path()[self.item.base as usize..]
    }

    /// The directory part (`""` at the top level).
    pub fn parent(&self) -> &'a str {
        self.path()[..self.item.base as usize].trim_end_matches('/')
    }

    /// Lower-case copy of the path.
    pub fn lower(&self) -> &'a str {
        let s = self.item.lstart;
        &self.index.lower[s..s + self.item.llen as usize]
    }

    /// The lower-case basename.
    pub fn lower_basename(&self) -> &'a str {
        &self.lower()[self.item.lbase as usize..]
    }

    /// True for a directory.
    pub fn is_dir(&self) -> bool {
        self.item.is_dir
    }

    /// True when some component starts with `.`.
    pub fn hidden(&self) -> bool {
        self.item.hidden
    }

    /// True when every character of `mask` (a [`char_mask`]) may occur in the lower-case
    /// path; false means it certainly does not contain them all.
    pub fn may_contain(&self, mask: u64) -> bool {
        mask & !self.item.mask == 0
    }
}

/// A 64-bit summary of the characters of `s`: one bit per ASCII letter and digit, and a few
/// shared bits for everything else. If `s` contains every character of `t`, then
/// `char_mask(t) & !char_mask(s) == 0`.
pub fn char_mask(s: &str) -> u64 {
    s.chars().fold(0u64, |m, c| m | (1u64 << char_bit(c)))
}

fn char_bit(c: char) -> u32 {
    match c {
        'a'..='z' => c as u32 - 'a' as u32,
        'A'..='Z' => c as u32 - 'A' as u32,
        '0'..='9' => 26 + (c as u32 - '0' as u32),
        '_' => 36,
        '-' => 37,
        '.' => 38,
        '/' => 39,
        ' ' => 40,
        other => 41 + (other as u32 % 23),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ranges_and_masks() {
        let ix = Index::of_files(&["b/c", "a/x", "a/y/z", "a", "ab/q", "a/x"]);
        assert_eq!(ix.len(), 5, "duplicates dropped");
        let r = ix.prefix_range("a/");
        let got: Vec<&str> = r.map(|i| ix.get(i).path()).collect();
        assert_eq!(got, ["a/x", "a/y/z"]);
        assert!(ix.prefix_range("zz/").is_empty());
        let c = ix.get(ix.prefix_range("ab/").start);
        assert_eq!((c.basename(), c.parent()), ("q", "ab"));
        assert!(c.may_contain(char_mask("bq/")));
        assert!(!c.may_contain(char_mask("bqz")));
        assert!(!c.may_contain(char_mask("é")));
    }
}

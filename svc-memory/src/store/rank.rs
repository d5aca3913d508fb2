//! Top-k bm25 ranking of the FTS5 phrase matches of a query, computed here instead of by
//! FTS5's `bm25()` (issue 14 "Recall").
//!
//! `bm25()` looks up the document frequency of every phrase by walking the phrase's whole
//! doclist and then scores every matching row before `LIMIT` picks the best few, so a
//! recall query with common words cost hundreds of milliseconds at 100k memories. This
//! module computes the same formula (FTS5's, `fts5_aux.c`: k1 = 1.2, b = 0.75, column
//! weights text 1.0 / tags 0.5 / title 0.8, idf = ln((N − n + 0.5)/(n + 0.5)) floored at
//! 1e-6, document length in trigram tokens) with MaxScore early termination:
//!
//! - the table's row and token totals come from FTS5's own averages record, the document
//!   frequency of each phrase from a small cache ([`doc_freq`]) that is checked against
//!   the table on every use (so it is never stale, and is rebuilt from SQLite after a
//!   restart: nothing durable lives outside SQLite);
//! - phrases are fetched rarest first (FTS5 `MATCH` of one phrase, no `bm25()`), every
//!   fetched row is scored over all phrases from its text;
//! - once `limit` rows are scored and the `limit`-th score is above the most the
//!   still-unfetched phrases could add to a row that has none of the fetched ones
//!   (Σ idf·(k1 + 1)), no other row can enter the top `limit`: the answer is exact.
//!
//! One bound keeps a long or common-word query fast: at most [`MAX_SCORED`] rows are
//! scored; a phrase whose matches would exceed what is left of it contributes its newest
//! matches only, and later (more common) phrases add no rows, only their share of the
//! score of rows already fetched. So the answer is the exact bm25 order
//! (`ORDER BY -bm25(…) DESC, created_ms DESC, rowid DESC`, see the tests) whenever MaxScore
//! proves the top `limit` within that many rows; otherwise it is the bm25 order of the
//! rows that contain the query's rarest words.
//!
//! Two more keep the p99 low ([`Limits`]): a cold document frequency of a phrase common
//! among the newest [`DF_SAMPLE`] memories is estimated from them instead of counted over
//! its whole doclist (so on a table larger than that, the idf of common phrases is an
//! estimate; rare phrases, the ones that decide a ranking, are always counted), and
//! namespaces of at most [`SMALL_NAMESPACE`] memories are scored whole instead of fetched
//! through the index (which would walk every other namespace's matches).
//!
//! And three keep the recall before a turn (three namespaces searched at once) short: an
//! empty namespace answers before any frequency is counted; a namespace holding at most
//! 1/[`MEMBERS_SHARE`] of the table walks a phrase's matches through a cached filter of
//! its rowids ([`members`]) instead of joining every match with `memories`; and concurrent
//! searches count different cold phrases in parallel, each phrase once ([`doc_freqs`]).
//!
//! Whatever the query and the stored texts, one search holds at most its best `limit` rows
//! ([`TopRows`]; a small namespace is scored whole as a stream), counts at most
//! [`SEARCH_OCCURRENCES`] occurrences of a phrase per column, and meets phrases of at most
//! `SEARCH_WORD_CHARS` characters (cut by the query plan): the work per row is bounded by
//! the row's length (`proto/src/limits.rs`, issue 40).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, LazyLock, Mutex};
use std::time::{Duration, Instant};

use memchr::memmem::Finder;
use rusqlite::types::Value as Sql;
use rusqlite::{params_from_iter, Connection, OptionalExtension};
use snowpea_proto::limits::SEARCH_OCCURRENCES;

use super::memories::Memory;
use crate::error::{Error, Result};
use crate::namespace::Namespace;

/// bm25 `k1`, as in FTS5.
const K1: f64 = 1.2;
/// bm25 `b`, as in FTS5.
const B: f64 = 0.75;
/// Column weights (text, tags, title), as the former `bm25(memories_fts, 1.0, 0.5, 0.8)`.
const WEIGHTS: [f64; 3] = [1.0, 0.5, 0.8];
/// Most rows one query scores (module docs).
pub const MAX_SCORED: usize = 256;
/// Most cached document frequencies (all databases of the process together).
const DF_CACHE: usize = 8_192;
/// Memories of the sample a common phrase's frequency is estimated from ([`Sample`]).
pub const DF_SAMPLE: i64 = 8_192;
/// Namespaces of at most this many memories are scored whole ([`Limits`]): reading 2,048
/// rows costs about what fetching [`MAX_SCORED`] rows of a common phrase costs when the
/// namespace holds a small share of the table (the fetch then skips every row of other
/// namespaces: all of them when the namespace is empty, as a new project's is).
pub const SMALL_NAMESPACE: i64 = 2_048;

/// The table's totals at one moment, from FTS5's averages record, plus the newest row
/// (to tell an append-only change from any other).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Snapshot {
    rows: i64,
    tokens: i64,
    max_rowid: i64,
    max_id: String,
}

/// A cached document frequency and the snapshot it was counted at.
#[derive(Debug, Clone)]
struct Df {
    n: i64,
    at: Snapshot,
}

static DFS: LazyLock<Mutex<HashMap<(String, String), Df>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Keys (database, phrase) being counted, and the signal that one was released.
type Counting = (Mutex<HashSet<(String, String)>>, Condvar);

/// The phrases (per database) whose document frequency is being counted now: searches of
/// the same words at the same time (the recall before a turn searches three namespaces
/// at once) count each phrase once, and count different phrases in parallel — a search
/// that meets a phrase another is counting counts its next phrase first, and waits for
/// that one (then finds it cached) only at the end ([`doc_freqs`]).
static COUNTING: LazyLock<Counting> =
    LazyLock::new(|| (Mutex::new(HashSet::new()), Condvar::new()));

/// Longest wait for another search's count of a phrase; then the phrase is counted again.
const COUNT_WAIT: Duration = Duration::from_secs(5);

/// A claim on counting one phrase ([`COUNTING`]), released (and waiters woken) on drop,
/// error paths included.
struct Claim(Option<(String, String)>);

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(key) = self.0.take() {
            let (set, cv) = &*COUNTING;
            if let Ok(mut s) = set.lock() {
                s.remove(&key);
            }
            cv.notify_all();
        }
    }
}

/// Where the sample starts (`None`: the table is no larger than the sample), for the
/// snapshot and sample it was found at.
type SampleStart = (Snapshot, Sample, Option<i64>);

/// Per database: where the frequency sample starts ([`sample_start`]) at one snapshot.
static STARTS: LazyLock<Mutex<HashMap<String, SampleStart>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// A SQLite varint (big-endian 7-bit groups, the 9th byte whole), as FTS5 writes them.
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for i in 0..9 {
        let byte = *b.get(i)?;
        if i == 8 {
            return Some(((v << 8) | u64::from(byte), 9));
        }
        v = (v << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

fn snapshot(conn: &Connection) -> Result<Snapshot> {
    // FTS5_AVERAGES_ROWID = 1: varint row count, then one varint token total per column.
    let block: Option<Vec<u8>> = conn
        .query_row(
            "SELECT block FROM memories_fts_data WHERE id = 1",
            [],
            |r| r.get(0),
        )
        .optional()?;
    let (mut rows, mut tokens) = (0i64, 0i64);
    if let Some(b) = block {
        let mut at = 0;
        if let Some((n, len)) = varint(&b) {
            rows = n as i64;
            at += len;
            while let Some((t, len)) = varint(&b[at..]) {
                tokens += t as i64;
                at += len;
            }
        }
    }
    let (max_rowid, max_id) = conn
        .query_row(
            "SELECT rowid, id FROM memories ORDER BY rowid DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?
        .unwrap_or((0, String::new()));
    Ok(Snapshot {
        rows,
        tokens,
        max_rowid,
        max_id,
    })
}

fn quoted(phrase: &str) -> String {
    format!("\"{}\"", phrase.replace('"', "\"\""))
}

/// Rows containing `phrase` with a rowid above `after_rowid` and below `before_rowid`.
fn count_matches(
    conn: &Connection,
    phrase: &str,
    after_rowid: i64,
    before_rowid: i64,
) -> Result<i64> {
    let mut stmt = conn.prepare_cached(
        "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?1 AND rowid > ?2 AND rowid < ?3",
    )?;
    Ok(stmt.query_row(
        rusqlite::params![quoted(phrase), after_rowid, before_rowid],
        |r| r.get(0),
    )?)
}

/// Rows containing `phrase` with `after_rowid < rowid < before_rowid`: how many, and their
/// rowids when there are at most `keep` (a rare phrase's rows are then fetched by rowid,
/// without reading its doclist a second time).
fn matches(
    conn: &Connection,
    phrase: &str,
    after_rowid: i64,
    before_rowid: i64,
    keep: usize,
) -> Result<(i64, Option<Vec<i64>>)> {
    let mut stmt = conn.prepare_cached(
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?1 AND rowid > ?2 AND rowid < ?3",
    )?;
    let mut rows = stmt.query(rusqlite::params![quoted(phrase), after_rowid, before_rowid])?;
    let mut n = 0;
    let mut ids = Some(Vec::new());
    while let Some(r) = rows.next()? {
        n += 1;
        match ids.as_mut() {
            Some(v) if v.len() < keep => v.push(r.get(0)?),
            _ => ids = None,
        }
    }
    Ok((n, ids))
}

/// Where a cold document frequency is counted: the whole table, or, when it holds more
/// than `rows` memories, first its newest `rows` only ([`doc_freq`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Memories of the sample.
    pub rows: i64,
    /// Matches in the sample from which a phrase is common: its frequency is then
    /// estimated from the sample instead of counted over its whole doclist.
    pub common: i64,
}

impl Sample {
    /// The service's sample: the newest [`DF_SAMPLE`] memories; a phrase in at least
    /// 1/64 of them (≈ 1.6 %) is common (its estimate then rests on ≥ 128 matches: a
    /// relative error of about 1/√128 ≈ 9 %, an idf error of about 0.1 for a phrase in a
    /// few percent of the memories).
    pub const DEFAULT: Sample = Sample {
        rows: DF_SAMPLE,
        common: DF_SAMPLE / 64,
    };
    /// Never estimate: always count (the exact bm25 idf, at any size).
    pub const EXACT: Sample = Sample {
        rows: i64::MAX,
        common: i64::MAX,
    };
}

/// The bounds of one ranking ([`top_scoring`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most rows fetched through the index and scored (module docs).
    pub max_scored: usize,
    /// How cold document frequencies are counted.
    pub sample: Sample,
    /// Namespaces holding at most this many memories together are read whole and every
    /// memory scored, instead of fetched phrase by phrase through the index.
    pub small_namespace: i64,
    /// Namespaces holding at most 1/`members_share` of the table walk a phrase's matches
    /// with a filter of their rowids instead of a join with `memories` (0: never). Changes
    /// only the cost.
    pub members_share: i64,
}

impl Limits {
    /// The service's bounds: [`MAX_SCORED`], [`Sample::DEFAULT`], [`SMALL_NAMESPACE`],
    /// [`MEMBERS_SHARE`].
    pub const DEFAULT: Limits = Limits {
        max_scored: MAX_SCORED,
        sample: Sample::DEFAULT,
        small_namespace: SMALL_NAMESPACE,
        members_share: MEMBERS_SHARE,
    };
}

/// The rowid from which the newest `sample.rows` memories start, or `None` when the table
/// is no larger than that (then there is nothing to estimate).
/// Cached per database until the table changes (finding it walks `sample.rows` rows).
fn sample_start(
    conn: &Connection,
    db: &str,
    now: &Snapshot,
    sample: Sample,
) -> Result<Option<i64>> {
    if now.rows <= sample.rows {
        return Ok(None);
    }
    if let Some((at, s, start)) = STARTS.lock().ok().and_then(|m| m.get(db).cloned()) {
        if at == *now && s == sample {
            return Ok(start);
        }
    }
    let start = conn
        .prepare_cached("SELECT rowid FROM memories ORDER BY rowid DESC LIMIT 1 OFFSET ?1")?
        .query_row([sample.rows - 1], |r| r.get(0))
        .optional()?;
    if let Ok(mut m) = STARTS.lock() {
        if m.len() >= 64 {
            m.clear();
        }
        m.insert(db.to_owned(), (now.clone(), sample, start));
    }
    Ok(start)
}

/// How many rows of the whole table (all namespaces, as FTS5's bm25 counts) contain
/// `phrase`. Cached per database and phrase; a cached count is reused only when the table
/// is unchanged since, or only grew (then the new rows are counted on top); any delete
/// recounts.
///
/// A cold count of a common word walks its whole doclist (5–13 ms per word at 100k
/// memories, ten times that at 1M: the p99 tail of recall). So on a table larger than
/// `sample.rows`, the phrase is first counted among the newest `sample.rows` memories
/// (`start`: [`sample_start`]); when it has at least `sample.common` matches there, its
/// frequency is that share of the whole table; only rarer phrases (cheap to count, and
/// the ones whose idf decides the ranking) are counted exactly.
///
/// `wait: false`: `None` when another search is counting the phrase right now (count
/// something else, then ask again with `wait: true`, which waits for it up to
/// [`COUNT_WAIT`]).
#[allow(clippy::too_many_arguments)]
fn doc_freq(
    conn: &Connection,
    db: &str,
    now: &Snapshot,
    phrase: &str,
    sample: Sample,
    start: &mut Option<Option<i64>>,
    keep: usize,
    wait: bool,
) -> Result<Option<(i64, Option<Vec<i64>>)>> {
    let key = (db.to_owned(), phrase.to_owned());
    let lookup = || DFS.lock().ok().and_then(|m| m.get(&key).cloned());
    if let Some(d) = lookup().filter(|d| d.at == *now) {
        return Ok(Some((d.n, None)));
    }
    let claim = {
        let (set, cv) = &*COUNTING;
        let mut s = set
            .lock()
            .map_err(|_| Error::Internal("counting lock poisoned".into()))?;
        let deadline = Instant::now() + COUNT_WAIT;
        while s.contains(&key) {
            let left = deadline.saturating_duration_since(Instant::now());
            if !wait {
                return Ok(None);
            }
            if left.is_zero() {
                break;
            }
            s = cv
                .wait_timeout(s, left)
                .map_err(|_| Error::Internal("counting lock poisoned".into()))?
                .0;
        }
        // After a timed-out wait the other count still holds the claim: count unclaimed.
        Claim(s.insert(key.clone()).then(|| key.clone()))
    };
    let cached = lookup();
    let (n, ids) = match cached {
        Some(d) if d.at == *now => return Ok(Some((d.n, None))),
        Some(d) if appended_since(conn, &d.at, now)? => (
            d.n + count_matches(conn, phrase, d.at.max_rowid, i64::MAX)?,
            None,
        ),
        _ => {
            let from = match start {
                Some(s) => *s,
                None => *start.insert(sample_start(conn, db, now, sample)?),
            };
            match from {
                // The sample is the `sample.rows` rows from `from` on (rowids only grow).
                Some(from) => {
                    let (hits, newer) = matches(conn, phrase, from - 1, i64::MAX, keep)?;
                    if hits >= sample.common {
                        let n = (hits as f64) * (now.rows as f64) / (sample.rows as f64);
                        (n.round() as i64, None)
                    } else {
                        let left = keep.saturating_sub(newer.as_ref().map_or(keep, Vec::len));
                        let (older, ids) = matches(conn, phrase, i64::MIN, from, left)?;
                        let ids = match (newer, ids) {
                            (Some(mut a), Some(b)) => {
                                a.extend(b);
                                Some(a)
                            }
                            _ => None,
                        };
                        (hits + older, ids)
                    }
                }
                None => matches(conn, phrase, i64::MIN, i64::MAX, keep)?,
            }
        }
    };
    if let Ok(mut m) = DFS.lock() {
        if m.len() >= DF_CACHE {
            m.clear();
        }
        m.insert(key, Df { n, at: now.clone() });
    }
    drop(claim);
    Ok(Some((n, ids)))
}

/// The document frequency of every phrase ([`doc_freq`]), and the rowids of the rare ones
/// this search counted: phrases another search is counting are left to the end.
fn doc_freqs(
    conn: &Connection,
    db: &str,
    now: &Snapshot,
    phrases: &[String],
    sample: Sample,
    keep: usize,
) -> Result<Vec<(i64, Option<Vec<i64>>)>> {
    let mut start = None;
    let mut got: Vec<Option<(i64, Option<Vec<i64>>)>> = vec![None; phrases.len()];
    let mut later = Vec::new();
    for (i, p) in phrases.iter().enumerate() {
        match doc_freq(conn, db, now, p, sample, &mut start, keep, false)? {
            Some(v) => got[i] = Some(v),
            None => later.push(i),
        }
    }
    for i in later {
        got[i] = doc_freq(conn, db, now, &phrases[i], sample, &mut start, keep, true)?;
    }
    Ok(got.into_iter().map(|g| g.unwrap_or((0, None))).collect())
}

/// True when every row of `then` is still there: the rows beyond its newest row account
/// for all growth and that newest row is the same one (new rows only get a rowid above the
/// largest one present, so a deleted old row shows in one of the two).
fn appended_since(conn: &Connection, then: &Snapshot, now: &Snapshot) -> Result<bool> {
    if now.max_rowid < then.max_rowid {
        return Ok(false);
    }
    let newer: i64 = conn
        .prepare_cached("SELECT count(*) FROM memories WHERE rowid > ?1")?
        .query_row([then.max_rowid], |r| r.get(0))?;
    if now.rows != then.rows + newer {
        return Ok(false);
    }
    if then.max_rowid == 0 {
        return Ok(true);
    }
    let id: Option<String> = conn
        .prepare_cached("SELECT id FROM memories WHERE rowid = ?1")?
        .query_row([then.max_rowid], |r| r.get(0))
        .optional()?;
    Ok(id.as_deref() == Some(then.max_id.as_str()))
}

/// Per database and namespace list: the sorted rowids of its memories at one snapshot, or
/// `None` when they are more than 1/[`MEMBERS_SHARE`] of the table ([`members`]).
type MemberSet = (Snapshot, Option<Arc<Vec<i64>>>);

static MEMBERS: LazyLock<Mutex<HashMap<(String, String), MemberSet>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Namespaces holding at most 1/`MEMBERS_SHARE` of the table get a rowid filter
/// ([`Limits::members_share`]).
pub const MEMBERS_SHARE: i64 = 4;

/// The rowids (sorted) of the memories of `namespaces` when they hold at most 1/`share` of
/// the table, else `None` (`share` 0: always `None`).
///
/// A mid-size namespace (a project's, next to a larger global one) would otherwise join
/// every match of a phrase with `memories` to drop the other namespaces' rows; with the
/// filter they are dropped by a binary search, and only its own rows are read. Cached per
/// database and namespace list like [`doc_freq`]: reused while the table is unchanged,
/// extended when it only grew (a namespace found too large stays so), rebuilt after any
/// delete (reading up to a quarter of the table's rowids from the namespace index, once).
fn members(
    conn: &Connection,
    db: &str,
    now: &Snapshot,
    namespaces: &[Namespace],
    share: i64,
) -> Result<Option<Arc<Vec<i64>>>> {
    if share <= 0 {
        return Ok(None);
    }
    let keys: Vec<String> = namespaces.iter().map(Namespace::key).collect();
    let key = (db.to_owned(), format!("{share}\n{}", keys.join("\n")));
    let cached = MEMBERS.lock().ok().and_then(|m| m.get(&key).cloned());
    let marks = (2..=keys.len() + 1)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let read = |after: i64, limit: i64| -> Result<Vec<i64>> {
        let mut params = vec![Sql::Integer(after)];
        params.extend(keys.iter().map(|k| Sql::Text(k.clone())));
        params.push(Sql::Integer(limit));
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT rowid FROM memories WHERE rowid > ?1 AND namespace IN ({marks}) LIMIT ?{}",
            params.len()
        ))?;
        let ids = stmt
            .query_map(params_from_iter(params.iter()), |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<i64>>>()?;
        Ok(ids)
    };
    let most = now.rows / share;
    let set = match cached {
        Some((at, set)) if at == *now => return Ok(set),
        // Too large, and only grown since: stays unfiltered without reading its rowids
        // again (that is a quarter of the table: the global namespace's first search after
        // every write would pay it).
        Some((at, None)) if appended_since(conn, &at, now)? => None,
        Some((at, Some(set))) if appended_since(conn, &at, now)? => {
            let newer = read(at.max_rowid, most + 1)?;
            let mut all = Vec::with_capacity(set.len() + newer.len());
            all.extend_from_slice(&set);
            all.extend(newer);
            all.sort_unstable();
            (all.len() as i64 <= most).then(|| Arc::new(all))
        }
        _ => {
            let mut all = read(i64::MIN, most + 1)?;
            all.sort_unstable();
            (all.len() as i64 <= most).then(|| Arc::new(all))
        }
    };
    if let Ok(mut m) = MEMBERS.lock() {
        // A few namespace lists (each set ≤ a quarter of the table's rowids).
        if m.len() >= 8 {
            m.clear();
        }
        m.insert(key, (now.clone(), set.clone()));
    }
    Ok(set)
}

/// Occurrences of `needle` in `hay`, overlapping ones included (a trigram phrase matches
/// at every position).
/// `needle` is searched once per query (a [`Finder`] per phrase), not per row.
/// Counting stops at [`SEARCH_OCCURRENCES`]: past it a periodic phrase in a periodic text
/// would cost a phrase-length comparison per character.
fn occurrences(hay: &str, needle: &Finder<'_>) -> u32 {
    let mut n = 0;
    let mut from = 0;
    while n < SEARCH_OCCURRENCES {
        let Some(i) = needle.find(&hay.as_bytes()[from..]) else {
            break;
        };
        n += 1;
        // A match of a UTF-8 needle starts on a character boundary.
        let at = from + i;
        from = at + hay[at..].chars().next().map_or(1, char::len_utf8);
    }
    n
}

/// Trigram tokens of a column: one per character position with two more after it.
fn tokens(s: &str) -> usize {
    s.chars().count().saturating_sub(2)
}

/// A fetched row and its score.
struct Scored {
    rowid: i64,
    created_ms: i64,
    score: f64,
    memory: Memory,
}

impl Scored {
    /// True when `self` ranks before `other`: bm25 score, then newer, then later rowid.
    fn before(&self, other: &Scored) -> bool {
        self.score
            .total_cmp(&other.score)
            .then(self.created_ms.cmp(&other.created_ms))
            .then(self.rowid.cmp(&other.rowid))
            .is_gt()
    }
}

/// The best `limit` rows scored so far, best first, and how many were scored: a search
/// holds at most `limit` rows whatever it reads (a small namespace is scored whole).
struct TopRows {
    limit: usize,
    rows: Vec<Scored>,
    scored: usize,
}

impl TopRows {
    fn new(limit: usize) -> Self {
        TopRows {
            limit,
            rows: Vec::with_capacity(limit.min(MAX_SCORED)),
            scored: 0,
        }
    }

    /// Counts `row` as scored and keeps it if it ranks among the best `limit`.
    fn offer(&mut self, row: Scored) {
        self.scored += 1;
        let pos = self.rows.partition_point(|r| r.before(&row));
        if pos < self.limit {
            self.rows.insert(pos, row);
            self.rows.truncate(self.limit);
        }
    }

    /// The `limit`-th best score, once `limit` rows are held (what MaxScore compares the
    /// unfetched phrases' bound with).
    fn threshold(&self) -> Option<f64> {
        (self.rows.len() >= self.limit).then(|| self.rows[self.limit - 1].score)
    }

    fn into_memories(self) -> Vec<Memory> {
        self.rows.into_iter().map(|s| s.memory).collect()
    }
}

/// The bm25 score of a row with columns `cols` (FTS5's formula and summation order).
fn score(cols: [&str; 3], phrases: &[Finder<'_>], idf: &[f64], avgdl: f64) -> f64 {
    let lower = cols.map(str::to_lowercase);
    let d = cols.iter().map(|c| tokens(c)).sum::<usize>() as f64;
    let mut s = 0.0;
    for (p, idf) in phrases.iter().zip(idf) {
        let mut freq = 0.0;
        for (col, w) in lower.iter().zip(WEIGHTS) {
            for _ in 0..occurrences(col, p) {
                freq += w;
            }
        }
        s += idf * ((freq * (K1 + 1.0)) / (freq + K1 * (1.0 - B + B * d / avgdl)));
    }
    s
}

/// The best `limit` memories of `namespaces` matching any of `phrases` (each ≥ 3
/// characters, lowercase), best first: bm25 score, then newer, then later rowid.
pub fn top(
    conn: &Connection,
    namespaces: &[Namespace],
    phrases: &[String],
    limit: usize,
) -> Result<Vec<Memory>> {
    top_scoring(conn, namespaces, phrases, limit, Limits::DEFAULT)
}

/// [`top`] within `limits`: at most `limits.max_scored` rows fetched through the index,
/// the document frequencies of common phrases estimated from `limits.sample`
/// ([`doc_freq`]), small namespaces scored whole. With `max_scored: usize::MAX` and
/// [`Sample::EXACT`]: the exact bm25 order always (`small_namespace` changes only the cost).
pub fn top_scoring(
    conn: &Connection,
    namespaces: &[Namespace],
    phrases: &[String],
    limit: usize,
    limits: Limits,
) -> Result<Vec<Memory>> {
    let Limits {
        max_scored,
        sample,
        small_namespace,
        members_share,
    } = limits;
    if phrases.is_empty() || namespaces.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    // One read transaction: totals, frequencies and rows from the same snapshot.
    let tx = conn.unchecked_transaction()?;
    let now = snapshot(&tx)?;
    if now.rows == 0 {
        return Ok(Vec::new());
    }
    // How many memories the namespaces hold (counted up to `small_namespace` + 1). Zero:
    // nothing to rank, and no document frequency to count (the recall before a turn
    // searches the agent namespace, often empty, next to the others: it must not wait for
    // their counts while it holds a reader).
    let mut whole: Vec<Sql> = namespaces.iter().map(|ns| Sql::Text(ns.key())).collect();
    let whole_marks = (1..=whole.len())
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    whole.push(Sql::Integer(small_namespace.saturating_add(1)));
    let size: i64 = tx
        .prepare_cached(&format!(
            "SELECT count(*) FROM (SELECT 1 FROM memories WHERE namespace IN ({whole_marks}) LIMIT ?{})",
            whole.len()
        ))?
        .query_row(params_from_iter(whole.iter()), |r| r.get(0))?;
    if size == 0 {
        return Ok(Vec::new());
    }
    let db = tx.path().unwrap_or("").to_owned();
    let keep = max_scored.min(MAX_SCORED);
    let (dfs, known): (Vec<i64>, Vec<Option<Vec<i64>>>) =
        doc_freqs(&tx, &db, &now, phrases, sample, keep)?
            .into_iter()
            .unzip();
    let n = now.rows as f64;
    let idf: Vec<f64> = dfs
        .iter()
        .map(|&df| {
            let v = ((n - df as f64 + 0.5) / (df as f64 + 0.5)).ln();
            if v <= 0.0 {
                1e-6
            } else {
                v
            }
        })
        .collect();
    let avgdl = now.tokens as f64 / n;
    let finders: Vec<Finder<'_>> = phrases.iter().map(|p| Finder::new(p.as_bytes())).collect();
    let mut order: Vec<usize> = (0..phrases.len()).filter(|&i| dfs[i] > 0).collect();
    order.sort_by_key(|&i| (dfs[i], i));

    let mut params = vec![Sql::Null];
    let marks: Vec<String> = namespaces
        .iter()
        .map(|ns| {
            params.push(Sql::Text(ns.key()));
            format!("?{}", params.len())
        })
        .collect();
    let marks = marks.join(", ");
    params.push(Sql::Null);
    let last = params.len() - 1;
    let columns = "m.rowid, m.id, m.namespace, m.text, m.tags, m.title, m.created_ms, m.created_at";

    let mut top = TopRows::new(limit);
    // A small namespace: every memory of it scored (a row matches when a phrase occurs in
    // it, as the scorer counts occurrences).
    if size <= small_namespace {
        let mut stmt = tx.prepare_cached(&format!(
            "SELECT {columns} FROM memories m WHERE m.namespace IN ({whole_marks})"
        ))?;
        let mut rows = stmt.query(params_from_iter(whole[..whole.len() - 1].iter()))?;
        while let Some(r) = rows.next()? {
            let row = scored_row(r, &finders, &idf, avgdl)?;
            if row.score > 0.0 {
                top.offer(row);
            }
        }
        return Ok(top.into_memories());
    }

    // Every match of a phrase (FTS5's own ascending order: reading a doclist backwards
    // costs more), or the newest `budget` ones.
    let matches = format!(
        "SELECT {columns}
           FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid
          WHERE memories_fts MATCH ?1 AND m.namespace IN ({marks})"
    );
    let mut all = tx.prepare_cached(&matches)?;
    // One row by rowid (a phrase whose rowids were read while counting it).
    let mut by_rowid = tx.prepare_cached(&format!(
        "SELECT {columns} FROM memories m WHERE m.rowid = ?1 AND m.namespace IN ({marks})"
    ))?;
    let mut newest = tx.prepare_cached(&format!(
        "{matches} ORDER BY memories_fts.rowid DESC LIMIT ?{}",
        params.len()
    ))?;
    // A mid-size namespace: matches walked without the join, other namespaces' rowids
    // dropped by the filter, its own rows read by rowid.
    let filter = members(&tx, &db, &now, namespaces, members_share)?;
    let mut rowids_all =
        tx.prepare_cached("SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?1")?;
    let mut rowids_newest = tx.prepare_cached(
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?1 ORDER BY rowid DESC",
    )?;
    let mut seen: HashSet<i64> = HashSet::new();
    for (k, &i) in order.iter().enumerate() {
        let rest: f64 = order[k..].iter().map(|&j| idf[j] * (K1 + 1.0)).sum();
        if top.threshold().is_some_and(|t| t > rest) {
            break;
        }
        let budget = max_scored.saturating_sub(top.scored);
        if budget == 0 {
            break;
        }
        if let Some(ids) = known[i].as_ref().filter(|ids| ids.len() <= budget) {
            for &rowid in ids {
                if seen.contains(&rowid)
                    || filter
                        .as_ref()
                        .is_some_and(|f| f.binary_search(&rowid).is_err())
                {
                    continue;
                }
                params[0] = Sql::Integer(rowid);
                let mut rows = by_rowid.query(params_from_iter(params[..last].iter()))?;
                if let Some(r) = rows.next()? {
                    seen.insert(rowid);
                    let row = scored_row(r, &finders, &idf, avgdl)?;
                    top.offer(row);
                }
            }
            continue;
        }
        if let Some(f) = filter.as_deref() {
            // As the SQL below: every match in the namespaces, or the newest `budget` of
            // them (rows already scored count towards it, as in its `LIMIT`).
            let uncapped = dfs[i] as usize <= budget;
            let stmt = if uncapped {
                &mut rowids_all
            } else {
                &mut rowids_newest
            };
            let mut ids = stmt.query([quoted(&phrases[i])])?;
            let mut taken = 0;
            while let Some(r) = ids.next()? {
                let rowid: i64 = r.get(0)?;
                if f.binary_search(&rowid).is_err() {
                    continue;
                }
                taken += 1;
                if seen.insert(rowid) {
                    params[0] = Sql::Integer(rowid);
                    let mut rows = by_rowid.query(params_from_iter(params[..last].iter()))?;
                    if let Some(r) = rows.next()? {
                        let row = scored_row(r, &finders, &idf, avgdl)?;
                        top.offer(row);
                    }
                }
                if !uncapped && taken >= budget {
                    break;
                }
            }
            continue;
        }
        params[0] = Sql::Text(quoted(&phrases[i]));
        let mut rows = if dfs[i] as usize <= budget {
            all.query(params_from_iter(params[..last].iter()))?
        } else {
            params[last] = Sql::Integer(budget as i64);
            newest.query(params_from_iter(params.iter()))?
        };
        while let Some(r) = rows.next()? {
            let rowid: i64 = r.get(0)?;
            if !seen.insert(rowid) {
                continue;
            }
            let row = scored_row(r, &finders, &idf, avgdl)?;
            top.offer(row);
        }
    }
    Ok(top.into_memories())
}

/// A row of `rowid, id, namespace, text, tags, title, created_ms, created_at`, scored.
fn scored_row(
    r: &rusqlite::Row<'_>,
    phrases: &[Finder<'_>],
    idf: &[f64],
    avgdl: f64,
) -> Result<Scored> {
    let text: String = r.get(3)?;
    let tags: String = r.get(4)?;
    let title: String = r.get(5)?;
    let s = score([&text, &tags, &title], phrases, idf, avgdl);
    Ok(Scored {
        rowid: r.get(0)?,
        created_ms: r.get(6)?,
        score: s,
        memory: Memory {
            id: r.get(1)?,
            namespace: Namespace::from_key(&r.get::<_, String>(2)?),
            tags: tags
                .split('\n')
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
            text,
            created_at: r.get(7)?,
            score: s,
        },
    })
}

#[cfg(test)]
#[path = "rank_tests.rs"]
mod oracle;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_occurrences() {
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x81, 0x00]), Some((128, 2)));
        assert_eq!(varint(&[0x81]), None);
        let occ = |hay: &str, needle: &str| occurrences(hay, &Finder::new(needle.as_bytes()));
        assert_eq!(occ("aaaaa", "aaaa"), 2);
        assert_eq!(occ("회의 회의실", "회의"), 2);
        assert_eq!(occ("abc", "abcd"), 0);
        // A periodic phrase in a periodic text: counted up to the bound, no further.
        assert_eq!(occ(&"z".repeat(100_000), "zzz"), SEARCH_OCCURRENCES);
        assert_eq!(occ(&"z".repeat(1_000), "zzz"), 998);
        assert_eq!(tokens("ab"), 0);
        assert_eq!(tokens("데이터베이스"), 4);
    }
}

//! Ranked memories: rows of `memories` and their FTS5 index (trigram tokenizer, so partial
//! words and non-Latin text match; bm25 ranking, computed top-k by [`super::rank`]). Queries
//! are split into words; words of three or more characters become FTS5 phrases OR-ed
//! together (bm25 rewards matching more of them). Words shorter than three characters
//! cannot use a trigram index: a query made only of them takes the short-query path —
//! ranked by how many words match, then by recency — through the index of two-character
//! non-ASCII words ([`super::grams`]) when every word is one, else a `LIKE` scan within the
//! namespaces. Non-ASCII words longer than three characters also match by their trigrams
//! (see [`plan_query`]). Two-character words of non-ASCII scripts (Korean, Chinese,
//! Japanese content words are often two syllables) are also looked up on the short path
//! next to the FTS5 match; short ASCII words ("is", "to") are not, they are almost always
//! stop words.

use std::collections::HashMap;

use rusqlite::types::Value as Sql;
use rusqlite::{params_from_iter, Connection, OptionalExtension, Transaction};
use snowpea_proto::limits::{SEARCH_PHRASES, SEARCH_WORDS, SEARCH_WORD_CHARS};

use super::{grams, rank};
use crate::error::Result;
use crate::namespace::Namespace;

/// A memory to store.
#[derive(Debug, Clone, Default)]
pub struct NewMemory {
    /// Id (`mem_…`).
    pub id: String,
    /// Namespace key.
    pub namespace: String,
    /// The text.
    pub text: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Page title (browser pages).
    pub title: String,
    /// Creation (or visit) time, ms since the epoch.
    pub created_ms: i64,
    /// The same time as UTC ISO-8601.
    pub created_at: String,
    /// Page URL (browser pages).
    pub url: Option<String>,
    /// Page origin (browser pages), for deleting a whole site.
    pub origin: Option<String>,
    /// Hash of (url, text) (browser pages): stored once.
    pub content_hash: Option<String>,
    /// Session the page came from, if any.
    pub session_id: Option<String>,
}

/// A stored memory as searches and lists return it.
#[derive(Debug, Clone, PartialEq)]
pub struct Memory {
    /// Id.
    pub id: String,
    /// Its namespace.
    pub namespace: Namespace,
    /// Text.
    pub text: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Creation time, UTC ISO-8601.
    pub created_at: String,
    /// Relevance, higher is better (0 in newest-first lists).
    pub score: f64,
}

/// Inserts `m`. Returns false (and stores nothing) when a page with the same
/// `content_hash` is already in the namespace.
pub fn insert(tx: &Transaction<'_>, m: &NewMemory) -> Result<bool> {
    let tags = m.tags.join("\n");
    // Prepared once per writer connection: compiling it (with its trigger) on every write
    // cost about what the index of two-character words adds (docs/PERFORMANCE.md "Recall").
    let mut stmt = tx.prepare_cached(
        "INSERT OR IGNORE INTO memories
           (id, namespace, text, tags, title, created_ms, created_at, url, origin, content_hash, session_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
    let n = stmt.execute(rusqlite::params![
        m.id,
        m.namespace,
        m.text,
        tags,
        m.title,
        m.created_ms,
        m.created_at,
        m.url,
        m.origin,
        m.content_hash,
        m.session_id
    ])?;
    drop(stmt);
    if n == 1 {
        let rid = tx.last_insert_rowid();
        grams::index(
            tx,
            rid,
            &m.namespace,
            m.created_ms,
            [&m.text, &tags, &m.title],
        )?;
    }
    Ok(n == 1)
}

/// How a query is answered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueryPlan {
    /// FTS5 MATCH expression over the words of ≥ 3 characters, if any.
    pub fts: Option<String>,
    /// The phrases of `fts`, unquoted, in order (what [`rank::top`] ranks by).
    pub phrases: Vec<String>,
    /// Words looked up with `LIKE` (the short-query path).
    pub like: Vec<String>,
}

/// Splits `query` into words (runs of letters and digits, lowercased, de-duplicated, at
/// most [`SEARCH_WORDS`] of them, each cut to its first [`SEARCH_WORD_CHARS`] characters)
/// and decides how each is looked up (module docs).
pub fn plan_query(query: &str) -> QueryPlan {
    let mut words: Vec<String> = Vec::new();
    for w in query.split(|c: char| !c.is_alphanumeric()) {
        let w = first_chars(
            &first_chars(w, SEARCH_WORD_CHARS).to_lowercase(),
            SEARCH_WORD_CHARS,
        )
        .to_owned();
        if !w.is_empty() && !words.contains(&w) {
            words.push(w);
        }
        if words.len() == SEARCH_WORDS {
            break;
        }
    }
    let (long, short): (Vec<_>, Vec<_>) = words.into_iter().partition(|w| w.chars().count() >= 3);
    let mut phrases: Vec<String> = Vec::new();
    for w in &long {
        phrases.push(w.clone());
        // Non-ASCII words longer than a trigram also match by their trigrams: Korean and
        // Japanese attach particles and endings to words ("마이그레이션은"), so the whole
        // word rarely occurs in the text while its stem does; bm25 ranks the texts sharing
        // more trigrams first.
        let chars: Vec<char> = w.chars().collect();
        if !w.is_ascii() && chars.len() > 3 {
            for t in chars.windows(3) {
                let t: String = t.iter().collect();
                if !phrases.contains(&t) && phrases.len() < SEARCH_PHRASES {
                    phrases.push(t);
                }
            }
        }
    }
    let fts = (!phrases.is_empty()).then(|| {
        phrases
            .iter()
            .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" OR ")
    });
    let like = if long.is_empty() {
        short
    } else {
        short
            .into_iter()
            .filter(|w| w.chars().count() == 2 && !w.is_ascii())
            .collect()
    };
    QueryPlan { fts, phrases, like }
}

/// The first `n` characters of `s` (all of it when shorter).
fn first_chars(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(at, _)| &s[..at])
}

fn namespace_filter(namespaces: &[Namespace], col: &str, params: &mut Vec<Sql>) -> String {
    let marks: Vec<String> = namespaces
        .iter()
        .map(|ns| {
            params.push(Sql::Text(ns.key()));
            format!("?{}", params.len())
        })
        .collect();
    format!("{col} IN ({})", marks.join(", "))
}

fn row_memory(r: &rusqlite::Row<'_>) -> rusqlite::Result<Memory> {
    let tags: String = r.get(3)?;
    Ok(Memory {
        id: r.get(0)?,
        namespace: Namespace::from_key(&r.get::<_, String>(1)?),
        text: r.get(2)?,
        tags: tags
            .split('\n')
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect(),
        created_at: r.get(4)?,
        score: r.get(5)?,
    })
}

/// The case forms of a short word (lowercase) that `LIKE` does not fold: every mix of the
/// lower- and uppercase form of each non-ASCII character (an ASCII word: itself only).
fn case_forms(word: &str) -> Vec<String> {
    let mut forms = vec![String::new()];
    for c in word.chars() {
        let lower: String = c.to_lowercase().collect();
        let upper: String = c.to_uppercase().collect();
        let mut next = Vec::with_capacity(forms.len() * 2);
        for f in &forms {
            next.push(format!("{f}{lower}"));
            if !c.is_ascii() && upper != lower {
                next.push(format!("{f}{upper}"));
            }
        }
        forms = next;
    }
    forms
}

/// Escapes `%`, `_` and `\` for `LIKE … ESCAPE '\'`.
fn like_pattern(word: &str) -> String {
    let mut s = String::with_capacity(word.len() + 2);
    s.push('%');
    for c in word.chars() {
        if matches!(c, '%' | '_' | '\\') {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('%');
    s
}

/// The best `limit` memories of `namespaces` for `query`, best first. A blank query
/// matches nothing.
pub fn search(
    conn: &Connection,
    namespaces: &[Namespace],
    query: &str,
    limit: usize,
) -> Result<Vec<Memory>> {
    let plan = plan_query(query);
    if namespaces.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    let mut hits: Vec<Memory> = Vec::new();
    if plan.fts.is_some() {
        hits = rank::top(conn, namespaces, &plan.phrases, limit)?;
    }
    if !plan.like.is_empty() {
        let short = if plan.like.iter().all(|w| grams::indexed(w)) {
            short_indexed(conn, namespaces, &plan.like, limit)?
        } else {
            short_scan(conn, namespaces, &plan.like, limit)?
        };
        // Merge: a memory found both ways adds the short-word matches to its bm25 score.
        let mut by_id: HashMap<String, usize> = hits
            .iter()
            .enumerate()
            .map(|(i, h)| (h.id.clone(), i))
            .collect();
        for m in short {
            match by_id.get(&m.id) {
                Some(&i) => hits[i].score += m.score,
                None => {
                    by_id.insert(m.id.clone(), hits.len());
                    hits.push(m);
                }
            }
        }
        // Stable: equal scores keep the newest-first order of each path.
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(limit);
    }
    Ok(hits)
}

/// The short-query path through the index of two-character words ([`grams::top`]): the
/// same hits and order as [`short_scan`] without reading the namespace.
fn short_indexed(
    conn: &Connection,
    namespaces: &[Namespace],
    words: &[String],
    limit: usize,
) -> Result<Vec<Memory>> {
    let hits = grams::top(conn, namespaces, words, limit)?;
    let mut stmt = conn.prepare_cached(
        "SELECT id, namespace, text, tags, created_at, CAST(?2 AS REAL) FROM memories WHERE rowid = ?1",
    )?;
    let mut out = Vec::with_capacity(hits.len());
    for h in hits {
        // A memory deleted since the index was read is simply not returned.
        if let Some(m) = stmt
            .query_row(rusqlite::params![h.rid, h.n as i64], row_memory)
            .optional()?
        {
            out.push(m);
        }
    }
    Ok(out)
}

/// The short-query path for words the index does not hold (ASCII or one character): a
/// `LIKE` scan of the namespaces, ranked by how many words match, then newest first.
fn short_scan(
    conn: &Connection,
    namespaces: &[Namespace],
    words: &[String],
    limit: usize,
) -> Result<Vec<Memory>> {
    // SQLite's LIKE folds the case of ASCII letters only: a word with other letters is
    // matched in each of its case forms (a short-path word has at most two characters, so
    // at most four forms).
    let mut params: Vec<Sql> = Vec::new();
    let matched: Vec<String> = words
        .iter()
        .map(|w| {
            let forms: Vec<String> = case_forms(w)
                .iter()
                .map(|f| {
                    params.push(Sql::Text(like_pattern(f)));
                    format!("hay LIKE ?{} ESCAPE '\\'", params.len())
                })
                .collect();
            format!("({})", forms.join(" OR "))
        })
        .collect();
    let ns = namespace_filter(namespaces, "namespace", &mut params);
    params.push(Sql::Integer(limit as i64));
    let sql = format!(
        "SELECT id, namespace, text, tags, created_at, CAST(n AS REAL) FROM (
            SELECT id, namespace, text, tags, created_at, created_ms, rowid,
                   {} AS n
              FROM (SELECT *, text || char(10) || tags || char(10) || title AS hay
                      FROM memories WHERE {ns}))
          WHERE n > 0
          ORDER BY n DESC, created_ms DESC, rowid DESC
          LIMIT ?{}",
        matched.join(" + "),
        params.len()
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt
        .query_map(params_from_iter(params), row_memory)?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

/// The newest `limit` memories of `namespaces`.
pub fn recent(conn: &Connection, namespaces: &[Namespace], limit: usize) -> Result<Vec<Memory>> {
    if namespaces.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    let mut params = Vec::new();
    let ns = namespace_filter(namespaces, "namespace", &mut params);
    params.push(Sql::Integer(limit as i64));
    let sql = format!(
        "SELECT id, namespace, text, tags, created_at, 0.0 FROM memories WHERE {ns}
          ORDER BY created_ms DESC, rowid DESC LIMIT ?{}",
        params.len()
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt
        .query_map(params_from_iter(params), row_memory)?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

/// Deletes the memory `id`; false when there is none.
pub fn delete_id(tx: &Transaction<'_>, id: &str) -> Result<bool> {
    Ok(tx.execute("DELETE FROM memories WHERE id = ?1", [id])? == 1)
}

/// Which browsing memories a `memory.delete{source:"browser"}` forgets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BrowserFilter {
    /// Only this page (normalised URL).
    pub page: Option<String>,
    /// Only pages of this origin (a whole site).
    pub origin: Option<String>,
    /// Only pages visited before this time (ms since the epoch).
    pub before_ms: Option<i64>,
}

/// Deletes the browsing memories matching `f`; returns how many.
pub fn delete_browser(tx: &Transaction<'_>, f: &BrowserFilter) -> Result<u64> {
    let mut sql = String::from("DELETE FROM memories WHERE namespace = 'browser'");
    let mut params: Vec<Sql> = Vec::new();
    if let Some(page) = &f.page {
        params.push(Sql::Text(page.clone()));
        sql.push_str(&format!(" AND url = ?{}", params.len()));
    }
    if let Some(origin) = &f.origin {
        params.push(Sql::Text(origin.clone()));
        sql.push_str(&format!(" AND origin = ?{}", params.len()));
    }
    if let Some(before) = f.before_ms {
        params.push(Sql::Integer(before));
        sql.push_str(&format!(" AND created_ms < ?{}", params.len()));
    }
    Ok(tx.execute(&sql, params_from_iter(params))? as u64)
}

/// The namespace of memory `id`, if it exists.
pub fn namespace_of(conn: &Connection, id: &str) -> Result<Option<String>> {
    Ok(conn
        .query_row("SELECT namespace FROM memories WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()?)
}

#[cfg(test)]
#[path = "memories_tests.rs"]
mod tests;

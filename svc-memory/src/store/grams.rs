//! The index of two-character non-ASCII words (issue 14 "Recall"): Korean, Chinese and
//! Japanese content words are often two syllables ("회의", "배포"), too short for the FTS5
//! trigram index, so `memory.search` used to find them with a `LIKE` scan of the whole
//! namespace (65–325 ms at 100k memories: the p99 tail of every query that held one).
//!
//! `memory_grams` (migration 2) holds, per memory, every distinct pair of adjacent
//! letters/digits of its text, tags and title (lowercased, within one word) of which at
//! least one is non-ASCII, keyed `(gram, namespace, created_ms, rid)`: for one word and one
//! namespace the rows come newest first straight from the index. It lives in SQLite, is
//! written in the same transaction as the memory ([`index`]) and loses its rows through the
//! `memories` delete trigger, so it is as durable as the memory itself; memories written
//! before migration 2 are indexed at open ([`backfill`]). Pure-ASCII words are not indexed
//! (in the text of a Latin-script user that would be one row per letter pair): a
//! short-only query with an ASCII or one-character word keeps the `LIKE` scan.

use std::collections::HashSet;

use rusqlite::{Connection, OptionalExtension, Transaction};

use crate::error::Result;
use crate::namespace::Namespace;

/// Migration 2 (svc-memory): the `memory_grams` index, its delete trigger, and the list of
/// memories written before it ([`backfill`] indexes them).
pub const MIGRATION: &str = r#"
    CREATE TABLE memory_grams (
        gram       TEXT NOT NULL,
        namespace  TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        rid        INTEGER NOT NULL,
        PRIMARY KEY (gram, namespace, created_ms, rid)
    ) WITHOUT ROWID;
    CREATE INDEX memory_grams_by_rid ON memory_grams(rid);
    CREATE TRIGGER memories_ad_grams AFTER DELETE ON memories BEGIN
        DELETE FROM memory_grams WHERE rid = old.rowid;
    END;
    CREATE TABLE memory_grams_pending (rid INTEGER PRIMARY KEY);
    INSERT INTO memory_grams_pending SELECT rowid FROM memories;
"#;

/// Memories indexed per transaction by [`backfill`].
const BACKFILL_BATCH: usize = 2_000;

/// True when `word` (one query word, lowercased) is looked up in this index: exactly two
/// characters, at least one of them non-ASCII.
pub fn indexed(word: &str) -> bool {
    word.chars().count() == 2 && !word.is_ascii()
}

/// The distinct grams of one memory (module docs), in first-seen order.
pub fn grams(cols: [&str; 3]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for col in cols {
        for word in col.split(|c: char| !c.is_alphanumeric()) {
            if word.is_ascii() {
                continue;
            }
            let chars: Vec<char> = word.to_lowercase().chars().collect();
            for pair in chars.windows(2) {
                let g: String = pair.iter().collect();
                if indexed(&g) && seen.insert(g.clone()) {
                    out.push(g);
                }
            }
        }
    }
    out
}

/// Indexes memory `rid` (just inserted in `tx`).
pub fn index(
    tx: &Connection,
    rid: i64,
    namespace: &str,
    created_ms: i64,
    cols: [&str; 3],
) -> Result<()> {
    let g = grams(cols);
    if g.is_empty() {
        return Ok(());
    }
    let mut stmt = tx.prepare_cached(
        "INSERT OR IGNORE INTO memory_grams (gram, namespace, created_ms, rid) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for gram in g {
        stmt.execute(rusqlite::params![gram, namespace, created_ms, rid])?;
    }
    Ok(())
}

/// Indexes the memories written before migration 2, [`BACKFILL_BATCH`] per transaction
/// (an interrupted backfill resumes at the next open). Returns how many were indexed.
pub fn backfill(conn: &mut Connection) -> Result<usize> {
    let mut done = 0;
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let rids: Vec<i64> = tx
            .prepare("SELECT rid FROM memory_grams_pending ORDER BY rid LIMIT ?1")?
            .query_map([BACKFILL_BATCH as i64], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        if rids.is_empty() {
            return Ok(done);
        }
        for &rid in &rids {
            backfill_one(&tx, rid)?;
        }
        done += rids.len();
        tx.commit()?;
    }
}

fn backfill_one(tx: &Transaction<'_>, rid: i64) -> Result<()> {
    let row: Option<(String, i64, String, String, String)> = tx
        .query_row(
            "SELECT namespace, created_ms, text, tags, title FROM memories WHERE rowid = ?1",
            [rid],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .optional()?;
    if let Some((ns, created_ms, text, tags, title)) = row {
        index(tx, rid, &ns, created_ms, [&text, &tags, &title])?;
    }
    tx.execute("DELETE FROM memory_grams_pending WHERE rid = ?1", [rid])?;
    Ok(())
}

/// One row of a short-word lookup: how many of the words it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    /// `memories.rowid`.
    pub rid: i64,
    /// Words of the query the memory holds (≥ 1).
    pub n: usize,
    /// Its creation time, ms.
    pub created_ms: i64,
}

/// The best `limit` memories of `namespaces` holding any of `words` (each [`indexed`],
/// distinct), in the order of the former `LIKE` path: more words matched first, then newer
/// (`created_ms`), then later `rid`.
///
/// Reads one index stream per (word, namespace), newest first, merged; stops as soon as
/// `limit` memories hold every word (nothing later can outrank them), so a common word
/// costs `limit` index rows. Worst case (several words that rarely occur together): every
/// index row of those words in those namespaces, still without touching `memories`.
pub fn top(
    conn: &Connection,
    namespaces: &[Namespace],
    words: &[String],
    limit: usize,
) -> Result<Vec<Hit>> {
    if words.is_empty() || namespaces.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    let sql = "SELECT created_ms, rid FROM memory_grams WHERE gram = ?1 AND namespace = ?2
                ORDER BY created_ms DESC, rid DESC";
    let mut stmts = Vec::new();
    let mut owner = Vec::new();
    for (w, word) in words.iter().enumerate() {
        for ns in namespaces {
            stmts.push((conn.prepare(sql)?, word.clone(), ns.key()));
            owner.push(w);
        }
    }
    let mut streams = Vec::with_capacity(stmts.len());
    for (stmt, word, ns) in &mut stmts {
        streams.push(stmt.query(rusqlite::params![&*word, &*ns])?);
    }
    let mut heads: Vec<Option<(i64, i64)>> = Vec::with_capacity(streams.len());
    for s in &mut streams {
        heads.push(next(s)?);
    }
    let mut best: Vec<Hit> = Vec::new(); // best first, at most `limit`
    let mut full = 0; // hits of `best` holding every word
    while let Some(key) = heads.iter().flatten().max().copied() {
        let mut held = vec![false; words.len()];
        for (i, head) in heads.iter_mut().enumerate() {
            if *head == Some(key) {
                held[owner[i]] = true;
                *head = next(&mut streams[i])?;
            }
        }
        let hit = Hit {
            rid: key.1,
            n: held.iter().filter(|h| **h).count(),
            created_ms: key.0,
        };
        // Keys arrive newest first, so among equal `n` a later hit ranks lower.
        let pos = best.partition_point(|b| b.n >= hit.n);
        if pos < limit {
            best.insert(pos, hit);
            best.truncate(limit);
            if hit.n == words.len() {
                full += 1;
                if full >= limit {
                    break;
                }
            }
        }
    }
    Ok(best)
}

fn next(rows: &mut rusqlite::Rows<'_>) -> Result<Option<(i64, i64)>> {
    Ok(match rows.next()? {
        Some(r) => Some((r.get(0)?, r.get(1)?)),
        None => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grams_are_non_ascii_letter_pairs_within_words() {
        assert_eq!(
            grams(["정기회의, 배포", "ab", "Ωμέγα x"]),
            vec!["정기", "기회", "회의", "배포", "ωμ", "μέ", "έγ", "γα"]
        );
        assert!(grams(["plain ascii words", "tag", ""]).is_empty());
        assert_eq!(grams(["회의 회의실", "", ""]), vec!["회의", "의실"]);
        assert!(indexed("회의") && !indexed("go") && !indexed("회") && !indexed("회의실"));
    }
}

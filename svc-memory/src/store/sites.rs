//! Rows of `site_entries`: one site-memory entry per (profile, origin, pageType), stored as
//! the protobuf encoding of `site.get`'s entry with the columns needed to find, count and
//! evict it.

use prost::Message;
use rusqlite::{params, Connection, OptionalExtension};
use snowpea_proto::memory::v1::SiteEntry as Entry;

use crate::error::{Error, Result};

fn decode(body: Vec<u8>) -> Result<Entry> {
    Entry::decode(body.as_slice())
        .map_err(|e| Error::Internal(format!("stored site entry unreadable: {e}")))
}

fn verified_ms(e: &Entry) -> i64 {
    e.last_verified
        .parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .unwrap_or(0)
}

fn collect(rows: impl Iterator<Item = rusqlite::Result<Vec<u8>>>) -> Result<Vec<Entry>> {
    rows.map(|b| decode(b?)).collect()
}

/// Every entry of `origin` in `profile`.
pub fn of_origin(conn: &Connection, profile: &str, origin: &str) -> Result<Vec<Entry>> {
    let mut stmt = conn.prepare_cached(
        "SELECT body FROM site_entries WHERE profile = ?1 AND origin = ?2 ORDER BY page_type",
    )?;
    let rows = stmt.query_map(params![profile, origin], |r| r.get(0))?;
    collect(rows)
}

/// The entry `entry_id` of `origin` in `profile`.
pub fn by_id(
    conn: &Connection,
    profile: &str,
    origin: &str,
    entry_id: &str,
) -> Result<Option<Entry>> {
    let body: Option<Vec<u8>> = conn
        .query_row(
            "SELECT body FROM site_entries WHERE profile = ?1 AND origin = ?2 AND entry_id = ?3",
            params![profile, origin, entry_id],
            |r| r.get(0),
        )
        .optional()?;
    body.map(decode).transpose()
}

/// The entry of (origin, pageType) in `profile`.
pub fn by_page_type(
    conn: &Connection,
    profile: &str,
    origin: &str,
    page_type: &str,
) -> Result<Option<Entry>> {
    let body: Option<Vec<u8>> = conn
        .query_row(
            "SELECT body FROM site_entries WHERE profile = ?1 AND origin = ?2 AND page_type = ?3",
            params![profile, origin, page_type],
            |r| r.get(0),
        )
        .optional()?;
    body.map(decode).transpose()
}

/// How many entries `origin` has in `profile`.
pub fn count_in_origin(conn: &Connection, profile: &str, origin: &str) -> Result<usize> {
    let n: i64 = conn.query_row(
        "SELECT count(*) FROM site_entries WHERE profile = ?1 AND origin = ?2",
        params![profile, origin],
        |r| r.get(0),
    )?;
    Ok(n as usize)
}

/// Inserts or replaces `e` (keyed by its entry id).
pub fn save(conn: &Connection, profile: &str, e: &Entry) -> Result<()> {
    conn.execute(
        "INSERT INTO site_entries (entry_id, profile, origin, page_type, body, last_verified_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT(entry_id) DO UPDATE SET body = excluded.body,
             last_verified_ms = excluded.last_verified_ms, page_type = excluded.page_type",
        params![
            e.entry_id,
            profile,
            e.origin,
            e.page_type,
            e.encode_to_vec(),
            verified_ms(e)
        ],
    )?;
    Ok(())
}

/// Drops whole origins of `profile`, least recently verified first (an origin's time is
/// its most recently verified entry's), until at most `max` remain; `keep` is never
/// dropped. Returns the dropped origins.
pub fn evict(conn: &Connection, profile: &str, keep: &str, max: usize) -> Result<Vec<String>> {
    let origins: i64 = conn.query_row(
        "SELECT count(DISTINCT origin) FROM site_entries WHERE profile = ?1",
        [profile],
        |r| r.get(0),
    )?;
    let excess = (origins as usize).saturating_sub(max);
    if excess == 0 {
        return Ok(Vec::new());
    }
    let victims: Vec<String> = conn
        .prepare_cached(
            "SELECT origin FROM site_entries WHERE profile = ?1 AND origin <> ?2
              GROUP BY origin ORDER BY max(last_verified_ms), origin LIMIT ?3",
        )?
        .query_map(params![profile, keep, excess as i64], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for o in &victims {
        conn.execute(
            "DELETE FROM site_entries WHERE profile = ?1 AND origin = ?2",
            params![profile, o],
        )?;
    }
    Ok(victims)
}

/// Deletes one entry (`Some(id)`) or every entry of `origin`; returns how many.
pub fn delete(
    conn: &Connection,
    profile: &str,
    origin: &str,
    entry_id: Option<&str>,
) -> Result<u64> {
    let n = match entry_id {
        Some(id) => conn.execute(
            "DELETE FROM site_entries WHERE profile = ?1 AND origin = ?2 AND entry_id = ?3",
            params![profile, origin, id],
        )?,
        None => conn.execute(
            "DELETE FROM site_entries WHERE profile = ?1 AND origin = ?2",
            params![profile, origin],
        )?,
    };
    Ok(n as u64)
}

/// Up to `limit` origins of `profile` after `after` (exclusive), in origin order, each
/// with its entries; `only` restricts to one origin.
pub fn origins_page(
    conn: &Connection,
    profile: &str,
    only: Option<&str>,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<(String, Vec<Entry>)>> {
    let origins: Vec<String> = conn
        .prepare_cached(
            "SELECT DISTINCT origin FROM site_entries
              WHERE profile = ?1 AND (?2 IS NULL OR origin = ?2) AND (?3 IS NULL OR origin > ?3)
              ORDER BY origin LIMIT ?4",
        )?
        .query_map(params![profile, only, after, limit as i64], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    origins
        .into_iter()
        .map(|o| {
            let entries = of_origin(conn, profile, &o)?;
            Ok((o, entries))
        })
        .collect()
}

//! The `allowlist` table: `session`-scope allowlist entries (issue 17), deleted with their
//! session. `project` and `always` entries live in settings files, not here.

use rusqlite::{params, Connection, OptionalExtension};

/// One stored entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// `al-…` id.
    pub pattern_id: String,
    /// Session it belongs to.
    pub session_id: String,
    /// The pattern as given.
    pub pattern: String,
    /// ISO-8601 creation time.
    pub created_at: String,
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        pattern_id: r.get(0)?,
        session_id: r.get(1)?,
        pattern: r.get(2)?,
        created_at: r.get(3)?,
    })
}

/// Adds an entry; a duplicate pattern of the session keeps (and returns) the existing id.
pub fn insert(conn: &Connection, entry: &Row) -> rusqlite::Result<String> {
    conn.prepare_cached(
        "INSERT INTO allowlist (pattern_id, session_id, pattern, created_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (session_id, pattern) DO NOTHING",
    )?
    .execute(params![
        entry.pattern_id,
        entry.session_id,
        entry.pattern,
        entry.created_at
    ])?;
    conn.prepare_cached("SELECT pattern_id FROM allowlist WHERE session_id = ?1 AND pattern = ?2")?
        .query_row(params![entry.session_id, entry.pattern], |r| r.get(0))
}

/// Entries of one session, or of every session, oldest first.
pub fn list(conn: &Connection, session_id: Option<&str>) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = conn.prepare_cached(
        "SELECT pattern_id, session_id, pattern, created_at FROM allowlist \
         WHERE ?1 IS NULL OR session_id = ?1 ORDER BY created_at, pattern_id",
    )?;
    let rows = stmt.query_map(params![session_id], row)?;
    rows.collect()
}

/// One entry by id.
pub fn get(conn: &Connection, pattern_id: &str) -> rusqlite::Result<Option<Row>> {
    conn.prepare_cached(
        "SELECT pattern_id, session_id, pattern, created_at FROM allowlist WHERE pattern_id = ?1",
    )?
    .query_row(params![pattern_id], row)
    .optional()
}

/// Deletes one entry; true when it existed.
pub fn remove(conn: &Connection, pattern_id: &str) -> rusqlite::Result<bool> {
    Ok(conn
        .prepare_cached("DELETE FROM allowlist WHERE pattern_id = ?1")?
        .execute(params![pattern_id])?
        > 0)
}

/// Deletes every entry of a session (it closed or was deleted).
pub fn remove_session(conn: &Connection, session_id: &str) -> rusqlite::Result<usize> {
    conn.prepare_cached("DELETE FROM allowlist WHERE session_id = ?1")?
        .execute(params![session_id])
}

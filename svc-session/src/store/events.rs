//! The `events` table: every `session.event`, keyed by `(session_id, seq)`.

use rusqlite::{params, Connection};

/// A stored event (payload as JSON text).
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    /// Session it belongs to.
    pub session_id: String,
    /// Per-session sequence number, from 1.
    pub seq: i64,
    /// Event kind, e.g. `message.delta`.
    pub kind: String,
    /// Payload JSON object, as text.
    pub payload: String,
    /// UTC ISO-8601 time.
    pub ts: String,
}

/// Inserts one event.
pub fn insert(conn: &Connection, e: &EventRow) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO events (session_id, seq, kind, payload, ts) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![e.session_id, e.seq, e.kind, e.payload, e.ts])?;
    Ok(())
}

/// Stores the model-only fields of event `(session_id, seq)` (a JSON object as text; see
/// [`crate::events`]): never published, read back only by [`of_kinds`].
pub fn set_model_only(
    conn: &Connection,
    session_id: &str,
    seq: i64,
    model_only: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE events SET model_only = ?3 WHERE session_id = ?1 AND seq = ?2")?
        .execute(params![session_id, seq, model_only])?;
    Ok(())
}

/// Highest seq of a session (0 when it has no events).
pub fn last_seq(conn: &Connection, session_id: &str) -> rusqlite::Result<i64> {
    conn.prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?1")?
        .query_row([session_id], |r| r.get(0))
}

/// Events with `seq > after_seq`, in seq order.
pub fn after(
    conn: &Connection,
    session_id: &str,
    after_seq: i64,
) -> rusqlite::Result<Vec<EventRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT session_id, seq, kind, payload, ts FROM events WHERE session_id = ?1 AND seq > ?2 ORDER BY seq",
    )?;
    let rows = stmt.query_map(params![session_id, after_seq], |r| {
        Ok(EventRow {
            session_id: r.get(0)?,
            seq: r.get(1)?,
            kind: r.get(2)?,
            payload: r.get(3)?,
            ts: r.get(4)?,
        })
    })?;
    rows.collect()
}

/// `(kind, payload, model-only fields)` of the events of `kinds`, in seq order (for
/// rebuilding history).
pub fn of_kinds(
    conn: &Connection,
    session_id: &str,
    kinds: &[&str],
) -> rusqlite::Result<Vec<(String, String, Option<String>)>> {
    let placeholders = vec!["?"; kinds.len()].join(",");
    let sql = format!(
        "SELECT kind, payload, model_only FROM events WHERE session_id = ? AND kind IN ({placeholders}) ORDER BY seq"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut values: Vec<&dyn rusqlite::ToSql> = vec![&session_id];
    for k in kinds {
        values.push(k);
    }
    let rows = stmt.query_map(values.as_slice(), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    rows.collect()
}

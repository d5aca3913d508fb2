//! The `questions` table: every `ask_user` batch and how it was resolved, so a pending one
//! survives a restart (listed, answerable, re-sent to the origin) or is resolved with a
//! reason. Answers are never stored (they may be secrets).

use rusqlite::{params, Connection, OptionalExtension};

/// A batch still pending (as stored).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRow {
    /// `qu-…` id.
    pub request_id: String,
    /// Session whose turn asked.
    pub session_id: String,
    /// The turn that asked.
    pub turn_id: String,
    /// The `ask_user` call.
    pub call_id: String,
    /// The questions as JSON (`[Question]`).
    pub questions: String,
    /// Seconds the batch may wait in all.
    pub timeout_sec: i64,
    /// When it gives up, in ms since the epoch.
    pub deadline_ms: i64,
}

/// Records a new pending batch.
pub fn insert(conn: &Connection, row: &PendingRow, now: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO questions (request_id, session_id, turn_id, call_id, questions, timeout_sec, \
         deadline_ms, status, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8)",
    )?
    .execute(params![
        row.request_id,
        row.session_id,
        row.turn_id,
        row.call_id,
        row.questions,
        row.timeout_sec,
        row.deadline_ms,
        now
    ])?;
    Ok(())
}

/// Marks a batch resolved: `outcome` is `answered`, `declined` or `timed_out`; `by` who.
pub fn resolve(
    conn: &Connection,
    request_id: &str,
    outcome: &str,
    by: &str,
    now: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE questions SET status = 'resolved', outcome = ?2, decided_by = ?3, resolved_at = ?4 \
         WHERE request_id = ?1 AND status = 'pending'",
    )?
    .execute(params![request_id, outcome, by, now])?;
    Ok(())
}

/// Every batch still pending, oldest first.
pub fn pending(conn: &Connection) -> rusqlite::Result<Vec<PendingRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT request_id, session_id, turn_id, call_id, questions, timeout_sec, deadline_ms \
         FROM questions WHERE status = 'pending' ORDER BY created_at, request_id",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(PendingRow {
            request_id: r.get(0)?,
            session_id: r.get(1)?,
            turn_id: r.get(2)?,
            call_id: r.get(3)?,
            questions: r.get(4)?,
            timeout_sec: r.get(5)?,
            deadline_ms: r.get(6)?,
        })
    })?;
    rows.collect()
}

/// The status (`pending` / `resolved`) of a batch, `None` when there is no such id.
pub fn status(conn: &Connection, request_id: &str) -> rusqlite::Result<Option<String>> {
    conn.prepare_cached("SELECT status FROM questions WHERE request_id = ?1")?
        .query_row(params![request_id], |r| r.get(0))
        .optional()
}

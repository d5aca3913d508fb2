//! The `approvals` table: every approval request and how it was resolved, so a restart
//! can resolve the ones a crash left pending.

use rusqlite::{params, Connection};

/// Records a new pending request (`request` is the `approval.request` params JSON).
pub fn insert(
    conn: &Connection,
    request_id: &str,
    session_id: &str,
    turn_id: &str,
    request: &str,
    now: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO approvals (request_id, session_id, turn_id, request, status, created_at) \
         VALUES (?1, ?2, ?3, ?4, 'pending', ?5)",
    )?
    .execute(params![request_id, session_id, turn_id, request, now])?;
    Ok(())
}

/// Marks a request resolved.
pub fn resolve(
    conn: &Connection,
    request_id: &str,
    decision: &str,
    by: &str,
    now: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE approvals SET status = 'resolved', decision = ?2, decided_by = ?3, resolved_at = ?4 \
         WHERE request_id = ?1",
    )?
    .execute(params![request_id, decision, by, now])?;
    Ok(())
}

/// `(request_id, session_id)` of every request still pending.
pub fn pending(conn: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT request_id, session_id FROM approvals WHERE status = 'pending' ORDER BY created_at",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

//! The `turns` table: the lifecycle state of every turn (`queued`, `running`, `done`),
//! maintained by the event writer from the `turn.*` events in the same transaction, so
//! crash recovery finds the turns a crash left open without scanning the event log.

use rusqlite::{params, Connection};

/// Records the state a `turn.*` event moves its turn to. Other kinds are ignored.
pub fn track(
    conn: &Connection,
    session_id: &str,
    kind: &str,
    turn_id: &str,
) -> rusqlite::Result<()> {
    let state = match kind {
        "turn.queued" => "queued",
        "turn.started" => "running",
        "turn.done" => "done",
        _ => return Ok(()),
    };
    conn.prepare_cached(
        "INSERT INTO turns (turn_id, session_id, state) VALUES (?1, ?2, ?3) \
         ON CONFLICT(turn_id) DO UPDATE SET state = excluded.state",
    )?
    .execute(params![turn_id, session_id, state])?;
    Ok(())
}

/// A turn that has no `turn.done`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenTurn {
    /// Session of the turn.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// `queued` or `running`.
    pub state: String,
}

/// Every turn without a `turn.done`.
pub fn open(conn: &Connection) -> rusqlite::Result<Vec<OpenTurn>> {
    let mut stmt = conn.prepare_cached(
        "SELECT session_id, turn_id, state FROM turns WHERE state != 'done' ORDER BY session_id, rowid",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(OpenTurn {
            session_id: r.get(0)?,
            turn_id: r.get(1)?,
            state: r.get(2)?,
        })
    })?;
    rows.collect()
}

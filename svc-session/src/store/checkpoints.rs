//! The `checkpoints` and `checkpoint_files` tables (issue 20): one row per checkpoint
//! manifest of a session and one per file entry of it. Owned by
//! [`crate::checkpoints::Checkpoints`]; written through the event writer so a turn's
//! entries commit in order with its events.

use std::collections::HashSet;

use rusqlite::{params, Connection, OptionalExtension};

/// A checkpoint manifest (`checkpoint.list` item) with its file entries.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointRow {
    /// Session the checkpoint belongs to.
    pub session_id: String,
    /// The turn id for a `turn` checkpoint, `r-<12 hex>` for a `restore` one.
    pub id: String,
    /// Turn that made the changes (`None` for a restore).
    pub turn_id: Option<String>,
    /// Session workdir the paths are relative to (absolute).
    pub workdir: String,
    /// UTC ISO-8601 creation time.
    pub created_at: String,
    /// The turn's prompt (empty for a restore).
    pub prompt: String,
    /// `turn` or `restore`.
    pub kind: String,
    /// File entries in the order they were first touched.
    pub files: Vec<FileRow>,
}

/// One file entry of a manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRow {
    /// Path relative to the workdir (`/`-separated).
    pub path: String,
    /// `modified`, `created` or `deleted`: what the turn did to the file.
    pub status: String,
    /// sha-256 (hex) of the before-bytes; `None` when the file did not exist.
    pub before_sha: Option<String>,
    /// sha-256 (hex) of the bytes the turn left; `None` when it left no file.
    pub after_sha: Option<String>,
    /// Size of the before-bytes (or of the file when skipped), in bytes.
    pub size: i64,
    /// `tool` or `shell`: how the change was seen.
    pub source: String,
    /// False when the before-state cannot be put back.
    pub restorable: bool,
    /// `too_large`, `excluded` or `unreadable` when the before-bytes were not stored.
    pub skipped: Option<String>,
    /// Unix permission bits the file had before (`None` when it did not exist / unknown).
    pub mode: Option<u32>,
    /// True while the call that changes the file has not finished (its after-state is not
    /// known yet, e.g. after a crash mid-call).
    pub pending: bool,
}

/// Adds the checkpoint's row when it is not there yet (its files are written separately).
pub fn put_checkpoint(conn: &Connection, c: &CheckpointRow) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR IGNORE INTO checkpoints (session_id, id, turn_id, workdir, created_at, prompt, kind) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        c.session_id,
        c.id,
        c.turn_id,
        c.workdir,
        c.created_at,
        c.prompt,
        c.kind
    ])?;
    Ok(())
}

/// Writes the file entry of checkpoint `id`: inserted at position `pos`, or updated in place
/// (keeping its position) when the path is there already.
pub fn put_file(
    conn: &Connection,
    session_id: &str,
    id: &str,
    pos: usize,
    f: &FileRow,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO checkpoint_files (session_id, checkpoint_id, path, pos, status, \
         before_sha, after_sha, size, source, restorable, skipped, mode, pending) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) \
         ON CONFLICT (session_id, checkpoint_id, path) DO UPDATE SET status = excluded.status, \
         before_sha = excluded.before_sha, after_sha = excluded.after_sha, size = excluded.size, \
         source = excluded.source, restorable = excluded.restorable, skipped = excluded.skipped, \
         mode = excluded.mode, pending = excluded.pending",
    )?
    .execute(params![
        session_id,
        id,
        f.path,
        pos as i64,
        f.status,
        f.before_sha,
        f.after_sha,
        f.size,
        f.source,
        f.restorable,
        f.skipped,
        f.mode,
        f.pending
    ])?;
    Ok(())
}

/// Removes one file entry (a call that in the end changed nothing).
pub fn remove_file(
    conn: &Connection,
    session_id: &str,
    id: &str,
    path: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "DELETE FROM checkpoint_files WHERE session_id = ?1 AND checkpoint_id = ?2 AND path = ?3",
    )?
    .execute(params![session_id, id, path])?;
    Ok(())
}

/// Deletes checkpoint `id` of a session with its entries.
pub fn delete(conn: &Connection, session_id: &str, id: &str) -> rusqlite::Result<()> {
    conn.execute(
        "DELETE FROM checkpoint_files WHERE session_id = ?1 AND checkpoint_id = ?2",
        params![session_id, id],
    )?;
    conn.execute(
        "DELETE FROM checkpoints WHERE session_id = ?1 AND id = ?2",
        params![session_id, id],
    )?;
    Ok(())
}

/// Deletes every checkpoint of a session.
pub fn delete_session(conn: &Connection, session_id: &str) -> rusqlite::Result<()> {
    conn.execute(
        "DELETE FROM checkpoint_files WHERE session_id = ?1",
        [session_id],
    )?;
    conn.execute(
        "DELETE FROM checkpoints WHERE session_id = ?1",
        [session_id],
    )?;
    Ok(())
}

/// Every checkpoint of a session that has at least one file entry, oldest first.
pub fn list(conn: &Connection, session_id: &str) -> rusqlite::Result<Vec<CheckpointRow>> {
    let mut out: Vec<CheckpointRow> = conn
        .prepare_cached(
            "SELECT id, turn_id, workdir, created_at, prompt, kind FROM checkpoints \
             WHERE session_id = ?1 ORDER BY ord",
        )?
        .query_map([session_id], |r| {
            Ok(CheckpointRow {
                session_id: session_id.to_owned(),
                id: r.get(0)?,
                turn_id: r.get(1)?,
                workdir: r.get(2)?,
                created_at: r.get(3)?,
                prompt: r.get(4)?,
                kind: r.get(5)?,
                files: Vec::new(),
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut stmt = conn.prepare_cached(
        "SELECT path, status, before_sha, after_sha, size, source, restorable, skipped, mode, pending \
         FROM checkpoint_files WHERE session_id = ?1 AND checkpoint_id = ?2 ORDER BY pos, path",
    )?;
    for c in &mut out {
        c.files = stmt
            .query_map(params![session_id, c.id], |r| {
                Ok(FileRow {
                    path: r.get(0)?,
                    status: r.get(1)?,
                    before_sha: r.get(2)?,
                    after_sha: r.get(3)?,
                    size: r.get(4)?,
                    source: r.get(5)?,
                    restorable: r.get(6)?,
                    skipped: r.get(7)?,
                    mode: r.get(8)?,
                    pending: r.get(9)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
    }
    out.retain(|c| !c.files.is_empty());
    Ok(out)
}

/// True when the session has a checkpoint `id`.
pub fn exists(conn: &Connection, session_id: &str, id: &str) -> rusqlite::Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM checkpoints WHERE session_id = ?1 AND id = ?2")?
        .query_row(params![session_id, id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// The blobs (before-shas) the session's entries still refer to.
pub fn referenced_blobs(conn: &Connection, session_id: &str) -> rusqlite::Result<HashSet<String>> {
    conn.prepare_cached(
        "SELECT DISTINCT before_sha FROM checkpoint_files \
         WHERE session_id = ?1 AND before_sha IS NOT NULL",
    )?
    .query_map([session_id], |r| r.get(0))?
    .collect()
}

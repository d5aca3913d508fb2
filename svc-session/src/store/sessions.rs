//! The `sessions` table: one row per session, live or closed.

use rusqlite::{params, Connection, OptionalExtension, Row};

/// A session as persisted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionRow {
    /// `s_…` id.
    pub id: String,
    /// Absolute, canonical working directory.
    pub workdir: String,
    /// `$SNOWPEA_HOME/sessions/<date>_<id>` (with `tmp/` and `artifacts/`).
    pub workspace_dir: String,
    /// `plan` / `accept` / `auto`.
    pub mode: String,
    /// Vendor the session asked for (`session.create{provider}`), if any.
    pub provider: Option<String>,
    /// Model the session asked for (`session.create{model}`), if any.
    pub model: Option<String>,
    /// Vendor that served the last turn.
    pub provider_in_use: Option<String>,
    /// Model that served the last turn.
    pub model_in_use: Option<String>,
    /// Title (`session.rename`).
    pub title: Option<String>,
    /// `session.create{denyExec}`.
    pub deny_exec: bool,
    /// The owning client (`hostToolsFrom`).
    pub host_tools_from: Option<String>,
    /// `session.create{originSurface}`.
    pub origin_surface: Option<String>,
    /// clientId of the origin connection, used to re-bind after a reconnect.
    pub origin_client_id: Option<String>,
    /// Gateway connection id of the origin (it may be gone).
    pub origin_connection_id: Option<String>,
    /// Creation time (UTC ISO-8601).
    pub created_at: String,
    /// Time of the last prompt or turn end.
    pub last_activity_at: Option<String>,
    /// Text of the last prompt.
    pub last_prompt: Option<String>,
    /// When `session.close` closed it.
    pub closed_at: Option<String>,
    /// Tokens the last model call's prompt occupied.
    pub context_used: i64,
    /// Context window of the model in use, when known.
    pub context_window: Option<i64>,
    /// `chat` (a person's thread) or `scheduled` (a job's unattended run); see [`KIND_CHAT`].
    /// Empty in a `Default` row means `chat`.
    pub kind: String,
    /// Named agent the session runs as, if any (`session.list` `agent`).
    pub agent: Option<String>,
    /// The scheduled job whose run this session is (`session.list` `jobId`).
    pub job_id: Option<String>,
    /// Seconds an approval may wait before it is denied with `approval_timeout`; `None`
    /// means the `approvals.timeoutSec` setting.
    pub approval_timeout_sec: Option<i64>,
    /// The session's effort pin (`session.setEffort`, `session.create{effort}`):
    /// `low`/`medium`/`high`/`max`; `None` follows the settings.
    pub effort: Option<String>,
    /// `session.setBrowserProvider`: `Some("local")` when the user opted in to core's own
    /// browser; `None` is `host`.
    pub browser_provider: Option<String>,
    /// `clientKind` of the connection that created the session (`browser`, `tui`, …).
    pub origin_client_kind: Option<String>,
    /// `session.create{maxConcurrent}`: concurrent subagents override.
    pub max_concurrent: Option<i64>,
    /// `session.create{locale}` / `attach{locale}`: a BCP 47 tag.
    pub locale: Option<String>,
    /// `session.create{browserMemory}`: recall also searches browser-ingested pages.
    pub browser_memory: Option<bool>,
    /// When `session.setActive` (or a client's prompt/steer) last marked it active.
    pub active_at: Option<String>,
    /// The session that spawned this one (a subagent's parent, issue 19); `None` for a root.
    pub parent_session_id: Option<String>,
    /// Delegation mode pinned by `/team on|off`; `None` follows `agents.delegateByDefault`.
    pub delegation: Option<bool>,
}

/// Kind of a session a person drives (spec `session.list` `kind`).
pub const KIND_CHAT: &str = "chat";
/// Kind of a session a scheduled job's unattended run opened (issue 5).
pub const KIND_SCHEDULED: &str = "scheduled";
/// Kind of a delegated child session (`agent.spawn`, `delegate_task`; issue 19).
pub const KIND_SUBAGENT: &str = "subagent";
/// Kind of a named agent's own unattended session (issue 19).
pub const KIND_AGENT: &str = "agent";

impl SessionRow {
    /// The session kind as the protocol spells it (`chat` when unset).
    pub fn kind(&self) -> &str {
        if self.kind.is_empty() {
            KIND_CHAT
        } else {
            &self.kind
        }
    }
}

const COLUMNS: &str =
    "id, workdir, workspace_dir, mode, provider, model, provider_in_use, model_in_use, \
     title, deny_exec, host_tools_from, origin_surface, origin_client_id, origin_connection_id, \
     created_at, last_activity_at, last_prompt, closed_at, context_used, context_window, \
     kind, agent, job_id, approval_timeout_sec, effort, browser_provider, origin_client_kind, \
     max_concurrent, locale, browser_memory, active_at, parent_session_id, delegation";

fn from_row(r: &Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        id: r.get(0)?,
        workdir: r.get(1)?,
        workspace_dir: r.get(2)?,
        mode: r.get(3)?,
        provider: r.get(4)?,
        model: r.get(5)?,
        provider_in_use: r.get(6)?,
        model_in_use: r.get(7)?,
        title: r.get(8)?,
        deny_exec: r.get(9)?,
        host_tools_from: r.get(10)?,
        origin_surface: r.get(11)?,
        origin_client_id: r.get(12)?,
        origin_connection_id: r.get(13)?,
        created_at: r.get(14)?,
        last_activity_at: r.get(15)?,
        last_prompt: r.get(16)?,
        closed_at: r.get(17)?,
        context_used: r.get(18)?,
        context_window: r.get(19)?,
        kind: r.get(20)?,
        agent: r.get(21)?,
        job_id: r.get(22)?,
        approval_timeout_sec: r.get(23)?,
        effort: r.get(24)?,
        browser_provider: r.get(25)?,
        origin_client_kind: r.get(26)?,
        max_concurrent: r.get(27)?,
        locale: r.get(28)?,
        browser_memory: r.get(29)?,
        active_at: r.get(30)?,
        parent_session_id: r.get(31)?,
        delegation: r.get(32)?,
    })
}

/// Inserts or replaces the whole row.
pub fn save(conn: &Connection, s: &SessionRow) -> rusqlite::Result<()> {
    conn.prepare_cached(&format!(
        "INSERT OR REPLACE INTO sessions ({COLUMNS}) VALUES \
         (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,?23,?24,\
         ?25,?26,?27,?28,?29,?30,?31,?32,?33)"
    ))?
    .execute(params![
        s.id,
        s.workdir,
        s.workspace_dir,
        s.mode,
        s.provider,
        s.model,
        s.provider_in_use,
        s.model_in_use,
        s.title,
        s.deny_exec,
        s.host_tools_from,
        s.origin_surface,
        s.origin_client_id,
        s.origin_connection_id,
        s.created_at,
        s.last_activity_at,
        s.last_prompt,
        s.closed_at,
        s.context_used,
        s.context_window,
        s.kind(),
        s.agent,
        s.job_id,
        s.approval_timeout_sec,
        s.effort,
        s.browser_provider,
        s.origin_client_kind,
        s.max_concurrent,
        s.locale,
        s.browser_memory,
        s.active_at,
        s.parent_session_id,
        s.delegation,
    ])?;
    Ok(())
}

/// One session by id.
pub fn get(conn: &Connection, id: &str) -> rusqlite::Result<Option<SessionRow>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM sessions WHERE id = ?1"))?
        .query_row([id], from_row)
        .optional()
}

/// Every session, oldest first; closed ones only with `include_closed`.
pub fn list(conn: &Connection, include_closed: bool) -> rusqlite::Result<Vec<SessionRow>> {
    let sql = if include_closed {
        format!("SELECT {COLUMNS} FROM sessions ORDER BY created_at, id")
    } else {
        format!("SELECT {COLUMNS} FROM sessions WHERE closed_at IS NULL ORDER BY created_at, id")
    };
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map([], from_row)?;
    rows.collect()
}

/// Ids of the sessions whose `parent_session_id` is `parent` (its subagent children).
pub fn children(conn: &Connection, parent: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt =
        conn.prepare_cached("SELECT id FROM sessions WHERE parent_session_id = ?1 ORDER BY id")?;
    let rows = stmt.query_map([parent], |r| r.get(0))?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_saved_before_the_kind_column_read_as_chat() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("session.db");
        {
            // A database written by the first schema version.
            let c = snowpea_common::db::open(&path, &crate::store::MIGRATIONS[..1]).unwrap();
            c.execute(
                "INSERT INTO sessions (id, workdir, workspace_dir, mode, created_at) \
                 VALUES ('s_old', '/w', '/ws', 'accept', '2026-01-01T00:00:00Z')",
                [],
            )
            .unwrap();
        }
        let c = crate::store::open(&path).unwrap();
        let row = get(&c, "s_old").unwrap().unwrap();
        assert_eq!(row.kind(), KIND_CHAT);
        assert_eq!(row.kind, KIND_CHAT, "the migration fills the column");
        assert_eq!(row.job_id, None);

        let new = SessionRow {
            id: "s_new".into(),
            kind: KIND_SCHEDULED.into(),
            job_id: Some("job_1".into()),
            approval_timeout_sec: Some(30),
            ..row
        };
        save(&c, &new).unwrap();
        assert_eq!(get(&c, "s_new").unwrap().unwrap(), new);
    }
}

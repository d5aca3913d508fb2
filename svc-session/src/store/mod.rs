//! The session service's SQLite database (`$SNOWPEA_HOME/state/session.db`, DESIGN.md §6):
//! schema migrations, row types and queries for sessions, events, turns and approvals.
//!
//! Writes go through the single writer of [`crate::events::EventLog`] (group commit);
//! this module only provides the SQL, as functions over a `rusqlite::Connection`, and a
//! [`Store`] with its own read connection for queries (WAL lets reads run beside the
//! writer and see exactly what was committed). Which component owns which table:
//! `sessions` — [`crate::session::Sessions`]; `events` and `turns` —
//! [`crate::events::EventLog`]; `approvals` — [`crate::approval::Approvals`]; `checkpoints` and
//! `checkpoint_files` — [`crate::checkpoints::Checkpoints`]; `questions` —
//! [`crate::question::Questions`]; `allowlist` (the `session` scope) —
//! [`crate::permission::Allowlist`]; `usage_calls`, `usage_daily` and
//! `usage_daily_models` (kept by triggers on `events`) — [`crate::usage::Usage`]; `subagents`,
//! `named_agents` and `agent_bindings` — [`crate::agents::Agents`]; `teams` and `team_tasks` —
//! [`crate::teams::Teams`].

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use snowpea_session_error::Result;

pub mod agents;
pub mod allowlist;
pub mod approvals;
pub mod checkpoints;
pub mod events;
pub mod questions;
pub mod sessions;
pub mod teams;
pub mod turns;
pub mod usage;

/// Schema versions, oldest first (`PRAGMA user_version` = how many ran).
pub const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    workdir TEXT NOT NULL,
    workspace_dir TEXT NOT NULL,
    mode TEXT NOT NULL,
    provider TEXT,
    model TEXT,
    provider_in_use TEXT,
    model_in_use TEXT,
    title TEXT,
    deny_exec INTEGER NOT NULL DEFAULT 0,
    host_tools_from TEXT,
    origin_surface TEXT,
    origin_client_id TEXT,
    origin_connection_id TEXT,
    created_at TEXT NOT NULL,
    last_activity_at TEXT,
    last_prompt TEXT,
    closed_at TEXT,
    context_used INTEGER NOT NULL DEFAULT 0,
    context_window INTEGER
);
CREATE TABLE events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    ts TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE TABLE turns (
    turn_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    state TEXT NOT NULL
);
CREATE INDEX turns_open ON turns(state) WHERE state != 'done';
CREATE TABLE approvals (
    request_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    request TEXT NOT NULL,
    status TEXT NOT NULL,
    decision TEXT,
    decided_by TEXT,
    created_at TEXT NOT NULL,
    resolved_at TEXT
);
CREATE INDEX approvals_pending ON approvals(status) WHERE status = 'pending';
"#,
    // 2: the session kind (`chat` / `scheduled`, spec CORE-session-kind), the named agent it runs
    // as, the scheduled job behind it and its own approval timeout (issue 5).
    r#"
ALTER TABLE sessions ADD COLUMN kind TEXT NOT NULL DEFAULT 'chat';
ALTER TABLE sessions ADD COLUMN agent TEXT;
ALTER TABLE sessions ADD COLUMN job_id TEXT;
ALTER TABLE sessions ADD COLUMN approval_timeout_sec INTEGER;
"#,
    // 3: per-turn checkpoints of the workdir (issue 20): one row per manifest (`ord` orders a
    // session's checkpoints oldest first) and one per file entry; the blobs live on disk
    // under `$SNOWPEA_HOME/checkpoints/<sessionId>/objects/`.
    r#"
CREATE TABLE checkpoints (
    ord INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    id TEXT NOT NULL,
    turn_id TEXT,
    workdir TEXT NOT NULL,
    created_at TEXT NOT NULL,
    prompt TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL,
    UNIQUE (session_id, id)
);
CREATE TABLE checkpoint_files (
    session_id TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    path TEXT NOT NULL,
    pos INTEGER NOT NULL,
    status TEXT NOT NULL,
    before_sha TEXT,
    after_sha TEXT,
    size INTEGER NOT NULL DEFAULT 0,
    source TEXT NOT NULL,
    restorable INTEGER NOT NULL,
    skipped TEXT,
    mode INTEGER,
    pending INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, checkpoint_id, path)
) WITHOUT ROWID;
"#,
    // 4: `ask_user` batches (issue 17; answers are never stored) and the `session`-scope
    // allowlist entries, which die with their session.
    r#"
CREATE TABLE questions (
    request_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    questions TEXT NOT NULL,
    timeout_sec INTEGER NOT NULL,
    deadline_ms INTEGER NOT NULL,
    status TEXT NOT NULL,
    outcome TEXT,
    decided_by TEXT,
    created_at TEXT NOT NULL,
    resolved_at TEXT
);
CREATE INDEX questions_pending ON questions(status) WHERE status = 'pending';
CREATE TABLE allowlist (
    pattern_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    pattern TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (session_id, pattern)
);
"#,
    // 5: the usage index of `usage.summary` (issue 15): one row per stored `usage` event and
    // per-day totals (per session and model, and per model alone), all kept by triggers in the transaction that commits (or deletes) the
    // event, so the summary never scans event JSON. Existing usage events are indexed here.
    r#"
CREATE TABLE usage_calls (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE INDEX usage_calls_ts ON usage_calls(ts);
CREATE TABLE usage_daily (
    day TEXT NOT NULL,
    session_id TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    calls INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    PRIMARY KEY (day, session_id, provider, model)
) WITHOUT ROWID;
CREATE TABLE usage_daily_models (
    day TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    calls INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    PRIMARY KEY (day, provider, model)
) WITHOUT ROWID;
CREATE TRIGGER usage_indexed AFTER INSERT ON events WHEN new.kind = 'usage'
BEGIN
    INSERT OR REPLACE INTO usage_calls VALUES (
        new.session_id, new.seq, new.ts,
        COALESCE(json_extract(new.payload, '$.provider'), ''),
        COALESCE(json_extract(new.payload, '$.model'), ''),
        COALESCE(CAST(json_extract(new.payload, '$.inputTokens') AS INTEGER), 0),
        COALESCE(CAST(json_extract(new.payload, '$.outputTokens') AS INTEGER), 0));
    INSERT INTO usage_daily
        SELECT substr(ts, 1, 10), session_id, provider, model, 1, input_tokens, output_tokens
        FROM usage_calls WHERE session_id = new.session_id AND seq = new.seq
    ON CONFLICT (day, session_id, provider, model) DO UPDATE SET
        calls = calls + 1,
        input_tokens = usage_daily.input_tokens + excluded.input_tokens,
        output_tokens = usage_daily.output_tokens + excluded.output_tokens;
    INSERT INTO usage_daily_models
        SELECT substr(ts, 1, 10), provider, model, 1, input_tokens, output_tokens
        FROM usage_calls WHERE session_id = new.session_id AND seq = new.seq
    ON CONFLICT (day, provider, model) DO UPDATE SET
        calls = calls + 1,
        input_tokens = usage_daily_models.input_tokens + excluded.input_tokens,
        output_tokens = usage_daily_models.output_tokens + excluded.output_tokens;
END;
CREATE TRIGGER usage_unindexed AFTER DELETE ON events WHEN old.kind = 'usage'
BEGIN
    UPDATE usage_daily SET
        calls = calls - 1,
        input_tokens = input_tokens - (SELECT input_tokens FROM usage_calls WHERE session_id = old.session_id AND seq = old.seq),
        output_tokens = output_tokens - (SELECT output_tokens FROM usage_calls WHERE session_id = old.session_id AND seq = old.seq)
    WHERE (day, session_id, provider, model) =
        (SELECT substr(ts, 1, 10), session_id, provider, model FROM usage_calls
         WHERE session_id = old.session_id AND seq = old.seq);
    DELETE FROM usage_daily WHERE calls <= 0 AND (day, session_id, provider, model) =
        (SELECT substr(ts, 1, 10), session_id, provider, model FROM usage_calls
         WHERE session_id = old.session_id AND seq = old.seq);
    UPDATE usage_daily_models SET
        calls = calls - 1,
        input_tokens = input_tokens - (SELECT input_tokens FROM usage_calls WHERE session_id = old.session_id AND seq = old.seq),
        output_tokens = output_tokens - (SELECT output_tokens FROM usage_calls WHERE session_id = old.session_id AND seq = old.seq)
    WHERE (day, provider, model) =
        (SELECT substr(ts, 1, 10), provider, model FROM usage_calls
         WHERE session_id = old.session_id AND seq = old.seq);
    DELETE FROM usage_daily_models WHERE calls <= 0 AND (day, provider, model) =
        (SELECT substr(ts, 1, 10), provider, model FROM usage_calls
         WHERE session_id = old.session_id AND seq = old.seq);
    DELETE FROM usage_calls WHERE session_id = old.session_id AND seq = old.seq;
END;
INSERT INTO usage_calls
    SELECT session_id, seq, ts,
        COALESCE(json_extract(payload, '$.provider'), ''),
        COALESCE(json_extract(payload, '$.model'), ''),
        COALESCE(CAST(json_extract(payload, '$.inputTokens') AS INTEGER), 0),
        COALESCE(CAST(json_extract(payload, '$.outputTokens') AS INTEGER), 0)
    FROM events WHERE kind = 'usage';
INSERT INTO usage_daily
    SELECT substr(ts, 1, 10), session_id, provider, model, COUNT(*), SUM(input_tokens), SUM(output_tokens)
    FROM usage_calls GROUP BY 1, 2, 3, 4;
INSERT INTO usage_daily_models
    SELECT day, provider, model, SUM(calls), SUM(input_tokens), SUM(output_tokens)
    FROM usage_daily GROUP BY 1, 2, 3;
"#,
    // 6: the interactive session (issue 16): the effort pin, the browser provider, the kind
    // of the creating client (the caller rule of session.continue / setActive), the
    // session.create knobs, when the session was last marked active.
    r#"
ALTER TABLE sessions ADD COLUMN effort TEXT;
ALTER TABLE sessions ADD COLUMN browser_provider TEXT;
ALTER TABLE sessions ADD COLUMN origin_client_kind TEXT;
ALTER TABLE sessions ADD COLUMN max_concurrent INTEGER;
ALTER TABLE sessions ADD COLUMN locale TEXT;
ALTER TABLE sessions ADD COLUMN browser_memory INTEGER;
ALTER TABLE sessions ADD COLUMN active_at TEXT;
"#,
    // migration 7: agents (issue 19 part A): a session's parent (subagents), the subagent
    // runs, the named agents and their channel bindings.
    r#"
ALTER TABLE sessions ADD COLUMN parent_session_id TEXT;
CREATE TABLE subagents (
    agent_id TEXT PRIMARY KEY,
    parent_session_id TEXT NOT NULL,
    session_id TEXT,
    name TEXT NOT NULL DEFAULT '',
    task TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    depth INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    ended_at TEXT,
    result TEXT
);
CREATE INDEX subagents_by_parent ON subagents (parent_session_id, created_at);
CREATE TABLE named_agents (
    name TEXT PRIMARY KEY,
    definition_path TEXT,
    session_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    workdir TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
CREATE TABLE agent_bindings (
    channel TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    credentials_ref TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"#,
    // migration 8: teams (issue 19 part B): one row per `team.start` and one per task of its
    // board; the claim of a task is one UPDATE in the writer's transaction.
    r#"
CREATE TABLE teams (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    workdir TEXT NOT NULL,
    task TEXT NOT NULL,
    workers INTEGER NOT NULL,
    state TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    ended_at TEXT
);
CREATE INDEX teams_by_created ON teams (created_at);
CREATE TABLE team_tasks (
    team_id TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    task_id TEXT NOT NULL,
    ord INTEGER NOT NULL,
    title TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    depends_on TEXT NOT NULL DEFAULT '[]',
    status TEXT NOT NULL,
    agent_n INTEGER,
    assignee TEXT,
    retries INTEGER NOT NULL DEFAULT 0,
    branch TEXT NOT NULL DEFAULT '',
    note TEXT NOT NULL DEFAULT '',
    conflict_hunks TEXT NOT NULL DEFAULT '',
    conflict_summary TEXT NOT NULL DEFAULT '',
    child_session_id TEXT,
    PRIMARY KEY (team_id, task_id)
);
"#,
    // migration 9: delegation mode (gaps, `/team on|off`): a session's pin, NULL = follow
    // `agents.delegateByDefault`.
    r#"
ALTER TABLE sessions ADD COLUMN delegation INTEGER;
"#,
    // migration 10: model-only fields of an event (issue 32 item 3, `crate::events`): what
    // only the model sees of a prompt, kept off the wire; earlier `message.user.input`s move
    // there.
    r#"
ALTER TABLE events ADD COLUMN model_only TEXT;
UPDATE events
    SET model_only = json_object('input', json_extract(payload, '$.input')),
        payload = json_remove(payload, '$.input')
    WHERE kind = 'message.user' AND json_type(payload, '$.input') = 'text';
"#,
];

/// Opens (creating and migrating) the database at `path`.
pub fn open(path: &Path) -> anyhow::Result<Connection> {
    snowpea_common::db::open(path, MIGRATIONS)
}

/// Read access to the database: one connection behind a mutex, used only inside
/// [`snowpea_common::db::blocking`] so no query runs on an async worker thread. Cheap to
/// clone; every component that reads its tables holds a copy.
#[derive(Debug, Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
}

impl Store {
    /// Opens a read connection to the database at `path` (migrating it if needed).
    pub fn open(path: &Path) -> anyhow::Result<Store> {
        Ok(Store {
            conn: Arc::new(Mutex::new(open(path)?)),
        })
    }

    /// Runs `f` with the read connection on the blocking pool; `what` names the work in
    /// errors (`"session.list"`).
    pub async fn read<T: Send + 'static>(
        &self,
        what: &'static str,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        let conn = self.conn.clone();
        let r = snowpea_common::db::blocking(what, move || {
            let conn = conn.lock().unwrap_or_else(|e| e.into_inner());
            f(&conn)
        })
        .await?;
        Ok(r?)
    }
}

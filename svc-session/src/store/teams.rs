//! The `teams` and `team_tasks` tables (issue 19 part B, protocol "team.start" /
//! "team.status"): one row per team and one per task of its board. Owned by
//! [`crate::teams::Teams`]; every write goes through the event writer, so a task's state
//! change commits in order with its `team.task.update` event, and a claim
//! ([`claim`]) is one read-modify-write inside the writer's single transaction: no task
//! is ever handed to two workers.

use std::collections::HashMap;

use rusqlite::{params, Connection, OptionalExtension, Row};

/// A team as persisted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TeamRow {
    /// `tm` + 8 hex.
    pub id: String,
    /// The lead's session (the one `team.start` named).
    pub session_id: String,
    /// Top level of the lead's git repository (absolute).
    pub workdir: String,
    /// The task the team was given.
    pub task: String,
    /// Workers it runs with (1–16).
    pub workers: i64,
    /// `running`, `done`, `failed` or `interrupted`.
    pub state: String,
    /// Why it ended the way it did (planner failure, restart, …); empty otherwise.
    pub note: String,
    /// UTC ISO-8601.
    pub created_at: String,
    /// When it ended.
    pub ended_at: Option<String>,
}

/// One task of a team's board.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskRow {
    /// Team it belongs to.
    pub team_id: String,
    /// Planner's id (unique in the team).
    pub task_id: String,
    /// Planner's order.
    pub ord: i64,
    /// One line.
    pub title: String,
    /// What exactly to do (may be empty).
    pub detail: String,
    /// Task ids that must be merged first.
    pub depends_on: Vec<String>,
    /// `pending`, `queued`, `claimed`, `running`, `done`, `conflict`, `merged`, `failed`.
    pub status: String,
    /// 1-based worker that owns it.
    pub agent_n: Option<i64>,
    /// `worker-<n>`.
    pub assignee: Option<String>,
    /// How many times a merge conflict re-queued it.
    pub retries: i64,
    /// Branch its work is on.
    pub branch: String,
    /// Latest note (the worker's summary, why it failed).
    pub note: String,
    /// Conflicting hunks of the last failed merge.
    pub conflict_hunks: String,
    /// Which files conflicted.
    pub conflict_summary: String,
    /// The child session of the latest run.
    pub child_session_id: Option<String>,
}

/// Task states after which nothing more happens to a task.
pub fn is_terminal(status: &str) -> bool {
    matches!(status, "merged" | "failed")
}

const TEAM_COLUMNS: &str =
    "id, session_id, workdir, task, workers, state, note, created_at, ended_at";

fn team_from(r: &Row<'_>) -> rusqlite::Result<TeamRow> {
    Ok(TeamRow {
        id: r.get(0)?,
        session_id: r.get(1)?,
        workdir: r.get(2)?,
        task: r.get(3)?,
        workers: r.get(4)?,
        state: r.get(5)?,
        note: r.get(6)?,
        created_at: r.get(7)?,
        ended_at: r.get(8)?,
    })
}

const TASK_COLUMNS: &str = "team_id, task_id, ord, title, detail, depends_on, status, agent_n, \
     assignee, retries, branch, note, conflict_hunks, conflict_summary, child_session_id";

fn task_from(r: &Row<'_>) -> rusqlite::Result<TaskRow> {
    let deps: String = r.get(5)?;
    Ok(TaskRow {
        team_id: r.get(0)?,
        task_id: r.get(1)?,
        ord: r.get(2)?,
        title: r.get(3)?,
        detail: r.get(4)?,
        depends_on: serde_json::from_str(&deps).unwrap_or_default(),
        status: r.get(6)?,
        agent_n: r.get(7)?,
        assignee: r.get(8)?,
        retries: r.get(9)?,
        branch: r.get(10)?,
        note: r.get(11)?,
        conflict_hunks: r.get(12)?,
        conflict_summary: r.get(13)?,
        child_session_id: r.get(14)?,
    })
}

/// Inserts a new team.
pub fn insert_team(c: &Connection, t: &TeamRow) -> rusqlite::Result<()> {
    c.execute(
        &format!("INSERT INTO teams ({TEAM_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
        params![
            t.id,
            t.session_id,
            t.workdir,
            t.task,
            t.workers,
            t.state,
            t.note,
            t.created_at,
            t.ended_at
        ],
    )?;
    Ok(())
}

/// Sets a team's state and note (and `ended_at` unless it is `running`).
pub fn set_state(c: &Connection, id: &str, state: &str, note: &str) -> rusqlite::Result<()> {
    let ended = (state != "running").then(snowpea_common::time::now_iso);
    c.execute(
        "UPDATE teams SET state = ?2, note = ?3, ended_at = COALESCE(ended_at, ?4) WHERE id = ?1",
        params![id, state, note, ended],
    )?;
    Ok(())
}

/// Team `id`.
pub fn team(c: &Connection, id: &str) -> rusqlite::Result<Option<TeamRow>> {
    c.query_row(
        &format!("SELECT {TEAM_COLUMNS} FROM teams WHERE id = ?1"),
        [id],
        team_from,
    )
    .optional()
}

/// The most recently started team.
pub fn latest(c: &Connection) -> rusqlite::Result<Option<TeamRow>> {
    c.query_row(
        &format!("SELECT {TEAM_COLUMNS} FROM teams ORDER BY created_at DESC, rowid DESC LIMIT 1"),
        [],
        team_from,
    )
    .optional()
}

/// Teams still marked `running` (at start-up: teams a dead process left behind).
pub fn running(c: &Connection) -> rusqlite::Result<Vec<TeamRow>> {
    let mut st = c.prepare(&format!(
        "SELECT {TEAM_COLUMNS} FROM teams WHERE state = 'running' ORDER BY created_at"
    ))?;
    let rows = st.query_map([], team_from)?;
    rows.collect()
}

/// Inserts or replaces a task row.
pub fn save_task(c: &Connection, t: &TaskRow) -> rusqlite::Result<()> {
    c.execute(
        &format!(
            "INSERT OR REPLACE INTO team_tasks ({TASK_COLUMNS}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
        ),
        params![
            t.team_id,
            t.task_id,
            t.ord,
            t.title,
            t.detail,
            serde_json::to_string(&t.depends_on).unwrap_or_else(|_| "[]".into()),
            t.status,
            t.agent_n,
            t.assignee,
            t.retries,
            t.branch,
            t.note,
            t.conflict_hunks,
            t.conflict_summary,
            t.child_session_id
        ],
    )?;
    Ok(())
}

/// The board of team `team_id`, in the planner's order.
pub fn tasks(c: &Connection, team_id: &str) -> rusqlite::Result<Vec<TaskRow>> {
    let mut st = c.prepare(&format!(
        "SELECT {TASK_COLUMNS} FROM team_tasks WHERE team_id = ?1 ORDER BY ord"
    ))?;
    let rows = st.query_map([team_id], task_from)?;
    rows.collect()
}

/// True when every dependency of `t` is merged.
pub fn ready(t: &TaskRow, by_id: &HashMap<&str, &TaskRow>) -> bool {
    t.depends_on
        .iter()
        .all(|d| by_id.get(d.as_str()).is_some_and(|x| x.status == "merged"))
}

/// Claims the next task worker `n` may run, in one transaction (the caller runs this inside
/// the writer's transaction): a task re-queued to this worker first, else the first `queued`
/// (or `pending`) task nobody owns, in both cases with all its dependencies merged. Marks it `claimed` by
/// worker `n` and returns it; `None` when nothing is claimable now.
pub fn claim(c: &Connection, team_id: &str, n: i64) -> rusqlite::Result<Option<TaskRow>> {
    let board = tasks(c, team_id)?;
    let by_id: HashMap<&str, &TaskRow> = board.iter().map(|t| (t.task_id.as_str(), t)).collect();
    // A `pending` task whose dependencies have all merged is claimable too, so a claim never
    // waits for the promotion to `queued` to be written.
    let claimable =
        |t: &&TaskRow| matches!(t.status.as_str(), "queued" | "pending") && ready(t, &by_id);
    let pick = board
        .iter()
        .filter(claimable)
        .find(|t| t.agent_n == Some(n))
        .or_else(|| board.iter().filter(claimable).find(|t| t.agent_n.is_none()))
        .cloned();
    let Some(mut t) = pick else {
        return Ok(None);
    };
    // The guard makes a second claimer of the same row a no-op even outside one writer.
    let changed = c.execute(
        "UPDATE team_tasks SET status = 'claimed', agent_n = ?3, assignee = ?4 \
         WHERE team_id = ?1 AND task_id = ?2 AND status IN ('queued', 'pending')",
        params![team_id, t.task_id, n, format!("worker-{n}")],
    )?;
    if changed != 1 {
        return Ok(None);
    }
    t.status = "claimed".into();
    t.agent_n = Some(n);
    t.assignee = Some(format!("worker-{n}"));
    Ok(Some(t))
}

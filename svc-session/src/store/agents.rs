//! The agent tables (issue 19, migration 7): `subagents` (one row per delegated run),
//! `named_agents` (persistent named instances) and `agent_bindings` (chat channels routed to
//! a named agent by `agent.bindChannel`, read by the chat gateway later).

use rusqlite::{params, Connection, OptionalExtension, Row};

/// One delegated run (`agent.spawn`, `delegate_task`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SubagentRow {
    /// `a-` + 12 hex.
    pub agent_id: String,
    /// The delegating session.
    pub parent_session_id: String,
    /// The child's own session, once it has one.
    pub session_id: Option<String>,
    /// Agent definition it runs as (empty for none).
    pub name: String,
    /// Task text.
    pub task: String,
    /// One-line label written by the delegating model.
    pub title: String,
    /// `queued`, `running`, `done`, `error`, `interrupted`.
    pub status: String,
    /// Delegation depth (1 = a child of a root session).
    pub depth: i64,
    /// When it was spawned.
    pub created_at: String,
    /// When it ended.
    pub ended_at: Option<String>,
    /// Its final report or the reason it failed.
    pub result: Option<String>,
}

const SUB_COLUMNS: &str = "agent_id, parent_session_id, session_id, name, task, title, status, \
                           depth, created_at, ended_at, result";

fn sub_from(r: &Row<'_>) -> rusqlite::Result<SubagentRow> {
    Ok(SubagentRow {
        agent_id: r.get(0)?,
        parent_session_id: r.get(1)?,
        session_id: r.get(2)?,
        name: r.get(3)?,
        task: r.get(4)?,
        title: r.get(5)?,
        status: r.get(6)?,
        depth: r.get(7)?,
        created_at: r.get(8)?,
        ended_at: r.get(9)?,
        result: r.get(10)?,
    })
}

/// Inserts or replaces a subagent row.
pub fn save_subagent(c: &Connection, s: &SubagentRow) -> rusqlite::Result<()> {
    c.prepare_cached(&format!(
        "INSERT OR REPLACE INTO subagents ({SUB_COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)"
    ))?
    .execute(params![
        s.agent_id,
        s.parent_session_id,
        s.session_id,
        s.name,
        s.task,
        s.title,
        s.status,
        s.depth,
        s.created_at,
        s.ended_at,
        s.result
    ])?;
    Ok(())
}

/// Subagents still `queued` or `running` (after a restart: the ones it cut short).
pub fn unfinished_subagents(c: &Connection) -> rusqlite::Result<Vec<SubagentRow>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {SUB_COLUMNS} FROM subagents WHERE status IN ('queued', 'running') ORDER BY created_at"
    ))?;
    let rows = st.query_map([], sub_from)?;
    rows.collect()
}

/// A persistent named agent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NamedAgentRow {
    /// Its name (also its definition's).
    pub name: String,
    /// The definition file, when one was written or found.
    pub definition_path: Option<String>,
    /// Its own session (kept across restarts).
    pub session_id: String,
    /// Memory namespace `agent:<name>`.
    pub namespace: String,
    /// The session's workdir.
    pub workdir: String,
    /// One line from its definition.
    pub description: String,
    /// When it was registered.
    pub created_at: String,
}

const NAMED_COLUMNS: &str =
    "name, definition_path, session_id, namespace, workdir, description, created_at";

fn named_from(r: &Row<'_>) -> rusqlite::Result<NamedAgentRow> {
    Ok(NamedAgentRow {
        name: r.get(0)?,
        definition_path: r.get(1)?,
        session_id: r.get(2)?,
        namespace: r.get(3)?,
        workdir: r.get(4)?,
        description: r.get(5)?,
        created_at: r.get(6)?,
    })
}

/// Inserts or replaces a named agent.
pub fn save_named(c: &Connection, n: &NamedAgentRow) -> rusqlite::Result<()> {
    c.prepare_cached(&format!(
        "INSERT OR REPLACE INTO named_agents ({NAMED_COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7)"
    ))?
    .execute(params![
        n.name,
        n.definition_path,
        n.session_id,
        n.namespace,
        n.workdir,
        n.description,
        n.created_at
    ])?;
    Ok(())
}

/// One named agent.
pub fn named(c: &Connection, name: &str) -> rusqlite::Result<Option<NamedAgentRow>> {
    c.prepare_cached(&format!(
        "SELECT {NAMED_COLUMNS} FROM named_agents WHERE name = ?1"
    ))?
    .query_row([name], named_from)
    .optional()
}

/// Every named agent, by name.
pub fn all_named(c: &Connection) -> rusqlite::Result<Vec<NamedAgentRow>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {NAMED_COLUMNS} FROM named_agents ORDER BY name"
    ))?;
    let rows = st.query_map([], named_from)?;
    rows.collect()
}

/// Deletes a named agent and its bindings.
pub fn delete_named(c: &Connection, name: &str) -> rusqlite::Result<()> {
    c.execute("DELETE FROM agent_bindings WHERE name = ?1", [name])?;
    c.execute("DELETE FROM named_agents WHERE name = ?1", [name])?;
    Ok(())
}

/// A chat channel routed to a named agent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BindingRow {
    /// `<platform>:<id>`.
    pub channel: String,
    /// The named agent.
    pub name: String,
    /// Credential entry of the platform account.
    pub credentials_ref: String,
    /// When it was bound.
    pub created_at: String,
}

/// Binds `channel`, replacing any earlier binding of it.
pub fn save_binding(c: &Connection, b: &BindingRow) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT OR REPLACE INTO agent_bindings (channel, name, credentials_ref, created_at) \
         VALUES (?1,?2,?3,?4)",
    )?
    .execute(params![b.channel, b.name, b.credentials_ref, b.created_at])?;
    Ok(())
}

/// Every binding, by channel.
pub fn all_bindings(c: &Connection) -> rusqlite::Result<Vec<BindingRow>> {
    let mut st = c.prepare_cached(
        "SELECT channel, name, credentials_ref, created_at FROM agent_bindings ORDER BY channel",
    )?;
    let rows = st.query_map([], |r| {
        Ok(BindingRow {
            channel: r.get(0)?,
            name: r.get(1)?,
            credentials_ref: r.get(2)?,
            created_at: r.get(3)?,
        })
    })?;
    rows.collect()
}

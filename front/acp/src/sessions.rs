//! `session/new`, `session/load`, `session/list` and `session/close`.
//!
//! * `session/new {cwd, mcpServers}` → `session.create {workdir: cwd}`; the answer carries
//!   the session id (the native one) and the modes ([`crate::modes`]); the editor's MCP
//!   servers are added ([`crate::mcp`]), the forwarder starts and the commands are sent.
//! * `session/load {sessionId, cwd, mcpServers}` → `session.resume {sessionId, afterSeq: 0}`:
//!   the stored history is replayed as `session/update`s before the answer, then live.
//! * `session/list {cwd?}` → `session.list {workdir?}`.
//! * `session/close {sessionId}` → `session.close`, the MCP servers removed.

use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    CloseSessionRequest, CloseSessionResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse,
};
use agent_client_protocol::{Error as AcpError, Responder, V1};
use serde_json::{json, Value};
use snowpea_sdk::{Client, SessionEvent};

use crate::state::{AcpAgent, SessionLink};
use crate::{commands, errors, mcp, modes, updates, Conn};

/// Runs `work` on its own task and answers the request with its result.
fn answer<T, F>(cx: &Conn, responder: Responder<T, V1>, work: F) -> Result<(), AcpError>
where
    T: agent_client_protocol::JsonRpcResponse + Send + 'static,
    F: std::future::Future<Output = Result<T, AcpError>> + Send + 'static,
{
    cx.spawn(async move {
        let _ = match work.await {
            Ok(response) => responder.respond(response),
            Err(e) => responder.respond_with_error(e),
        };
        Ok(())
    })
}

/// An absolute, existing directory, or invalid params.
fn workdir(cwd: &std::path::Path) -> Result<PathBuf, AcpError> {
    if !cwd.is_absolute() {
        return Err(errors::invalid_params(format!(
            "cwd {} is not absolute",
            cwd.display()
        )));
    }
    let dir = std::fs::canonicalize(cwd)
        .map_err(|e| errors::invalid_params(format!("cwd {}: {e}", cwd.display())))?;
    if !dir.is_dir() {
        return Err(errors::invalid_params(format!(
            "cwd {} is not a directory",
            cwd.display()
        )));
    }
    Ok(dir)
}

/// The editor's `mcpServers` as wire JSON.
fn servers_json<T: serde::Serialize>(servers: &[T]) -> Vec<Value> {
    servers
        .iter()
        .filter_map(|s| serde_json::to_value(s).ok())
        .collect()
}

/// The session's current permission mode (`session.list`), `accept` when not listed.
async fn current_mode(client: &Client, session_id: &str, workdir: &std::path::Path) -> String {
    let listed = client
        .call(
            "session.list",
            json!({ "workdir": workdir, "includeClosed": true }),
        )
        .await;
    listed
        .ok()
        .and_then(|r| {
            r.get("sessions")?.as_array()?.iter().find_map(|s| {
                (s.get("sessionId")?.as_str()? == session_id)
                    .then(|| s.get("mode")?.as_str().map(str::to_owned))
                    .flatten()
            })
        })
        .unwrap_or_else(|| "accept".into())
}

/// Opens the link of a session: MCP servers, then the forwarder and the commands.
async fn open_link(
    agent: &Arc<AcpAgent>,
    client: &Arc<Client>,
    cx: &Conn,
    link: Arc<SessionLink>,
    servers: &[Value],
    after_seq: Option<u64>,
) -> Result<(), AcpError> {
    agent.insert(link.clone());
    if let Err(e) = mcp::add_all(client, &link, servers).await {
        if let Some(link) = agent.remove(&link.id) {
            mcp::remove_all(client, &link).await;
        }
        return Err(e);
    }
    updates::start_forwarder(client, cx.clone(), link.clone(), after_seq);
    commands::send_commands(client, cx, &link).await;
    Ok(())
}

/// `session/new`.
pub fn new_session(
    agent: &Arc<AcpAgent>,
    req: NewSessionRequest,
    responder: Responder<NewSessionResponse, V1>,
    cx: Conn,
) -> Result<(), AcpError> {
    let agent = agent.clone();
    let task_cx = cx.clone();
    answer(&cx, responder, async move {
        let client = agent.client()?;
        let dir = workdir(&req.cwd)?;
        let result = client
            .call(
                "session.create",
                json!({ "workdir": dir, "originSurface": "acp" }),
            )
            .await
            .map_err(|e| errors::from_native("session.create", &e))?;
        let id = result
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| AcpError::new(-32603, "session.create answered no sessionId"))?
            .to_owned();
        let mode = current_mode(&client, &id, &dir).await;
        let link = Arc::new(SessionLink::new(id.clone(), dir));
        open_link(
            &agent,
            &client,
            &task_cx,
            link,
            &servers_json(&req.mcp_servers),
            None,
        )
        .await?;
        errors::from_wire(json!({ "sessionId": id, "modes": modes::mode_state(&mode) }))
    })
}

/// `session/load`: replays the history, then goes live.
pub fn load_session(
    agent: &Arc<AcpAgent>,
    req: LoadSessionRequest,
    responder: Responder<LoadSessionResponse, V1>,
    cx: Conn,
) -> Result<(), AcpError> {
    let agent = agent.clone();
    let task_cx = cx.clone();
    answer(&cx, responder, async move {
        let client = agent.client()?;
        let dir = workdir(&req.cwd)?;
        let id = req.session_id.to_string();
        let resumed = client
            .call("session.resume", json!({ "sessionId": id, "afterSeq": 0 }))
            .await
            .map_err(|e| errors::from_native("session.resume", &e))?;
        let events: Vec<SessionEvent> = resumed
            .get("events")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(SessionEvent::from_value)
            .collect();
        let mode = resumed
            .get("mode")
            .and_then(Value::as_str)
            .unwrap_or("accept")
            .to_owned();
        let link = Arc::new(SessionLink::new(id.clone(), dir));
        let last = updates::replay(&task_cx, &link, &events);
        open_link(
            &agent,
            &client,
            &task_cx,
            link,
            &servers_json(&req.mcp_servers),
            last,
        )
        .await?;
        errors::from_wire(json!({ "modes": modes::mode_state(&mode) }))
    })
}

/// `session/list`: the daemon's sessions (in `cwd` when given).
pub fn list_sessions(
    agent: &Arc<AcpAgent>,
    req: ListSessionsRequest,
    responder: Responder<ListSessionsResponse, V1>,
    cx: Conn,
) -> Result<(), AcpError> {
    let agent = agent.clone();
    answer(&cx, responder, async move {
        let client = agent.client()?;
        let mut params = json!({ "kinds": ["chat"] });
        if let Some(cwd) = &req.cwd {
            params["workdir"] = json!(cwd);
        }
        let result = client
            .call("session.list", params)
            .await
            .map_err(|e| errors::from_native("session.list", &e))?;
        let sessions: Vec<Value> = result
            .get("sessions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| {
                Some(json!({
                    "sessionId": s.get("sessionId")?.as_str()?,
                    "cwd": s.get("workdir")?.as_str()?,
                    "title": s.get("title").and_then(Value::as_str).or(s.get("lastPrompt").and_then(Value::as_str)),
                    "updatedAt": s.get("lastActivityAt").and_then(Value::as_str).or(s.get("createdAt").and_then(Value::as_str)),
                }))
            })
            .collect();
        errors::from_wire(json!({ "sessions": sessions }))
    })
}

/// `session/close`: `session.close`, then the session's MCP servers are removed.
pub fn close_session(
    agent: &Arc<AcpAgent>,
    req: CloseSessionRequest,
    responder: Responder<CloseSessionResponse, V1>,
    cx: Conn,
) -> Result<(), AcpError> {
    let agent = agent.clone();
    answer(&cx, responder, async move {
        let client = agent.client()?;
        let id = req.session_id.to_string();
        let link = agent.session(&id)?;
        client
            .call("session.close", json!({ "sessionId": id }))
            .await
            .map_err(|e| errors::from_native("session.close", &e))?;
        agent.remove(&id);
        client.untrack(&id);
        mcp::remove_all(&client, &link).await;
        errors::from_wire(json!({}))
    })
}

//! `snowpea_sessions{workdir?, includeClosed?}` → `session.list`: the daemon's chat sessions
//! with their working directory, title and state, newest activity first.
//!
//! Text: one line per session, `<sessionId>  <status>  <workdir>  <title or last prompt>`.
//! Structured: `{sessions: [{sessionId, workdir, title, status, mode, running, lastActivityAt}]}`.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{definition as def, native, ToolError, ToolOutput};
use crate::args::Args;
use crate::server::State;
use crate::transcript::clip;

/// The tool's name.
pub const NAME: &str = "snowpea_sessions";

/// Most sessions listed.
pub const MAX_SESSIONS: usize = 200;

/// The tool's definition.
pub fn definition() -> Value {
    def(
        NAME,
        "List Snowpea sessions",
        "List the Snowpea agent's chat sessions (shared with the user's other Snowpea clients): \
         sessionId, working directory, title and state (idle, running, awaiting_approval, …). \
         Use it to find a sessionId to continue with snowpea_prompt or to read with \
         snowpea_session_history.",
        json!({
            "type": "object",
            "properties": {
                "workdir": {
                    "type": "string",
                    "description": "Only sessions rooted in this absolute directory (one that does not exist matches none)."
                },
                "includeClosed": {
                    "type": "boolean",
                    "description": "Also list saved (closed) sessions. Default false."
                }
            },
            "additionalProperties": false
        }),
        true,
    )
}

/// The session list rows (`session.list` entries) as compact JSON objects.
pub fn rows(result: &Value) -> Vec<Value> {
    let mut sessions: Vec<&Value> = result
        .get("sessions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let activity = |s: &Value| {
        s.get("lastActivityAt")
            .or_else(|| s.get("createdAt"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    sessions.sort_by_key(|s| std::cmp::Reverse(activity(s)));
    sessions
        .into_iter()
        .take(MAX_SESSIONS)
        .map(|s| {
            let status = s.get("status").and_then(Value::as_str).unwrap_or(
                if s.get("running").and_then(Value::as_bool) == Some(true) {
                    "running"
                } else {
                    "idle"
                },
            );
            json!({
                "sessionId": s.get("sessionId"),
                "workdir": s.get("workdir"),
                "title": s.get("title").filter(|t| !t.is_null()).or(s.get("lastPrompt")),
                "status": status,
                "mode": s.get("mode"),
                "running": s.get("running").and_then(Value::as_bool).unwrap_or(false),
                "lastActivityAt": s.get("lastActivityAt").filter(|t| !t.is_null()).or(s.get("createdAt")),
            })
        })
        .collect()
}

/// Runs the tool.
pub async fn call(state: &Arc<State>, args: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let args = Args::new(args, &["workdir", "includeClosed"])?;
    // A filter, not a place to work: a directory that does not exist lists nothing.
    let workdir = args.opt_abs_path("workdir")?;
    let include_closed = args.opt_bool("includeClosed")?.unwrap_or(false);
    let client = state.client().await.map_err(ToolError::Daemon)?;
    let mut params = json!({ "kinds": ["chat"], "includeClosed": include_closed });
    if let Some(dir) = &workdir {
        params["workdir"] = json!(dir);
    }
    let result = client
        .call("session.list", params)
        .await
        .map_err(native("session.list"))?;
    let rows = rows(&result);
    let text = if rows.is_empty() {
        "No sessions.".to_owned()
    } else {
        rows.iter()
            .map(|r| {
                let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
                format!(
                    "{}  {}  {}  {}",
                    s("sessionId"),
                    s("status"),
                    s("workdir"),
                    clip(s("title"), 120)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(ToolOutput::ok(text, json!({ "sessions": rows })))
}

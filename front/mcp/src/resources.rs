//! Session transcripts as MCP resources.
//!
//! * `resources/list` → `session.list {kinds: ["chat"]}`: one resource per live chat session,
//!   URI `snowpea://session/<sessionId>`, name = its title (else the id), `text/plain`.
//! * `resources/read {uri}` → `session.resume {sessionId, afterSeq: 0}` on the reader
//!   connection: the whole transcript as text ([`crate::transcript`]). A URI of another
//!   shape is invalid params; an unknown session is "resource not found" (-32002).
//! * `notifications/resources/list_changed` when a session is created, closed or renamed
//!   (`sessions.changed` with reason `create`, `close`, `renamed`), and
//!   `notifications/prompts/list_changed` on `commands.changed` ([`watch_sessions`]).

use std::sync::Arc;

use rmcp::model::{ListResourcesResult, ReadResourceResult};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};
use snowpea_sdk::Client;
use tokio::sync::broadcast::error::RecvError;

use crate::server::{wire, State};
use crate::transcript::clip;

/// The URI prefix of a session transcript.
pub const SESSION_URI: &str = "snowpea://session/";

/// Most resources listed.
pub const MAX_RESOURCES: usize = 500;

/// `sessions.changed` reasons that change the resource list.
pub const LIST_REASONS: [&str; 3] = ["create", "close", "renamed"];

/// The session id in a transcript URI; `None` when the URI is not one.
pub fn session_of(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix(SESSION_URI)?;
    let valid = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    valid.then_some(id)
}

/// `resources/list`.
pub async fn list(state: &Arc<State>) -> Result<ListResourcesResult, McpError> {
    let client = state
        .client()
        .await
        .map_err(|e| McpError::internal_error(e, None))?;
    let result = client
        .call("session.list", json!({ "kinds": ["chat"] }))
        .await
        .map_err(|e| McpError::internal_error(format!("session.list failed: {e}"), None))?;
    let rows = crate::tools::sessions::rows(&result);
    let resources: Vec<Value> = rows
        .iter()
        .take(MAX_RESOURCES)
        .filter_map(|r| {
            let id = r.get("sessionId")?.as_str()?;
            let title = r
                .get("title")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(|t| clip(t, 120))
                .unwrap_or_else(|| id.to_owned());
            Some(json!({
                "uri": format!("{SESSION_URI}{id}"),
                "name": title,
                "title": title,
                "description": format!(
                    "Transcript of Snowpea session {id} in {} ({})",
                    r.get("workdir").and_then(Value::as_str).unwrap_or("?"),
                    r.get("status").and_then(Value::as_str).unwrap_or("idle"),
                ),
                "mimeType": "text/plain",
            }))
        })
        .collect();
    wire(json!({ "resources": resources }))
}

/// `resources/read`.
pub async fn read(state: &Arc<State>, uri: &str) -> Result<ReadResourceResult, McpError> {
    let Some(session_id) = session_of(uri) else {
        return Err(McpError::invalid_params(
            format!(
                "uri: {:?} is not a Snowpea resource; the resources are {SESSION_URI}<sessionId>",
                clip(uri, 200)
            ),
            None,
        ));
    };
    let client = state
        .reader()
        .await
        .map_err(|e| McpError::internal_error(e, None))?;
    let events = crate::tools::session_history::events(&client, session_id, 0)
        .await
        .map_err(|e| match e.code_str() {
            Some("not_found") => McpError::resource_not_found(
                format!("no session {session_id}"),
                Some(json!({ "uri": uri })),
            ),
            _ => McpError::internal_error(format!("session.resume failed: {e}"), None),
        })?;
    wire(json!({
        "contents": [{
            "uri": uri,
            "mimeType": "text/plain",
            "text": crate::transcript::render(&events),
        }]
    }))
}

/// Tells the host when the session list or the commands change (while the client lives).
pub fn watch_sessions(state: &Arc<State>, client: &Arc<Client>) -> tokio::task::JoinHandle<()> {
    let mut rx = client.subscribe();
    let state = Arc::downgrade(state);
    tokio::spawn(async move {
        loop {
            let n = match rx.recv().await {
                Ok(n) => n,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            };
            let Some(state) = state.upgrade() else { return };
            let Some(peer) = state.peer() else { continue };
            let sent = match n.method.as_str() {
                "sessions.changed" => {
                    let reason = n.params.get("reason").and_then(Value::as_str).unwrap_or("");
                    if !LIST_REASONS.contains(&reason) {
                        continue;
                    }
                    peer.notify_resource_list_changed().await
                }
                "commands.changed" => peer.notify_prompt_list_changed().await,
                _ => continue,
            };
            if let Err(error) = sent {
                tracing::debug!(%error, "list-changed notification failed");
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::session_of;

    #[test]
    fn transcript_uris() {
        assert_eq!(session_of("snowpea://session/s_01abc"), Some("s_01abc"));
        assert_eq!(session_of("snowpea://session/"), None);
        assert_eq!(session_of("snowpea://session/a/b"), None);
        assert_eq!(session_of("file:///etc/passwd"), None);
    }
}

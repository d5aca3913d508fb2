//! `available_commands_update`: the session's slash commands from `command.list`, sent when
//! a session opens and again on every `commands.changed` notification. Names go without the
//! leading `/`; a command with an argument schema gets an input hint. Typing `/name args`
//! in the editor sends a prompt starting with `/`, which the daemon runs as the command.

use std::sync::Arc;

use serde_json::{json, Value};
use snowpea_sdk::Client;
use tokio::sync::broadcast::error::RecvError;

use crate::state::{AcpAgent, SessionLink};
use crate::updates::{send, truncate};
use crate::Conn;

/// Most commands sent in one update.
const MAX_COMMANDS: usize = 512;

/// The `available_commands_update` wire JSON for a `command.list` result.
pub fn commands_update(result: &Value) -> Value {
    let commands: Vec<Value> = result
        .get("commands")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(MAX_COMMANDS)
        .filter_map(|c| {
            let name = c
                .get("name")
                .and_then(Value::as_str)?
                .trim_start_matches('/');
            if name.is_empty() {
                return None;
            }
            let summary = c.get("summary").and_then(Value::as_str).unwrap_or_default();
            let mut command = json!({ "name": name, "description": truncate(summary, 500) });
            if c.get("argsSchema").is_some_and(|s| !s.is_null()) {
                command["input"] = json!({ "hint": "arguments" });
            }
            Some(command)
        })
        .collect();
    json!({ "sessionUpdate": "available_commands_update", "availableCommands": commands })
}

/// Sends the session's commands to the editor (`command.list {sessionId}`).
pub async fn send_commands(client: &Client, cx: &Conn, link: &SessionLink) {
    match client
        .call("command.list", json!({ "sessionId": link.id }))
        .await
    {
        Ok(result) => send(cx, &link.id, commands_update(&result)),
        Err(error) => tracing::warn!(%error, "command.list failed"),
    }
}

/// Refreshes every open session's commands on `commands.changed`.
pub fn watch_changes(agent: &Arc<AcpAgent>, client: &Arc<Client>) {
    let mut rx = client.subscribe();
    let agent = Arc::downgrade(agent);
    let client = Arc::downgrade(client);
    tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(n) if n.method == "commands.changed" => {}
                Ok(_) | Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            }
            let (Some(agent), Some(client)) = (agent.upgrade(), client.upgrade()) else {
                return;
            };
            let Some(cx) = agent.conn() else { continue };
            for link in agent.links() {
                send_commands(&client, &cx, &link).await;
            }
        }
    });
}

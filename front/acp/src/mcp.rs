//! The editor's `mcpServers` (`session/new`, `session/load`) → MCP servers of the session's
//! project through the native `mcp.add {scope: project, workdir, sessionId}`; each is named
//! `acp-<name>` and removed (`mcp.remove`) when the ACP session closes or `snowpea acp`
//! exits. stdio servers keep `command`, `args` and `env`; `http` and `sse` servers keep
//! `url` and `headers`.

use serde_json::{json, Map, Value};
use snowpea_sdk::Client;

use crate::state::{lock, SessionLink};
use crate::{errors, updates::truncate};

/// Most MCP servers one session may bring.
pub const MAX_SERVERS: usize = 32;

/// The native server name for an editor's server name: `acp-` + the name with every
/// character outside `[A-Za-z0-9_-]` replaced by `-`, at most 64 characters.
pub fn native_name(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    truncate(&format!("acp-{clean}"), 64)
        .trim_end_matches('…')
        .to_owned()
}

/// `[{name, value}]` → `{name: value}` (the native shape of `env` and `headers`).
fn pairs(list: Option<&Value>) -> Map<String, Value> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some((
                p.get("name")?.as_str()?.to_owned(),
                p.get("value")?.as_str()?.into(),
            ))
        })
        .collect()
}

/// The `mcp.add` params for one ACP `McpServer` (wire JSON).
pub fn add_params(
    server: &Value,
    link: &SessionLink,
) -> Result<Value, agent_client_protocol::Error> {
    let name = server
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| errors::invalid_params("an MCP server has no name"))?;
    let mut params = json!({
        "name": native_name(name),
        "scope": "project",
        "workdir": link.workdir,
        "sessionId": link.id,
        "force": true,
    });
    match server.get("type").and_then(Value::as_str) {
        Some(kind @ ("http" | "sse")) => {
            params["type"] = kind.into();
            params["url"] = server.get("url").cloned().unwrap_or(Value::Null);
            params["headers"] = Value::Object(pairs(server.get("headers")));
        }
        _ => {
            params["type"] = "stdio".into();
            params["command"] = server.get("command").cloned().unwrap_or(Value::Null);
            params["args"] = server.get("args").cloned().unwrap_or_else(|| json!([]));
            params["env"] = Value::Object(pairs(server.get("env")));
        }
    }
    Ok(params)
}

/// Adds the editor's servers for a session; the first failure is the error of
/// `session/new` / `session/load` (servers added before it stay registered on the link and
/// are removed with it).
pub async fn add_all(
    client: &Client,
    link: &SessionLink,
    servers: &[Value],
) -> Result<(), agent_client_protocol::Error> {
    if servers.len() > MAX_SERVERS {
        return Err(errors::invalid_params(format!(
            "at most {MAX_SERVERS} MCP servers per session"
        )));
    }
    for server in servers {
        let params = add_params(server, link)?;
        let name = params["name"].as_str().unwrap_or_default().to_owned();
        client
            .call("mcp.add", params)
            .await
            .map_err(|e| errors::from_native("mcp.add", &e))?;
        lock(&link.mcp_servers).push(name);
    }
    Ok(())
}

/// Removes every server added for the link (errors are logged: the entry may be gone).
pub async fn remove_all(client: &Client, link: &SessionLink) {
    let names = std::mem::take(&mut *lock(&link.mcp_servers));
    for name in names {
        let params = json!({ "name": name, "scope": "project", "workdir": link.workdir });
        if let Err(error) = client.call("mcp.remove", params).await {
            tracing::warn!(%error, name, "mcp.remove failed");
        }
    }
}

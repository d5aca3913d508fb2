//! The session's slash commands and skills as MCP prompts.
//!
//! * `prompts/list` → `command.list {sessionId?}` (the session of the last `snowpea_prompt`,
//!   else the global table; user-invocable skills are in it as commands): one prompt per
//!   command, named as the command without its `/`, with its summary and one optional
//!   argument `args` (the text after the command).
//! * `prompts/get {name, arguments: {args?}}`: a user message asking to run `/<name> <args>`
//!   in Snowpea with `snowpea_prompt` (in the last session when there is one). Running the
//!   command is Snowpea's business, so the prompt hands it over rather than copying it.
//!   An unknown name or a non-string `args` is invalid params.

use std::sync::Arc;

use rmcp::model::{GetPromptRequestParams, GetPromptResult, ListPromptsResult};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};

use crate::server::{lock, wire, State};
use crate::transcript::clip;

/// Most prompts listed.
pub const MAX_PROMPTS: usize = 512;

/// The commands: of the last session, else the global table.
async fn commands(state: &Arc<State>) -> Result<(Vec<Value>, Option<String>), McpError> {
    let client = state
        .client()
        .await
        .map_err(|e| McpError::internal_error(e, None))?;
    let session = lock(&state.last_session).clone();
    let mut result = None;
    if let Some(id) = &session {
        result = client
            .call("command.list", json!({ "sessionId": id }))
            .await
            .ok();
    }
    let (result, session) = match result {
        Some(r) => (r, session),
        None => (
            client
                .call("command.list", json!({}))
                .await
                .map_err(|e| McpError::internal_error(format!("command.list failed: {e}"), None))?,
            None,
        ),
    };
    let commands = result
        .get("commands")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Ok((commands, session))
}

fn name_of(command: &Value) -> Option<&str> {
    command
        .get("name")
        .and_then(Value::as_str)
        .map(|n| n.trim_start_matches('/'))
        .filter(|n| !n.is_empty())
}

/// `prompts/list`.
pub async fn list(state: &Arc<State>) -> Result<ListPromptsResult, McpError> {
    let (commands, _) = commands(state).await?;
    let prompts: Vec<Value> = commands
        .iter()
        .take(MAX_PROMPTS)
        .filter_map(|c| {
            let name = name_of(c)?;
            let source = c.get("source").and_then(Value::as_str).unwrap_or("builtin");
            let summary = c.get("summary").and_then(Value::as_str).unwrap_or_default();
            Some(json!({
                "name": name,
                "title": format!("/{name}"),
                "description": format!("{} ({source})", clip(summary, 500)),
                "arguments": [{
                    "name": "args",
                    "description": format!("What follows /{name} (optional)"),
                    "required": false,
                }],
            }))
        })
        .collect();
    wire(json!({ "prompts": prompts }))
}

/// `prompts/get`.
pub async fn get(
    state: &Arc<State>,
    request: &GetPromptRequestParams,
) -> Result<GetPromptResult, McpError> {
    let args = match request.arguments.as_ref().and_then(|a| a.get("args")) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) if s.len() <= crate::args::MAX_STRING_BYTES => s.clone(),
        Some(Value::String(_)) => {
            return Err(McpError::invalid_params(
                "arguments.args: is too long",
                None,
            ))
        }
        Some(_) => {
            return Err(McpError::invalid_params(
                "arguments.args: must be a string",
                None,
            ))
        }
    };
    let (commands, session) = commands(state).await?;
    let Some(command) = commands
        .iter()
        .find(|c| name_of(c) == Some(request.name.as_str()))
    else {
        return Err(McpError::invalid_params(
            format!(
                "name: no Snowpea command {:?} (prompts/list lists them)",
                clip(&request.name, 80)
            ),
            None,
        ));
    };
    let text = if args.trim().is_empty() {
        format!("/{}", request.name)
    } else {
        format!("/{} {}", request.name, args.trim())
    };
    let target = match &session {
        Some(id) => format!(" with sessionId \"{id}\""),
        None => String::new(),
    };
    let summary = command
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or_default();
    wire(json!({
        "description": clip(summary, 500),
        "messages": [{
            "role": "user",
            "content": {
                "type": "text",
                "text": format!(
                    "Run the Snowpea command {text:?} ({}): call the snowpea_prompt tool with text {text:?}{target}, then report its answer.",
                    clip(summary, 200)
                ),
            },
        }],
    }))
}

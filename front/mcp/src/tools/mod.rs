//! The MCP tools, one file each: its name, its definition (description written for a model
//! to choose well, JSON Schema of the arguments) and its call. Every call:
//! * reads its arguments with [`crate::args::Args`]: a bad argument is a tool error naming the
//!   field (`invalid argument sessionId: must be a string, not a number`), never a panic;
//! * makes native protocol calls through the Rust SDK; a refused call is a tool error
//!   `<method> failed: <message> (<code>)`;
//! * answers text content (what a model reads) plus `structuredContent` (the same facts as
//!   JSON, for hosts that use it).
//!
//! | tool | native calls |
//! |---|---|
//! | [`prompt`] `snowpea_prompt` | `session.create`/`resume`/`attach`/`setMode`, `session.prompt`, `session.interrupt` |
//! | [`sessions`] `snowpea_sessions` | `session.list` |
//! | [`session_history`] `snowpea_session_history` | `session.resume` |
//! | [`memory_search`] `snowpea_memory_search` | `memory.search` |
//! | [`memory_write`] `snowpea_memory_write` | `memory.write` |
//! | [`schedule`] `snowpea_schedule` | `job.schedule` |
//! | [`jobs`] `snowpea_jobs` | `job.list` |

pub mod jobs;
pub mod memory_search;
pub mod memory_write;
pub mod prompt;
pub mod schedule;
pub mod session_history;
pub mod sessions;

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{json, Map, Value};

use crate::args::ArgError;
use crate::server::{wire, State};

/// Why a tool call failed; shown to the host as the tool's error text.
#[derive(Debug)]
pub enum ToolError {
    /// A bad argument (names the field).
    Args(ArgError),
    /// The daemon could not be reached (or started).
    Daemon(String),
    /// A native call was refused or failed.
    Native {
        /// The native method, e.g. `memory.search`.
        method: &'static str,
        /// What the SDK reported.
        error: snowpea_sdk::Error,
    },
    /// Anything else, said for humans.
    Other(String),
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolError::Args(e) => write!(f, "{e}"),
            ToolError::Daemon(e) | ToolError::Other(e) => write!(f, "{e}"),
            ToolError::Native { method, error } => match error.code_str() {
                Some(code) => write!(f, "{method} failed: {error} ({code})"),
                None => write!(f, "{method} failed: {error}"),
            },
        }
    }
}

impl From<ArgError> for ToolError {
    fn from(e: ArgError) -> Self {
        ToolError::Args(e)
    }
}

/// A native call's error, naming the method.
pub fn native(method: &'static str) -> impl FnOnce(snowpea_sdk::Error) -> ToolError {
    move |error| ToolError::Native { method, error }
}

/// What a tool answers: text for the model, and the same facts as JSON.
pub struct ToolOutput {
    /// The text content.
    pub text: String,
    /// `structuredContent` (an object), if any.
    pub structured: Option<Value>,
    /// True when the tool ran but its work failed (`isError`).
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful answer.
    pub fn ok(text: impl Into<String>, structured: Value) -> Self {
        ToolOutput {
            text: text.into(),
            structured: Some(structured),
            is_error: false,
        }
    }
}

/// Every tool's definition (`tools/list`).
pub fn definitions() -> Vec<Value> {
    vec![
        prompt::definition(),
        sessions::definition(),
        session_history::definition(),
        memory_search::definition(),
        memory_write::definition(),
        schedule::definition(),
        jobs::definition(),
    ]
}

/// A tool definition's JSON.
pub fn definition(
    name: &str,
    title: &str,
    description: &str,
    input_schema: Value,
    read_only: bool,
) -> Value {
    json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": input_schema,
        "annotations": {
            "title": title,
            "readOnlyHint": read_only,
            "destructiveHint": false,
            "openWorldHint": !read_only,
        },
    })
}

/// `tools/call`: runs the named tool. An unknown tool is a protocol error (invalid params);
/// everything that goes wrong inside a tool is a tool result with `isError: true`.
pub async fn call(
    state: &Arc<State>,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResult, McpError> {
    let empty = Map::new();
    let args = request.arguments.as_ref().unwrap_or(&empty);
    let outcome = match request.name.as_ref() {
        prompt::NAME => prompt::call(state, args, &request, &context).await,
        sessions::NAME => sessions::call(state, args).await,
        session_history::NAME => session_history::call(state, args).await,
        memory_search::NAME => memory_search::call(state, args).await,
        memory_write::NAME => memory_write::call(state, args).await,
        schedule::NAME => schedule::call(state, args).await,
        jobs::NAME => jobs::call(state, args).await,
        other => {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool {:?}; the tools are {}",
                    crate::transcript::clip(other, 80),
                    definitions()
                        .iter()
                        .filter_map(|d| d["name"].as_str().map(str::to_owned))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None,
            ))
        }
    };
    let output = outcome.unwrap_or_else(|e| ToolOutput {
        text: e.to_string(),
        structured: None,
        is_error: true,
    });
    let mut result = json!({
        "content": [{ "type": "text", "text": output.text }],
        "isError": output.is_error,
    });
    if let Some(structured) = output.structured {
        result["structuredContent"] = structured;
    }
    wire(result)
}

#[cfg(test)]
mod tests {
    /// docs/MCP-SERVER.md shows each tool's input schema exactly as `tools/list` sends it
    /// (the first JSON block of the tool's section), descriptions included.
    #[test]
    fn the_docs_show_the_schemas_the_server_sends() {
        let docs = include_str!("../../../../docs/MCP-SERVER.md");
        for definition in super::definitions() {
            let name = definition["name"].as_str().unwrap();
            let section = docs
                .split_once(&format!("### `{name}`"))
                .unwrap_or_else(|| panic!("no section for {name}"))
                .1;
            let block = section
                .split_once("```json\n")
                .and_then(|(_, rest)| rest.split_once("```"))
                .unwrap_or_else(|| panic!("no JSON block for {name}"))
                .0;
            let documented: serde_json::Value = serde_json::from_str(block)
                .unwrap_or_else(|e| panic!("{name}'s documented schema: {e}"));
            assert_eq!(documented, definition["inputSchema"], "{name}");
        }
    }
}

//! `snowpea_memory_write{text, tags?}` → `memory.write {text, tags}`: stores a memory the
//! agent will recall in later turns (the `default` namespace).
//!
//! `text` is at most [`MAX_MEMORY_BYTES`] (64 KiB, the memory service's bound), checked here
//! so a longer one is an argument error naming `text`.
//!
//! Text: `Stored memory <id>.` Structured: `{id}`.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{definition as def, native, ToolError, ToolOutput};
use crate::args::{Args, MAX_MEMORY_BYTES, MAX_TAGS};
use crate::server::State;

/// The tool's name.
pub const NAME: &str = "snowpea_memory_write";

/// The tool's definition.
pub fn definition() -> Value {
    def(
        NAME,
        "Store a Snowpea memory",
        "Store a fact in the long-term memory of the Snowpea agent, so its later sessions \
         recall it (e.g. a user preference, a project convention, a decision). Keep one fact \
         per memory; tags help find it again.",
        json!({
            "type": "object",
            "properties": {
                "text": {
                    "type": "string",
                    "description": "The fact to remember, as a self-contained sentence. At most 64 KiB (65536 bytes)."
                },
                "tags": {
                    "type": "array",
                    "items": { "type": "string" },
                    "maxItems": MAX_TAGS,
                    "description": "Optional tags, e.g. [\"preference\", \"python\"]."
                }
            },
            "required": ["text"],
            "additionalProperties": false
        }),
        false,
    )
}

/// Runs the tool.
pub async fn call(state: &Arc<State>, args: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let args = Args::new(args, &["text", "tags"])?;
    let text = args.str_max("text", MAX_MEMORY_BYTES)?;
    let tags = args.opt_strings("tags", MAX_TAGS)?;
    let client = state.client().await.map_err(ToolError::Daemon)?;
    let result = client
        .call("memory.write", json!({ "text": text, "tags": tags }))
        .await
        .map_err(native("memory.write"))?;
    let id = result
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok(ToolOutput::ok(
        format!("Stored memory {id}."),
        json!({ "id": id }),
    ))
}

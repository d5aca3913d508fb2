//! `snowpea_memory_search{query}` → `memory.search {query}`: what the agent remembers that
//! matches, best first (the `default` namespace, the same the agent recalls from before each
//! turn).
//!
//! Text: one line per hit, `<id>  [tags]  <text>`. Structured: `{hits: [{id, text, tags,
//! score, scope}]}` as the daemon answered.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{definition as def, native, ToolError, ToolOutput};
use crate::args::Args;
use crate::server::State;
use crate::transcript::clip;

/// The tool's name.
pub const NAME: &str = "snowpea_memory_search";

/// Most hits asked for.
pub const LIMIT: u64 = 20;

/// The tool's definition.
pub fn definition() -> Value {
    def(
        NAME,
        "Search Snowpea's memory",
        "Search the long-term memory the Snowpea agent keeps across sessions (facts, \
         preferences, decisions it or the user stored) by words; returns the best matches \
         with their ids and tags.",
        json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Free-text query (words to match)."
                }
            },
            "required": ["query"],
            "additionalProperties": false
        }),
        true,
    )
}

/// Runs the tool.
pub async fn call(state: &Arc<State>, args: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let args = Args::new(args, &["query"])?;
    let query = args.str("query")?;
    let client = state.client().await.map_err(ToolError::Daemon)?;
    let result = client
        .call("memory.search", json!({ "query": query, "limit": LIMIT }))
        .await
        .map_err(native("memory.search"))?;
    let hits: Vec<Value> = result
        .get("hits")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text = if hits.is_empty() {
        format!("No memories match {:?}.", clip(query, 200))
    } else {
        hits.iter()
            .map(|h| {
                let tags: Vec<&str> = h
                    .get("tags")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let tags = if tags.is_empty() {
                    String::new()
                } else {
                    format!("[{}]  ", tags.join(", "))
                };
                format!(
                    "{}  {tags}{}",
                    h.get("id").and_then(Value::as_str).unwrap_or_default(),
                    clip(
                        h.get("text").and_then(Value::as_str).unwrap_or_default(),
                        2_000
                    )
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(ToolOutput::ok(text, json!({ "hits": hits })))
}

//! Deferred host tools (`tool.register{deferred: true}`, issue 21): the model sees them by
//! name only (a line of the system prompt) and loads their description and schema on
//! demand with the `tool_search` tool; a loaded tool is offered like any other from the
//! next model call of the turn.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::invoke::TOOL_SEARCH;
use super::HostTool;
use crate::tools::{args, Permission, Tool, ToolContext, ToolOutput, ToolPlan};
use snowpea_session_llm::provider::ToolSpec;

/// Most tools one search loads.
pub const MAX_RESULTS: usize = 8;

/// The `tool_search` tool of one turn, over the host's deferred tools.
pub struct ToolSearch {
    deferred: Vec<Arc<HostTool>>,
    loaded: Arc<Mutex<HashSet<String>>>,
}

impl ToolSearch {
    /// Search over `deferred`; loaded names are shared with the turn through `loaded`.
    pub fn new(deferred: Vec<Arc<HostTool>>, loaded: Arc<Mutex<HashSet<String>>>) -> Self {
        ToolSearch { deferred, loaded }
    }

    /// The system-prompt line naming the deferred tools.
    pub fn prompt_line(&self) -> String {
        let names: Vec<&str> = self.deferred.iter().map(|t| t.def.name.as_str()).collect();
        format!(
            "\n\nMore tools of the connected client are available but not loaded: {}. Call `{TOOL_SEARCH}` with a query (or a tool's exact name) to load the ones you need before calling them.",
            names.join(", ")
        )
    }

    /// Names loaded so far.
    pub fn loaded(&self) -> HashSet<String> {
        self.loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The deferred tools that match `query` (exact name first, then every query word in
    /// the name or description), at most [`MAX_RESULTS`].
    pub fn search(&self, query: &str) -> Vec<Arc<HostTool>> {
        let q = query.trim().to_lowercase();
        if let Some(t) = self
            .deferred
            .iter()
            .find(|t| t.def.name.to_lowercase() == q)
        {
            return vec![t.clone()];
        }
        let words: Vec<&str> = q.split_whitespace().collect();
        self.deferred
            .iter()
            .filter(|t| {
                let hay = format!("{} {}", t.def.name, t.def.description).to_lowercase();
                !words.is_empty() && words.iter().any(|w| hay.contains(w))
            })
            .take(MAX_RESULTS)
            .cloned()
            .collect()
    }
}

impl Tool for ToolSearch {
    fn name(&self) -> &'static str {
        TOOL_SEARCH
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TOOL_SEARCH.into(),
            description: "Load deferred tools of the connected client by name or keywords; their descriptions and argument schemas come back, and they can be called from the next step on.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"query": {"type": "string", "description": "A tool name or keywords."}},
                "required": ["query"],
            }),
        }
    }

    fn permission(&self) -> Permission {
        Permission::Read
    }

    fn category(&self) -> &'static str {
        "host"
    }

    fn plan(&self, a: &Value, _workdir: &Path) -> Result<ToolPlan, String> {
        args::object(a)?;
        let q = args::required_str(a, "query")?;
        Ok(ToolPlan {
            permission: Permission::Read,
            outside_workdir: vec![],
            summary: format!("tool_search {}", args::one_line(q, 60)),
        })
    }

    fn run(&self, a: Value, _ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let query = a
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let found = self.search(&query);
        {
            let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
            loaded.extend(found.iter().map(|t| t.def.name.clone()));
        }
        let out = if found.is_empty() {
            ToolOutput::error(format!("no deferred tool matches {query:?}"))
        } else {
            let listed: Vec<Value> = found
                .iter()
                .map(|t| json!({"name": t.def.name, "description": t.def.description, "inputSchema": t.def.input_schema}))
                .collect();
            ToolOutput {
                ok: true,
                content: serde_json::to_string_pretty(&listed).unwrap_or_default(),
                meta: json!({"loaded": found.iter().map(|t| t.def.name.clone()).collect::<Vec<_>>()}),
                diff: None,
            }
        };
        Box::pin(async move { out })
    }
}

//! Agent tools backed by svc-memory: `save_memory{text, tags?}` (permission `write`: it
//! changes what later sessions recall) stores into the session's project namespace;
//! `search_memory{query, limit?}` (permission `read`) searches the project and global
//! namespaces. When svc-memory is down they fail with a clear error, never a hang.

use std::path::Path;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::clients::memory::{session_namespaces, MemoryClient};
use crate::tools::{args, Permission, Tool, ToolContext, ToolOutput, ToolPlan};
use snowpea_session_llm::provider::ToolSpec;

/// Most results of one `search_memory` call.
pub const MAX_SEARCH_RESULTS: u64 = 20;

fn tags_arg(v: &Value) -> Result<Vec<String>, String> {
    match args::object(v)?.get("tags") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| "argument `tags` must be an array of strings".to_string())
            })
            .collect(),
        Some(_) => Err("argument `tags` must be an array of strings".into()),
    }
}

/// `save_memory`.
#[derive(Debug, Clone)]
pub struct SaveMemory {
    client: MemoryClient,
}

impl SaveMemory {
    /// The tool, writing through `client`.
    pub fn new(client: MemoryClient) -> Self {
        SaveMemory { client }
    }
}

impl Tool for SaveMemory {
    fn name(&self) -> &'static str {
        "save_memory"
    }

    fn permission(&self) -> Permission {
        Permission::Write
    }

    fn category(&self) -> &'static str {
        "memory"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: "Remember a fact for later sessions in this project (a preference, a decision, \
                          where something lives). Save short, self-contained statements; never save secrets."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "text": { "type": "string", "description": "The fact to remember." },
                    "tags": { "type": "array", "items": { "type": "string" }, "description": "Optional tags." }
                },
                "required": ["text"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, a: &Value, _workdir: &Path) -> Result<ToolPlan, String> {
        let text = args::required_str(a, "text")?;
        if text.trim().is_empty() {
            return Err("argument `text` must not be empty".into());
        }
        tags_arg(a)?;
        Ok(ToolPlan {
            permission: self.permission(),
            outside_workdir: vec![],
            summary: format!("save_memory: {}", args::one_line(text, 60)),
        })
    }

    fn run(&self, a: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let client = self.client.clone();
        Box::pin(async move {
            let (text, tags) = match (args::required_str(&a, "text"), tags_arg(&a)) {
                (Ok(t), Ok(tags)) => (t.to_owned(), tags),
                (Err(e), _) | (_, Err(e)) => return ToolOutput::error(e),
            };
            // A named agent's own session remembers in its namespace (issue 19).
            let ns = match &ctx.named_agent {
                Some(a) => crate::agents::named::namespace(a),
                None => format!("project:{}", ctx.workdir.display()),
            };
            match client.write(&ns, &text, tags).await {
                Ok(id) => ToolOutput {
                    ok: true,
                    content: format!("Saved memory {id}."),
                    meta: json!({ "id": id, "namespace": ns }),
                    diff: None,
                },
                Err(e) => ToolOutput::error(format!("save_memory failed: {e}")),
            }
        })
    }
}

/// `search_memory`.
#[derive(Debug, Clone)]
pub struct SearchMemory {
    client: MemoryClient,
}

impl SearchMemory {
    /// The tool, searching through `client`.
    pub fn new(client: MemoryClient) -> Self {
        SearchMemory { client }
    }
}

impl Tool for SearchMemory {
    fn name(&self) -> &'static str {
        "search_memory"
    }

    fn permission(&self) -> Permission {
        Permission::Read
    }

    fn category(&self) -> &'static str {
        "memory"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: format!(
                "Search saved memories of this project and global ones, best match first. Partial words \
                 and any language work. At most {MAX_SEARCH_RESULTS} results (default 8)."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "What to look for." },
                    "limit": { "type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, a: &Value, _workdir: &Path) -> Result<ToolPlan, String> {
        let q = args::required_str(a, "query")?;
        if q.trim().is_empty() {
            return Err("argument `query` must not be empty".into());
        }
        args::optional_u64(a, "limit")?;
        Ok(ToolPlan {
            permission: self.permission(),
            outside_workdir: vec![],
            summary: format!("search_memory: {}", args::one_line(q, 60)),
        })
    }

    fn run(&self, a: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let client = self.client.clone();
        Box::pin(async move {
            let query = match args::required_str(&a, "query") {
                Ok(q) => q.to_owned(),
                Err(e) => return ToolOutput::error(e),
            };
            let limit = match args::optional_u64(&a, "limit") {
                Ok(n) => n.unwrap_or(8).clamp(1, MAX_SEARCH_RESULTS) as usize,
                Err(e) => return ToolOutput::error(e),
            };
            let root = ctx.workdir.display().to_string();
            match client
                .search_many(
                    &session_namespaces(&root, ctx.named_agent.as_deref()),
                    &query,
                    limit,
                )
                .await
            {
                Ok(hits) if hits.is_empty() => ToolOutput {
                    ok: true,
                    content: "No saved memories match.".into(),
                    meta: json!({ "hits": 0 }),
                    diff: None,
                },
                Ok(hits) => {
                    let content = hits
                        .iter()
                        .map(|h| {
                            let tags = if h.tags.is_empty() {
                                String::new()
                            } else {
                                format!(" [{}]", h.tags.join(", "))
                            };
                            format!("- ({}) {}{}", h.scope, h.text.replace('\n', " "), tags)
                        })
                        .collect::<Vec<_>>()
                        .join("\n");
                    ToolOutput {
                        ok: true,
                        content,
                        meta: json!({ "hits": hits.len() }),
                        diff: None,
                    }
                }
                Err(e) => ToolOutput::error(format!("search_memory failed: {e}")),
            }
        })
    }
}

/// The memory tools of a session service on `home` (offered after the built-in tools).
pub fn for_home(home: &snowpea_common::home::Home) -> Vec<std::sync::Arc<dyn Tool>> {
    let client = MemoryClient::new(home.socket("memory"));
    vec![
        std::sync::Arc::new(SaveMemory::new(client.clone())),
        std::sync::Arc::new(SearchMemory::new(client)),
    ]
}

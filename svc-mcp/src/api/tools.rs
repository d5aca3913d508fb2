//! [`ToolsApi`]: the logic of `McpInternalService` (proto `internal.proto`): the MCP tools
//! svc-session offers in a turn and the calls it makes (issue 6 "Sessions"); `rpc/internal.rs`
//! only implements the generated trait over it.
//!
//! A call runs under the server's `toolTimeoutSec`; everything that goes wrong at run time
//! is an `ok: false` reply with `errorKind` in the meta, so the session reports it to the
//! model as a failed tool result and the turn goes on. `errorKind`: `not_ready` (the server
//! is not ready), `timeout` (no answer within `toolTimeoutSec`; the server is then pinged in
//! the background and, if it leaves that unanswered too, reported not responding and
//! restarted), `server_exited` / `not_responding` (the connection ended during the call: the
//! process exited, or the server hung and was killed; the text names the server and says
//! why), `protocol` (the server answered with an error), `tool_error` (the tool's own
//! `isError` result).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use snowpea_proto::mcp::v1::{
    CallToolReply, CallToolRequest, ListToolsReply, ListToolsRequest, McpImage, McpServerState,
    McpTool,
};

use crate::clip::clip;
use crate::config;
use crate::error::{Error, Result};
use crate::host::server::State;
use crate::rpc::App;

/// Longest wait a `ListTools{wait_ms}` may ask for.
const MAX_LIST_WAIT: Duration = Duration::from_secs(60);

/// The internal tool logic over the service state.
#[derive(Debug, Clone)]
pub struct ToolsApi {
    app: Arc<App>,
}

impl ToolsApi {
    /// The logic over `app`.
    pub fn new(app: Arc<App>) -> Self {
        ToolsApi { app }
    }

    /// The project of a call: `workdir` (absolute, at most 4096 bytes, else
    /// `invalid_params`). Only an existing folder is remembered and has its project servers
    /// hosted; a session whose folder is gone still sees the global servers.
    async fn root(&self, workdir: &str) -> Result<Option<PathBuf>> {
        if workdir.is_empty() {
            return Ok(None);
        }
        crate::sessions::check_workdir_shape(workdir, "workdir")?;
        let p = crate::sessions::canonical(std::path::Path::new(workdir));
        if p.is_dir() {
            self.app.host.ensure_root(&p).await;
        }
        Ok(Some(p))
    }

    /// `ListTools`: the tools of the servers a session in `workdir` sees.
    pub async fn list_tools(&self, req: ListToolsRequest) -> Result<ListToolsReply> {
        let root = self.root(&req.workdir).await?;
        if req.wait_ms > 0 {
            let wait = Duration::from_millis(req.wait_ms as u64).min(MAX_LIST_WAIT);
            self.app.host.settle(root.as_deref(), wait).await;
        }
        let home = self.app.host.home();
        let mut tools = Vec::new();
        let mut servers = Vec::new();
        for h in self.app.host.view(root.as_deref()) {
            let d = &h.declared;
            if !d.entry.enabled() {
                continue;
            }
            let status = h.status();
            servers.push(McpServerState {
                name: d.name.clone(),
                state: status.state.as_str().into(),
                error: status.error.clone(),
            });
            if status.state != State::Ready {
                continue;
            }
            let permission = config::permission(home, &d.name);
            for t in status.tools.iter() {
                tools.push(McpTool {
                    server: d.name.clone(),
                    name: t.name.to_string(),
                    description: t.description.as_deref().unwrap_or_default().to_owned(),
                    input_schema_json: serde_json::to_string(&*t.input_schema)
                        .unwrap_or_else(|_| "{}".into()),
                    permission: permission.clone(),
                    transport: d.entry.transport().as_str().into(),
                    scope: d.scope.as_str().into(),
                    tool_timeout_sec: d.entry.tool_timeout().as_secs() as i64,
                });
            }
        }
        Ok(ListToolsReply { tools, servers })
    }

    /// `CallTool`: one tool call, under the server's `toolTimeoutSec`.
    pub async fn call_tool(&self, req: CallToolRequest) -> Result<CallToolReply> {
        let root = self.root(&req.workdir).await?;
        let handle = self
            .app
            .host
            .get(root.as_deref(), &req.server)
            .ok_or_else(|| Error::NotFound(format!("no MCP server named {:?}", req.server)))?;
        let arguments: serde_json::Map<String, Value> = if req.arguments_json.trim().is_empty() {
            Default::default()
        } else {
            match serde_json::from_str::<Value>(&req.arguments_json) {
                Ok(Value::Object(m)) => m,
                Ok(Value::Null) => Default::default(),
                _ => {
                    return Err(Error::invalid_params(
                        "arguments_json",
                        "must be a JSON object",
                    ))
                }
            }
        };
        let status = handle.status();
        let meta = |kind: Option<&str>, elapsed: u128| {
            let mut m =
                json!({"server": req.server, "tool": req.tool, "elapsedMs": elapsed as u64});
            if let Some(k) = kind {
                m["errorKind"] = json!(k);
            }
            m
        };
        // A call that did not reach a result: `ok: false` with `errorKind` (module doc).
        let failed = |kind: &str, content: String, elapsed: u128| CallToolReply {
            ok: false,
            content,
            is_error: false,
            meta_json: meta(Some(kind), elapsed).to_string(),
            images: Vec::new(),
        };
        let live = match (status.state, handle.live()) {
            (State::Ready, Some(live)) => live,
            (state, _) => {
                let why = match (state, status.error) {
                    (State::Error, Some(e)) => {
                        format!("MCP server {} is in error: {e}", req.server)
                    }
                    (State::Starting, _) => format!("MCP server {} is still starting", req.server),
                    _ => format!("MCP server {} is {}", req.server, state.as_str()),
                };
                return Ok(failed("not_ready", why, 0));
            }
        };
        if !status.tools.iter().any(|t| t.name == req.tool) {
            return Err(Error::EntityNotFound(format!(
                "MCP server {} offers no tool {:?}",
                req.server, req.tool
            )));
        }
        let timeout = handle.declared.entry.tool_timeout();
        let params =
            rmcp::model::CallToolRequestParams::new(req.tool.clone()).with_arguments(arguments);
        let started = Instant::now();
        tracing::info!(
            server = %clip(&req.server),
            tool = %clip(&req.tool),
            call_id = %clip(&req.call_id),
            "MCP tool call"
        );
        let mut rx = handle.subscribe();
        let outcome = {
            let _in_flight = handle.begin_call();
            tokio::select! {
                r = tokio::time::timeout(timeout, live.peer.call_tool(params)) => r.map(Some),
                // The connection ended under the call (exit, crash, hang): fail it at once.
                _ = rx.wait_for(|s| s.state != State::Ready) => Ok(None),
            }
        };
        let elapsed = started.elapsed().as_millis();
        // Why the connection is gone, from the supervisor: (errorKind, text).
        let ended = |after: crate::host::server::Status, fallback: String| {
            let kind = if after.not_responding {
                "not_responding"
            } else {
                "server_exited"
            };
            let why = after.error.unwrap_or(fallback);
            (
                kind,
                format!("MCP server {} stopped during the call: {why}", req.server),
            )
        };
        match outcome {
            Ok(None) => {
                let (kind, content) = ended(handle.status(), "it stopped".into());
                Ok(failed(kind, content, elapsed))
            }
            Err(_) => {
                // Slow tool or hung server? In the background (the caller is not kept
                // waiting): a server that cannot even answer a ping is reported not
                // responding, then killed and restarted; calls still in flight fail with it.
                if handle.live().is_some_and(|l| l.epoch == live.epoch) {
                    let handle = handle.clone();
                    let tool = req.tool.clone();
                    tokio::spawn(async move {
                        if let Some(why) = handle.answers_ping(&live.peer).await {
                            tracing::warn!(server = %handle.declared.name, tool = %clip(&tool), reason = %why, "MCP call timed out and the server does not answer ping");
                            handle.report_not_responding(
                                live.epoch,
                                format!(
                                    "a call of {tool} got no answer within {}s (toolTimeoutSec), then {why}",
                                    timeout.as_secs()
                                ),
                            );
                        }
                    });
                }
                let content = format!(
                    "MCP tool {}/{} did not answer within {}s (toolTimeoutSec)",
                    req.server,
                    req.tool,
                    timeout.as_secs()
                );
                Ok(failed("timeout", content, elapsed))
            }
            Ok(Some(Err(e))) => {
                // For people: the cause, never rmcp's transport type names.
                let e = crate::host::connect::error_reason(&e).1;
                // A transport failure: the server died mid-call. Let the supervisor record why.
                let _ = tokio::time::timeout(
                    Duration::from_millis(1500),
                    rx.wait_for(|s| s.state != State::Ready),
                )
                .await;
                let after = handle.status();
                let (kind, content) = match after.state {
                    State::Ready => (
                        "protocol",
                        format!("MCP tool {}/{} failed: {e}", req.server, req.tool),
                    ),
                    _ => ended(after, e),
                };
                Ok(failed(kind, content, elapsed))
            }
            Ok(Some(Ok(result))) => {
                let v = serde_json::to_value(&result).unwrap_or(Value::Null);
                let (content, images) = render(&v);
                let is_error = v.get("isError").and_then(Value::as_bool).unwrap_or(false);
                let mut m = meta(is_error.then_some("tool_error"), elapsed);
                if let Some(s) = v.get("structuredContent") {
                    m["structuredContent"] = s.clone();
                }
                Ok(CallToolReply {
                    ok: !is_error,
                    content,
                    is_error,
                    meta_json: m.to_string(),
                    images,
                })
            }
        }
    }
}

/// The text of a `CallToolResult` (text blocks joined by newlines; other blocks summarised)
/// and its images.
pub fn render(result: &Value) -> (String, Vec<McpImage>) {
    let mut parts = Vec::new();
    let mut images = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let s = |k: &str| {
            block
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        match block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "text" => parts.push(s("text")),
            "image" => {
                let data = s("data");
                parts.push(format!(
                    "[image {} ({} bytes base64)]",
                    s("mimeType"),
                    data.len()
                ));
                images.push(McpImage {
                    mime_type: s("mimeType"),
                    data,
                });
            }
            "audio" => parts.push(format!("[audio {}]", s("mimeType"))),
            "resource" => {
                let r = block.get("resource").cloned().unwrap_or(Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or_default();
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => parts.push(format!("[resource {uri}]\n{t}")),
                    None => parts.push(format!("[resource {uri} (binary)]")),
                }
            }
            "resource_link" => parts.push(format!("[resource link {}]", s("uri"))),
            other => parts.push(format!("[{other} content]")),
        }
    }
    if parts.is_empty() {
        if let Some(sc) = result.get("structuredContent") {
            parts.push(sc.to_string());
        }
    }
    (parts.join("\n"), images)
}

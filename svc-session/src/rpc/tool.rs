//! `ToolService`: `tool.list` (the built-in tools and the MCP tools of ready servers; host
//! tools are not supported yet).

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::tool_service_server::{ToolService, ToolServiceServer};
use tonic::{Request, Response, Status};

use super::span;
use crate::app::App;
use crate::error::Error;
use crate::tools::Tool;

/// The `snowpea.session.v1.ToolService` server.
#[derive(Debug, Clone)]
pub struct ToolRpc {
    app: Arc<App>,
}

impl ToolRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        ToolRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> ToolServiceServer<Self> {
        ToolServiceServer::new(self)
    }
}

/// Permission tag and category of a built-in tool, as `tool.list` reports them (the
/// tag a call gets is decided per call by `Tool::plan`; these are the usual ones).
pub fn listed_tag(name: &str) -> (&'static str, &'static str) {
    match name {
        "read_file" | "list_dir" => ("read", "files"),
        "write_file" | "edit_file" => ("write", "files"),
        "glob" | "grep" => ("read", "search"),
        "shell" => ("exec", "shell"),
        "save_memory" => ("write", "memory"),
        "search_memory" => ("read", "memory"),
        _ => ("read", "builtin"),
    }
}

#[tonic::async_trait]
impl ToolService for ToolRpc {
    async fn list(
        &self,
        req: Request<pb::ToolListParams>,
    ) -> Result<Response<pb::ToolListResult>, Status> {
        let span = span("tool.list", &CallContext::of(&req));
        let (deny_exec, workdir) = {
            let _g = span.enter();
            match req
                .get_ref()
                .session_id
                .as_deref()
                .filter(|s| !s.is_empty())
            {
                Some(id) => {
                    let session = self.app.session(id).map_err(Error::into_rpc)?;
                    (session.row().deny_exec, Some(session.workdir()))
                }
                None => (false, None),
            }
        };
        // MCP tools of the ready servers (issue 6): the session's workdir, else the global
        // servers; none while svc-mcp is down.
        let mcp = crate::clients::mcp::McpClient::new(&self.app.config.home)
            .listed(workdir.as_deref().unwrap_or(std::path::Path::new("")))
            .await;
        let _g = span.enter();
        let tools = self
            .app
            .tools
            .iter()
            .map(|t| {
                let spec = t.spec();
                let (tag, category) = listed_tag(t.name());
                let refused = deny_exec && tag == "exec";
                pb::tool_list_result::Tool {
                    category: category.into(),
                    deferred: false,
                    description: spec.description,
                    name: spec.name,
                    permission_tag: tag.into(),
                    provider: String::new(),
                    reason: if refused {
                        "exec tools are refused in this session (denyExec)".into()
                    } else {
                        String::new()
                    },
                    server: String::new(),
                    source: "builtin".into(),
                    state: "active".into(),
                }
            })
            .chain(mcp.iter().map(|t| {
                // Server and tag as listed (the name may be shortened or hashed: never parsed).
                let spec = t.spec();
                let tag = t.permission().as_str();
                let refused = deny_exec && tag == "exec";
                pb::tool_list_result::Tool {
                    category: "mcp".into(),
                    deferred: false,
                    description: spec.description,
                    name: spec.name,
                    permission_tag: tag.into(),
                    provider: String::new(),
                    reason: if refused {
                        "exec tools are refused in this session (denyExec)".into()
                    } else {
                        String::new()
                    },
                    server: t.server.clone(),
                    source: "mcp".into(),
                    state: "active".into(),
                }
            }))
            .collect();
        Ok(Response::new(pb::ToolListResult { tools }))
    }
}

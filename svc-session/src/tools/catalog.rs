//! The [`Tools`] component (`tool.list`, and the tools a turn may call): the built-in tools
//! ([`super::builtin`]), the memory and schedule tools backed by svc-memory and
//! svc-scheduler, and the MCP tools of the ready servers of a workdir, asked of svc-mcp per
//! turn ([`crate::clients::mcp`]). Host tools are not supported yet. It owns no table.

use std::path::Path;
use std::sync::Arc;

use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;

use super::Tool;
use crate::checkpoints::Checkpoints;
use crate::clients::mcp::McpClient;
use crate::error::Result;
use crate::question::Questions;
use crate::session::Registry;

/// The tools of the process.
pub struct Tools {
    home: Home,
    sessions: Registry,
    builtin: Vec<Arc<dyn Tool>>,
    checkpoints: Arc<Checkpoints>,
}

impl std::fmt::Debug for Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tools")
            .field("builtin", &self.builtin.len())
            .finish_non_exhaustive()
    }
}

impl Tools {
    /// The tools of `home`: built-ins (commands they start carry the orphan `mark`),
    /// `ask_user` (asking through `questions`), the memory tools and the schedule tools;
    /// sessions looked up in `sessions`; what their calls change is captured by
    /// `checkpoints`; `web_search` through `web`'s provider chain.
    pub fn open(
        home: &Home,
        mark: &str,
        sessions: Registry,
        checkpoints: Arc<Checkpoints>,
        questions: Arc<Questions>,
        web: crate::web::WebSearch,
    ) -> Self {
        let mut builtin = super::builtin(mark);
        builtin.push(Arc::new(super::ask_user::AskUser::new(
            questions,
            sessions.clone(),
        )));
        builtin.extend(super::memory::for_home(home));
        builtin.extend(super::schedule::for_home(home));
        builtin.push(Arc::new(super::web_search::WebSearchTool::new(web)));
        Tools {
            home: home.clone(),
            sessions,
            builtin,
            checkpoints,
        }
    }

    /// The checkpoints of what tool calls change (issue 20).
    pub fn checkpoints(&self) -> &Checkpoints {
        &self.checkpoints
    }

    /// The tools every session has (everything but MCP tools).
    pub fn builtin(&self) -> &[Arc<dyn Tool>] {
        &self.builtin
    }

    /// A client of svc-mcp (MCP tools of a workdir, and their calls).
    pub fn mcp(&self) -> McpClient {
        McpClient::new(&self.home)
    }

    /// `tool.list`: the built-in tools and the MCP tools of the ready servers of the
    /// session's workdir (else the global servers; none while svc-mcp is down), with the
    /// session's `denyExec` refusals.
    pub async fn list(&self, p: pb::ToolListParams) -> Result<pb::ToolListResult> {
        let (deny_exec, workdir) = match p.session_id.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => {
                let session = self.sessions.get(id)?;
                (session.row().deny_exec, Some(session.workdir()))
            }
            None => (false, None),
        };
        let mcp = self
            .mcp()
            .listed(workdir.as_deref().unwrap_or(Path::new("")))
            .await;
        let refusal = |tag: &str| {
            if deny_exec && tag == "exec" {
                "exec tools are refused in this session (denyExec)".into()
            } else {
                String::new()
            }
        };
        let tools = self
            .builtin
            .iter()
            .map(|t| {
                let spec = t.spec();
                let tag = t.permission().as_str();
                pb::tool_list_result::Tool {
                    category: t.category().into(),
                    deferred: false,
                    description: spec.description,
                    name: spec.name,
                    permission_tag: tag.into(),
                    provider: String::new(),
                    reason: refusal(tag),
                    server: String::new(),
                    source: "builtin".into(),
                    state: "active".into(),
                }
            })
            .chain(mcp.iter().map(|t| {
                // Server and tag as listed (the name may be shortened or hashed: never parsed).
                let spec = t.spec();
                let tag = t.permission().as_str();
                pb::tool_list_result::Tool {
                    category: t.category().into(),
                    deferred: false,
                    description: spec.description,
                    name: spec.name,
                    permission_tag: tag.into(),
                    provider: String::new(),
                    reason: refusal(tag),
                    server: t.server.clone(),
                    source: "mcp".into(),
                    state: "active".into(),
                }
            }))
            .collect();
        Ok(pb::ToolListResult { tools })
    }
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;

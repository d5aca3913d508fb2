//! The [`Tools`] component (`tool.list`, and the tools a turn may call): the built-in tools
//! ([`super::builtin`]), the memory and schedule tools backed by svc-memory and
//! svc-scheduler, and the MCP tools of the ready servers of a workdir, asked of svc-mcp per
//! turn ([`crate::clients::mcp`]), and the host tools clients registered
//! ([`crate::host_tools`], listed with `source: "host"`). It owns no table.

use std::path::Path;
use std::sync::Arc;

use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;

use super::Tool;
use crate::checkpoints::Checkpoints;
use crate::clients::mcp::McpClient;
use crate::lsp::Lsp;
use crate::question::Questions;
use crate::session::Registry;
use snowpea_session_error::Result;

/// The tools of the process.
pub struct Tools {
    home: Home,
    sessions: Registry,
    builtin: Vec<Arc<dyn Tool>>,
    checkpoints: Arc<Checkpoints>,
    /// Host tools of the connections, and the hub to find a session's host (issue 21).
    hosts: Option<(
        Arc<crate::host_tools::Hosts>,
        Arc<snowpea_common::bus::BusHub>,
    )>,
    lsp: Arc<Lsp>,
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
        lsp: Arc<Lsp>,
        web: crate::web::WebSearch,
    ) -> Self {
        let mut builtin = super::builtin(mark);
        builtin.push(Arc::new(super::ask_user::AskUser::new(
            questions,
            sessions.clone(),
        )));
        builtin.extend(super::memory::for_home(home));
        builtin.extend(super::schedule::for_home(home));
        builtin.extend(crate::lsp::tools::all(&lsp));
        builtin.push(Arc::new(super::web_search::WebSearchTool::new(web)));
        Tools {
            home: home.clone(),
            sessions,
            builtin,
            checkpoints,
            hosts: None,
            lsp,
        }
    }

    /// The component listing the host tools of `hosts` too (a session's host found
    /// through `hub`'s live connections).
    pub fn with_hosts(
        mut self,
        hosts: Arc<crate::host_tools::Hosts>,
        hub: Arc<snowpea_common::bus::BusHub>,
    ) -> Self {
        self.hosts = Some((hosts, hub));
        self
    }

    /// `tool.list` entries of the host tools: the session's host's (filtered by the
    /// session's agent), or every connection's without a session.
    fn host_entries(
        &self,
        session: Option<&crate::session::Session>,
    ) -> Vec<pb::tool_list_result::Tool> {
        let Some((hosts, hub)) = &self.hosts else {
            return vec![];
        };
        let listed: Vec<(String, crate::host_tools::Host)> = match session {
            Some(s) => hosts.host_of(hub, s).into_iter().collect(),
            None => hosts.all(),
        };
        let agent = session.and_then(|s| s.row().agent);
        listed
            .into_iter()
            .flat_map(|(conn, host)| {
                let provider = host.client_id.clone().unwrap_or(conn);
                host.tools
                    .into_values()
                    .filter(|d| {
                        session.is_none()
                            || crate::host_tools::registry::agent_may_use(d, agent.as_deref())
                    })
                    .map(move |d| pb::tool_list_result::Tool {
                        category: d.category.clone(),
                        deferred: d.deferred,
                        description: d.description.clone(),
                        name: d.name.clone(),
                        permission_tag: d.permission.as_str().into(),
                        provider: provider.clone(),
                        reason: String::new(),
                        server: String::new(),
                        source: "host".into(),
                        state: "active".into(),
                    })
            })
            .collect()
    }

    /// The language servers (diagnostics after edits, the `lsp_*` tools).
    pub fn lsp(&self) -> &Arc<Lsp> {
        &self.lsp
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
        let session = match p.session_id.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => Some(self.sessions.get(id)?),
            None => None,
        };
        let (deny_exec, workdir, backend) = match &session {
            Some(s) => (s.row().deny_exec, Some(s.workdir()), s.backend().kind()),
            None => (false, None, crate::backend::BackendKind::Local),
        };
        let host = self.host_entries(session.as_deref());
        let shadowed: std::collections::HashSet<String> =
            host.iter().map(|t| t.name.clone()).collect();
        let lsp_off = crate::lsp::tools::inactive_reason(
            &self.lsp,
            backend,
            workdir.as_deref().unwrap_or(Path::new("")),
        );
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
        let tools = host
            .into_iter()
            .chain(
                self.builtin
                    .iter()
                    .filter(|t| !shadowed.contains(t.name()))
                    .map(|t| {
                        let spec = t.spec();
                        let tag = t.permission().as_str();
                        let inactive = lsp_off.as_ref().filter(|_| t.category() == "lsp");
                        pb::tool_list_result::Tool {
                            category: t.category().into(),
                            deferred: false,
                            description: spec.description,
                            name: spec.name,
                            permission_tag: tag.into(),
                            provider: String::new(),
                            reason: inactive.cloned().unwrap_or_else(|| refusal(tag)),
                            server: String::new(),
                            source: "builtin".into(),
                            state: if inactive.is_some() {
                                "inactive"
                            } else {
                                "active"
                            }
                            .into(),
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
                    })),
            )
            .collect();
        Ok(pb::ToolListResult { tools })
    }
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;

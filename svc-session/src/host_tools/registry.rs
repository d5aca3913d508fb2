//! `tool.register` / `tool.unregister` (spec; issue 21 "Registration"): the host tools of
//! each connection, validated all-or-nothing and kept in memory until the connection
//! closes (a closed connection's tools are dropped at once, [`Hosts::drop_connection`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use snowpea_proto::session::v1 as pb;

use crate::tools::Permission;
use snowpea_session_error::{Error, Result};

/// Default of a tool's `timeoutMs`: how long `tool.invoke` may stay silent (120 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Longest `timeoutMs` accepted (24 h): a host that needs longer sends `tool.progress`.
pub const MAX_TIMEOUT_MS: i64 = 24 * 3600 * 1000;

/// Most tools one connection may register.
pub const MAX_TOOLS: usize = 512;

/// Whether calls of a tool may overlap (`tool.register` `parallel`, `hostToolParallel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallel {
    /// Calls in one model step run side by side.
    Safe,
    /// Calls run one at a time (the default).
    Never,
}

/// One registered host tool (a `tool.register` entry, validated).
#[derive(Debug, Clone, PartialEq)]
pub struct HostToolDef {
    /// Name the model calls (`^[A-Za-z][A-Za-z0-9_-]{0,63}$`).
    pub name: String,
    /// What it does, as the model sees it.
    pub description: String,
    /// JSON Schema of its arguments (an object; `{"type":"object"}` when not given).
    pub input_schema: Value,
    /// Permission class the approval pipeline applies.
    pub permission: Permission,
    /// `tool.list` category (default `host`).
    pub category: String,
    /// Silence allowed before the call is cancelled (`timeoutMs`, default 120 s).
    pub timeout: Duration,
    /// `parallel`.
    pub parallel: Parallel,
    /// Listed to the model by name only until loaded with `tool_search`.
    pub deferred: bool,
    /// Agents that may use it; `None` = every session.
    pub agents: Option<Vec<String>>,
}

/// The tools one connection registered.
#[derive(Debug, Clone, Default)]
pub struct Host {
    /// The connection's `clientId` (from `system.hello`), when it gave one.
    pub client_id: Option<String>,
    /// Its tools by name.
    pub tools: BTreeMap<String, Arc<HostToolDef>>,
}

/// The host tools of every live connection.
#[derive(Debug, Default)]
pub struct Hosts {
    by_connection: Mutex<HashMap<String, Host>>,
}

/// True when `name` matches `^[A-Za-z][A-Za-z0-9_-]{0,63}$`.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Parses a protocol permission tag; `None` for anything else.
pub fn permission_tag(s: &str) -> Option<Permission> {
    Some(match s {
        "read" => Permission::Read,
        "write" => Permission::Write,
        "exec" => Permission::Exec,
        "network" => Permission::Network,
        "send" => Permission::Send,
        "config" => Permission::Config,
        "delegate" => Permission::Delegate,
        "secret" => Permission::Secret,
        _ => return None,
    })
}

/// True when a host may register `name` although a daemon tool has it: only `browser_*`
/// tools may be shadowed by a host.
pub fn shadowable(name: &str) -> bool {
    name.starts_with("browser_")
}

/// Validates a whole `tool.register` call: every entry, or `invalid_params` naming the
/// first bad field (`params.tools[3].name`; a name is quoted at most
/// [`crate::commands::args::ECHO_CHARS`] characters long). `daemon` are the daemon's own tool names.
pub fn validate(
    tools: &[pb::tool_register_params::Tool],
    daemon: &HashSet<String>,
) -> Result<Vec<HostToolDef>> {
    if tools.len() > MAX_TOOLS {
        return Err(Error::invalid(
            "params.tools",
            format!("at most {MAX_TOOLS} tools per connection"),
        ));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(tools.len());
    for (i, t) in tools.iter().enumerate() {
        let field = |f: &str| format!("params.tools[{i}].{f}");
        // A bad name is echoed clipped, as slash commands do (issue 32 item 10).
        let echo = crate::commands::args::clip(&t.name);
        if !valid_name(&t.name) {
            return Err(Error::invalid(
                &field("name"),
                format!("{echo:?} must match ^[A-Za-z][A-Za-z0-9_-]{{0,63}}$"),
            ));
        }
        if !seen.insert(t.name.clone()) {
            return Err(Error::invalid(
                &field("name"),
                format!("{echo:?} appears twice in this call"),
            ));
        }
        if t.name.starts_with(crate::clients::mcp::PREFIX) {
            return Err(Error::invalid(
                &field("name"),
                format!("{echo:?}: the mcp__ prefix is reserved for MCP tools"),
            ));
        }
        if daemon.contains(&t.name) && !shadowable(&t.name) {
            return Err(Error::invalid(
                &field("name"),
                format!("{echo:?} is a daemon tool; a host may only shadow browser_* tools"),
            ));
        }
        if t.description.trim().is_empty() {
            return Err(Error::invalid(&field("description"), "must not be empty"));
        }
        let permission = permission_tag(&t.permission).ok_or_else(|| {
            Error::invalid(
                &field("permission"),
                format!(
                    "{:?} is not one of read, write, exec, network, send, config, delegate, secret",
                    t.permission
                ),
            )
        })?;
        let parallel = match t.parallel.as_str() {
            "" | "never" => Parallel::Never,
            "safe" => Parallel::Safe,
            other => {
                return Err(Error::invalid(
                    &field("parallel"),
                    format!("{other:?} must be safe or never"),
                ))
            }
        };
        let timeout = match t.timeout_ms {
            None => DEFAULT_TIMEOUT,
            Some(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Duration::from_millis(ms as u64),
            Some(ms) => {
                return Err(Error::invalid(
                    &field("timeoutMs"),
                    format!("{ms} must be between 1 and {MAX_TIMEOUT_MS}"),
                ))
            }
        };
        let input_schema = match &t.input_schema {
            None => serde_json::json!({"type": "object", "properties": {}}),
            Some(s) => {
                let v = snowpea_proto::wkt::from_struct(s);
                if let Some(ty) = v.get("type") {
                    if ty != "object" {
                        return Err(Error::invalid(
                            &field("inputSchema.type"),
                            "the arguments of a tool are an object: type must be \"object\"",
                        ));
                    }
                }
                v
            }
        };
        let agents = if t.agents.is_empty() {
            None
        } else {
            if let Some((j, _)) = t
                .agents
                .iter()
                .enumerate()
                .find(|(_, a)| a.trim().is_empty())
            {
                return Err(Error::invalid(
                    &format!("params.tools[{i}].agents[{j}]"),
                    "must not be empty",
                ));
            }
            Some(t.agents.clone())
        };
        out.push(HostToolDef {
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema,
            permission,
            category: t
                .category
                .clone()
                .filter(|c| !c.trim().is_empty())
                .unwrap_or_else(|| "host".into()),
            timeout,
            parallel,
            deferred: t.deferred,
            agents,
        });
    }
    Ok(out)
}

/// True when `def` may be used by a session running `agent` (`agents` unset: every
/// session; set: only sessions running one of the named agents).
pub fn agent_may_use(def: &HostToolDef, agent: Option<&str>) -> bool {
    match (&def.agents, agent) {
        (None, _) => true,
        (Some(list), Some(a)) => list.iter().any(|n| n == a),
        (Some(_), None) => false,
    }
}

impl Hosts {
    /// The connection whose host tools `session` uses, with its tools: the live
    /// connection named by the session's `hostToolsFrom` (its clientId, or surface id =
    /// instanceId, or connection id) — the one with tools when several match — else the
    /// session's origin connection. `None` when that connection is not live or has no
    /// tools. (Subagents inherit their parent's host: callers pass
    /// [`super::HostTools::host_session`].)
    pub fn host_of(
        &self,
        hub: &snowpea_common::bus::BusHub,
        session: &crate::session::Session,
    ) -> Option<(String, Host)> {
        let all = self.lock();
        let conn = match session.host_tools_from() {
            Some(h) => {
                let mut matching: Vec<String> = hub
                    .connections()
                    .into_iter()
                    .filter(|c| {
                        c.connection_id == h
                            || c.client_id.as_deref() == Some(h.as_str())
                            || c.instance_id.as_deref() == Some(h.as_str())
                    })
                    .map(|c| c.connection_id)
                    .collect();
                matching.sort();
                matching
                    .iter()
                    .rev()
                    .find(|c| all.contains_key(*c))
                    .cloned()?
            }
            None => session.origin().filter(|c| hub.is_live(c))?,
        };
        all.get(&conn).cloned().map(|h| (conn, h))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Host>> {
        self.by_connection.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds or replaces `defs` for `connection_id`; returns their names.
    pub fn register(
        &self,
        connection_id: &str,
        client_id: Option<String>,
        defs: Vec<HostToolDef>,
    ) -> Vec<String> {
        let mut all = self.lock();
        let host = all.entry(connection_id.to_owned()).or_default();
        if client_id.is_some() {
            host.client_id = client_id;
        }
        let names: Vec<String> = defs.iter().map(|d| d.name.clone()).collect();
        for d in defs {
            host.tools.insert(d.name.clone(), Arc::new(d));
        }
        names
    }

    /// Removes the named tools of `connection_id`; returns those that were there.
    pub fn unregister(&self, connection_id: &str, names: &[String]) -> Vec<String> {
        let mut all = self.lock();
        let Some(host) = all.get_mut(connection_id) else {
            return vec![];
        };
        let removed = names
            .iter()
            .filter(|n| host.tools.remove(n.as_str()).is_some())
            .cloned()
            .collect();
        if host.tools.is_empty() {
            all.remove(connection_id);
        }
        removed
    }

    /// Forgets every tool of a closed connection; returns how many there were.
    pub fn drop_connection(&self, connection_id: &str) -> usize {
        self.lock()
            .remove(connection_id)
            .map_or(0, |h| h.tools.len())
    }

    /// The tools of `connection_id`.
    pub fn of(&self, connection_id: &str) -> Option<Host> {
        self.lock().get(connection_id).cloned()
    }

    /// Every connection with tools: `(connection id, host)`, by connection id.
    pub fn all(&self) -> Vec<(String, Host)> {
        let mut v: Vec<_> = self
            .lock()
            .iter()
            .map(|(c, h)| (c.clone(), h.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

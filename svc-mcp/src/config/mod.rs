//! MCP server configuration (issue 6 "Configuration"): the `.mcp.json` common format, the
//! scopes a server can be declared in, and discovery of the effective set for a workdir.
//!
//! * `global`: `$SNOWPEA_HOME/.mcp.json` (the default scope of `mcp.add`);
//! * `project`: `<workdir>/.mcp.json` — project entries win over every other scope, and
//!   start only once trusted ([`crate::trust`]: written through `mcp.add`/`mcp.update`, or
//!   the project listed in the global settings `mcp.trustedProjects`);
//! * `settings` (read-only): `settings.json` `mcp.servers`, same entry format;
//! * `plugin` (read-only): `$SNOWPEA_HOME/plugins/<plugin>/.mcp.json` (installed by
//!   `skill.install`; `mcpServers`, or the server map at the top as Claude Code's plugins
//!   write it; `${CLAUDE_PLUGIN_ROOT}` / `${SNOWPEA_PLUGIN_ROOT}` in `command`, `args`, `env`
//!   and `cwd` name the plugin's folder). The host's watcher picks a new plugin up.
//!
//! Precedence for one name: project > global > settings > plugin. Changes to read-only scopes
//! answer `mcp_read_only`. [`file`] does the atomic, order- and unknown-key-preserving
//! rewrites; [`json`] is the order-preserving value it works on.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use snowpea_common::home::Home;

use crate::error::{Error, Result};

pub mod file;
pub mod json;

pub use json::Json;

/// Default start-up cap (`timeoutSec`), seconds.
pub const DEFAULT_TIMEOUT_SEC: i64 = 30;
/// Default per-call cap (`toolTimeoutSec`), seconds.
pub const DEFAULT_TOOL_TIMEOUT_SEC: i64 = 300;
/// Default permission tag of a server's tools.
pub const DEFAULT_PERMISSION: &str = "network";

/// Where a server is declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// A plugin's `.mcp.json` (read-only).
    Plugin,
    /// `settings.json` `mcp.servers` (read-only).
    Settings,
    /// `$SNOWPEA_HOME/.mcp.json`.
    Global,
    /// `<workdir>/.mcp.json`.
    Project,
}

impl Scope {
    /// The protocol's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Plugin => "plugin",
            Scope::Settings => "settings",
            Scope::Global => "global",
            Scope::Project => "project",
        }
    }

    /// Parses the protocol's spelling.
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "plugin" => Some(Scope::Plugin),
            "settings" => Some(Scope::Settings),
            "global" => Some(Scope::Global),
            "project" => Some(Scope::Project),
            _ => None,
        }
    }

    /// True for scopes the daemon never writes.
    pub fn read_only(self) -> bool {
        matches!(self, Scope::Plugin | Scope::Settings)
    }
}

/// How svc-mcp talks to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
    /// Legacy HTTP+SSE (2024-11-05).
    Sse,
}

impl Transport {
    /// The protocol's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
            Transport::Sse => "sse",
        }
    }
}

/// `tools: {include, exclude}` of an entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolsFilter {
    /// Register only these tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    /// Never register these tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<String>>,
}

/// One server entry of `mcpServers` (the common `.mcp.json` format). Every field is optional
/// so a rewrite puts back exactly what was there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerEntry {
    /// `type`: stdio, http or sse (also `streamable-http`/`streamableHttp` for http);
    /// inferred from command/url when absent.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Executable of a stdio server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments, argv style.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Extra environment of the child (values are secrets: never returned or logged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<IndexMap<String, String>>,
    /// Working directory of the child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Endpoint of an http or sse server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers (values are secrets: never returned or logged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<IndexMap<String, String>>,
    /// Keep the entry but never start the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Start-up cap, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_sec: Option<i64>,
    /// Per-call cap, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout_sec: Option<i64>,
    /// Tool filters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolsFilter>,
}

/// The keys of [`ServerEntry`] (the rest of an entry object is kept untouched on rewrite).
pub const KNOWN_KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "disabled",
    "timeoutSec",
    "toolTimeoutSec",
    "tools",
];

impl ServerEntry {
    /// Reads an entry object (unknown keys ignored).
    pub fn from_json(name: &str, v: &Json) -> Result<ServerEntry> {
        if v.as_object().is_none() {
            return Err(Error::Invalid(format!(
                "mcpServers.{name}: an entry must be a JSON object"
            )));
        }
        serde_json::from_value(v.to_value())
            .map_err(|e| Error::Invalid(format!("mcpServers.{name}: {e}")))
    }

    /// Writes the known keys into an existing entry object, keeping unknown keys and the
    /// position of every key that stays.
    pub fn merge_into(&self, target: &mut IndexMap<String, Json>) {
        let v = serde_json::to_value(self).expect("entry serializes");
        for key in KNOWN_KEYS {
            Json::set_or_remove(target, key, v.get(*key).map(Json::from_value));
        }
    }

    /// The transport: `type` when set, else stdio for a command, else sse for a URL whose
    /// path ends in `/sse`, else http.
    pub fn transport(&self) -> Transport {
        match self.kind.as_deref() {
            Some("stdio") => Transport::Stdio,
            Some("sse") => Transport::Sse,
            Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => {
                Transport::Http
            }
            _ if self.command.is_some() => Transport::Stdio,
            _ => match self.url.as_deref().and_then(|u| url::Url::parse(u).ok()) {
                Some(u) if u.path().trim_end_matches('/').ends_with("/sse") => Transport::Sse,
                _ => Transport::Http,
            },
        }
    }

    /// Replaces `${CLAUDE_PLUGIN_ROOT}` and `${SNOWPEA_PLUGIN_ROOT}` in `command`, `args`,
    /// `env` values and `cwd` of a plugin's entry with the plugin's folder (Claude Code's
    /// plugin layout names its own files that way). Nothing else is expanded.
    pub fn expand_plugin_root(&mut self, root: &Path) {
        let root = root.to_string_lossy();
        let expand = |s: &mut String| {
            if s.contains("_PLUGIN_ROOT}") {
                *s = s
                    .replace("${CLAUDE_PLUGIN_ROOT}", &root)
                    .replace("${SNOWPEA_PLUGIN_ROOT}", &root);
            }
        };
        self.command.iter_mut().for_each(expand);
        self.cwd.iter_mut().for_each(expand);
        self.args.iter_mut().flatten().for_each(expand);
        self.env
            .iter_mut()
            .flat_map(|m| m.values_mut())
            .for_each(expand);
    }

    /// True unless `disabled: true`.
    pub fn enabled(&self) -> bool {
        self.disabled != Some(true)
    }

    /// The start-up cap.
    pub fn start_timeout(&self) -> std::time::Duration {
        secs(self.timeout_sec, DEFAULT_TIMEOUT_SEC)
    }

    /// The per-call cap.
    pub fn tool_timeout(&self) -> std::time::Duration {
        secs(self.tool_timeout_sec, DEFAULT_TOOL_TIMEOUT_SEC)
    }

    /// Sorted keys of `env` (what may be shown instead of the values).
    pub fn env_keys(&self) -> Vec<String> {
        keys(&self.env)
    }

    /// Sorted keys of `headers`.
    pub fn header_keys(&self) -> Vec<String> {
        keys(&self.headers)
    }

    /// True when `tool` passes the include/exclude filters.
    pub fn tool_allowed(&self, tool: &str) -> bool {
        let Some(f) = &self.tools else { return true };
        if let Some(inc) = &f.include {
            if !inc.is_empty() && !inc.iter().any(|t| t == tool) {
                return false;
            }
        }
        !f.exclude
            .as_ref()
            .is_some_and(|ex| ex.iter().any(|t| t == tool))
    }
}

fn secs(v: Option<i64>, default: i64) -> std::time::Duration {
    std::time::Duration::from_secs(v.filter(|s| *s > 0).unwrap_or(default) as u64)
}

fn keys(m: &Option<IndexMap<String, String>>) -> Vec<String> {
    let mut k: Vec<String> = m.iter().flat_map(|m| m.keys().cloned()).collect();
    k.sort();
    k
}

/// A server as declared in one scope.
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    /// Server name.
    pub name: String,
    /// Where it is declared.
    pub scope: Scope,
    /// The entry (a malformed entry is reported through `invalid`).
    pub entry: ServerEntry,
    /// Why the entry cannot be used, if it cannot.
    pub invalid: Option<String>,
    /// Why a project entry is not started although it parses: the trust step said no
    /// (untrusted, changed on disk, or security findings not accepted with force; see
    /// [`crate::trust`]). The text says why and how to trust it.
    pub blocked: Option<String>,
    /// The file it is declared in.
    pub path: PathBuf,
    /// The plugin declaring it (scope plugin).
    pub plugin: Option<String>,
    /// The project root (scope project).
    pub root: Option<PathBuf>,
}

/// `$SNOWPEA_HOME/.mcp.json`.
pub fn global_path(home: &Home) -> PathBuf {
    home.root().join(".mcp.json")
}

/// `<workdir>/.mcp.json`.
pub fn project_path(workdir: &Path) -> PathBuf {
    workdir.join(".mcp.json")
}

/// `$SNOWPEA_HOME/plugins/`.
pub fn plugins_dir(home: &Home) -> PathBuf {
    home.root().join("plugins")
}

/// Every entry of an `mcpServers` object.
fn entries_of(
    servers: Option<&Json>,
    scope: Scope,
    path: &Path,
    plugin: Option<&str>,
    root: Option<&Path>,
) -> Vec<Declared> {
    let Some(map) = servers.and_then(Json::as_object) else {
        return Vec::new();
    };
    map.iter()
        .map(|(name, v)| {
            let (entry, invalid) = match ServerEntry::from_json(name, v) {
                Ok(e) => (e, None),
                Err(e) => (ServerEntry::default(), Some(e.to_string())),
            };
            Declared {
                name: name.clone(),
                scope,
                entry,
                invalid,
                blocked: None,
                path: path.to_path_buf(),
                plugin: plugin.map(str::to_owned),
                root: root.map(Path::to_path_buf),
            }
        })
        .collect()
}

/// The servers of one `.mcp.json` (missing = none; unreadable = an error naming the file).
pub fn read_scope_file(path: &Path, scope: Scope, root: Option<&Path>) -> Result<Vec<Declared>> {
    let doc = file::McpFile::load(path)?;
    Ok(entries_of(
        doc.doc.get("mcpServers"),
        scope,
        path,
        None,
        root,
    ))
}

/// The read-only servers: settings.json `mcp.servers`, then every plugin's `.mcp.json`.
pub fn read_only_servers(home: &Home) -> Vec<Declared> {
    let mut out = Vec::new();
    let settings_path = home.settings_path();
    match file::load_json(&settings_path) {
        Ok(doc) => {
            let servers = doc.get("mcp").and_then(|m| m.get("servers"));
            out.extend(entries_of(
                servers,
                Scope::Settings,
                &settings_path,
                None,
                None,
            ));
        }
        Err(e) => {
            tracing::warn!(error = %e, "settings.json unreadable; its MCP servers are skipped")
        }
    }
    if let Ok(dir) = std::fs::read_dir(plugins_dir(home)) {
        let mut plugins: Vec<_> = dir.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        plugins.sort();
        for p in plugins {
            let path = p.join(".mcp.json");
            let Some(plugin) = p.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            match file::McpFile::load(&path) {
                Ok(doc) => {
                    // Claude Code's plugin layout also allows the server map at the top.
                    let servers = doc.doc.get("mcpServers").or(Some(&doc.doc));
                    let mut found = entries_of(servers, Scope::Plugin, &path, Some(plugin), None);
                    for d in &mut found {
                        d.entry.expand_plugin_root(&p);
                    }
                    out.extend(found)
                }
                Err(e) => tracing::warn!(error = %e, plugin, "plugin .mcp.json unreadable"),
            }
        }
    }
    out
}

/// The servers that apply without a project: global over settings over plugin, one per name,
/// in name order. Unreadable files are skipped with a warning.
pub fn discover_global(home: &Home) -> Vec<Declared> {
    let mut all = read_only_servers(home);
    match read_scope_file(&global_path(home), Scope::Global, None) {
        Ok(g) => all.extend(g),
        Err(e) => tracing::warn!(error = %e, "global .mcp.json unreadable"),
    }
    winners(all)
}

/// The servers of a project's `.mcp.json`, each with the trust step's verdict in
/// [`Declared::blocked`] (see [`crate::trust`]): an entry starts only when it was written
/// through `mcp.add`/`mcp.update` as it is now, or the project is listed in the global
/// settings `mcp.trustedProjects`; and, with security findings, only when written with force.
pub fn read_project(home: &Home, workdir: &Path) -> Result<Vec<Declared>> {
    let path = project_path(workdir);
    let doc = file::McpFile::load(&path)?;
    let mut found = entries_of(
        doc.doc.get("mcpServers"),
        Scope::Project,
        &path,
        None,
        Some(workdir),
    );
    if found.is_empty() {
        return Ok(found);
    }
    let trust = crate::trust::Trust::load(home);
    for d in found.iter_mut().filter(|d| d.invalid.is_none()) {
        let raw = doc.entry(&d.name).expect("a listed entry");
        d.blocked = blocked_reason(&trust, workdir, &d.name, &d.entry, raw);
    }
    Ok(found)
}

/// Why a project entry may not start (`None`: it may).
fn blocked_reason(
    trust: &crate::trust::Trust,
    workdir: &Path,
    name: &str,
    entry: &ServerEntry,
    raw: &Json,
) -> Option<String> {
    let (findings, invalid) = match crate::validate::validate(name, entry) {
        Ok(f) => (f, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    let sha = crate::trust::fingerprint(raw);
    match trust.verdict(workdir, name, &sha, &findings) {
        crate::trust::Verdict::Blocked(why) => Some(why),
        crate::trust::Verdict::Trusted => invalid.map(|e| format!("not started: {e}")),
    }
}

/// The servers of a project's `.mcp.json` only ([`read_project`]; an unreadable file is
/// skipped with a warning).
pub fn discover_project(home: &Home, workdir: &Path) -> Vec<Declared> {
    match read_project(home, workdir) {
        Ok(p) => winners(p),
        Err(e) => {
            tracing::warn!(error = %crate::clip::clip(&e.to_string()), "project .mcp.json unreadable");
            Vec::new()
        }
    }
}

/// True when `workdir`'s project file is the global file itself (a session or job whose
/// workdir is `$SNOWPEA_HOME`): that workdir has no project scope, or every global server
/// would be declared — and started — twice.
pub fn is_global_file(home: &Home, workdir: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    canon(workdir) == canon(home.root())
}

/// The effective servers for `workdir`: project entries win over the global set.
pub fn discover(home: &Home, workdir: Option<&Path>) -> Vec<Declared> {
    let mut all = discover_global(home);
    if let Some(w) = workdir.filter(|w| !is_global_file(home, w)) {
        all.extend(discover_project(home, w));
    }
    winners(all)
}

/// Keeps the highest-precedence declaration of each name (later scopes in [`Scope`] order
/// win; within a scope the first plugin wins), sorted by name.
fn winners(all: Vec<Declared>) -> Vec<Declared> {
    let mut by_name: std::collections::BTreeMap<String, Declared> = Default::default();
    for d in all {
        match by_name.get(&d.name) {
            Some(existing) if existing.scope >= d.scope => {}
            _ => {
                by_name.insert(d.name.clone(), d);
            }
        }
    }
    by_name.into_values().collect()
}

/// Permission tag of a server's tools: `$SNOWPEA_HOME/settings.json`
/// `mcp.permissions.<server>` (never a project's settings), default `network`.
pub fn permission(home: &Home, server: &str) -> String {
    // The user's own settings only: a project's `.snowpea/settings.json` may not relax the
    // approvals of a server (svc-session, which enforces them, reads the same file).
    let settings = snowpea_common::settings::load_file(&home.settings_path()).unwrap_or_default();
    settings
        .get("mcp")
        .and_then(|m| m.get("permissions"))
        .and_then(|p| p.get(server))
        .and_then(|v| v.as_str())
        .filter(|p| crate::validate::PERMISSIONS.contains(p))
        .unwrap_or(DEFAULT_PERMISSION)
        .to_owned()
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;

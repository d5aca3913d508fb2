//! MCP tools inside agent turns (issue 6 "Sessions"): svc-mcp owns every MCP server; this
//! module asks it (internal `McpInternalService` over `run/mcp.sock`) which tools the ready
//! servers of the session's workdir offer, and wraps each as a [`Tool`] named
//! `mcp__<server>__<tool>` ([`McpTool`]).
//!
//! * Names are unique and provider-safe (≤ 64 characters of `[a-zA-Z0-9_-]`): a name that is
//!   too long or collides with another is cut and gets a stable hash ([`tool_names`]). Each
//!   [`McpTool`] keeps its `(server, tool)`; calls and `tool.list` use that, never the name.
//! * The permission tag is the server's `mcp.permissions.<server>` of the **global**
//!   `$SNOWPEA_HOME/settings.json` (default `network`), read here — not the tag svc-mcp
//!   reports, which it merges with the project's `.snowpea/settings.json`: a project must not
//!   relax the approvals of the user's servers ([`permission_of`]). Calls go through the same
//!   mode matrix and approval path as built-in tools.
//! * svc-mcp down or frozen: [`McpClient::tools`] answers no tools after at most
//!   [`LIST_TIMEOUT`] (the turn runs without them), and a call fails with `unavailable: …` as
//!   a failed tool result.
//! * A call of an MCP tool the current listing lacks because its server is not ready (e.g.
//!   still starting right after svc-mcp restarted) fails with `not_ready: MCP server … is not
//!   ready (state: …)`, not `unknown tool` ([`not_callable`]).
//! * Every wait has a deadline. Per-call timeouts (`toolTimeoutSec`) are enforced by svc-mcp;
//!   the session gives up on a `CallTool` that svc-mcp has not answered within the tool's
//!   `toolTimeoutSec` (reported by `ListTools`, default [`DEFAULT_TOOL_TIMEOUT`]) plus
//!   [`CALL_MARGIN`]: the call fails with `timeout: svc-mcp did not answer within N s` and the
//!   turn goes on. Interrupts stop the wait at once.
//! * Text and image results come back as the tool result: the text (images summarised as
//!   `[image <mime> (<n> bytes base64)]`) is the output, the images travel in the result's
//!   `meta.images` (`[{mimeType, data}]`, stored with the `tool.result` event), and the turn
//!   hands them to the model with the result ([`images_of`], [`ToolImage`]).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use snowpea_common::home::Home;
use snowpea_proto::mcp::v1::mcp_internal_service_client::McpInternalServiceClient;
use snowpea_proto::mcp::v1::{CallToolRequest, ListToolsRequest};
use tonic::transport::Channel;

use crate::tools::{args, Permission, Tool, ToolContext, ToolOutput, ToolPlan};
use snowpea_session_llm::provider::{ToolImage, ToolSpec};

/// Deadline of one `ListTools` (svc-mcp down or stuck must not delay a turn).
pub const LIST_TIMEOUT: Duration = Duration::from_secs(5);
/// Deadline of `mcp.update` / `mcp.reload` asked by the `/mcp` command (a reload restarts
/// the server).
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);
/// A tool's `toolTimeoutSec` when its server's entry sets none (svc-mcp's default).
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(300);
/// How much longer than a tool's `toolTimeoutSec` the session waits for svc-mcp's answer
/// (svc-mcp answers a call that ran out of time itself, so this only fires when svc-mcp is
/// stuck).
pub const CALL_MARGIN: Duration = Duration::from_secs(15);
/// Cap on a configured `toolTimeoutSec` (a week), so the deadline stays a valid instant.
const MAX_TOOL_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long the session waits for svc-mcp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Deadline of `ListTools`.
    pub list: Duration,
    /// Added to a tool's `toolTimeoutSec` for the deadline of `CallTool`.
    pub call_margin: Duration,
    /// `toolTimeoutSec` of a server whose entry sets none.
    pub default_tool: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            list: LIST_TIMEOUT,
            call_margin: CALL_MARGIN,
            default_tool: DEFAULT_TOOL_TIMEOUT,
        }
    }
}

impl Timeouts {
    /// The timeouts for `home`: the defaults (tests may shorten them per home).
    fn for_home(home: &Home) -> Timeouts {
        #[cfg(test)]
        if let Some(t) = fake::timeouts_for(home) {
            return t;
        }
        let _ = home;
        Timeouts::default()
    }
}
fn admin_timeout() -> snowpea_proto::error::RpcError {
    snowpea_proto::error::RpcError::new(
        snowpea_proto::error::ErrorCode::Unavailable,
        format!("svc-mcp did not answer within {}s", ADMIN_TIMEOUT.as_secs()),
    )
}

/// Prefix of every MCP tool name.
pub const PREFIX: &str = "mcp__";

/// A lazily connecting client of svc-mcp's internal service.
#[derive(Debug, Clone)]
pub struct McpClient {
    channel: Channel,
    home: Home,
    timeouts: Timeouts,
}

impl McpClient {
    /// A client of `home`'s svc-mcp socket (connects on first use, reconnects after a
    /// restart); permission tags come from `home`'s global settings.
    pub fn new(home: &Home) -> Self {
        McpClient {
            channel: snowpea_common::client::unix_channel(home.socket("mcp")),
            home: home.clone(),
            timeouts: Timeouts::for_home(home),
        }
    }

    /// The same client with other timeouts.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// `mcp.update{name, patch: {disabled}, workdir}` of svc-mcp (the `/mcp enable|disable`
    /// command), at most [`ADMIN_TIMEOUT`]; the protocol error of svc-mcp on failure
    /// (`unavailable` when it does not answer).
    pub async fn set_disabled(
        &self,
        name: &str,
        disabled: bool,
        workdir: &Path,
    ) -> Result<(), snowpea_proto::error::RpcError> {
        let mut client =
            snowpea_proto::mcp::v1::mcp_service_client::McpServiceClient::new(self.channel.clone());
        let req = snowpea_proto::mcp::v1::McpUpdateParams {
            name: name.to_owned(),
            patch: Some(snowpea_proto::mcp::v1::McpServerDraft {
                disabled: Some(disabled),
                ..Default::default()
            }),
            workdir: Some(workdir.display().to_string()),
            ..Default::default()
        };
        match tokio::time::timeout(ADMIN_TIMEOUT, client.update(req)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(status)) => Err(snowpea_proto::error::RpcError::from_status(&status)),
            Err(_) => Err(admin_timeout()),
        }
    }

    /// `mcp.reload{name, workdir}` of svc-mcp (the `/mcp reconnect` command): restarts the
    /// server; returns the servers reloaded. Errors as [`McpClient::set_disabled`].
    pub async fn reload(
        &self,
        name: &str,
        workdir: &Path,
    ) -> Result<Vec<String>, snowpea_proto::error::RpcError> {
        let mut client =
            snowpea_proto::mcp::v1::mcp_service_client::McpServiceClient::new(self.channel.clone());
        let req = snowpea_proto::mcp::v1::McpReloadParams {
            name: Some(name.to_owned()),
            workdir: Some(workdir.display().to_string()),
            ..Default::default()
        };
        match tokio::time::timeout(ADMIN_TIMEOUT, client.reload(req)).await {
            Ok(Ok(r)) => Ok(r.into_inner().servers),
            Ok(Err(status)) => Err(snowpea_proto::error::RpcError::from_status(&status)),
            Err(_) => Err(admin_timeout()),
        }
    }

    /// The MCP tools for `workdir`, as session tools; empty (with a debug log) when svc-mcp is
    /// unavailable.
    pub async fn tools(&self, workdir: &Path) -> Vec<Arc<dyn Tool>> {
        self.listed(workdir)
            .await
            .into_iter()
            .map(|t| t as Arc<dyn Tool>)
            .collect()
    }

    /// The MCP tools for `workdir`; empty (with a log) when svc-mcp is unavailable.
    pub async fn listed(&self, workdir: &Path) -> Vec<Arc<McpTool>> {
        match self.list(workdir).await {
            Ok(listing) => listing.tools,
            Err(Unreachable::Down(message)) => {
                tracing::debug!(error = %message, "svc-mcp unavailable; the turn runs without MCP tools");
                Vec::new()
            }
            Err(Unreachable::Slow(after)) => {
                tracing::warn!(
                    after_ms = after.as_millis() as u64,
                    "svc-mcp did not list its tools in time; the turn runs without MCP tools"
                );
                Vec::new()
            }
        }
    }

    /// The MCP tools for `workdir` and the state of every enabled server, or why svc-mcp
    /// could not list them. Each tool gets a unique provider-safe name ([`tool_names`]) and
    /// keeps its `(server, tool)`, which calls and `tool.list` use — the name is never parsed
    /// back.
    pub async fn list(&self, workdir: &Path) -> Result<Listing, Unreachable> {
        let mut client = McpInternalServiceClient::new(self.channel.clone())
            .max_decoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_REQUEST);
        let req = ListToolsRequest {
            workdir: workdir.display().to_string(),
            wait_ms: 0,
        };
        let deadline = self.timeouts.list;
        let (listed, servers) = match tokio::time::timeout(deadline, client.list_tools(req)).await {
            Ok(Ok(reply)) => {
                let r = reply.into_inner();
                (r.tools, r.servers)
            }
            Ok(Err(status)) => return Err(Unreachable::Down(status.message().to_owned())),
            Err(_) => return Err(Unreachable::Slow(deadline)),
        };
        let settings = global_settings(&self.home);
        let pairs: Vec<(&str, &str)> = listed
            .iter()
            .map(|t| (t.server.as_str(), t.name.as_str()))
            .collect();
        let names = tool_names(&pairs);
        let mut seen = HashSet::new();
        let mut tools = Vec::with_capacity(listed.len());
        for (t, name) in listed.into_iter().zip(names) {
            if !seen.insert(name.clone()) {
                tracing::warn!(server = %t.server, tool = %t.name, "MCP tool listed twice; the first one is kept");
                continue;
            }
            // svc-mcp reports the entry's `toolTimeoutSec`; 0 from an older svc-mcp.
            let timeout = if t.tool_timeout_sec > 0 {
                Duration::from_secs(t.tool_timeout_sec as u64).min(MAX_TOOL_TIMEOUT)
            } else {
                self.timeouts.default_tool
            };
            tools.push(Arc::new(McpTool {
                permission: permission_of(&settings, &t.server, &t.scope),
                timeout,
                name: intern(&name, &t.server, &t.name),
                server: t.server,
                tool: t.name,
                description: t.description,
                schema: serde_json::from_str(&t.input_schema_json)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({"type": "object"})),
                client: self.clone(),
            }));
        }
        Ok(Listing {
            tools,
            servers: servers
                .into_iter()
                .map(|s| ServerState {
                    name: s.name,
                    state: s.state,
                    error: s.error.filter(|e| !e.is_empty()),
                })
                .collect(),
        })
    }

    /// Calls `tool` of `server` for a session in `workdir`, waiting at most `tool_timeout`
    /// (the tool's `toolTimeoutSec`) plus the call margin for svc-mcp's answer.
    pub async fn call(
        &self,
        workdir: &Path,
        server: &str,
        tool: &str,
        arguments: &Value,
        call_id: &str,
        tool_timeout: Duration,
    ) -> ToolOutput {
        let mut client = McpInternalServiceClient::new(self.channel.clone())
            .max_decoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_REQUEST);
        let req = CallToolRequest {
            workdir: workdir.display().to_string(),
            server: server.to_owned(),
            tool: tool.to_owned(),
            arguments_json: arguments.to_string(),
            call_id: call_id.to_owned(),
        };
        let deadline = tool_timeout.min(MAX_TOOL_TIMEOUT) + self.timeouts.call_margin;
        let Ok(answer) = tokio::time::timeout(deadline, client.call_tool(req)).await else {
            tracing::warn!(
                server,
                tool,
                call_id,
                "svc-mcp did not answer a CallTool in time"
            );
            let mut out = ToolOutput::error(format!(
                "timeout: svc-mcp did not answer within {} (MCP tool {server}/{tool}); the call was abandoned",
                human(deadline)
            ));
            out.meta =
                json!({"source": "mcp", "server": server, "tool": tool, "errorKind": "timeout"});
            return out;
        };
        match answer {
            Ok(reply) => {
                let r = reply.into_inner();
                let mut meta: Value =
                    serde_json::from_str(&r.meta_json).unwrap_or_else(|_| json!({}));
                if !r.images.is_empty() {
                    meta["images"] = Value::Array(
                        r.images
                            .iter()
                            .map(|i| json!({"mimeType": i.mime_type, "data": i.data}))
                            .collect(),
                    );
                }
                meta["source"] = json!("mcp");
                ToolOutput {
                    ok: r.ok,
                    content: r.content,
                    meta,
                    diff: None,
                }
            }
            Err(status) => {
                let e = snowpea_proto::error::RpcError::from_status(&status);
                let mut out = ToolOutput::error(match e.code.wire() {
                    "unavailable" | "internal" if is_transport(&status) => format!(
                        "unavailable: svc-mcp is not running (MCP tool {server}/{tool} could not be called); try again shortly"
                    ),
                    code => format!("{code}: {}", e.message),
                });
                out.meta = json!({"source": "mcp", "server": server, "tool": tool, "errorKind": e.code.wire()});
                out
            }
        }
    }
}

/// The images of a tool result, read from its meta (`meta.images: [{mimeType, data}]`, as
/// [`McpClient::call`] writes it); entries without data are skipped. Empty for any other
/// meta.
pub fn images_of(meta: &Value) -> Vec<ToolImage> {
    meta.get("images")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let data = i.get("data")?.as_str()?;
            (!data.is_empty()).then(|| ToolImage {
                mime_type: i
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                data: data.to_owned(),
            })
        })
        .collect()
}

/// What `ListTools` answered.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// The tools of the ready servers.
    pub tools: Vec<Arc<McpTool>>,
    /// Every enabled server visible from the workdir, ready or not.
    pub servers: Vec<ServerState>,
}

/// State of one MCP server, as svc-mcp reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerState {
    /// Server name.
    pub name: String,
    /// `stopped`, `starting`, `ready` or `error`.
    pub state: String,
    /// Why it is in the error state.
    pub error: Option<String>,
}

/// The failed result for a call of MCP tool `name` that a fresh `listing` lacks, when the
/// reason is known: its server is not ready (`not_ready`, naming the server and its state and
/// error), or the server is not configured (or disabled) for the workdir any more
/// (`not_found`). `None` when the server is ready or unknown (then it is an unknown tool).
///
/// The server is the one this process listed the name for ([`registered`]); for a name it
/// never listed (a tool of an earlier svc-session, called from the history), the server whose
/// `mcp__<server>__` prefix the name starts with.
pub fn not_callable(name: &str, listing: &Listing) -> Option<ToolOutput> {
    let server = match registered(name) {
        Some((server, _)) => server,
        None => listing
            .servers
            .iter()
            .filter(|s| name.starts_with(&sanitize(&format!("{PREFIX}{}__", s.name))))
            .max_by_key(|s| s.name.len())?
            .name
            .clone(),
    };
    let (kind, content, state) = match listing.servers.iter().find(|s| s.name == server) {
        Some(s) if s.state == "ready" => return None,
        Some(s) => {
            let why = match &s.error {
                Some(e) => format!("{}: {e}", s.state),
                None => s.state.clone(),
            };
            let hint = if s.state == "starting" {
                "; try again shortly"
            } else {
                ""
            };
            (
                "not_ready",
                format!(
                    "not_ready: MCP server `{server}` is not ready (state: {why}); MCP tool `{name}` cannot be called right now{hint}"
                ),
                Some(s.state.clone()),
            )
        }
        None => (
            "not_found",
            format!(
                "not_found: MCP server `{server}` is not configured (or is disabled) for this workdir; MCP tool `{name}` cannot be called"
            ),
            None,
        ),
    };
    let mut out = ToolOutput::error(content);
    out.meta = json!({"source": "mcp", "server": server, "errorKind": kind});
    if let Some(state) = state {
        out.meta["state"] = json!(state);
    }
    Some(out)
}

/// Why svc-mcp could not list its tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreachable {
    /// The rpc failed (svc-mcp not running, or it refused).
    Down(String),
    /// No answer within this deadline (svc-mcp stuck).
    Slow(Duration),
}

/// The failed tool result for a call of MCP tool `name` that the turn's tool list lacks
/// because svc-mcp was unreachable when the turn started and still is (`why`).
pub fn unavailable_message(name: &str, why: &Unreachable) -> String {
    match why {
        Unreachable::Down(_) => format!(
            "unavailable: svc-mcp is not running; MCP tool `{name}` cannot be called right now"
        ),
        Unreachable::Slow(after) => format!(
            "unavailable: svc-mcp did not answer within {}; MCP tool `{name}` cannot be called right now",
            human(*after)
        ),
    }
}

/// `d` for a message: whole seconds as `N s`, anything finer as `N ms`.
fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// True when the status comes from the transport (connection refused/reset), not svc-mcp.
fn is_transport(s: &tonic::Status) -> bool {
    s.metadata().get("snowpea-code").is_none()
}

/// Longest tool name providers accept (`^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_NAME_LEN: usize = 64;
/// Hex digits of the hash that disambiguates a shortened or colliding name.
pub const HASH_LEN: usize = 6;

/// The name of one MCP tool on its own: [`tool_names`] of a single pair.
pub fn tool_name(server: &str, tool: &str) -> String {
    tool_names(&[(server, tool)]).remove(0)
}

/// Unique, provider-safe names for the `(server, tool)` pairs of one listing, in order:
/// `mcp__<server>__<tool>` with characters providers refuse replaced by `_`, when that fits
/// [`MAX_NAME_LEN`] and no other pair gets the same name; otherwise cut and suffixed with
/// `_` and [`HASH_LEN`] hex digits of a stable hash of server and tool
/// (`mcp__<cut>_<hash>`, at most 64 characters). If hashed names still collide, their
/// hashes grow (up to 16 digits). Only identical pairs share a name.
pub fn tool_names(pairs: &[(&str, &str)]) -> Vec<String> {
    let plain: Vec<String> = pairs
        .iter()
        .map(|(server, tool)| sanitize(&format!("{PREFIX}{server}__{tool}")))
        .collect();
    // Hash length per pair; `None` keeps the plain name.
    let mut hash_len: Vec<Option<usize>> = plain
        .iter()
        .map(|p| (p.len() > MAX_NAME_LEN).then_some(HASH_LEN))
        .collect();
    loop {
        let names: Vec<String> = (0..pairs.len())
            .map(|i| match hash_len[i] {
                None => plain[i].clone(),
                Some(n) => hashed(&plain[i], pairs[i], n),
            })
            .collect();
        let mut owners: HashMap<&str, HashSet<(&str, &str)>> = HashMap::new();
        for (name, pair) in names.iter().zip(pairs) {
            owners.entry(name).or_default().insert(*pair);
        }
        let mut grew = false;
        for (i, name) in names.iter().enumerate() {
            if owners[name.as_str()].len() > 1 {
                let next = hash_len[i].map_or(HASH_LEN, |n| n + 2);
                if next <= 16 {
                    hash_len[i] = Some(next);
                    grew = true;
                }
            }
        }
        if !grew {
            return names;
        }
    }
}

/// `name` with every character providers refuse in tool names replaced by `_` (ASCII only).
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `plain` (ASCII) cut so that `_` and `len` hex digits of [`stable_hash`] fit
/// [`MAX_NAME_LEN`].
fn hashed(plain: &str, (server, tool): (&str, &str), len: usize) -> String {
    let keep = plain.len().min(MAX_NAME_LEN - 1 - len);
    let hex = format!("{:016x}", stable_hash(server, tool));
    format!("{}_{}", &plain[..keep], &hex[..len])
}

/// 64-bit FNV-1a of `server`, a NUL and `tool`: the same on every run, build and machine
/// (unlike `std`'s `DefaultHasher`), so a tool keeps its name across turns and restarts.
pub fn stable_hash(server: &str, tool: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in server.bytes().chain([0]).chain(tool.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Every MCP tool name this process has listed, with the `(server, tool)` it was last listed
/// for.
static NAMES: LazyLock<Mutex<HashMap<&'static str, (String, String)>>> =
    LazyLock::new(Default::default);

/// The session's tool names are `&'static str`; each distinct MCP tool name is leaked once
/// (bounded by the set of tools ever seen) and remembered with its `(server, tool)`.
fn intern(name: &str, server: &str, tool: &str) -> &'static str {
    let mut names = NAMES.lock().expect("names lock");
    let pair = (server.to_owned(), tool.to_owned());
    if let Some((n, p)) = names.get_key_value(name) {
        let n: &'static str = n;
        if *p != pair {
            names.insert(n, pair);
        }
        return n;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked, pair);
    leaked
}

/// The `(server, tool)` MCP tool `name` was last listed for by this process.
pub fn registered(name: &str) -> Option<(String, String)> {
    NAMES.lock().expect("names lock").get(name).cloned()
}

/// The global settings (`$SNOWPEA_HOME/settings.json`); `{}` (with a warning) when unreadable.
fn global_settings(home: &Home) -> Value {
    snowpea_common::settings::load_file(&home.settings_path()).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "global settings unreadable; MCP tools get the default permission tag");
        json!({})
    })
}

/// Permission tag of `server`'s tools (declared in `scope`): `mcp.permissions.<server>` of
/// the global `settings` only (never a project's settings, which would let a project relax
/// the approvals of the user's servers), default `network`. A server declared in a project's
/// `.mcp.json` always gets `network`: tags are keyed by name, and a project server named like
/// one of the user's must not inherit that server's (possibly relaxed) tag.
pub fn permission_of(settings: &Value, server: &str, scope: &str) -> Permission {
    if scope == "project" {
        return Permission::Network;
    }
    settings
        .get("mcp")
        .and_then(|m| m.get("permissions"))
        .and_then(|p| p.get(server))
        .and_then(Value::as_str)
        .map(parse_permission)
        .unwrap_or(Permission::Network)
}

/// The protocol tag; unknown tags fall back to `network`.
pub fn parse_permission(s: &str) -> Permission {
    match s {
        "read" => Permission::Read,
        "write" => Permission::Write,
        "exec" => Permission::Exec,
        "send" => Permission::Send,
        "config" => Permission::Config,
        "delegate" => Permission::Delegate,
        "secret" => Permission::Secret,
        _ => Permission::Network,
    }
}

/// The MCP tools of one turn (listed when the turn starts).
#[derive(Default, Clone)]
pub struct TurnTools(pub Vec<Arc<dyn Tool>>);

impl std::fmt::Debug for TurnTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|t| t.name()))
            .finish()
    }
}

/// One MCP tool as a session tool.
pub struct McpTool {
    name: &'static str,
    /// Server name.
    pub server: String,
    /// Tool name on the server.
    pub tool: String,
    description: String,
    schema: Value,
    permission: Permission,
    /// The server's `toolTimeoutSec`.
    timeout: Duration,
    client: McpClient,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool").field("name", &self.name).finish()
    }
}

impl Tool for McpTool {
    fn name(&self) -> &'static str {
        self.name
    }

    fn permission(&self) -> Permission {
        // The server's tag from the global settings (`permission_of`).
        self.permission
    }

    fn category(&self) -> &'static str {
        "mcp"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.into(),
            description: if self.description.is_empty() {
                format!("Tool {} of the MCP server {}.", self.tool, self.server)
            } else {
                self.description.clone()
            },
            parameters: self.schema.clone(),
        }
    }

    fn plan(&self, a: &Value, _workdir: &Path) -> Result<ToolPlan, String> {
        if !a.is_null() {
            args::object(a)?;
        }
        Ok(ToolPlan {
            permission: Tool::permission(self),
            outside_workdir: vec![],
            summary: format!(
                "mcp {}/{}: {}",
                self.server,
                self.tool,
                args::one_line(&a.to_string(), 80)
            ),
        })
    }

    fn run(&self, a: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let client = self.client.clone();
        let (server, tool, timeout) = (self.server.clone(), self.tool.clone(), self.timeout);
        Box::pin(async move {
            let call_id = snowpea_common::ids::new_id("mcpc");
            tokio::select! {
                out = client.call(&ctx.workdir, &server, &tool, &a, &call_id, timeout) => out,
                _ = ctx.cancel.cancelled() => ToolOutput::error("interrupted by the user"),
            }
        })
    }
}

#[cfg(test)]
pub mod fake;

#[cfg(test)]
#[path = "mcp_tests.rs"]
mod tests;

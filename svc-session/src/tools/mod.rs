//! Built-in agent tools (issue 2 "Built-in tools"; names are API): `read_file`,
//! `write_file`, `edit_file`, `list_dir`, `glob`, `grep`, `shell` (and, composed by
//! [`Tools`], `ask_user`, the memory and schedule tools and `web_search`).
//!
//! A tool declares its permission tag and which paths it touches ([`Tool::plan`]) so the
//! session can apply the mode matrix and ask for approval *before* anything runs; then
//! [`Tool::run`] executes it inside the session workdir. Paths resolve inside the workdir;
//! a path that leaves it is flagged in the plan (`outside_workdir`) and the session asks a
//! person even where the mode would allow.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use snowpea_session_llm::provider::ToolSpec;

pub mod ask_user;
pub mod catalog;
pub mod fs;
pub mod memory;
pub mod paths;
pub mod schedule;
pub mod search;
pub mod shell;
pub mod web_search;

pub use catalog::Tools;

/// Permission tags of the protocol (issue 2 "Permissions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Permission {
    /// Reads files or state.
    Read,
    /// Changes files.
    Write,
    /// Runs a process.
    Exec,
    /// Talks to the network.
    Network,
    /// Sends something to a person or service outside.
    Send,
    /// Changes daemon configuration.
    Config,
    /// Hands work to another agent.
    Delegate,
    /// Touches secrets.
    Secret,
}

impl Permission {
    /// The protocol's spelling (`read`, `write`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::Write => "write",
            Permission::Exec => "exec",
            Permission::Network => "network",
            Permission::Send => "send",
            Permission::Config => "config",
            Permission::Delegate => "delegate",
            Permission::Secret => "secret",
        }
    }
}

/// What a call would do, decided before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolPlan {
    /// Permission tag that applies to this call.
    pub permission: Permission,
    /// Absolute paths the call touches that lie outside the workdir (needs approval).
    pub outside_workdir: Vec<PathBuf>,
    /// One line for the person approving, e.g. `shell: cargo test` or `write_file src/a.rs`.
    pub summary: String,
}

/// A file change made by a tool (the `diff` session event).
#[derive(Debug, Clone, PartialEq)]
pub struct FileDiff {
    /// Path relative to the workdir (absolute when outside it).
    pub path: String,
    /// Unified diff text (`similar`), `---`/`+++` headers included.
    pub diff: String,
    /// Lines added.
    pub added: u64,
    /// Lines removed.
    pub removed: u64,
    /// True when the file did not exist before.
    pub created: bool,
}

/// The outcome of one tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// False when the tool failed (the model sees the error text).
    pub ok: bool,
    /// Text fed back to the model (capped by the tool).
    pub content: String,
    /// Structured facts for the `tool.result` event (exit code, bytes, truncated, …).
    pub meta: Value,
    /// File change, for `write_file`/`edit_file`.
    pub diff: Option<FileDiff>,
}

impl ToolOutput {
    /// A failed call with an error message.
    pub fn error(message: impl Into<String>) -> Self {
        ToolOutput {
            ok: false,
            content: message.into(),
            meta: Value::Null,
            diff: None,
        }
    }
}

/// Everything a running tool may use.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Session workdir (absolute, canonical).
    pub workdir: PathBuf,
    /// Sink for `tool.progress` chunks (e.g. shell output as it arrives).
    pub progress: mpsc::UnboundedSender<String>,
    /// Cancelled on `session.interrupt`: a tool stops promptly (shell kills its process group).
    pub cancel: CancellationToken,
    /// Cap on output fed back to the model, in bytes.
    pub output_cap: usize,
    /// Id of the session whose turn runs the tool (empty outside a session, e.g. in tests).
    pub session_id: String,
    /// That session's permission mode (`plan`, `accept`, `auto`); empty outside a session.
    pub mode: String,
    /// The turn running the call (empty outside a session).
    pub turn_id: String,
    /// The call's id (`tool.call` `callId`; empty outside a session).
    pub call_id: String,
    /// The named agent whose own session runs the call (issue 19): its memory namespace is
    /// `agent:<name>`; `None` elsewhere.
    pub named_agent: Option<String>,
    /// Facts of the running turn a host tool hands its host (`tool.invoke`); `None`
    /// outside a turn.
    pub turn: Option<Arc<TurnFacts>>,
    /// Where the call's files and commands are (issue 23): the session's backend. Built-in
    /// tools touch files and run commands only through it.
    pub backend: Arc<dyn crate::backend::Backend>,
}

/// What `tool.invoke` tells a host about the turn behind a call (spec 1.22.0–1.25.0).
#[derive(Debug, Clone, Default)]
pub struct TurnFacts {
    /// Who started the running turn: `human`, `agent`, `schedule`, `member` or `system`.
    pub origin: &'static str,
    /// The latest message the session's person typed (`userTurn`).
    pub user_turn: Option<snowpea_proto::session::v1::tool_invoke_params::UserTurn>,
    /// `agent-switch` while the session is guarded (`session.setAgent{guardTurn}`).
    pub guard: Option<String>,
    /// Files attached in the conversation, as `session.attachments` lists them.
    pub attachments: Vec<snowpea_proto::session::v1::SessionAttachment>,
}

/// Which files a call may change, for its checkpoint (issue 20), decided before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Writes {
    /// The call changes no files.
    Nothing,
    /// Exactly these files (absolute, resolved as the tool will touch them).
    Files(Vec<PathBuf>),
    /// Anything in the workdir (a shell command): found by comparing the tree before and after.
    Workdir,
}

/// A built-in tool.
pub trait Tool: Send + Sync {
    /// Tool name (API).
    fn name(&self) -> &'static str;
    /// Description and JSON Schema offered to the model.
    fn spec(&self) -> ToolSpec;
    /// The tool's permission tag: its one declaration (issue 24 §4), which `tool.list`
    /// reports, every [`ToolPlan`] of [`Tool::plan`] carries, and so the mode matrix
    /// ([`crate::permissions::decide`]) and approvals (`approval.request.risk`, the
    /// allowlist key) use.
    fn permission(&self) -> Permission;
    /// The category `tool.list` reports (`files`, `search`, `shell`, `memory`, `mcp`,
    /// `builtin`).
    fn category(&self) -> &'static str;
    /// Validates `args` and says what the call would do (its plan's `permission` is
    /// [`Tool::permission`]). `Err` is an argument error,
    /// reported to the model as a failed `tool.result` without asking anyone.
    fn plan(&self, args: &Value, workdir: &Path) -> Result<ToolPlan, String>;
    /// Runs the call. Never panics on bad input; failures are `ToolOutput { ok: false }`.
    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput>;
    /// The files the call would change (their before-state is checkpointed first). The
    /// default is none; every built-in tool that changes files overrides it.
    fn writes(&self, _args: &Value, _workdir: &Path) -> Writes {
        Writes::Nothing
    }
}

/// The built-in tools, in the order they are offered to the model; the processes they
/// start carry `mark` ([`snowpea_common::orphans::mark`]).
pub fn builtin(mark: &str) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(fs::ReadFile),
        Arc::new(fs::WriteFile),
        Arc::new(fs::EditFile),
        Arc::new(fs::ListDir),
        Arc::new(search::Glob),
        Arc::new(search::Grep),
        Arc::new(shell::Shell::marked(mark.to_owned())),
    ]
}

/// Argument parsing shared by the built-in tools: every error names the field.
pub(crate) mod args {
    use serde_json::{Map, Value};

    /// `args` as a JSON object.
    pub(crate) fn object(args: &Value) -> Result<&Map<String, Value>, String> {
        args.as_object()
            .ok_or_else(|| "arguments must be a JSON object".to_string())
    }

    /// A present, non-null field.
    fn field<'a>(args: &'a Value, name: &str) -> Result<Option<&'a Value>, String> {
        Ok(object(args)?.get(name).filter(|v| !v.is_null()))
    }

    /// A required string field.
    pub(crate) fn required_str<'a>(args: &'a Value, name: &str) -> Result<&'a str, String> {
        match field(args, name)? {
            None => Err(format!("missing required argument `{name}`")),
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(format!("argument `{name}` must be a string")),
        }
    }

    /// An optional string field (`null` counts as absent).
    pub(crate) fn optional_str<'a>(args: &'a Value, name: &str) -> Result<Option<&'a str>, String> {
        match field(args, name)? {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("argument `{name}` must be a string")),
        }
    }

    /// An optional boolean field (`null` counts as absent).
    pub(crate) fn optional_bool(args: &Value, name: &str) -> Result<Option<bool>, String> {
        match field(args, name)? {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(format!("argument `{name}` must be a boolean")),
        }
    }

    /// An optional non-negative integer field (`null` counts as absent).
    pub(crate) fn optional_u64(args: &Value, name: &str) -> Result<Option<u64>, String> {
        match field(args, name)? {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) => Ok(Some(n)),
                None => match v.as_f64() {
                    Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64 => {
                        Ok(Some(f as u64))
                    }
                    _ => Err(format!("argument `{name}` must be a non-negative integer")),
                },
            },
        }
    }

    /// An optional positive number field (`null` counts as absent).
    pub(crate) fn optional_positive_f64(args: &Value, name: &str) -> Result<Option<f64>, String> {
        match field(args, name)? {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(f) if f > 0.0 && f.is_finite() => Ok(Some(f)),
                _ => Err(format!("argument `{name}` must be a positive number")),
            },
        }
    }

    /// Cuts `s` to at most `max` characters, marking the cut with `…`, on one line.
    pub(crate) fn one_line(s: &str, max: usize) -> String {
        let flat: String = s.trim().replace("\r\n", "\n").replace('\n', " ↵ ");
        if flat.chars().count() <= max {
            flat
        } else {
            let mut cut: String = flat.chars().take(max).collect();
            cut.push('…');
            cut
        }
    }

    /// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
    pub(crate) fn floor_char_boundary(s: &str, max: usize) -> usize {
        if max >= s.len() {
            return s.len();
        }
        let mut i = max;
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

/// Runs blocking tool work (file system, walking, searching) off the async threads; a
/// panic in it becomes a failed [`ToolOutput`] instead of unwinding into the session.
pub(crate) async fn run_blocking<F>(work: F) -> ToolOutput
where
    F: FnOnce() -> ToolOutput + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(output) => output,
        Err(e) => ToolOutput::error(format!("internal error in tool: {e}")),
    }
}

/// A [`ToolContext`] on `workdir` for tests, with the receiving end of its progress channel.
#[cfg(test)]
pub(crate) fn test_context(
    workdir: &Path,
    output_cap: usize,
) -> (ToolContext, mpsc::UnboundedReceiver<String>) {
    let (progress, rx) = mpsc::unbounded_channel();
    let ctx = ToolContext {
        workdir: std::fs::canonicalize(workdir).unwrap_or_else(|_| workdir.to_path_buf()),
        progress,
        cancel: CancellationToken::new(),
        output_cap,
        session_id: String::new(),
        mode: String::new(),
        turn_id: String::new(),
        call_id: String::new(),
        named_agent: None,
        turn: None,
        backend: crate::backend::local(),
    };
    (ctx, rx)
}

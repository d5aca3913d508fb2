//! Built-in agent tools (issue 2 "Built-in tools"; names are API): `read_file`,
//! `write_file`, `edit_file`, `list_dir`, `glob`, `grep`, `shell`.
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

use crate::provider::ToolSpec;

pub mod fs;
pub mod paths;
pub mod search;
pub mod shell;

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
        ToolOutput { ok: false, content: message.into(), meta: Value::Null, diff: None }
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
}

/// A built-in tool.
pub trait Tool: Send + Sync {
    /// Tool name (API).
    fn name(&self) -> &'static str;
    /// Description and JSON Schema offered to the model.
    fn spec(&self) -> ToolSpec;
    /// Validates `args` and says what the call would do. `Err` is an argument error,
    /// reported to the model as a failed `tool.result` without asking anyone.
    fn plan(&self, args: &Value, workdir: &Path) -> Result<ToolPlan, String>;
    /// Runs the call. Never panics on bad input; failures are `ToolOutput { ok: false }`.
    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput>;
}

/// The built-in tools, in the order they are offered to the model.
pub fn builtin() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(fs::ReadFile),
        Arc::new(fs::WriteFile),
        Arc::new(fs::EditFile),
        Arc::new(fs::ListDir),
        Arc::new(search::Glob),
        Arc::new(search::Grep),
        Arc::new(shell::Shell),
    ]
}

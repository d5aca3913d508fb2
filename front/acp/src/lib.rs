//! `snowpea acp` (issue 33, DESIGN.md §9 "Front ends"): an **Agent Client Protocol** agent
//! (ACP protocol version 1, the official `agent-client-protocol` crate) on stdin/stdout that is
//! an ordinary client of the running Snowpea suite. Editors (Zed, JetBrains, Neovim plugins)
//! launch it as their agent command; every ACP call becomes native protocol calls on the
//! gateway's WebSocket through the Rust SDK, so the sessions stay visible to `snowpea chat`
//! and every other client. There is no private channel and no second agent loop.
//!
//! One module per ACP method family:
//! * [`initialize`]: `initialize` (capabilities, agent info, no auth methods) and the
//!   connection to the daemon it opens ([`daemon`]).
//! * [`sessions`]: `session/new`, `session/load`, `session/list`, `session/close`.
//! * [`prompt`]: `session/prompt` (ACP content blocks → `session.prompt`) and
//!   `session/cancel` (→ `session.interrupt`); [`stop_reason`] maps `turn.done.reason`.
//! * [`updates`]: native `session.event`s → ACP `session/update` notifications.
//! * [`permission`]: `approval.request` / `question.request` → `session/request_permission`.
//! * [`modes`]: `session/set_mode` ↔ `session.setMode`, `availableModes`.
//! * [`commands`]: `available_commands_update` from `command.list` / `commands.changed`.
//! * [`mcp`]: the editor's `mcpServers` → `mcp.add` / `mcp.remove`.
//! * [`transport`]: bounded newline-delimited JSON-RPC on stdio.
//! * [`errors`]: native SDK errors → ACP JSON-RPC errors, in one place.
//!
//! The `snowpea` binary links this crate as the subcommand `snowpea acp` ([`run`]); starting
//! the suite when it is not running is the supervisor's code path, handed in as a
//! [`SuiteStarter`] so this crate does not depend on the supervisor. Mapping tables and editor
//! set-up: docs/ACP.md.

pub mod commands;
pub mod daemon;
pub mod errors;
pub mod initialize;
pub mod mcp;
pub mod modes;
pub mod permission;
pub mod prompt;
pub mod sessions;
pub mod state;
pub mod stop_reason;
pub mod transport;
pub mod updates;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use agent_client_protocol::{on_receive_notification, on_receive_request, Agent};
use clap::Args;

pub use daemon::SuiteStarter;
use state::AcpAgent;

/// The ACP connection to the editor (protocol v1, agent side, talking to the client).
pub type Conn = agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Client>;

/// A boxed, sendable future (the shape of [`SuiteStarter`]'s answer).
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

const ACP_HELP: &str = "\
Speaks the Agent Client Protocol (v1, newline-delimited JSON-RPC) on stdin/stdout: point an
editor's agent command at `snowpea acp` (Zed: agent_servers in settings.json; docs/ACP.md).
It starts the suite when it is not running and reads the daemon token from the home; nothing
but ACP is written to stdout, diagnostics go to stderr.

Exit codes: 0 the editor closed stdin, 1 the ACP connection failed, 2 usage error.";

/// Arguments of `snowpea acp`.
#[derive(Debug, Clone, Args)]
#[command(after_help = ACP_HELP)]
pub struct AcpArgs {
    /// Snowpea home (default: $SNOWPEA_HOME, else ~/.snowpea).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
}

/// Exit codes of `snowpea acp`.
pub mod exit {
    /// The editor closed the connection (stdin EOF).
    pub const OK: i32 = 0;
    /// The ACP connection failed (a transport or protocol error).
    pub const FAILURE: i32 = 1;
    /// Usage error (the home cannot be resolved).
    pub const USAGE: i32 = 2;
}

/// Runs the ACP agent on stdio until the editor closes stdin; returns the exit code.
///
/// `home` is the resolved Snowpea home; `starter` starts the suite there when it is not
/// running (called at `initialize`, and again when a reconnect finds no daemon).
pub async fn run(home: &Path, starter: SuiteStarter) -> i32 {
    let agent = Arc::new(AcpAgent::new(home.to_owned(), starter));
    let result = serve(agent.clone(), transport::stdio()).await;
    agent.shutdown().await;
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("snowpea acp: {e}");
            exit::FAILURE
        }
    }
}

/// Serves ACP on `transport` with one handler per ACP method; returns when the editor hangs up.
pub async fn serve(
    agent: Arc<AcpAgent>,
    transport: impl agent_client_protocol::ConnectTo<Agent> + 'static,
) -> Result<(), agent_client_protocol::Error> {
    let (a1, a2, a3, a4, a5, a6, a7, a8, a9) = (
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
    );
    Agent
        .v1()
        .name("snowpea")
        .on_receive_request(
            async move |req, responder, cx| initialize::initialize(&a1, req, responder, cx),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req, responder, cx| initialize::authenticate(&a2, req, responder, cx),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req, responder, cx| sessions::new_session(&a3, req, responder, cx),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req, responder, cx| sessions::load_session(&a4, req, responder, cx),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req, responder, cx| sessions::list_sessions(&a5, req, responder, cx),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req, responder, cx| sessions::close_session(&a6, req, responder, cx),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req, responder, cx| modes::set_mode(&a7, req, responder, cx),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req, responder, cx| prompt::prompt(&a8, req, responder, cx),
            on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification, cx| prompt::cancel(&a9, notification, cx),
            on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}

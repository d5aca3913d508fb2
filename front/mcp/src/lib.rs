//! `snowpea mcp serve` (issue 38): a **Model Context Protocol server** on stdin/stdout, built
//! with the official Rust SDK (`rmcp`, server side), that is an ordinary client of the running
//! Snowpea suite — exactly like `snowpea acp` and `snowpea chat`. An MCP host (Claude Desktop,
//! Cursor, VS Code, codex, another agent, another Snowpea) hands a task to a Snowpea session and
//! gets the answer back; the session stays visible to `snowpea chat` and every other client.
//! There is no private channel: every tool is native protocol calls through the Rust SDK.
//!
//! Modules:
//! * [`server`]: the `rmcp` [`rmcp::ServerHandler`] (initialize, tools, resources, prompts).
//! * [`tools`]: one file per MCP tool (`snowpea_prompt`, `snowpea_sessions`,
//!   `snowpea_session_history`, `snowpea_memory_search`, `snowpea_memory_write`,
//!   `snowpea_schedule`, `snowpea_jobs`), their JSON schemas and the dispatch.
//! * [`approvals`]: native `approval.request`s → MCP elicitation, or left to other clients.
//! * [`resources`]: each session's transcript as `snowpea://session/<id>`.
//! * [`prompts`]: the slash commands and skills as MCP prompts.
//! * [`transcript`], [`turn`]: native events → text, and a turn's summary.
//! * [`args`]: reading tool arguments with errors that name the field.
//! * [`daemon`]: reaching (and starting) the suite.
//!
//! The `snowpea` binary links this crate as `snowpea mcp serve` ([`run`]); starting the suite
//! is the supervisor's code path, handed in as a [`SuiteStarter`]. Set-up and tool reference:
//! docs/MCP-SERVER.md.

pub mod approvals;
pub mod args;
pub mod daemon;
pub mod prompts;
pub mod resources;
pub mod server;
pub mod tools;
pub mod transcript;
pub mod turn;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use clap::{Args, Subcommand};
use rmcp::ServiceExt;

pub use daemon::SuiteStarter;
pub use server::SnowpeaMcp;

/// A boxed, sendable future (the shape of [`SuiteStarter`]'s answer).
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

const SERVE_HELP: &str = "\
Speaks the Model Context Protocol (stdio transport: newline-delimited JSON-RPC) on
stdin/stdout: point an MCP host's server command at `snowpea mcp serve` (Claude Desktop,
Cursor, VS Code, codex, another Snowpea; docs/MCP-SERVER.md). It starts the suite when it is
not running and reads the daemon token from the home; nothing but MCP is written to stdout,
diagnostics go to stderr.

Exit codes: 0 the host closed stdin (or sent SIGTERM), 1 the MCP connection failed, 2 usage
error. Turns this server started that still run when the host hangs up are interrupted.";

/// Arguments of `snowpea mcp`.
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: McpCommand,
}

/// `snowpea mcp …` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum McpCommand {
    /// Serve Snowpea as an MCP server on stdio (tools, session transcripts, prompts).
    #[command(after_help = SERVE_HELP)]
    Serve(ServeArgs),
}

/// Arguments of `snowpea mcp serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Snowpea home (default: $SNOWPEA_HOME, else ~/.snowpea).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
}

/// Exit codes of `snowpea mcp serve`.
pub mod exit {
    /// The host closed the connection (stdin EOF), or SIGTERM.
    pub const OK: i32 = 0;
    /// The MCP connection failed (a transport or protocol error).
    pub const FAILURE: i32 = 1;
    /// Usage error (the home cannot be resolved).
    pub const USAGE: i32 = 2;
}

/// Runs the MCP server on stdio until the host closes stdin; returns the exit code.
///
/// `home` is the resolved Snowpea home; `starter` starts the suite there when it is not
/// running (called on the first request that needs the daemon, and again after a failure).
pub async fn run(home: &Path, starter: SuiteStarter) -> i32 {
    let server = SnowpeaMcp::new(home.to_owned(), starter);
    let result = tokio::select! {
        result = serve(server.clone(), rmcp::transport::stdio()) => result,
        // A host that stops a server sends SIGTERM when it does not exit after stdin closed:
        // the running turns are still interrupted (below) before exiting.
        () = terminated() => {
            daemon::diag("terminated (SIGTERM); interrupting the running turns this server started");
            Ok(())
        }
    };
    server.shutdown().await;
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("snowpea mcp serve: {e}");
            exit::FAILURE
        }
    }
}

/// Resolves on SIGTERM (never on other platforms, or when the handler cannot be set).
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut sigterm) = signal(SignalKind::terminate()) {
            sigterm.recv().await;
            return;
        }
    }
    std::future::pending::<()>().await
}

/// Serves MCP on `transport` until the host hangs up; the moment its input ends, the turns
/// this server started are interrupted ([`SnowpeaMcp::host_hung_up`]).
pub async fn serve<T, E, A>(server: SnowpeaMcp, transport: T) -> Result<(), String>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleServer, E, A> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    use rmcp::transport::IntoTransport;
    let hung_up = tokio_util::sync::CancellationToken::new();
    let transport = server::HostTransport {
        inner: IntoTransport::<rmcp::RoleServer, E, A>::into_transport(transport),
        hung_up: hung_up.clone(),
    };
    let watcher = {
        let server = server.clone();
        let hung_up = hung_up.clone();
        tokio::spawn(async move {
            hung_up.cancelled().await;
            server.host_hung_up();
        })
    };
    let _stop_watcher = AbortOnDrop(watcher);
    let running = server
        .serve(transport)
        .await
        .map_err(|e| format!("the MCP handshake failed: {e}"))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| format!("the MCP connection failed: {e}"))
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The server as a cheap handle (it is an `Arc` inside).
pub type Shared = Arc<server::State>;

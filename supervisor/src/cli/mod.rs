//! The `snowpea` command line (clap): `supervisor start|stop|status|restart|logs`, `run`
//! `cmd`, `chat`, `acp` and `mcp serve`. One file per subcommand; each returns the process exit code (see [`exit`]).

pub mod logs;
pub mod restart;
pub mod start;
pub mod status;
pub mod stop;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Exit codes of `snowpea supervisor …` (documented in `--help`).
pub mod exit {
    /// Success.
    pub const OK: i32 = 0;
    /// Failure (the message says why).
    pub const FAILURE: i32 = 1;
    /// Usage error (clap's own code).
    pub const USAGE: i32 = 2;
    /// The suite is not running (`status`, `restart`).
    pub const NOT_RUNNING: i32 = 3;
    /// The suite runs but a process is `failed` (it used up its restart budget; `status`).
    pub const FAILED_PROCESS: i32 = 4;
}

const EXIT_CODES: &str = "\
Exit codes (supervisor commands):
  0  success
  1  failure (also an unknown process name for restart and logs; a start that finds
     the suite running with other model settings than this shell's, or a
     SNOWPEA_PROVIDER=fake:<script> whose script cannot be used)
  2  usage error
  3  not running (status, restart)
  4  a process is failed: it crashed more than 5 times within 60 s (status)

Files under the home (--home, else $SNOWPEA_HOME, else ~/.snowpea):
  daemon.json             port, supervisor pid, token of the running suite
  run/supervisor.sock     control socket (gRPC snowpea.supervisor.v1.Supervisor)
  run/<service>.sock      one gRPC socket per service
  logs/<process>.log      one log per process (supervisor, services, gateway)";

const TOP_HELP: &str = "\
Talking to the agent: `snowpea chat` (the terminal client; keys in docs/CHAT.md), or
`snowpea run \"<prompt>\"` for one prompt from a script.

Picking a model: the daemon reads these when it starts (restart it after a change):
  ANTHROPIC_API_KEY / OPENAI_API_KEY     use that vendor's API
  providers.default, providers.<vendor>  in $SNOWPEA_HOME/settings.json (e.g. a local
                                         llama.cpp or Ollama server)
  SNOWPEA_PROVIDER=fake:<script.json>    the scripted provider, e.g. examples/demo.json
  e.g.: snowpea supervisor stop; SNOWPEA_PROVIDER=fake:$PWD/examples/demo.json snowpea supervisor start

Logs: SNOWPEA_LOG=debug (EnvFilter syntax, default info) and SNOWPEA_LOG_FORMAT=json, read
by the supervisor and every service when they start; one file per process in
$SNOWPEA_HOME/logs/ (`snowpea supervisor logs <process>`).

`snowpea run --help` lists the exit codes of run; `snowpea supervisor --help` those of the
supervisor commands.";

/// The `snowpea` command.
#[derive(Debug, Parser)]
#[command(name = "snowpea", version, about = "Snowpea: a local AI-agent daemon", after_help = TOP_HELP)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start, stop and inspect the suite.
    #[command(subcommand, after_help = EXIT_CODES)]
    Supervisor(SupervisorCommand),
    /// Run one prompt against the suite (starting it if needed).
    Run(crate::run::RunArgs),
    /// Run a slash command headless against the running suite (see --help for the
    /// commands and their risk).
    Cmd(crate::cmd::CmdArgs),
    /// Talk to the agent: the full-screen terminal client (starting the suite if needed).
    Chat(crate::chat::ChatArgs),
    /// Chat platform bindings (Telegram, Discord, Slack): bind, list, unbind, sync.
    Gateway(crate::gateway_cmd::GatewayArgs),
    /// Agent Client Protocol agent on stdio for editors (Zed, JetBrains, Neovim; docs/ACP.md).
    Acp(snowpea_acp::AcpArgs),
    /// Snowpea as an MCP server: `snowpea mcp serve` on stdio for MCP hosts (Claude Desktop,
    /// Cursor, VS Code, codex; docs/MCP-SERVER.md).
    Mcp(snowpea_mcp_serve::McpArgs),
}

/// `snowpea supervisor …`.
#[derive(Debug, Subcommand)]
pub enum SupervisorCommand {
    /// Start the suite (returns once it listens; --foreground runs it in this process).
    #[command(after_help = EXIT_CODES)]
    Start(start::StartArgs),
    /// Stop the suite: SIGTERM every process, SIGKILL after a grace period.
    #[command(after_help = EXIT_CODES)]
    Stop(HomeArgs),
    /// Show every supervised process (pid, state, restarts, uptime).
    #[command(after_help = EXIT_CODES)]
    Status(status::StatusArgs),
    /// Restart one process by name (session, gateway, …) or `all`.
    #[command(after_help = EXIT_CODES)]
    Restart(restart::RestartArgs),
    /// Print (and follow) the log of a process.
    #[command(after_help = EXIT_CODES)]
    Logs(logs::LogsArgs),
}

/// The `--home` option shared by every subcommand.
#[derive(Debug, Clone, Args)]
pub struct HomeArgs {
    /// Snowpea home (default: $SNOWPEA_HOME, else ~/.snowpea).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
}

impl HomeArgs {
    /// Resolves the home.
    pub fn resolve(&self) -> anyhow::Result<snowpea_common::home::Home> {
        snowpea_common::home::Home::resolve(self.home.as_deref())
    }
}

/// The home of `snowpea supervisor start --foreground` (the one command that runs the
/// supervisor in this process and so logs), `None` for every other command.
pub fn foreground_home(cli: &Cli) -> Option<snowpea_common::home::Home> {
    match &cli.command {
        Command::Supervisor(SupervisorCommand::Start(a)) if a.foreground => {
            snowpea_common::home::Home::resolve(a.home.as_deref()).ok()
        }
        _ => None,
    }
}

/// The suite starter the stdio front ends call when no daemon answers: starts the suite in
/// the home at the given root the way `run` and `chat` do ([`start::start_suite`]); the
/// error is its message. (`snowpea_acp::SuiteStarter` and `snowpea_mcp_serve::SuiteStarter`
/// are the same type.)
fn suite_starter() -> snowpea_acp::SuiteStarter {
    std::sync::Arc::new(|root: &std::path::Path| {
        let root = root.to_owned();
        Box::pin(async move {
            let home =
                snowpea_common::home::Home::resolve(Some(&root)).map_err(|e| format!("{e:#}"))?;
            start::start_suite(&home, None)
                .await
                .map(|_| ())
                .map_err(|e| format!("{e:#}"))
        })
    })
}

/// The home of a stdio front end (`--home`, else the default), or the message on stderr and
/// `usage` as the exit code.
fn front_end_home(
    command: &str,
    home: Option<&std::path::Path>,
    usage: i32,
) -> Result<snowpea_common::home::Home, i32> {
    snowpea_common::home::Home::resolve(home).map_err(|e| {
        eprintln!("{command}: {e:#}");
        usage
    })
}

/// `snowpea acp` (issue 33): the ACP front end of `front/acp`.
async fn acp(args: snowpea_acp::AcpArgs) -> i32 {
    match front_end_home(
        "snowpea acp",
        args.home.as_deref(),
        snowpea_acp::exit::USAGE,
    ) {
        Ok(home) => snowpea_acp::run(home.root(), suite_starter()).await,
        Err(code) => code,
    }
}

/// `snowpea mcp serve` (issue 38): the MCP server front end of `front/mcp`.
async fn mcp(args: snowpea_mcp_serve::McpArgs) -> i32 {
    let snowpea_mcp_serve::McpCommand::Serve(serve) = args.command;
    let usage = snowpea_mcp_serve::exit::USAGE;
    match front_end_home("snowpea mcp serve", serve.home.as_deref(), usage) {
        Ok(home) => snowpea_mcp_serve::run(home.root(), suite_starter()).await,
        Err(code) => code,
    }
}

/// Runs the parsed command and returns the exit code.
pub async fn dispatch(cli: Cli) -> i32 {
    let result = match cli.command {
        Command::Run(args) => return crate::run::run(args).await,
        Command::Cmd(args) => return crate::cmd::cmd(args).await,
        Command::Chat(args) => return crate::chat::run(args).await,
        Command::Gateway(args) => return crate::gateway_cmd::gateway(args).await,
        Command::Acp(args) => return acp(args).await,
        Command::Mcp(args) => return mcp(args).await,
        Command::Supervisor(SupervisorCommand::Start(a)) => start::start(a).await,
        Command::Supervisor(SupervisorCommand::Stop(a)) => stop::stop(a).await,
        Command::Supervisor(SupervisorCommand::Status(a)) => status::status(a).await,
        Command::Supervisor(SupervisorCommand::Restart(a)) => restart::restart(a).await,
        Command::Supervisor(SupervisorCommand::Logs(a)) => logs::logs(a).await,
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("snowpea: {e:#}");
            exit::FAILURE
        }
    }
}

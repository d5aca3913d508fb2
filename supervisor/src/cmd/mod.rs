//! `snowpea cmd <command> [args…] [--session ID | --workdir DIR] [--json] [--yes]` (issue 18
//! "snowpea cmd"): the headless control plane. It runs a slash command through
//! `command.list` / `command.run` over the suite's WebSocket as a `cli` client (so the
//! daemon applies the confirmation rule) and prints the result; it never starts the suite.
//!
//! * Session: the target rule of [`target`] (`--session ID`, else the directory's session a
//!   client opened, else its latest `snowpea run` session; `--workdir DIR` creates one when
//!   there is none); without any, commands that need one fail `SESSION_REQUIRED`. `help`
//!   and `session-command list` need none (they read `command.list`, [`help`]).
//! * `--help` lists the commands from the running suite's `command.list` ([`help`]), so it
//!   says exactly what the daemon runs.
//! * `--json` prints exactly one object `{ok, command, data, code?, message?, risk?}`.
//! * Exit codes ([`exit`]): 0 success, 1 failure, 2 bad usage, 3 the suite is not running.
//!
//! [`output`] renders results.

pub mod help;
pub mod output;
pub mod target;

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::{json, Value};
use snowpea_common::home::Home;
use snowpea_sdk::{Client, ConnectOptions, ReconnectPolicy};

use output::Result as CmdResult;

/// Exit codes of `snowpea cmd`.
pub mod exit {
    /// The command succeeded.
    pub const OK: i32 = 0;
    /// The command failed (the stable code says why).
    pub const FAILURE: i32 = 1;
    /// Bad usage of `snowpea cmd` itself.
    pub const USAGE: i32 = 2;
    /// The suite is not running (`snowpea supervisor start` starts it).
    pub const NOT_RUNNING: i32 = 3;
}

/// Stable failure codes the CLI itself produces (the daemon sends the others).
pub mod codes {
    /// See `docs/OPERATIONS.md` "snowpea cmd".
    pub const INVALID_ARGS: &str = "INVALID_ARGS";
    /// No such command.
    pub const NOT_FOUND: &str = "NOT_FOUND";
    /// No session given or found.
    pub const SESSION_REQUIRED: &str = "SESSION_REQUIRED";
    /// The suite is not running or not reachable.
    pub const NOT_CONFIGURED: &str = "NOT_CONFIGURED";
    /// The call failed.
    pub const EXECUTION_FAILED: &str = "EXECUTION_FAILED";
}

/// Default of `--timeout`: how long to wait for the command's `turn.done`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;

const CMD_HELP: &str = "\
The commands, their usage and risk tiers come from the running suite (`command.list`, the
declarations the daemon runs them by): `snowpea cmd --help` lists them when the suite runs,
`snowpea cmd <command> --help` shows one.

Which session a command runs in (the target rule):
  1. --session ID;
  2. else the open session of the directory (--workdir DIR, else the current one) that a
     client such as `snowpea chat` opened, the most recently active first;
  3. else the directory's latest `snowpea run` session (the one `snowpea run --continue`
     continues);
  4. else none: help and session-command list need none; with --workdir a session is
     created there for the command; otherwise the command fails SESSION_REQUIRED.

medium_write and high_risk writes need --yes (or --confirm); without it they fail with
CONFIRM_REQUIRED and change nothing. Arguments are checked first (INVALID_ARGS).
Markdown commands, skills and plugin commands run a model turn and are refused here
(HEADLESS_UNSUPPORTED).

Failure codes (--json `code`): INVALID_ARGS, NOT_FOUND, SESSION_REQUIRED, CONFIRM_REQUIRED,
NOT_CONFIGURED, EXECUTION_FAILED, HEADLESS_UNSUPPORTED.

Exit codes:
  0  success
  1  failure (the code says why)
  2  usage error
  3  the suite is not running (start it with `snowpea supervisor start`)";

/// Arguments of `snowpea cmd`.
#[derive(Debug, Clone, Args)]
#[command(after_help = CMD_HELP, disable_help_flag = true)]
pub struct CmdArgs {
    /// Snowpea home (default: $SNOWPEA_HOME, else ~/.snowpea).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Session to run the command in.
    #[arg(long, value_name = "ID", conflicts_with = "workdir")]
    pub session: Option<String>,
    /// Run in this directory's session (the target rule below; one is created when there is
    /// none).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Print one JSON object {ok, command, data, code?, message?, risk?}.
    #[arg(long)]
    pub json: bool,
    /// Confirm a medium_write / high_risk write.
    #[arg(long, visible_alias = "confirm")]
    pub yes: bool,
    /// Seconds to wait for the command to finish.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_TIMEOUT_SECS)]
    pub timeout: u64,
    /// Print help: the options, and the commands of the running suite with their usage
    /// and risk tiers (`<command> --help`: that command's).
    #[arg(short = 'h', long = "help")]
    pub help: bool,
    /// The command (without the slash; `name.sub` is `name sub`) and its arguments. The
    /// options above may also follow the command.
    #[arg(
        value_name = "COMMAND",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub words: Vec<String>,
}

/// The command line after the options mixed into the words were taken out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Invocation {
    /// Command name.
    pub name: String,
    /// Its arguments, as words.
    pub args: Vec<String>,
    /// `--session`.
    pub session: Option<String>,
    /// `--workdir`.
    pub workdir: Option<PathBuf>,
    /// `--home`.
    pub home: Option<PathBuf>,
    /// `--json`.
    pub json: bool,
    /// `--yes` / `--confirm`.
    pub yes: bool,
    /// `--timeout`.
    pub timeout: u64,
    /// `--help` / `-h`: print help instead of running (see [`help`]).
    pub help: bool,
}

/// Takes `snowpea cmd`'s own options out of the words (they may follow the command, as in
/// `snowpea cmd plan status --json`); the rest are the command and its arguments. A word
/// after `--` is always an argument.
pub fn invocation(a: &CmdArgs) -> Result<Invocation, String> {
    let mut inv = Invocation {
        session: a.session.clone(),
        workdir: a.workdir.clone(),
        home: a.home.clone(),
        json: a.json,
        yes: a.yes,
        timeout: a.timeout,
        help: a.help,
        ..Default::default()
    };
    let mut words = Vec::new();
    let mut it = a.words.iter().peekable();
    let mut literal = false;
    while let Some(w) = it.next() {
        if literal {
            words.push(w.clone());
            continue;
        }
        let mut value = |flag: &str| -> Result<Option<String>, String> {
            if w == flag {
                return it
                    .next()
                    .cloned()
                    .map(Some)
                    .ok_or_else(|| format!("{flag} needs a value"));
            }
            Ok(w.strip_prefix(&format!("{flag}=")).map(str::to_owned))
        };
        if w == "--" {
            literal = true;
            words.push(w.clone());
        } else if w == "--json" {
            inv.json = true;
        } else if w == "--yes" || w == "--confirm" {
            inv.yes = true;
        } else if w == "--help" || w == "-h" {
            inv.help = true;
        } else if let Some(v) = value("--session")? {
            inv.session = Some(v);
        } else if let Some(v) = value("--workdir")? {
            inv.workdir = Some(PathBuf::from(v));
        } else if let Some(v) = value("--home")? {
            inv.home = Some(PathBuf::from(v));
        } else if let Some(v) = value("--timeout")? {
            inv.timeout = v
                .parse()
                .map_err(|_| format!("--timeout must be a number of seconds, not {v:?}"))?;
        } else {
            words.push(w.clone());
        }
    }
    if inv.session.is_some() && inv.workdir.is_some() {
        return Err("--session and --workdir cannot be used together".into());
    }
    let Some(first) = words.first().cloned() else {
        if inv.help {
            return Ok(inv);
        }
        return Err("missing the command (see snowpea cmd --help)".into());
    };
    let first = first.trim_start_matches('/').to_owned();
    let (name, sub) = match first.split_once('.') {
        Some((n, s)) if !n.is_empty() && !s.is_empty() => (n.to_owned(), Some(s.to_owned())),
        _ => (first, None),
    };
    if name.is_empty() || name.starts_with('-') {
        return Err(format!("{name:?} is not a command name"));
    }
    inv.name = name;
    inv.args = sub.into_iter().chain(words.into_iter().skip(1)).collect();
    Ok(inv)
}

/// Runs `snowpea cmd`; returns the exit code.
pub async fn cmd(a: CmdArgs) -> i32 {
    let inv = match invocation(&a) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("snowpea cmd: {e}");
            return exit::USAGE;
        }
    };
    if inv.help {
        return help::print(&inv).await;
    }
    let json = inv.json;
    let (result, code) = run(&inv).await;
    output::print(&result, json);
    code
}

/// Connects to the running suite of `home` as a `cli` client (no reconnects: `cmd` never
/// starts or waits for the suite); the error says why it is not reachable.
pub(crate) async fn connect(home: &Home) -> Result<Client, String> {
    let opts = ConnectOptions::from_home(home.root()).map_err(|e| e.to_string())?;
    let opts = opts
        .with_client_id(snowpea_common::ids::new_id("cli"))
        .with_client_kind("cli")
        .with_reconnect(ReconnectPolicy {
            max_attempts: Some(0),
            ..ReconnectPolicy::default()
        });
    Client::connect(opts).await.map_err(|e| e.to_string())
}

async fn run(inv: &Invocation) -> (CmdResult, i32) {
    let home = match Home::resolve(inv.home.as_deref()) {
        Ok(h) => h,
        Err(e) => {
            let r = CmdResult::failure(&inv.name, codes::INVALID_ARGS, format!("{e:#}"), None);
            return (r, exit::USAGE);
        }
    };
    let client = match connect(&home).await {
        Ok(c) => c,
        Err(why) => {
            let message = format!(
                "the suite is not running ({why}); start it with `snowpea supervisor start` (home {})",
                home.root().display()
            );
            let r = CmdResult::failure(&inv.name, codes::NOT_CONFIGURED, message, None);
            return (r, exit::NOT_RUNNING);
        }
    };
    let out = with_client(&client, inv).await;
    client.close().await;
    out
}

/// The row of `name` in a `command.list` result.
fn find<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list.get("commands")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
}

/// The tier of this call, as the daemon decides it: the `x-tiers` entry of the bare
/// command or the subcommand, else the command's `x-risk`.
fn risk_of(row: &Value, args: &[String]) -> String {
    let schema = row.get("argsSchema").cloned().unwrap_or(Value::Null);
    let first = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map(String::as_str)
        .unwrap_or("");
    if let Some(t) = schema
        .pointer("/x-tiers")
        .and_then(|t| t.get(first))
        .and_then(Value::as_str)
    {
        return t.to_owned();
    }
    schema
        .get("x-risk")
        .and_then(Value::as_str)
        .unwrap_or("low_write")
        .to_owned()
}

/// `session-command list` from `command.list` (needs no session).
fn session_command_rows(list: &Value, risk: Option<&str>) -> Value {
    let rows: Vec<Value> = list
        .get("commands")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let s = c.get("argsSchema").cloned().unwrap_or(Value::Null);
            let r = s
                .get("x-risk")
                .and_then(Value::as_str)
                .unwrap_or("low_write");
            if risk.is_some_and(|want| want != r) {
                return None;
            }
            Some(json!({
                "name": c.get("name"),
                "summary": c.get("summary"),
                "source": c.get("source"),
                "risk": r,
                "needsConfirm": s.get("x-needsConfirm").and_then(Value::as_bool).unwrap_or(false),
                "readForms": s.get("x-readForms").cloned().unwrap_or(json!([])),
                "usage": s.get("x-usage"),
                "available": s.get("x-available").and_then(Value::as_bool).unwrap_or(true),
            }))
        })
        .collect();
    json!({ "commands": rows })
}

async fn with_client(client: &Client, inv: &Invocation) -> (CmdResult, i32) {
    let name = inv.name.as_str();
    let rpc_fail = |e: snowpea_sdk::Error| {
        let code = match e.code_str() {
            Some("invalid_params") => codes::INVALID_ARGS,
            Some("not_found") => codes::NOT_FOUND,
            _ => codes::EXECUTION_FAILED,
        };
        (
            CmdResult::failure(name, code, e.to_string(), None),
            exit::FAILURE,
        )
    };
    // The session, when there is one to find.
    let session = match (&inv.session, &inv.workdir) {
        (Some(id), _) => Some(id.clone()),
        (None, Some(dir)) => {
            let Ok(dir) = std::fs::canonicalize(dir) else {
                return (
                    CmdResult::failure(
                        name,
                        codes::INVALID_ARGS,
                        format!("--workdir {}: no such directory", dir.display()),
                        None,
                    ),
                    exit::USAGE,
                );
            };
            match target::of_dir(client, &dir).await {
                Ok(Some(id)) => Some(id),
                Ok(None) => match client
                    .create_session_with(json!({
                        "workdir": dir.to_string_lossy(),
                        "originSurface": target::CMD_SURFACE,
                    }))
                    .await
                {
                    Ok(id) => Some(id),
                    Err(e) => return rpc_fail(e),
                },
                Err(e) => return rpc_fail(e),
            }
        }
        (None, None) => match std::env::current_dir() {
            Ok(cwd) => match target::of_dir(client, &cwd).await {
                Ok(s) => s,
                Err(e) => return rpc_fail(e),
            },
            Err(_) => None,
        },
    };
    let list_params = match &session {
        Some(id) => json!({ "sessionId": id }),
        None => json!({}),
    };
    let list = match client.call("command.list", list_params).await {
        Ok(l) => l,
        Err(e) => return rpc_fail(e),
    };
    let Some(row) = find(&list, name) else {
        return (
            CmdResult::failure(
                name,
                codes::NOT_FOUND,
                format!("unknown command {name}; `snowpea cmd session-command list` lists them"),
                None,
            ),
            exit::FAILURE,
        );
    };
    let risk = risk_of(row, &inv.args);
    let command_id = match inv.args.first() {
        Some(sub)
            if !sub.starts_with("--")
                && row["argsSchema"]["properties"]["subcommand"]["enum"]
                    .as_array()
                    .is_some_and(|e| e.iter().any(|v| v.as_str() == Some(sub))) =>
        {
            format!("{name}.{sub}")
        }
        _ => name.to_owned(),
    };
    // Help and listing commands need no session: both read `command.list` (issue 32
    // item 10).
    if name == "help" && session.is_none() {
        return help::reply(&list, inv.args.first().map(String::as_str));
    }
    if name == "session-command" && session.is_none() {
        let risk_filter = inv.args.iter().find_map(|a| a.strip_prefix("--risk="));
        let data = session_command_rows(&list, risk_filter);
        return (CmdResult::success(&command_id, data, Some(risk)), exit::OK);
    }
    let Some(session_id) = session else {
        return (
            CmdResult::failure(
                &command_id,
                codes::SESSION_REQUIRED,
                "no open session in this directory: pass --session ID, or --workdir DIR to use (or create) one".into(),
                Some(risk),
            ),
            exit::FAILURE,
        );
    };
    let mut args: Vec<String> = inv.args.clone();
    if inv.yes {
        args.push("--yes".into());
    }
    let raw = match shlex::try_join(args.iter().map(String::as_str)) {
        Ok(r) => r,
        Err(_) => {
            return (
                CmdResult::failure(
                    &command_id,
                    codes::INVALID_ARGS,
                    "arguments must not contain NUL".into(),
                    Some(risk),
                ),
                exit::USAGE,
            )
        }
    };
    let mut events = client.events(&session_id);
    let run = client
        .call(
            "command.run",
            json!({"sessionId": session_id, "name": name, "args": raw}),
        )
        .await;
    let turn_id = match run {
        Ok(r) => match r.get("turnId").and_then(Value::as_str) {
            Some(t) => t.to_owned(),
            None => {
                return rpc_fail(snowpea_sdk::Error::Protocol(
                    "command.run without turnId".into(),
                ))
            }
        },
        Err(e) => return rpc_fail(e),
    };
    let done = match events
        .wait_for_turn_done(&turn_id, Duration::from_secs(inv.timeout))
        .await
    {
        Ok(d) => d,
        Err(e) => {
            let _ = client.interrupt(&session_id).await;
            return (
                CmdResult::failure(
                    &command_id,
                    codes::EXECUTION_FAILED,
                    format!("no result within {}s: {e}", inv.timeout),
                    Some(risk),
                ),
                exit::FAILURE,
            );
        }
    };
    output::from_turn(&command_id, &done.events, done.reason.as_deref(), risk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Invocation, String> {
        let cli =
            crate::cli::Cli::try_parse_from(["snowpea", "cmd"].iter().chain(args.iter()).copied())
                .map_err(|e| e.to_string())?;
        match cli.command {
            crate::cli::Command::Cmd(a) => invocation(&a),
            _ => Err("not cmd".into()),
        }
    }

    #[test]
    fn options_may_follow_the_command() {
        let i = parse(&["plan", "status", "--json", "--session", "s1"]).unwrap();
        assert_eq!(
            (i.name.as_str(), i.args.clone()),
            ("plan", vec!["status".to_string()])
        );
        assert!(i.json);
        assert_eq!(i.session.as_deref(), Some("s1"));
        let i = parse(&["--yes", "mcp.reconnect", "srv", "--timeout=5"]).unwrap();
        assert_eq!(i.name, "mcp");
        assert_eq!(i.args, vec!["reconnect", "srv"]);
        assert!(i.yes);
        assert_eq!(i.timeout, 5);
        let i = parse(&["export", "md", "--out=x.md", "--confirm"]).unwrap();
        assert_eq!(i.args, vec!["md", "--out=x.md"]);
        assert!(i.yes);
        assert!(parse(&["--json"]).is_err());
        assert!(parse(&["plan", "--session", "a", "--workdir", "/tmp"]).is_err());
        assert!(parse(&["plan", "--timeout=x"]).is_err());
    }
}

//! `snowpea run "<prompt>"` (issue 2, "CLI client"): starts the suite when it is not
//! running ([`crate::cli::start::start_suite`]), connects as a `cli` client, opens a session
//! in the working directory, sends the prompt and shows the turn until its `turn.done`.
//!
//! * [`render`]: how events are shown (plain text or `--json` lines).
//! * [`approve`]: answering `approval.request` (`--yes`, the terminal, or deny).
//!
//! Exit codes ([`exit`]) follow the turn's `turn.done.reason`. Ctrl-C sends
//! `session.interrupt` and waits (bounded) for the turn to end; a second Ctrl-C exits at once.
//! The same happens when the turn outlives `--timeout`.

pub mod approve;
pub mod render;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use snowpea_common::home::Home;
use snowpea_sdk::{Client, ConnectOptions, Error, ReconnectPolicy, SessionEvents};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::time::Instant;

use crate::cli::start::{start_suite, Started};
use render::Renderer;

/// Exit codes of `snowpea run` (documented in `snowpea run --help`).
pub mod exit {
    /// The turn completed.
    pub const COMPLETE: i32 = 0;
    /// The turn ended with an error (or the daemon refused a call).
    pub const ERROR: i32 = 1;
    /// Usage error: bad arguments, a working directory that does not exist.
    pub const USAGE: i32 = 2;
    /// The daemon could not be started or reached, the connection was lost, or a service
    /// behind the gateway answered `unavailable`.
    pub const UNAVAILABLE: i32 = 3;
    /// The turn ended `denied`, or a person (or this client, without a terminal) refused a
    /// tool call of the turn (`error{code:"approval_denied"}`).
    pub const DENIED: i32 = 4;
    /// The turn was interrupted (Ctrl-C) or timed out.
    pub const INTERRUPTED: i32 = 5;
}

const RUN_HELP: &str = "\
Exit codes:
  0  the turn completed
  1  the turn ended with an error, or the suite has no usable model (said at once)
  2  usage error (bad arguments, missing working directory)
  3  the daemon could not be started or reached, or a service it needs is down
  4  denied: a tool call was refused by a person (or here, without a terminal), which
     ends the turn, or the turn ended denied after repeated automatic denials
  5  interrupted (Ctrl-C) or timed out

Approvals are asked on the terminal (stdin, else /dev/tty); without a terminal they are
denied at once. --yes allows every tool call once; --mode plan|accept|auto picks what is
asked at all. Ctrl-C interrupts the turn; a second Ctrl-C exits at once.

Each run starts a new session (originSurface \"run\"); --continue continues this
directory's latest run session instead (open or saved), so a conversation can go on over
several runs. `snowpea cmd` runs commands in a session a client opened before a run session
(see `snowpea cmd --help`).

The model is the daemon's: SNOWPEA_PROVIDER and API keys are read by the suite when it
starts, not by `snowpea run` (see `snowpea --help`).";

/// Default of `--timeout`: how long a turn may run before it is interrupted.
pub const DEFAULT_TIMEOUT_SECS: u64 = 1800;

/// How often the spinner is redrawn (on a terminal, while the model thinks).
const SPINNER_EVERY: Duration = Duration::from_millis(100);

/// How long to wait for `turn.done` after Ctrl-C or the timeout sent `session.interrupt`.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// Give up reconnecting after this many failed attempts in a row (≈ 45 s with the default
/// backoff): the suite restarts a crashed gateway well within that.
const RECONNECT_ATTEMPTS: u32 = 12;

/// Arguments of `snowpea run`.
#[derive(Debug, Clone, Args)]
#[command(after_help = RUN_HELP)]
pub struct RunArgs {
    /// Snowpea home (default: $SNOWPEA_HOME, else ~/.snowpea).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Project folder of the session (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Permission mode (default: the project's setting).
    #[arg(long, value_parser = ["plan", "accept", "auto"])]
    pub mode: Option<String>,
    /// Print every session event as one JSON line on stdout (and nothing else there).
    #[arg(long)]
    pub json: bool,
    /// Allow every approval without asking.
    #[arg(long)]
    pub yes: bool,
    /// Also show the full output of every tool call and the model's reasoning (stderr).
    #[arg(short, long)]
    pub verbose: bool,
    /// Continue this directory's latest `snowpea run` session (open or saved) instead of
    /// starting a new one; a new one when there is none.
    #[arg(long = "continue")]
    pub continue_last: bool,
    /// Interrupt the turn when it has not ended after this many seconds (exit 5).
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_TIMEOUT_SECS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// The prompt.
    pub prompt: String,
}

/// Runs a prompt; returns the exit code.
pub async fn run(args: RunArgs) -> i32 {
    match prepare(&args) {
        Ok((home, workdir)) => Run::connect(&args, &home, &workdir).await,
        Err(Usage(message)) => {
            eprintln!("snowpea run: {message}");
            exit::USAGE
        }
    }
}

/// A usage error: the message to print before exiting 2.
#[derive(Debug)]
pub(crate) struct Usage(pub(crate) String);

/// Checks the arguments clap cannot: the prompt, the home, the working directory.
fn prepare(args: &RunArgs) -> Result<(Home, PathBuf), Usage> {
    if args.prompt.trim().is_empty() {
        return Err(Usage("the prompt is empty".into()));
    }
    let home = Home::resolve(args.home.as_deref()).map_err(|e| Usage(format!("{e:#}")))?;
    let workdir = match &args.workdir {
        Some(dir) => resolve_workdir(dir),
        None => std::env::current_dir()
            .map_err(|e| Usage(format!("cannot read the current directory: {e}")))
            .and_then(|dir| resolve_workdir(&dir)),
    }?;
    Ok((home, workdir))
}

/// The canonical path of an existing directory.
pub(crate) fn resolve_workdir(dir: &Path) -> Result<PathBuf, Usage> {
    let canonical = std::fs::canonicalize(dir)
        .map_err(|e| Usage(format!("working directory {}: {e}", dir.display())))?;
    if !canonical.is_dir() {
        return Err(Usage(format!(
            "working directory {} is not a directory",
            dir.display()
        )));
    }
    Ok(canonical)
}

/// The exit code for a `turn.done` reason.
pub fn exit_code_for(reason: Option<&str>) -> i32 {
    match reason {
        Some("complete") => exit::COMPLETE,
        Some("denied") => exit::DENIED,
        Some("interrupted" | "timeout") => exit::INTERRUPTED,
        // error, budget, stalled, empty_response, a reason this client does not know, none.
        _ => exit::ERROR,
    }
}

/// The exit code for a failed call: no answer at all means the daemon is unavailable; an
/// answer that refuses (or makes no sense) is an error.
fn exit_code_for_error(error: &Error) -> i32 {
    match error {
        Error::Connect(_) | Error::Timeout | Error::Closed => exit::UNAVAILABLE,
        // The gateway answered, but the service behind it is down (crashed, restarting, or
        // `failed` after its restart budget): the daemon cannot serve the run either.
        Error::Rpc(e) if e.data_code.as_deref() == Some("unavailable") => exit::UNAVAILABLE,
        Error::Rpc(_) | Error::Protocol(_) => exit::ERROR,
    }
}

/// What to do when a call answered `unavailable`: the service behind the gateway is down.
fn unavailable_hint(error: &Error) -> Option<&'static str> {
    (error.code_str() == Some("unavailable")).then_some(
        "snowpea run: a service of the suite is not running; see which with \
         `snowpea supervisor status`, its log with `snowpea supervisor logs <name>`, and start it \
         again with `snowpea supervisor restart <name>`",
    )
}

/// Why the run stopped waiting for the turn on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Ctrl-C.
    CtrlC,
    /// `--timeout` passed.
    Timeout,
}

/// One connected run: the client and the output.
struct Run {
    client: Arc<Client>,
    renderer: Renderer<std::io::Stdout, std::io::Stderr>,
}

impl Run {
    /// Starts the suite if needed, connects, runs the turn, closes; returns the exit code.
    async fn connect(args: &RunArgs, home: &Home, workdir: &Path) -> i32 {
        let joined_running = match start_suite(home, None).await {
            Ok(Started::AlreadyRunning(_)) => true,
            Ok(Started::Started(d)) => {
                eprintln!(
                    "snowpea started: ws://127.0.0.1:{}{} (home {})",
                    d.port,
                    snowpea_proto::WS_PATH,
                    home.root().display()
                );
                false
            }
            Err(e) => {
                eprintln!("snowpea run: the daemon is unavailable: {e:#}");
                return exit::UNAVAILABLE;
            }
        };
        let opts = match ConnectOptions::from_home(home.root()) {
            Ok(opts) => opts,
            Err(e) => {
                eprintln!("snowpea run: {e}");
                return exit::UNAVAILABLE;
            }
        };
        let opts = opts
            .with_client_id(snowpea_common::ids::new_id("cli"))
            .with_client_kind("cli")
            .with_reconnect(ReconnectPolicy {
                max_attempts: Some(RECONNECT_ATTEMPTS),
                ..ReconnectPolicy::default()
            });
        let client = match Client::connect(opts).await {
            Ok(client) => Arc::new(client),
            Err(e) => {
                eprintln!("snowpea run: {e}");
                return exit_code_for_error(&e);
            }
        };
        let break_lines =
            !args.json && std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
        let mut run = Run {
            client,
            renderer: Renderer::new(args.json, std::io::stdout(), std::io::stderr(), break_lines)
                .with_verbose(args.verbose)
                .with_spinner(std::io::stderr().is_terminal()),
        };
        // The model, before the session and the prompt (issue 39 item 1): none at all ends
        // the run at once with the fix; other settings than this shell's are a note.
        if let Some(message) =
            crate::model_check::no_model(&run.client, home, args.home.as_deref()).await
        {
            run.renderer.diag(&format!("snowpea run: {message}"));
            run.client.close().await;
            return exit::ERROR;
        }
        if joined_running {
            if let Some(message) = crate::model_check::mismatch(home, args.home.as_deref()) {
                run.renderer.diag(&format!("snowpea run: note: {message}"));
            }
        }
        let code = run.turn(args, workdir).await;
        match code {
            // A second Ctrl-C: leave without the close handshake.
            Outcome::Abort(code) => code,
            Outcome::Done(code) => {
                run.client.close().await;
                code
            }
        }
    }

    /// Opens the session, prompts and follows the turn.
    async fn turn(&mut self, args: &RunArgs, workdir: &Path) -> Outcome {
        let policy = if args.yes {
            approve::Policy::AllowAll
        } else {
            approve::Policy::Ask
        };
        approve::install(&self.client, policy);
        let continued = if args.continue_last {
            match self.continue_session(workdir, args.mode.as_deref()).await {
                Ok(found) => found,
                Err((what, e)) => return self.failed(what, &e),
            }
        } else {
            None
        };
        let session_id = match continued {
            Some(id) => id,
            None => {
                let mut params = json!({
                    "workdir": workdir.to_string_lossy(),
                    "originSurface": crate::cmd::target::RUN_SURFACE,
                });
                if let Some(mode) = &args.mode {
                    params["mode"] = mode.as_str().into();
                }
                match self.client.create_session_with(params).await {
                    Ok(id) => id,
                    Err(e) => return self.failed("session.create", &e),
                }
            }
        };
        // Subscribe before prompting so no event of the turn is missed.
        let mut events = self.client.events(&session_id);
        // Ctrl-C from here on interrupts the turn instead of killing the process.
        let mut sigint = signal(SignalKind::interrupt()).ok();
        let turn_id = match self.client.prompt(&session_id, &args.prompt).await {
            Ok(id) => id,
            Err(e) => return self.failed("session.prompt", &e),
        };
        let deadline = Instant::now() + Duration::from_secs(args.timeout);
        self.follow(
            &mut events,
            &session_id,
            &turn_id,
            deadline,
            args.timeout,
            &mut sigint,
        )
        .await
    }

    /// Shows events until the turn's `turn.done`, handling Ctrl-C and the timeout.
    async fn follow(
        &mut self,
        events: &mut SessionEvents,
        session_id: &str,
        turn_id: &str,
        deadline: Instant,
        timeout_secs: u64,
        sigint: &mut Option<Signal>,
    ) -> Outcome {
        let mut stopping: Option<(Stop, Instant)> = None;
        // A person refused a call of this turn: exit 4 whatever the turn's reason.
        let mut refused = false;
        let mut spin = tokio::time::interval(SPINNER_EVERY);
        spin.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            let until = stopping.map_or(deadline, |(_, d)| d);
            let remaining = until.saturating_duration_since(Instant::now());
            tokio::select! {
                next = events.next(remaining) => match next {
                    Ok(event) => {
                        self.renderer.event(&event);
                        if event.kind == "error" && event.payload["code"] == "approval_denied" {
                            refused = true;
                        }
                        if event.kind == "turn.done" && event.turn_id() == Some(turn_id) {
                            let reason = event.payload.get("reason").and_then(|r| r.as_str());
                            return Outcome::Done(match stopping {
                                Some(_) => exit::INTERRUPTED,
                                None if refused => exit::DENIED,
                                None => exit_code_for(reason),
                            });
                        }
                    }
                    Err(Error::Timeout) => match stopping {
                        None => {
                            self.renderer.diag(&format!(
                                "snowpea run: the turn did not end within {timeout_secs}s; interrupting"
                            ));
                            self.interrupt(session_id);
                            stopping = Some((Stop::Timeout, Instant::now() + STOP_GRACE));
                        }
                        Some((why, _)) => {
                            self.renderer.end_answer_line();
                            self.renderer.diag(&format!(
                                "snowpea run: no turn.done within {}s of the interrupt ({})",
                                STOP_GRACE.as_secs(),
                                match why { Stop::CtrlC => "Ctrl-C", Stop::Timeout => "timeout" }
                            ));
                            return Outcome::Done(exit::INTERRUPTED);
                        }
                    },
                    Err(e) => {
                        self.renderer.end_answer_line();
                        self.renderer.diag(&format!("snowpea run: lost the daemon: {e}"));
                        return Outcome::Done(exit_code_for_error(&e));
                    }
                },
                _ = spin.tick() => self.renderer.tick(),
                () = ctrl_c(sigint) => {
                    if stopping.is_some_and(|(why, _)| why == Stop::CtrlC) {
                        self.renderer.end_answer_line();
                        self.renderer.diag("snowpea run: interrupted again; exiting");
                        return Outcome::Abort(exit::INTERRUPTED);
                    }
                    self.renderer.diag("snowpea run: interrupting the turn (Ctrl-C again to exit now)");
                    if stopping.is_none() {
                        self.interrupt(session_id);
                    }
                    stopping = Some((Stop::CtrlC, Instant::now() + STOP_GRACE));
                }
            }
        }
    }

    /// Sends `session.interrupt` without waiting for it (a second Ctrl-C must not wait either).
    /// A connection that closed meanwhile is no failure: the turn ended and the run is
    /// leaving.
    fn interrupt(&self, session_id: &str) {
        let client = self.client.clone();
        let session_id = session_id.to_owned();
        tokio::spawn(async move {
            match client.interrupt(&session_id).await {
                Ok(_) | Err(Error::Closed) => {}
                Err(e) => eprintln!("snowpea run: session.interrupt failed: {e}"),
            }
        });
    }

    /// `--continue`: re-opens the latest `snowpea run` session of `workdir`
    /// ([`crate::cmd::target::latest_run`]) — `session.resume` after its last event, then
    /// `session.attach` so approvals come here — and applies `--mode`; `None` when this
    /// directory has none (a new session is started).
    async fn continue_session(
        &mut self,
        workdir: &Path,
        mode: Option<&str>,
    ) -> Result<Option<String>, (&'static str, Error)> {
        let list = self
            .client
            .call(
                "session.list",
                json!({"workdir": workdir.to_string_lossy(), "includeClosed": true, "kinds": ["chat"]}),
            )
            .await
            .map_err(|e| ("session.list", e))?;
        let Some((id, seq)) = crate::cmd::target::latest_run(&list, workdir) else {
            self.renderer.diag(
                "snowpea run: no earlier `snowpea run` session in this directory; starting one",
            );
            return Ok(None);
        };
        self.client
            .call("session.resume", json!({"sessionId": id, "afterSeq": seq}))
            .await
            .map_err(|e| ("session.resume", e))?;
        self.client
            .call("session.attach", json!({"sessionId": id}))
            .await
            .map_err(|e| ("session.attach", e))?;
        if let Some(mode) = mode {
            self.client
                .call("session.setMode", json!({"sessionId": id, "mode": mode}))
                .await
                .map_err(|e| ("session.setMode", e))?;
        }
        Ok(Some(id))
    }

    /// Reports a failed call and picks its exit code.
    fn failed(&mut self, what: &str, error: &Error) -> Outcome {
        self.renderer
            .diag(&format!("snowpea run: {what} failed: {error}"));
        if let Some(hint) = unavailable_hint(error) {
            self.renderer.diag(hint);
        }
        Outcome::Done(exit_code_for_error(error))
    }
}

/// How [`Run::turn`] ended.
enum Outcome {
    /// Close the client cleanly, then exit with this code.
    Done(i32),
    /// Exit with this code right away (second Ctrl-C).
    Abort(i32),
}

/// The next SIGINT; never, when the handler could not be installed.
async fn ctrl_c(sigint: &mut Option<Signal>) {
    match sigint {
        Some(s) => {
            if s.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::{exit, exit_code_for, prepare, RunArgs};

    fn args(workdir: Option<&str>, prompt: &str) -> RunArgs {
        RunArgs {
            home: Some("/tmp/snowpea-home-unused".into()),
            workdir: workdir.map(Into::into),
            mode: None,
            json: false,
            yes: false,
            verbose: false,
            continue_last: false,
            timeout: 10,
            prompt: prompt.into(),
        }
    }

    #[test]
    fn turn_reasons_map_to_exit_codes() {
        assert_eq!(exit_code_for(Some("complete")), exit::COMPLETE);
        assert_eq!(exit_code_for(Some("error")), exit::ERROR);
        assert_eq!(exit_code_for(Some("denied")), exit::DENIED);
        assert_eq!(exit_code_for(Some("interrupted")), exit::INTERRUPTED);
        assert_eq!(exit_code_for(Some("timeout")), exit::INTERRUPTED);
        assert_eq!(exit_code_for(Some("budget")), exit::ERROR);
        assert_eq!(exit_code_for(None), exit::ERROR);
    }

    #[test]
    fn workdir_must_exist_and_is_canonicalized() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a");
        std::fs::create_dir(&nested).unwrap();
        let dotted = format!("{}/a/../a", dir.path().display());
        let (_, workdir) = prepare(&args(Some(&dotted), "hi")).unwrap();
        assert_eq!(workdir, std::fs::canonicalize(&nested).unwrap());

        let missing = dir.path().join("missing");
        let err = prepare(&args(Some(missing.to_str().unwrap()), "hi")).unwrap_err();
        assert!(err.0.contains("missing"), "{}", err.0);

        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let err = prepare(&args(Some(file.to_str().unwrap()), "hi")).unwrap_err();
        assert!(err.0.contains("not a directory"), "{}", err.0);
    }

    #[test]
    fn an_unavailable_service_is_exit_3_with_a_restart_hint() {
        let down = super::Error::Rpc(snowpea_sdk::RpcError {
            code: -32000,
            message: "service session unavailable".into(),
            data_code: Some("unavailable".into()),
            data: None,
        });
        assert_eq!(super::exit_code_for_error(&down), super::exit::UNAVAILABLE);
        let hint = super::unavailable_hint(&down).unwrap();
        assert!(hint.contains("snowpea supervisor restart <name>"), "{hint}");
        let other = super::Error::Rpc(snowpea_sdk::RpcError {
            code: -32602,
            message: "bad".into(),
            data_code: Some("invalid_params".into()),
            data: None,
        });
        assert_eq!(super::exit_code_for_error(&other), super::exit::ERROR);
        assert_eq!(super::unavailable_hint(&other), None);
    }

    #[test]
    fn an_empty_prompt_is_a_usage_error() {
        assert!(prepare(&args(Some("/"), "  ")).is_err());
    }
}

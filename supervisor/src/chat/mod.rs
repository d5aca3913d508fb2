//! `snowpea chat [--workdir DIR] [--session ID] [--mode plan|accept|auto]` (issue 26): the
//! full-screen terminal client over the Rust SDK, using public protocol methods only.
//!
//! * [`state`]: the UI state and its one `update` function (Elm-style; unit-tested).
//! * [`view`]: the pure render of a state (ratatui), with [`markdown`] and [`wrap`].
//! * [`input`]: the prompt editor (tui-textarea) and `@` completion.
//! * [`net`]: the SDK glue (calls, server→client requests, notifications, reconnects).
//! * [`theme`]: dark/light colours and `NO_COLOR`.
//!
//! The terminal (raw mode, alternate screen, bracketed paste) is restored on every exit
//! path: normal exit, error, SIGTERM/SIGHUP, and panic (a panic hook restores it before
//! the message is printed). Key bindings: docs/CHAT.md.

pub mod input;
pub mod markdown;
pub mod net;
pub mod state;
#[cfg(test)]
mod state_tests;
pub mod theme;
pub mod view;
pub mod wrap;

use std::io::{IsTerminal, Stdout};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste, Event, EventStream};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use futures::StreamExt;
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use snowpea_sdk::{Client, ConnectOptions, ReconnectPolicy};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::cli::start::{start_suite, Started};
use state::{update, Msg, State, ThemeKind};

/// Least time between two frames while events stream (a key press draws at once).
const FRAME: Duration = Duration::from_millis(16);

/// Spinner / clock tick.
const TICK: Duration = Duration::from_millis(100);

/// Most queued messages applied before a frame is drawn (a burst of deltas is coalesced).
const BATCH: usize = 4096;

const CHAT_HELP: &str = "\
Keys: Enter send (queues while a turn runs) · Alt-Enter or Ctrl-J newline · Ctrl-S steer ·
Esc interrupt · / commands · @ paths · Ctrl-O sessions · Ctrl-R reasoning · F1 help ·
Ctrl-C twice to leave. Full list: docs/CHAT.md.

Colours: --theme dark|light (or SNOWPEA_THEME); NO_COLOR=1 turns colours off.
The terminal must be at least 80×24.

Exit codes: 0 left normally, 1 failure, 2 usage error, 3 the daemon is unavailable.";

/// Arguments of `snowpea chat`.
#[derive(Debug, Clone, Args)]
#[command(after_help = CHAT_HELP)]
pub struct ChatArgs {
    /// Snowpea home (default: $SNOWPEA_HOME, else ~/.snowpea).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Project folder of new sessions (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Open this session (and replay its history) instead of picking one.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Permission mode of the session (set on create, or with session.setMode).
    #[arg(long, value_parser = ["plan", "accept", "auto"])]
    pub mode: Option<String>,
    /// Colours for a dark or light terminal background.
    #[arg(long, env = "SNOWPEA_THEME", value_parser = ["dark", "light"], default_value = "dark")]
    pub theme: String,
}

/// Runs the chat client; returns the exit code.
pub async fn run(args: ChatArgs) -> i32 {
    use crate::run::exit;
    let home = match snowpea_common::home::Home::resolve(args.home.as_deref()) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("snowpea chat: {e:#}");
            return exit::USAGE;
        }
    };
    let workdir = match &args.workdir {
        Some(d) => crate::run::resolve_workdir(d),
        None => std::env::current_dir()
            .map_err(|e| crate::run::Usage(format!("cannot read the current directory: {e}")))
            .and_then(|d| crate::run::resolve_workdir(&d)),
    };
    let workdir = match workdir {
        Ok(w) => w,
        Err(crate::run::Usage(m)) => {
            eprintln!("snowpea chat: {m}");
            return exit::USAGE;
        }
    };
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        eprintln!("snowpea chat: needs a terminal (use `snowpea run \"<prompt>\"` in scripts)");
        return exit::USAGE;
    }
    let joined_running = match start_suite(&home, None).await {
        Ok(Started::AlreadyRunning(_)) => true,
        Ok(Started::Started(d)) => {
            eprintln!("snowpea started on port {}", d.port);
            false
        }
        Err(e) => {
            eprintln!("snowpea chat: the daemon is unavailable: {e:#}");
            return exit::UNAVAILABLE;
        }
    };
    let opts = match ConnectOptions::from_home(home.root()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("snowpea chat: {e}");
            return exit::UNAVAILABLE;
        }
    };
    let opts = opts
        .with_client_id(snowpea_common::ids::new_id("tui"))
        .with_client_kind("tui")
        .with_reconnect(ReconnectPolicy {
            max_attempts: None,
            max_delay: Duration::from_secs(5),
            ..ReconnectPolicy::default()
        });
    let client = match Client::connect(opts).await {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("snowpea chat: {e}");
            return exit::UNAVAILABLE;
        }
    };
    let theme = if args.theme == "light" {
        ThemeKind::Light
    } else {
        ThemeKind::Dark
    };
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let mut state = State::new(
        &workdir.to_string_lossy(),
        args.mode.clone(),
        theme,
        no_color,
    );
    // The model, said at once (issue 39 item 1): none at all, or not this shell's.
    let home_arg = args.home.as_deref();
    if let Some(message) = crate::model_check::no_model(&client, &home, home_arg).await {
        state.warn_at_start(message);
    } else if joined_running {
        if let Some(message) = crate::model_check::mismatch(&home, home_arg) {
            state.warn_at_start(message);
        }
    }
    let outcome = match TerminalGuard::enter() {
        Ok(mut guard) => {
            event_loop(
                &mut guard.terminal,
                &client,
                &mut state,
                args.session.clone(),
            )
            .await
        }
        Err(e) => Err(e),
    };
    // The guard is dropped here: the terminal is back to normal before anything is printed.
    tokio::time::timeout(Duration::from_secs(3), client.close())
        .await
        .ok();
    match outcome {
        Ok(()) => {
            if let Some(sid) = &state.session_id {
                eprintln!("left snowpea chat; continue with: snowpea chat --session {sid}");
            }
            exit::COMPLETE
        }
        Err(e) => {
            eprintln!("snowpea chat: {e:#}");
            exit::ERROR
        }
    }
}

/// Raw mode + alternate screen + bracketed paste for its lifetime; restored on drop and by
/// the panic hook it installs.
struct TerminalGuard {
    terminal: Terminal<CrosstermBackend<Stdout>>,
}

/// Puts the terminal back (idempotent; errors ignored: there is nothing left to do).
pub fn restore_terminal() {
    let _ = disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        DisableBracketedPaste,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

impl TerminalGuard {
    fn enter() -> anyhow::Result<TerminalGuard> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
        enable_raw_mode()?;
        let mut stdout = std::io::stdout();
        if let Err(e) = execute!(stdout, EnterAlternateScreen, EnableBracketedPaste) {
            restore_terminal();
            return Err(e.into());
        }
        match Terminal::new(CrosstermBackend::new(stdout)) {
            Ok(terminal) => Ok(TerminalGuard { terminal }),
            Err(e) => {
                restore_terminal();
                Err(e.into())
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

async fn event_loop(
    terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    client: &Arc<Client>,
    state: &mut State,
    session: Option<String>,
) -> anyhow::Result<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    let net = net::Net::start(client.clone(), tx);
    let size = terminal.size()?;
    update(state, Msg::Resize(size.width, size.height));
    for effect in state.start(session) {
        net.run(effect);
    }
    let mut keys = EventStream::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let mut cache = view::Cache::default();
    let mut dirty = true;
    let mut last_draw = Instant::now() - FRAME;
    loop {
        let now = Instant::now();
        if dirty && now >= last_draw + FRAME {
            terminal.draw(|f| view::draw(f, state, &mut cache))?;
            last_draw = now;
            dirty = false;
        }
        let msg = tokio::select! {
            ev = keys.next() => match ev {
                Some(Ok(Event::Key(k))) => {
                    // A key press is drawn at once (no frame wait).
                    last_draw = Instant::now() - FRAME;
                    Msg::Key(k)
                }
                Some(Ok(Event::Paste(s))) => Msg::Paste(s),
                Some(Ok(Event::Resize(w, h))) => Msg::Resize(w, h),
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(e.into()),
                None => return Ok(()),
            },
            Some(m) = rx.recv() => m,
            _ = tick.tick() => Msg::Tick(std::time::Instant::now()),
            () = tokio::time::sleep_until(last_draw + FRAME), if dirty => continue,
            _ = sigterm.recv() => return Ok(()),
            _ = sighup.recv() => return Ok(()),
        };
        if !apply(state, &net, msg) {
            return Ok(());
        }
        // Coalesce a burst (e.g. thousands of deltas) into one frame.
        for _ in 0..BATCH {
            match rx.try_recv() {
                Ok(m) => {
                    if !apply(state, &net, m) {
                        return Ok(());
                    }
                }
                Err(_) => break,
            }
        }
        dirty = true;
    }
}

fn apply(state: &mut State, net: &net::Net, msg: Msg) -> bool {
    let mut go_on = true;
    for effect in update(state, msg) {
        go_on &= net.run(effect);
    }
    go_on && !state.quitting
}

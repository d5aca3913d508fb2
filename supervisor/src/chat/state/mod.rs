//! The chat client's state and its one [`update`] function (the Elm-style split of issue 26):
//! every protocol notification, call reply and key press is a [`Msg`]; `update` changes the
//! [`State`] and returns the [`Effect`]s (protocol calls, answers to server requests, quit)
//! that [`super::net`] performs. Nothing here touches the terminal or the network, so the
//! whole event → state logic is unit-tested (`state_tests.rs`).
//!
//! Session events are applied once each, in seq order: an event at or below the last applied
//! seq is a duplicate and dropped; one past a gap is held back while `session.resume
//! {afterSeq}` fetches the missing ones; while a session is being opened (its history comes
//! from `session.resume {afterSeq: 0}`) live events are held back and merged after it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::{json, Value};
use snowpea_sdk::SessionEvent;
use tui_textarea::TextArea;

use super::input::{self, Completion};

mod events;
mod keys;
mod parse;
mod replies;

use events::apply;
use keys::{after_edit, on_key};
pub use parse::{approval_from, question_from};
use parse::{commands_from, sessions_from};
use replies::on_reply;

/// Within this time a second Ctrl-C quits.
pub const QUIT_WINDOW: Duration = Duration::from_secs(3);

/// Most prompts kept in the input history.
pub const HISTORY_MAX: usize = 500;

/// Why a protocol call failed, as the UI needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The daemon answered `not_implemented` (or `method_not_found`): the feature is not
    /// available in this build; the UI says so instead of faking it.
    Unavailable(String),
    /// Any other failure (message as shown).
    Failed(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unavailable(m) => write!(f, "{m} is not available in this daemon"),
            CallError::Failed(m) => f.write_str(m),
        }
    }
}

/// What a call was made for; its reply comes back as [`Msg::Reply`] with the same tag.
#[derive(Debug, Clone, PartialEq)]
pub enum Purpose {
    /// `session.list` at start (pick or create).
    StartupList,
    /// `session.list` for the picker (Ctrl-O).
    PickerList,
    /// `session.create`.
    Create,
    /// `session.attach` of the session being opened.
    Attach(String),
    /// `session.resume {afterSeq}` of the current session (history, or a gap).
    Resume(String),
    /// `session.prompt` (with the text, to show it as queued when the daemon queues it).
    Prompt(String),
    /// `session.steer`.
    Steer(String),
    /// `session.interrupt`.
    Interrupt,
    /// `command.list`.
    CommandList,
    /// `command.run` of `/name args`.
    Command {
        /// Command name without the slash.
        name: String,
        /// Raw argument string.
        args: String,
    },
    /// A direct method used for a built-in command when `command.run` is unavailable.
    Direct(String),
    /// `checkpoint.list` for `/undo`.
    UndoList,
    /// `file.complete` for the query.
    Complete(String),
    /// `session.rename` / `session.close` / `session.setMode` and other fire-and-report calls.
    Other(String),
}

/// One message into [`update`].
#[derive(Debug)]
pub enum Msg {
    /// A key press.
    Key(KeyEvent),
    /// Bracketed paste.
    Paste(String),
    /// Terminal size (columns, rows).
    Resize(u16, u16),
    /// The clock (spinner, elapsed time, Ctrl-C window).
    Tick(Instant),
    /// The connection changed: connected (with the connect count) or not.
    Connection {
        /// Connected and past `system.hello`.
        connected: bool,
        /// Closed for good (no more reconnect attempts).
        closed: bool,
        /// Connects so far (1 after the first).
        generation: u64,
    },
    /// A `session.event` notification.
    Event(SessionEvent),
    /// The notification stream lagged: events may be missing.
    Lagged,
    /// `approval.request` (server → client) params.
    ApprovalRequest(Value),
    /// `approval.resolved` notification params.
    ApprovalResolved(Value),
    /// `question.request` (server → client) params.
    QuestionRequest(Value),
    /// `question.resolved` notification params.
    QuestionResolved(Value),
    /// `commands.changed` notification params.
    CommandsChanged(Value),
    /// `sessions.changed` notification params.
    SessionsChanged(Value),
    /// The reply of a call made for `purpose`.
    Reply {
        /// What the call was for.
        purpose: Purpose,
        /// Its result.
        result: Result<Value, CallError>,
    },
}

/// What [`update`] asks the outside world to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Call `method` with `params`; the reply comes back as [`Msg::Reply`] tagged `purpose`.
    Call {
        /// JSON-RPC method.
        method: &'static str,
        /// Its params.
        params: Value,
        /// Tag of the reply.
        purpose: Purpose,
    },
    /// Answer a server→client request (`approval.request` / `question.request`) with
    /// `result`; when this client no longer holds the request, call `fallback` (
    /// `approval.respond` / `question.respond`) with `{requestId, ...result}` instead.
    Answer {
        /// The request's `requestId`.
        request_id: String,
        /// The request's result.
        result: Value,
        /// The client→server method answering the same request.
        fallback: &'static str,
    },
    /// Forget a server→client request answered elsewhere.
    Forget(String),
    /// Leave the client.
    Quit,
}

/// Light or dark colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThemeKind {
    /// Colours for a dark background.
    Dark,
    /// Colours for a light background.
    Light,
}

/// Status of a tool call line.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolStatus {
    /// Running (no `tool.result` yet).
    Running,
    /// `tool.result {ok: true}`, with a one-line summary of the output.
    Ok(String),
    /// `tool.result {ok: false}`, with the error.
    Failed(String),
}

/// Kinds of one-line notices in the transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Information (mode changed, session opened, …).
    Info,
    /// Something the user should notice (unavailable feature, reconnecting).
    Warn,
    /// An `error` event or a failed call.
    Error,
}

/// One element of the transcript.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// `message.user`.
    User {
        /// What was typed.
        text: String,
        /// Folded into a running turn (`steered: true`).
        steered: bool,
    },
    /// The assistant's answer (Markdown), growing with `message.delta`.
    Assistant {
        /// Text so far.
        text: String,
        /// `message.done` arrived.
        done: bool,
    },
    /// `message.reasoning` text (collapsible).
    Reasoning {
        /// Text so far.
        text: String,
    },
    /// A tool call (`tool.call` … `tool.result`).
    Tool {
        /// `callId`.
        call_id: String,
        /// Tool name.
        name: String,
        /// One-line summary of the arguments.
        summary: String,
        /// Where it is.
        status: ToolStatus,
    },
    /// A `diff` event: unified diff of a file edit.
    Diff {
        /// File that changed.
        path: String,
        /// The patch.
        patch: String,
    },
    /// A one-line notice.
    Notice {
        /// Text.
        text: String,
        /// How it is shown.
        level: Level,
    },
}

/// A transcript block and its revision (bumped on every change; the view caches by it).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The block.
    pub block: Block,
    /// Revision.
    pub rev: u64,
}

/// A prompt waiting behind the running turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    /// Its turn id once known.
    pub turn_id: Option<String>,
    /// Its text (empty when another client queued it).
    pub text: String,
}

/// A pending `approval.request`.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    /// `requestId`.
    pub request_id: String,
    /// Tool name.
    pub tool: String,
    /// One line: the note, else a summary of the args.
    pub summary: String,
    /// Risk hint.
    pub risk: String,
    /// Why this is asked whatever the mode.
    pub guard: Option<String>,
    /// The scopes offered, in order (`once`, `session`, `project`, `always`, and `site` when
    /// the request names a site), then `deny`.
    pub choices: Vec<&'static str>,
    /// Highlighted choice.
    pub cursor: usize,
    /// Seconds before the daemon denies on its own.
    pub timeout_sec: Option<f64>,
}

/// One question of a `question.request`.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// Short header.
    pub header: String,
    /// The question.
    pub question: String,
    /// Option labels (with descriptions).
    pub options: Vec<(String, String)>,
    /// Several options may be selected.
    pub multi: bool,
    /// Free text is accepted (always when there are no options).
    pub allow_other: bool,
    /// The free text is secret: never shown.
    pub secret: bool,
}

/// A pending `question.request` being answered.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionBatch {
    /// `requestId`.
    pub request_id: String,
    /// The questions.
    pub questions: Vec<Question>,
    /// Question shown now.
    pub index: usize,
    /// Highlighted option (== options.len() for the free-text row).
    pub cursor: usize,
    /// Selected option indexes of the current question.
    pub selected: BTreeSet<usize>,
    /// Free text of the current question.
    pub text: String,
    /// Answers of the questions before `index`.
    pub answers: Vec<Value>,
}

/// A session row of the picker.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    /// `sessionId`.
    pub session_id: String,
    /// Title, else the last prompt.
    pub label: String,
    /// Status (`idle`, `running`, …).
    pub status: String,
    /// Last activity (ISO-8601), for sorting and display.
    pub last_activity: String,
}

/// The session picker (Ctrl-O).
#[derive(Debug, Clone, PartialEq)]
pub struct Picker {
    /// Rows; row 0 of the UI is "new session", then these.
    pub rows: Vec<SessionRow>,
    /// Highlighted UI row.
    pub cursor: usize,
    /// Renaming the highlighted session: the title typed so far.
    pub renaming: Option<String>,
    /// Still loading.
    pub loading: bool,
}

/// A modal on top of the transcript.
#[derive(Debug, Clone, PartialEq)]
pub enum Modal {
    /// The first of [`State::approvals`].
    Approval,
    /// The first of [`State::questions`].
    Question,
    /// The session picker.
    Picker(Picker),
    /// Key bindings.
    Help,
}

/// A slash command offered by the palette.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    /// Name without the slash.
    pub name: String,
    /// One line.
    pub summary: String,
    /// Argument hint.
    pub hint: String,
    /// `client` for commands this client runs itself, else the daemon's `source`.
    pub source: String,
}

/// The connection as shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Connected.
    Up,
    /// Reconnecting (the SDK retries with backoff).
    Reconnecting,
    /// Gone for good.
    Closed,
}

/// Everything the view shows.
pub struct State {
    /// Workdir of new sessions.
    pub workdir: String,
    /// `--mode` for new sessions.
    pub start_mode: Option<String>,
    /// Current session.
    pub session_id: Option<String>,
    /// Its title.
    pub title: String,
    /// Permission mode.
    pub mode: String,
    /// Model in use.
    pub model: String,
    /// Reasoning effort, when known.
    pub effort: String,
    /// Transcript.
    pub blocks: Vec<Entry>,
    /// Bumped whenever the transcript is replaced (the view drops its cache).
    pub epoch: u64,
    next_rev: u64,
    /// Highest applied seq of the current session.
    pub last_seq: u64,
    /// Live events held back while the session opens or a gap is filled.
    held: BTreeMap<u64, SessionEvent>,
    /// A `session.resume` is in flight (opening or gap).
    resuming: bool,
    /// Tool calls by callId → block index.
    tools: BTreeMap<String, usize>,
    /// The running turn's id.
    pub turn_id: Option<String>,
    /// When the running turn started (for the elapsed time).
    pub turn_started: Option<Instant>,
    /// Prompts waiting behind the running turn.
    pub queued: Vec<Queued>,
    /// Answer text was streamed (`message.delta`) in the current turn.
    streamed: bool,
    /// Tokens of the session so far (input, output).
    pub tokens: (u64, u64),
    /// Context use in percent.
    pub context_percent: Option<f64>,
    /// Connection.
    pub link: Link,
    generation: u64,
    /// Pending approvals, oldest first.
    pub approvals: VecDeque<Approval>,
    /// Pending question batches, oldest first.
    pub questions: VecDeque<QuestionBatch>,
    /// Open modal.
    pub modal: Option<Modal>,
    /// Prompt editor.
    pub input: TextArea<'static>,
    /// Sent prompts, oldest first.
    pub history: Vec<String>,
    /// Position while browsing history (index into `history`) and the draft it replaced.
    history_pos: Option<(usize, String)>,
    /// Daemon commands from `command.list`, or why there are none.
    pub commands: Result<Vec<Command>, CallError>,
    /// Palette highlight.
    pub palette_cursor: usize,
    /// `@` completion in progress.
    pub completion: Option<Completion>,
    /// Steering (`session.steer`) is known to be unavailable.
    pub steer_unavailable: bool,
    /// Reasoning blocks shown in full.
    pub show_reasoning: bool,
    /// Transcript scroll, in rows from the bottom (0 = follow the stream).
    pub scroll: usize,
    /// Rows of the transcript viewport (from the last resize).
    pub viewport_rows: u16,
    /// Terminal size.
    pub size: (u16, u16),
    /// Now (from the last tick).
    pub now: Instant,
    /// First Ctrl-C at.
    quit_armed: Option<Instant>,
    /// One-line status message (and when it was set).
    pub flash: Option<(String, Level, Instant)>,
    /// Colours.
    pub theme: ThemeKind,
    /// `NO_COLOR`: no colours at all.
    pub no_color: bool,
    /// The client is leaving.
    pub quitting: bool,
    /// The daemon command this client ran whose turn has not ended: its own reply says what
    /// changed, so `mode.changed` / `model.changed` are not repeated as notices.
    pub running_command: Option<String>,
    /// Warnings shown at the top of every transcript (kept when a session is opened): the
    /// suite has no model, or other model settings than this shell's (issue 39 item 1).
    pub startup_notices: Vec<String>,
}

/// Client commands (run by this client, not the daemon).
const CLIENT_COMMANDS: &[(&str, &str, &str)] = &[
    ("sessions", "pick, rename or close a session (Ctrl-O)", ""),
    ("new", "start a new session in the workdir", ""),
    ("rename", "set this session's title", "<title>"),
    ("close", "close this session", ""),
    (
        "reasoning",
        "show or fold the model's reasoning (Ctrl-R)",
        "",
    ),
    (
        "theme",
        "switch between the dark and light theme",
        "[dark|light]",
    ),
    ("quit", "leave snowpea chat", ""),
];

/// Built-in daemon commands the issue names, offered even before `command.list` answers.
/// They run through `command.run`; when that is unavailable, through the direct method.
const DAEMON_COMMANDS: &[(&str, &str, &str)] = &[
    (
        "model",
        "pin the session's model",
        "<profile|vendor:model|inherit>",
    ),
    (
        "effort",
        "pin how hard the model thinks",
        "low|medium|high|max|inherit",
    ),
    ("mode", "switch the permission mode", "plan|accept|auto"),
    (
        "compact",
        "summarise the conversation so far",
        "[instructions]",
    ),
    ("undo", "restore the files of the latest checkpoint", ""),
];

impl State {
    /// A fresh state for `workdir`.
    pub fn new(
        workdir: &str,
        start_mode: Option<String>,
        theme: ThemeKind,
        no_color: bool,
    ) -> State {
        State {
            workdir: workdir.to_owned(),
            start_mode,
            session_id: None,
            title: String::new(),
            mode: String::new(),
            model: String::new(),
            effort: String::new(),
            blocks: Vec::new(),
            epoch: 0,
            next_rev: 1,
            last_seq: 0,
            held: BTreeMap::new(),
            resuming: false,
            tools: BTreeMap::new(),
            turn_id: None,
            turn_started: None,
            queued: Vec::new(),
            streamed: false,
            tokens: (0, 0),
            context_percent: None,
            link: Link::Up,
            generation: 1,
            approvals: VecDeque::new(),
            questions: VecDeque::new(),
            modal: None,
            input: input::new_editor(),
            history: Vec::new(),
            history_pos: None,
            commands: Err(CallError::Failed("not loaded yet".into())),
            palette_cursor: 0,
            completion: None,
            steer_unavailable: false,
            show_reasoning: false,
            scroll: 0,
            viewport_rows: 20,
            size: (80, 24),
            now: Instant::now(),
            quit_armed: None,
            flash: None,
            theme,
            no_color,
            quitting: false,
            startup_notices: Vec::new(),
            running_command: None,
        }
    }

    /// The effects to run first: open `session` (`--session`), else list the workdir's
    /// sessions to pick or create one.
    pub fn start(&mut self, session: Option<String>) -> Vec<Effect> {
        match session {
            Some(id) => self.open(&id),
            None => vec![Effect::Call {
                method: "session.list",
                params: json!({ "workdir": self.workdir }),
                purpose: Purpose::StartupList,
            }],
        }
    }

    /// True while a turn runs.
    pub fn busy(&self) -> bool {
        self.turn_id.is_some()
    }

    /// The input's text.
    pub fn input_text(&self) -> String {
        self.input.lines().join("\n")
    }

    /// The palette's rows for the current input (when it starts with `/` and has no space).
    pub fn palette(&self) -> Option<Vec<Command>> {
        let text = self.input_text();
        let typed = text.strip_prefix('/')?;
        if typed.contains(char::is_whitespace) || self.modal.is_some() {
            return None;
        }
        let mut all: Vec<Command> = Vec::new();
        if let Ok(cmds) = &self.commands {
            all.extend(cmds.iter().cloned());
        }
        for (name, summary, hint) in DAEMON_COMMANDS {
            if !all.iter().any(|c| c.name == *name) {
                all.push(Command {
                    name: (*name).into(),
                    summary: (*summary).into(),
                    hint: (*hint).into(),
                    source: "builtin".into(),
                });
            }
        }
        for (name, summary, hint) in CLIENT_COMMANDS {
            all.push(Command {
                name: (*name).into(),
                summary: (*summary).into(),
                hint: (*hint).into(),
                source: "client".into(),
            });
        }
        let typed = typed.to_lowercase();
        Some(
            all.into_iter()
                .filter(|c| c.name.to_lowercase().starts_with(&typed))
                .collect(),
        )
    }

    fn push(&mut self, block: Block) -> usize {
        let rev = self.bump();
        self.blocks.push(Entry { block, rev });
        self.blocks.len() - 1
    }

    fn bump(&mut self) -> u64 {
        self.next_rev += 1;
        self.next_rev
    }

    /// A warning shown now and again at the top of every session opened later
    /// ([`State::startup_notices`]).
    pub fn warn_at_start(&mut self, text: impl Into<String>) {
        let text = text.into();
        self.startup_notices.push(text.clone());
        self.notice(text, Level::Warn);
    }

    /// Adds a notice line to the transcript.
    pub fn notice(&mut self, text: impl Into<String>, level: Level) {
        self.push(Block::Notice {
            text: text.into(),
            level,
        });
    }

    fn flash(&mut self, text: impl Into<String>, level: Level) {
        self.flash = Some((text.into(), level, self.now));
    }

    fn clear_transcript(&mut self) {
        self.blocks.clear();
        self.tools.clear();
        self.epoch += 1;
        self.last_seq = 0;
        self.held.clear();
        self.turn_id = None;
        self.turn_started = None;
        self.queued.clear();
        self.tokens = (0, 0);
        self.context_percent = None;
        self.scroll = 0;
        for text in self.startup_notices.clone() {
            self.notice(text, Level::Warn);
        }
    }

    /// Starts opening `session_id`: attach, then its history.
    fn open(&mut self, session_id: &str) -> Vec<Effect> {
        self.clear_transcript();
        self.session_id = Some(session_id.to_owned());
        self.title.clear();
        self.resuming = true;
        vec![Effect::Call {
            method: "session.attach",
            params: json!({ "sessionId": session_id }),
            purpose: Purpose::Attach(session_id.to_owned()),
        }]
    }

    fn create(&mut self) -> Vec<Effect> {
        let mut params = json!({ "workdir": self.workdir, "originSurface": "tui" });
        if let Some(mode) = &self.start_mode {
            params["mode"] = mode.as_str().into();
        }
        vec![Effect::Call {
            method: "session.create",
            params,
            purpose: Purpose::Create,
        }]
    }

    fn list_commands(&self) -> Vec<Effect> {
        match &self.session_id {
            Some(sid) => vec![Effect::Call {
                method: "command.list",
                params: json!({ "sessionId": sid }),
                purpose: Purpose::CommandList,
            }],
            None => Vec::new(),
        }
    }
}

/// Applies `msg` to `state`; returns what to do next.
pub fn update(state: &mut State, msg: Msg) -> Vec<Effect> {
    let effects = dispatch(state, msg);
    // A pending approval or question shows as soon as nothing else is on top.
    show_next_modal(state);
    effects
}

fn dispatch(state: &mut State, msg: Msg) -> Vec<Effect> {
    match msg {
        Msg::Key(key) => on_key(state, key),
        Msg::Paste(text) => {
            match &mut state.modal {
                Some(Modal::Picker(Picker {
                    renaming: Some(t), ..
                })) => t.push_str(&text.replace(['\r', '\n'], " ")),
                Some(Modal::Question) => {
                    if let Some(q) = state.questions.front_mut() {
                        q.text.push_str(&text);
                    }
                }
                Some(_) => {}
                None => {
                    // Terminals send \r for newlines in pastes.
                    let text = text.replace("\r\n", "\n").replace('\r', "\n");
                    state.input.insert_str(text);
                }
            }
            after_edit(state)
        }
        Msg::Resize(w, h) => {
            state.size = (w, h);
            state.viewport_rows = h.saturating_sub(8);
            Vec::new()
        }
        Msg::Tick(now) => {
            state.now = now;
            if state
                .flash
                .as_ref()
                .is_some_and(|(_, _, at)| now.duration_since(*at) > Duration::from_secs(6))
            {
                state.flash = None;
            }
            if state
                .quit_armed
                .is_some_and(|at| now.duration_since(at) > QUIT_WINDOW)
            {
                state.quit_armed = None;
            }
            Vec::new()
        }
        Msg::Connection {
            connected,
            closed,
            generation,
        } => on_connection(state, connected, closed, generation),
        Msg::Event(event) => on_event(state, event),
        Msg::Lagged => match (&state.session_id, state.resuming) {
            (Some(sid), false) => {
                state.resuming = true;
                vec![resume(sid, state.last_seq)]
            }
            _ => Vec::new(),
        },
        Msg::ApprovalRequest(params) => {
            let approval = approval_from(&params);
            if state
                .approvals
                .iter()
                .any(|a| a.request_id == approval.request_id)
            {
                return Vec::new();
            }
            state.approvals.push_back(approval);
            show_next_modal(state);
            Vec::new()
        }
        Msg::ApprovalResolved(params) => {
            let id = params["requestId"].as_str().unwrap_or_default().to_owned();
            let before = state.approvals.len();
            state.approvals.retain(|a| a.request_id != id);
            if state.approvals.len() == before {
                return Vec::new();
            }
            let by = params["by"].as_str().unwrap_or("another client");
            let decision = params["decision"].as_str().unwrap_or("answered");
            state.notice(format!("approval {decision} by {by}"), Level::Info);
            if state.modal == Some(Modal::Approval) {
                state.modal = None;
            }
            show_next_modal(state);
            vec![Effect::Forget(id)]
        }
        Msg::QuestionRequest(params) => {
            let batch = question_from(&params);
            if state
                .questions
                .iter()
                .any(|q| q.request_id == batch.request_id)
            {
                return Vec::new();
            }
            state.questions.push_back(batch);
            show_next_modal(state);
            Vec::new()
        }
        Msg::QuestionResolved(params) => {
            let id = params["requestId"].as_str().unwrap_or_default().to_owned();
            let before = state.questions.len();
            state.questions.retain(|q| q.request_id != id);
            if state.questions.len() == before {
                return Vec::new();
            }
            let by = params["by"].as_str().unwrap_or("another client");
            state.notice(format!("question answered by {by}"), Level::Info);
            if state.modal == Some(Modal::Question) {
                state.modal = None;
            }
            show_next_modal(state);
            vec![Effect::Forget(id)]
        }
        Msg::CommandsChanged(params) => {
            state.commands = Ok(commands_from(&params));
            Vec::new()
        }
        Msg::SessionsChanged(params) => {
            if state.session_id.as_deref() == params["sessionId"].as_str() {
                if let Some(t) = params["title"].as_str() {
                    state.title = t.to_owned();
                }
            }
            if matches!(state.modal, Some(Modal::Picker(_))) {
                return vec![list_for_picker(state)];
            }
            Vec::new()
        }
        Msg::Reply { purpose, result } => on_reply(state, purpose, result),
    }
}

fn resume(session_id: &str, after: u64) -> Effect {
    Effect::Call {
        method: "session.resume",
        params: json!({ "sessionId": session_id, "afterSeq": after }),
        purpose: Purpose::Resume(session_id.to_owned()),
    }
}

fn list_for_picker(state: &State) -> Effect {
    Effect::Call {
        method: "session.list",
        params: json!({ "workdir": state.workdir }),
        purpose: Purpose::PickerList,
    }
}

fn show_next_modal(state: &mut State) {
    if state.modal.is_some() {
        return;
    }
    if !state.approvals.is_empty() {
        state.modal = Some(Modal::Approval);
    } else if !state.questions.is_empty() {
        state.modal = Some(Modal::Question);
    }
}

fn on_connection(state: &mut State, connected: bool, closed: bool, generation: u64) -> Vec<Effect> {
    let was = state.link;
    state.link = if closed {
        Link::Closed
    } else if connected {
        Link::Up
    } else {
        Link::Reconnecting
    };
    match state.link {
        Link::Reconnecting if was == Link::Up => {
            state.notice("connection to the daemon lost; reconnecting…", Level::Warn);
        }
        Link::Closed if was != Link::Closed => {
            state.notice(
                "the daemon is gone and reconnecting gave up; Ctrl-C twice to leave",
                Level::Error,
            );
        }
        _ => {}
    }
    let reconnected = connected && generation > state.generation;
    state.generation = state.generation.max(generation);
    if !reconnected {
        return Vec::new();
    }
    // Requests of the old connection are gone (the daemon re-asks on the new one).
    state.approvals.clear();
    state.questions.clear();
    if matches!(state.modal, Some(Modal::Approval | Modal::Question)) {
        state.modal = None;
    }
    if was == Link::Up {
        // Down and up again between two looks at the connection.
        state.notice("the connection to the daemon dropped", Level::Warn);
    }
    let Some(sid) = state.session_id.clone() else {
        state.notice("reconnected", Level::Info);
        return Vec::new();
    };
    state.notice(
        format!(
            "reconnected; resuming the session after event {}",
            state.last_seq
        ),
        Level::Info,
    );
    // Become the session's origin again (approvals come to the origin), then fetch what
    // was missed (the SDK resumes too; duplicates are dropped by seq).
    state.resuming = true;
    vec![
        Effect::Call {
            method: "session.attach",
            params: json!({ "sessionId": sid }),
            purpose: Purpose::Other("session.attach".into()),
        },
        resume(&sid, state.last_seq),
    ]
}

fn on_event(state: &mut State, event: SessionEvent) -> Vec<Effect> {
    if state.session_id.as_deref() != Some(event.session_id.as_str()) {
        return Vec::new();
    }
    if event.seq <= state.last_seq {
        return Vec::new();
    }
    if state.resuming {
        state.held.insert(event.seq, event);
        return Vec::new();
    }
    if event.seq > state.last_seq + 1 {
        // A gap: hold this one back and fetch the missing events.
        let sid = event.session_id.clone();
        state.held.insert(event.seq, event);
        state.resuming = true;
        return vec![resume(&sid, state.last_seq)];
    }
    apply(state, &event);
    Vec::new()
}

/// Applies the events of a `session.resume` and then the held-back live ones, each once.
fn on_resumed(state: &mut State, events: Vec<SessionEvent>) -> Vec<Effect> {
    state.resuming = false;
    let sid = state.session_id.clone().unwrap_or_default();
    for event in events {
        if event.session_id == sid && event.seq > state.last_seq {
            state.held.insert(event.seq, event);
        }
    }
    let held = std::mem::take(&mut state.held);
    let mut rest = held.into_iter().peekable();
    while let Some((seq, event)) = rest.next() {
        if seq <= state.last_seq {
            continue;
        }
        if seq > state.last_seq + 1 {
            // Still a gap (the daemon's history is shorter than the live stream): keep the
            // rest and fetch again.
            state.held.insert(seq, event);
            state.held.extend(rest);
            state.resuming = true;
            return vec![resume(&sid, state.last_seq)];
        }
        apply(state, &event);
    }
    Vec::new()
}

fn str_of<'a>(p: &'a Value, key: &str) -> &'a str {
    p.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn first_non_empty<'a>(options: &[&'a str]) -> &'a str {
    options
        .iter()
        .copied()
        .find(|s| !s.is_empty())
        .unwrap_or_default()
}

fn one_line(s: &str) -> String {
    let line = s.lines().find(|l| !l.trim().is_empty()).unwrap_or_default();
    let mut out: String = line.chars().take(160).collect();
    if line.chars().count() > 160 {
        out.push('…');
    }
    out
}

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
    ("help", "key bindings (F1)", ""),
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

/// Applies one in-order event of the current session.
fn apply(state: &mut State, event: &SessionEvent) {
    state.last_seq = event.seq;
    let p = &event.payload;
    match event.kind.as_str() {
        "turn.started" => {
            let turn = str_of(p, "turnId").to_owned();
            state
                .queued
                .retain(|q| q.turn_id.as_deref() != Some(turn.as_str()));
            state.turn_id = Some(turn);
            state.turn_started = Some(state.now);
            state.streamed = false;
            if p.get("initiator").and_then(Value::as_str) == Some("system") {
                let why = str_of(p, "reason");
                state.notice(
                    format!("turn started by the system {why}")
                        .trim()
                        .to_owned(),
                    Level::Info,
                );
            }
        }
        "turn.queued" => {
            let turn = str_of(p, "turnId");
            if !state
                .queued
                .iter()
                .any(|q| q.turn_id.as_deref() == Some(turn))
            {
                // Ours (the prompt reply may come later) or another client's.
                match state.queued.iter_mut().find(|q| q.turn_id.is_none()) {
                    Some(q) => q.turn_id = Some(turn.to_owned()),
                    None => state.queued.push(Queued {
                        turn_id: Some(turn.to_owned()),
                        text: String::new(),
                    }),
                }
            }
        }
        "turn.dequeued" => {
            let turn = str_of(p, "turnId");
            state.queued.retain(|q| q.turn_id.as_deref() != Some(turn));
            match str_of(p, "reason") {
                "dropped" => state.notice("a queued prompt was dropped", Level::Warn),
                "steered" => state.notice(
                    "a queued prompt was folded into the running turn",
                    Level::Info,
                ),
                _ => {}
            }
        }
        "turn.done" => {
            let turn = str_of(p, "turnId");
            if state.turn_id.as_deref() == Some(turn) || state.turn_id.is_none() {
                state.turn_id = None;
                state.turn_started = None;
            }
            for e in &mut state.blocks {
                if let Block::Assistant { done, .. } = &mut e.block {
                    *done = true;
                }
            }
            for i in state.tools.values().copied().collect::<Vec<_>>() {
                if let Some(Entry {
                    block: Block::Tool { status, .. },
                    ..
                }) = state.blocks.get_mut(i)
                {
                    if *status == ToolStatus::Running {
                        *status = ToolStatus::Failed("did not finish".into());
                    }
                }
            }
            let reason = str_of(p, "reason");
            match reason {
                "complete" | "" => {}
                "interrupted" => state.notice("⏹ turn interrupted", Level::Warn),
                other => state.notice(format!("turn ended: {other}"), Level::Error),
            }
        }
        "message.user" => {
            let steered = p.get("steered").and_then(Value::as_bool).unwrap_or(false);
            state.push(Block::User {
                text: str_of(p, "text").to_owned(),
                steered,
            });
        }
        "message.delta" => {
            let text = str_of(p, "text");
            state.streamed = true;
            let rev = state.bump();
            // The answer being streamed, even when notices (reconnecting, …) came after it.
            let streaming = state
                .blocks
                .iter_mut()
                .rev()
                .find(|e| !matches!(e.block, Block::Notice { .. }));
            match streaming {
                Some(Entry {
                    block:
                        Block::Assistant {
                            text: t,
                            done: false,
                        },
                    rev: r,
                }) => {
                    t.push_str(text);
                    *r = rev;
                }
                _ => {
                    state.push(Block::Assistant {
                        text: text.to_owned(),
                        done: false,
                    });
                }
            }
        }
        "message.reasoning" => {
            let text = str_of(p, "text");
            let rev = state.bump();
            match state.blocks.last_mut() {
                Some(Entry {
                    block: Block::Reasoning { text: t },
                    rev: r,
                }) => {
                    t.push_str(text);
                    *r = rev;
                }
                _ => {
                    state.push(Block::Reasoning {
                        text: text.to_owned(),
                    });
                }
            }
        }
        "message.done" => {
            let full = str_of(p, "text");
            let role = str_of(p, "role");
            if role == "user" {
                return;
            }
            // The turn's message.done carries the text of every round; what was streamed
            // is shown already.
            if state.streamed {
                let rev = state.bump();
                for e in state.blocks.iter_mut().rev().take(64) {
                    if let Block::Assistant {
                        done: done @ false, ..
                    } = &mut e.block
                    {
                        *done = true;
                        e.rev = rev;
                    }
                }
            } else {
                match () {
                    _ if !full.is_empty() => {
                        if role == "system" || str_of(p, "messageKind") == "interrupted" {
                            state.notice(full.to_owned(), Level::Info);
                        } else {
                            state.push(Block::Assistant {
                                text: full.to_owned(),
                                done: true,
                            });
                        }
                    }
                    _ => {}
                }
            }
            if p.get("truncated").and_then(Value::as_bool) == Some(true) {
                state.notice(
                    "the answer hit the output limit and is incomplete",
                    Level::Warn,
                );
            }
        }
        "tool.call" => {
            let name = str_of(p, "name").to_owned();
            let summary =
                crate::run::render::tool_summary(&name, p.get("args").unwrap_or(&Value::Null));
            let call_id = str_of(p, "callId").to_owned();
            let i = state.push(Block::Tool {
                call_id: call_id.clone(),
                name,
                summary,
                status: ToolStatus::Running,
            });
            state.tools.insert(call_id, i);
        }
        "tool.result" => {
            let ok = p.get("ok").and_then(Value::as_bool).unwrap_or(false);
            let new_status = if ok {
                ToolStatus::Ok(crate::run::render::short_result(str_of(p, "output")))
            } else {
                ToolStatus::Failed(one_line(str_of(p, "error")))
            };
            let rev = state.bump();
            match state.tools.get(str_of(p, "callId")).copied() {
                Some(i) => {
                    if let Some(Entry {
                        block: Block::Tool { status, .. },
                        rev: r,
                    }) = state.blocks.get_mut(i)
                    {
                        *status = new_status;
                        *r = rev;
                    }
                }
                None => {
                    state.push(Block::Tool {
                        call_id: str_of(p, "callId").to_owned(),
                        name: str_of(p, "name").to_owned(),
                        summary: String::new(),
                        status: new_status,
                    });
                }
            }
        }
        "diff" => {
            state.push(Block::Diff {
                path: str_of(p, "path").to_owned(),
                patch: str_of(p, "patch").to_owned(),
            });
        }
        "usage" => {
            let n = |k: &str| p.get(k).and_then(Value::as_u64).unwrap_or(0);
            state.tokens.0 += n("inputTokens");
            state.tokens.1 += n("outputTokens");
            if let Some(m) = p.get("model").and_then(Value::as_str) {
                state.model = m.to_owned();
            }
        }
        "context" => {
            state.context_percent = p.get("percent").and_then(Value::as_f64);
            if let Some(m) = p.get("model").and_then(Value::as_str) {
                state.model = m.to_owned();
            }
        }
        "error" => {
            let code = str_of(p, "code");
            state.notice(
                format!("error ({code}): {}", str_of(p, "message")),
                Level::Error,
            );
        }
        "mode.changed" => {
            state.mode = str_of(p, "mode").to_owned();
            state.notice(format!("mode is now {}", state.mode), Level::Info);
        }
        "model.changed" => {
            state.model = str_of(p, "model").to_owned();
            state.effort = str_of(p, "effort").to_owned();
            state.notice(format!("model is now {}", state.model), Level::Info);
        }
        "compaction.started" => state.notice("compacting the conversation…", Level::Info),
        "compaction" => state.notice(
            format!(
                "conversation compacted: {} → {} tokens",
                p["before"].as_u64().unwrap_or(0),
                p["after"].as_u64().unwrap_or(0)
            ),
            Level::Info,
        ),
        "checkpoint.restored" => {
            let n = p["restored"].as_array().map_or(0, Vec::len);
            state.notice(format!("checkpoint restored: {n} file(s)"), Level::Info);
        }
        "subagent.spawn" => state.notice(
            format!(
                "subagent started: {}",
                first_non_empty(&[str_of(p, "title"), str_of(p, "task")])
            ),
            Level::Info,
        ),
        "subagent.done" => state.notice(
            format!("subagent finished ({})", str_of(p, "reason")),
            Level::Info,
        ),
        "loop.suspected" => state.notice(
            format!("the model seems to repeat `{}`", str_of(p, "tool")),
            Level::Warn,
        ),
        "todos.updated" => {
            let todos = p["todos"].as_array().cloned().unwrap_or_default();
            let lines: Vec<String> = todos
                .iter()
                .map(|t| {
                    let mark = match str_of(t, "status") {
                        "completed" => "☑",
                        "in_progress" => "◐",
                        _ => "☐",
                    };
                    format!("{mark} {}", str_of(t, "content"))
                })
                .collect();
            if !lines.is_empty() {
                state.notice(lines.join("\n"), Level::Info);
            }
        }
        _ => {}
    }
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

/// Reads an `approval.request`'s params (odd input is shown as well as it can be).
pub fn approval_from(params: &Value) -> Approval {
    let request = crate::run::approve::Request::from_params(params);
    let mut choices: Vec<&'static str> = vec!["once", "session", "project", "always"];
    if params
        .get("site")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        choices.push("site");
    }
    choices.push("deny");
    let hint = params
        .get("scopeHint")
        .and_then(Value::as_str)
        .unwrap_or("once");
    let cursor = choices.iter().position(|c| *c == hint).unwrap_or(0);
    Approval {
        request_id: str_of(params, "requestId").to_owned(),
        tool: request.tool,
        summary: request.summary,
        risk: request.risk,
        guard: params
            .get("guard")
            .and_then(Value::as_str)
            .map(str::to_owned),
        choices,
        cursor,
        timeout_sec: request.timeout_sec,
    }
}

/// Reads a `question.request`'s params.
pub fn question_from(params: &Value) -> QuestionBatch {
    let questions = params["questions"]
        .as_array()
        .map(|qs| {
            qs.iter()
                .map(|q| {
                    let options: Vec<(String, String)> = q["options"]
                        .as_array()
                        .map(|os| {
                            os.iter()
                                .map(|o| {
                                    (
                                        str_of(o, "label").to_owned(),
                                        str_of(o, "description").to_owned(),
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    Question {
                        header: str_of(q, "header").to_owned(),
                        question: str_of(q, "question").to_owned(),
                        allow_other: q["allowOther"].as_bool().unwrap_or(false)
                            || options.is_empty(),
                        options,
                        multi: q["multi"].as_bool().unwrap_or(false),
                        secret: q["secret"].as_bool().unwrap_or(false),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    QuestionBatch {
        request_id: str_of(params, "requestId").to_owned(),
        questions,
        index: 0,
        cursor: 0,
        selected: BTreeSet::new(),
        text: String::new(),
        answers: Vec::new(),
    }
}

fn commands_from(result: &Value) -> Vec<Command> {
    result["commands"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| Command {
                    name: str_of(c, "name").trim_start_matches('/').to_owned(),
                    summary: str_of(c, "summary").to_owned(),
                    hint: args_hint(c.get("argsSchema")),
                    source: str_of(c, "source").to_owned(),
                })
                .filter(|c| !c.name.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// An argument hint from a command's `argsSchema` (JSON Schema): its `description`, else
/// its property names / enum values.
fn args_hint(schema: Option<&Value>) -> String {
    let Some(schema) = schema.filter(|s| s.is_object()) else {
        return String::new();
    };
    if let Some(d) = schema.get("description").and_then(Value::as_str) {
        return d.to_owned();
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|");
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        return props
            .keys()
            .map(|k| format!("<{k}>"))
            .collect::<Vec<_>>()
            .join(" ");
    }
    String::new()
}

fn sessions_from(result: &Value) -> Vec<SessionRow> {
    let mut rows: Vec<SessionRow> = result["sessions"]
        .as_array()
        .map(|ss| {
            ss.iter()
                .filter(|s| matches!(s.get("kind").and_then(Value::as_str), None | Some("chat")))
                .map(|s| SessionRow {
                    session_id: str_of(s, "sessionId").to_owned(),
                    label: first_non_empty(&[
                        str_of(s, "title"),
                        str_of(s, "lastPrompt"),
                        "(untitled)",
                    ])
                    .replace('\n', " "),
                    status: first_non_empty(&[str_of(s, "status"), "idle"]).to_owned(),
                    last_activity: first_non_empty(&[
                        str_of(s, "lastActivityAt"),
                        str_of(s, "createdAt"),
                    ])
                    .to_owned(),
                })
                .collect()
        })
        .unwrap_or_default();
    rows.sort_by(|a, b| b.last_activity.cmp(&a.last_activity));
    rows
}

fn on_reply(state: &mut State, purpose: Purpose, result: Result<Value, CallError>) -> Vec<Effect> {
    match (purpose, result) {
        (Purpose::StartupList, Ok(v)) => {
            let rows = sessions_from(&v);
            if rows.is_empty() {
                return state.create();
            }
            state.modal = Some(Modal::Picker(Picker {
                rows,
                // The most recent session is preselected; row 0 is "new session".
                cursor: 1,
                renaming: None,
                loading: false,
            }));
            Vec::new()
        }
        (Purpose::StartupList, Err(e)) => {
            state.notice(
                format!("session.list failed: {e}; starting a new session"),
                Level::Warn,
            );
            state.create()
        }
        (Purpose::PickerList, Ok(v)) => {
            if let Some(Modal::Picker(p)) = &mut state.modal {
                p.rows = sessions_from(&v);
                p.loading = false;
                p.cursor = p.cursor.min(p.rows.len());
            }
            Vec::new()
        }
        (Purpose::Create, Ok(v)) => match v.get("sessionId").and_then(Value::as_str) {
            Some(sid) => {
                let sid = sid.to_owned();
                let mut fx = state.open(&sid);
                state.notice(
                    format!("new session {sid} in {}", state.workdir),
                    Level::Info,
                );
                if let Some(m) = &state.start_mode {
                    state.mode = m.clone();
                }
                // A new session is ours already (no attach); its resume brings the mode
                // and model it got.
                fx.clear();
                fx.push(resume(&sid, 0));
                fx.extend(state.list_commands());
                fx
            }
            None => {
                state.notice("session.create answered without a sessionId", Level::Error);
                Vec::new()
            }
        },
        (Purpose::Attach(sid), Ok(_)) => {
            if state.session_id.as_deref() != Some(sid.as_str()) {
                return Vec::new();
            }
            let mut fx = vec![resume(&sid, 0)];
            if let Some(mode) = state.start_mode.clone() {
                fx.push(Effect::Call {
                    method: "session.setMode",
                    params: json!({ "sessionId": sid, "mode": mode }),
                    purpose: Purpose::Other("session.setMode".into()),
                });
            }
            fx.extend(state.list_commands());
            fx
        }
        (Purpose::Resume(sid), Ok(v)) => {
            if state.session_id.as_deref() != Some(sid.as_str()) {
                return Vec::new();
            }
            let opening = state.last_seq == 0 && state.blocks.is_empty();
            if let Some(m) = v.get("mode").and_then(Value::as_str) {
                state.mode = m.to_owned();
            }
            if let Some(m) = v.get("model").and_then(Value::as_str) {
                state.model = m.to_owned();
            }
            if let Some(m) = v.get("effort").and_then(Value::as_str) {
                state.effort = m.to_owned();
            }
            let events: Vec<SessionEvent> = v["events"]
                .as_array()
                .map(|es| es.iter().filter_map(SessionEvent::from_value).collect())
                .unwrap_or_default();
            let fx = on_resumed(state, events);
            if opening {
                state.notice(
                    format!(
                        "session {sid} opened (history replayed up to event {})",
                        state.last_seq
                    ),
                    Level::Info,
                );
            }
            fx
        }
        (Purpose::Attach(sid) | Purpose::Resume(sid), Err(e)) => {
            state.resuming = false;
            state.notice(format!("could not open session {sid}: {e}"), Level::Error);
            Vec::new()
        }
        (Purpose::Prompt(text), Ok(v)) => {
            let turn = v.get("turnId").and_then(Value::as_str).map(str::to_owned);
            if let Some(q) = state
                .queued
                .iter_mut()
                .find(|q| q.text == text && q.turn_id.is_none())
            {
                q.turn_id = turn.clone();
            }
            // The turn may have started already (then it is not queued at all).
            if turn.is_some() && state.turn_id == turn {
                state.queued.retain(|q| q.turn_id != turn);
            }
            Vec::new()
        }
        (Purpose::Prompt(text), Err(e)) => {
            state
                .queued
                .retain(|q| !(q.text == text && q.turn_id.is_none()));
            state.notice(format!("the prompt was not sent: {e}"), Level::Error);
            restore_input(state, &text);
            Vec::new()
        }
        (Purpose::Steer(_), Ok(_)) => {
            state.flash(
                "steering: the message joins the running turn at its next tool round",
                Level::Info,
            );
            Vec::new()
        }
        (Purpose::Steer(text), Err(CallError::Unavailable(_))) => {
            state.steer_unavailable = true;
            state.notice(
                "steering is unavailable: this daemon does not implement session.steer yet; press Enter to queue the message instead",
                Level::Warn,
            );
            restore_input(state, &text);
            Vec::new()
        }
        (Purpose::Steer(text), Err(e)) => {
            state.notice(format!("steer failed: {e}"), Level::Error);
            restore_input(state, &text);
            Vec::new()
        }
        (Purpose::Interrupt, Err(e)) => {
            state.notice(format!("interrupt failed: {e}"), Level::Error);
            Vec::new()
        }
        (Purpose::Interrupt, Ok(_)) => Vec::new(),
        (Purpose::CommandList, result) => {
            state.commands = result.map(|v| commands_from(&v));
            Vec::new()
        }
        (Purpose::Command { name, args }, Err(CallError::Unavailable(_))) => {
            direct_command(state, &name, &args)
        }
        (Purpose::Command { name, .. }, Err(e)) => {
            state.notice(format!("/{name} failed: {e}"), Level::Error);
            Vec::new()
        }
        (Purpose::Command { name, .. }, Ok(_)) => {
            state.flash(format!("/{name} started"), Level::Info);
            Vec::new()
        }
        (Purpose::Direct(what), Ok(v)) => {
            let text = match what.as_str() {
                "session.setModel" => {
                    format!("model: {}", v["model"].as_str().unwrap_or("(default)"))
                }
                "session.setEffort" => {
                    format!("effort: {}", v["effort"].as_str().unwrap_or("(none)"))
                }
                "session.setMode" => {
                    // mode.changed says so in the transcript.
                    if let Some(m) = v["mode"].as_str() {
                        state.mode = m.to_owned();
                    }
                    return Vec::new();
                }
                "checkpoint.restore" => "files restored from the latest checkpoint".to_owned(),
                other => format!("{other}: done"),
            };
            state.notice(text, Level::Info);
            Vec::new()
        }
        (Purpose::Direct(what), Err(CallError::Unavailable(_))) => {
            state.notice(
                format!("unavailable: this daemon implements neither command.run nor {what} yet"),
                Level::Warn,
            );
            Vec::new()
        }
        (Purpose::Direct(what), Err(e)) => {
            state.notice(format!("{what} failed: {e}"), Level::Error);
            Vec::new()
        }
        (Purpose::UndoList, Ok(v)) => {
            let newest = v["checkpoints"].as_array().and_then(|c| c.first()).cloned();
            match (newest, state.session_id.clone()) {
                (Some(cp), Some(sid)) => vec![Effect::Call {
                    method: "checkpoint.restore",
                    params: json!({ "sessionId": sid, "id": str_of(&cp, "id") }),
                    purpose: Purpose::Direct("checkpoint.restore".into()),
                }],
                _ => {
                    state.notice(
                        "nothing to undo: this session has no checkpoint",
                        Level::Info,
                    );
                    Vec::new()
                }
            }
        }
        (Purpose::UndoList, Err(e)) => {
            state.notice(format!("/undo failed: {e}"), Level::Error);
            Vec::new()
        }
        (Purpose::Complete(query), result) => {
            if let Some(c) = &mut state.completion {
                if c.query == query {
                    c.set_result(result);
                }
            }
            Vec::new()
        }
        (Purpose::Other(what), Err(e)) => {
            match e {
                CallError::Unavailable(_) => {
                    state.notice(format!("{what} is unavailable in this daemon"), Level::Warn)
                }
                e => state.notice(format!("{what} failed: {e}"), Level::Error),
            }
            Vec::new()
        }
        (Purpose::Other(what), Ok(_)) => {
            match what.as_str() {
                "session.close" => {
                    state.notice("session closed", Level::Info);
                    if matches!(state.modal, Some(Modal::Picker(_))) {
                        return vec![list_for_picker(state)];
                    }
                }
                "session.rename" => {
                    if matches!(state.modal, Some(Modal::Picker(_))) {
                        return vec![list_for_picker(state)];
                    }
                }
                _ => {}
            }
            Vec::new()
        }
        (Purpose::Create | Purpose::PickerList, Err(e)) => {
            state.notice(format!("{e}"), Level::Error);
            Vec::new()
        }
    }
}

fn restore_input(state: &mut State, text: &str) {
    if state.input_text().is_empty() {
        state.input = input::new_editor();
        state.input.insert_str(text);
    }
}

/// Runs a built-in command through its own method when `command.run` is unavailable.
fn direct_command(state: &mut State, name: &str, args: &str) -> Vec<Effect> {
    let Some(sid) = state.session_id.clone() else {
        return Vec::new();
    };
    let args = args.trim();
    let (method, params) = match name {
        "mode" => {
            if !matches!(args, "plan" | "accept" | "auto") {
                state.notice("usage: /mode plan|accept|auto", Level::Warn);
                return Vec::new();
            }
            ("session.setMode", json!({ "sessionId": sid, "mode": args }))
        }
        "model" => {
            let model = if args.is_empty() || args == "inherit" {
                Value::Null
            } else {
                args.into()
            };
            (
                "session.setModel",
                json!({ "sessionId": sid, "model": model }),
            )
        }
        "effort" => {
            let effort = if args.is_empty() || args == "inherit" {
                Value::Null
            } else {
                args.into()
            };
            (
                "session.setEffort",
                json!({ "sessionId": sid, "effort": effort }),
            )
        }
        "compact" => {
            let instructions = if args.is_empty() {
                Value::Null
            } else {
                args.into()
            };
            (
                "session.compact",
                json!({ "sessionId": sid, "instructions": instructions }),
            )
        }
        "undo" => {
            return vec![Effect::Call {
                method: "checkpoint.list",
                params: json!({ "sessionId": sid }),
                purpose: Purpose::UndoList,
            }]
        }
        other => {
            state.notice(
                format!("/{other} is unavailable: this daemon does not implement command.run yet"),
                Level::Warn,
            );
            return Vec::new();
        }
    };
    vec![Effect::Call {
        method,
        params,
        purpose: Purpose::Direct(method.to_owned()),
    }]
}

fn is_ctrl(key: &KeyEvent, c: char) -> bool {
    key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char(c)
}

fn on_key(state: &mut State, key: KeyEvent) -> Vec<Effect> {
    if key.kind == crossterm::event::KeyEventKind::Release {
        return Vec::new();
    }
    if is_ctrl(&key, 'c') {
        if state.quit_armed.is_some() {
            state.quitting = true;
            return vec![Effect::Quit];
        }
        state.quit_armed = Some(state.now);
        state.flash("press Ctrl-C again to leave", Level::Warn);
        return Vec::new();
    }
    state.quit_armed = None;
    match state.modal.clone() {
        Some(Modal::Approval) => return approval_key(state, key),
        Some(Modal::Question) => return question_key(state, key),
        Some(Modal::Picker(p)) => return picker_key(state, p, key),
        Some(Modal::Help) => {
            state.modal = None;
            show_next_modal(state);
            return Vec::new();
        }
        None => {}
    }
    // Global keys.
    match key.code {
        KeyCode::F(1) => {
            state.modal = Some(Modal::Help);
            return Vec::new();
        }
        KeyCode::PageUp => {
            state.scroll += usize::from(state.viewport_rows.max(2) - 1);
            return Vec::new();
        }
        KeyCode::PageDown => {
            state.scroll = state
                .scroll
                .saturating_sub(usize::from(state.viewport_rows.max(2) - 1));
            return Vec::new();
        }
        KeyCode::End if key.modifiers.contains(KeyModifiers::CONTROL) => {
            state.scroll = 0;
            return Vec::new();
        }
        _ => {}
    }
    if is_ctrl(&key, 'r') {
        state.show_reasoning = !state.show_reasoning;
        state.epoch += 1;
        return Vec::new();
    }
    if is_ctrl(&key, 'o') {
        return open_picker(state);
    }
    if is_ctrl(&key, 's') {
        return submit(state, true);
    }
    if is_ctrl(&key, 'l') {
        state.scroll = 0;
        return Vec::new();
    }
    let palette = state.palette();
    match key.code {
        KeyCode::Esc => {
            if state.completion.take().is_some() {
                return Vec::new();
            }
            if palette.is_some() {
                state.input = input::new_editor();
                return Vec::new();
            }
            if state.busy() {
                if let Some(sid) = state.session_id.clone() {
                    state.flash("interrupting…", Level::Warn);
                    return vec![Effect::Call {
                        method: "session.interrupt",
                        params: json!({ "sessionId": sid }),
                        purpose: Purpose::Interrupt,
                    }];
                }
            }
            Vec::new()
        }
        KeyCode::Tab => {
            if let Some(rows) = palette {
                if let Some(c) = rows.get(state.palette_cursor.min(rows.len().saturating_sub(1))) {
                    state.input = input::new_editor();
                    state.input.insert_str(format!("/{} ", c.name));
                }
                return Vec::new();
            }
            if let Some(c) = state.completion.take() {
                if let Some(path) = c.selected_path() {
                    input::replace_at_word(&mut state.input, &format!("@{path}"));
                    return after_edit(state);
                }
            }
            Vec::new()
        }
        KeyCode::Up | KeyCode::Down if palette.as_ref().is_some_and(|r| !r.is_empty()) => {
            let n = palette.map_or(1, |r| r.len());
            state.palette_cursor = step(state.palette_cursor, n, key.code == KeyCode::Down);
            Vec::new()
        }
        KeyCode::Up | KeyCode::Down
            if state
                .completion
                .as_ref()
                .is_some_and(Completion::has_entries) =>
        {
            if let Some(c) = &mut state.completion {
                c.step(key.code == KeyCode::Down);
            }
            Vec::new()
        }
        KeyCode::Up if state.input.cursor().0 == 0 => {
            history_step(state, true);
            Vec::new()
        }
        KeyCode::Down
            if state.input.cursor().0 + 1 >= state.input.lines().len()
                && state.history_pos.is_some() =>
        {
            history_step(state, false);
            Vec::new()
        }
        KeyCode::Enter
            if !key
                .modifiers
                .intersects(KeyModifiers::ALT | KeyModifiers::SHIFT) =>
        {
            if let Some(rows) = palette {
                let typed = state.input_text();
                if let Some(c) = rows.get(state.palette_cursor.min(rows.len().saturating_sub(1))) {
                    if typed.trim_start_matches('/') != c.name {
                        state.input = input::new_editor();
                        state.input.insert_str(format!("/{}", c.name));
                    }
                }
            }
            if let Some(c) = state.completion.take() {
                if let Some(path) = c.selected_path() {
                    input::replace_at_word(&mut state.input, &format!("@{path}"));
                    return after_edit(state);
                }
            }
            submit(state, false)
        }
        KeyCode::Enter => {
            state.input.insert_newline();
            Vec::new()
        }
        KeyCode::Char('j') if key.modifiers.contains(KeyModifiers::CONTROL) => {
            state.input.insert_newline();
            Vec::new()
        }
        _ => {
            // Moving the cursor keeps the place in the history; editing leaves it.
            if state.input.input(key) {
                state.history_pos = None;
            }
            after_edit(state)
        }
    }
}

fn step(cursor: usize, n: usize, down: bool) -> usize {
    if n == 0 {
        return 0;
    }
    let cursor = cursor.min(n - 1);
    if down {
        (cursor + 1) % n
    } else {
        (cursor + n - 1) % n
    }
}

/// After the input changed: reset the palette highlight, start or update `@` completion.
fn after_edit(state: &mut State) -> Vec<Effect> {
    state.palette_cursor = state
        .palette_cursor
        .min(state.palette().map_or(0, |r| r.len().saturating_sub(1)));
    let Some(query) = input::at_word(&state.input) else {
        state.completion = None;
        return Vec::new();
    };
    if state.completion.as_ref().is_some_and(|c| c.query == query) {
        return Vec::new();
    }
    state.completion = Some(Completion::new(&query));
    let mut params = json!({ "query": query, "limit": 30 });
    match &state.session_id {
        Some(sid) => params["sessionId"] = sid.as_str().into(),
        None => params["workdir"] = state.workdir.as_str().into(),
    }
    vec![Effect::Call {
        method: "file.complete",
        params,
        purpose: Purpose::Complete(query),
    }]
}

fn history_step(state: &mut State, back: bool) {
    if state.history.is_empty() {
        return;
    }
    let (pos, draft) = match state.history_pos.take() {
        Some((pos, draft)) => (Some(pos), draft),
        None => (None, state.input_text()),
    };
    let next = match (pos, back) {
        (None, true) => Some(state.history.len() - 1),
        (None, false) => None,
        (Some(p), true) => Some(p.saturating_sub(1)),
        (Some(p), false) if p + 1 < state.history.len() => Some(p + 1),
        (Some(_), false) => None,
    };
    state.input = input::new_editor();
    match next {
        Some(p) => {
            let text = state.history[p].clone();
            state.input.insert_str(text);
            // On the first line, so the next Up goes further back at once.
            state.input.move_cursor(tui_textarea::CursorMove::Top);
            state.input.move_cursor(tui_textarea::CursorMove::End);
            state.history_pos = Some((p, draft));
        }
        None => {
            state.input.insert_str(draft);
        }
    }
}

/// Enter (or Ctrl-S to steer): a slash command, or a prompt (queued while a turn runs).
fn submit(state: &mut State, steer: bool) -> Vec<Effect> {
    let text = state.input_text();
    if text.trim().is_empty() {
        return Vec::new();
    }
    let Some(sid) = state.session_id.clone() else {
        state.flash("no session yet", Level::Warn);
        return Vec::new();
    };
    state.input = input::new_editor();
    state.completion = None;
    state.history_pos = None;
    state.scroll = 0;
    if state.history.last() != Some(&text) {
        state.history.push(text.clone());
        if state.history.len() > HISTORY_MAX {
            state.history.remove(0);
        }
    }
    if let Some(cmd) = text.strip_prefix('/') {
        if !cmd.starts_with('/') {
            return slash(state, &sid, cmd.trim());
        }
    }
    if steer && state.busy() {
        if state.steer_unavailable {
            state.flash(
                "steering is unavailable in this daemon; queued instead",
                Level::Warn,
            );
        } else {
            return vec![Effect::Call {
                method: "session.steer",
                params: json!({ "sessionId": sid, "text": text }),
                purpose: Purpose::Steer(text),
            }];
        }
    }
    let mut params = json!({ "sessionId": sid, "text": text });
    if state.busy() {
        params["whenBusy"] = "queue".into();
        state.queued.push(Queued {
            turn_id: None,
            text: text.clone(),
        });
    }
    vec![Effect::Call {
        method: "session.prompt",
        params,
        purpose: Purpose::Prompt(text),
    }]
}

fn slash(state: &mut State, sid: &str, line: &str) -> Vec<Effect> {
    let (name, args) = match line.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (line, ""),
    };
    match name {
        "sessions" => open_picker(state),
        "new" => state.create(),
        "rename" => vec![Effect::Call {
            method: "session.rename",
            params: json!({ "sessionId": sid, "title": args }),
            purpose: Purpose::Other("session.rename".into()),
        }],
        "close" => {
            let fx = vec![Effect::Call {
                method: "session.close",
                params: json!({ "sessionId": sid }),
                purpose: Purpose::Other("session.close".into()),
            }];
            state.session_id = None;
            state.clear_transcript();
            let mut fx = fx;
            fx.extend(open_picker(state));
            fx
        }
        "reasoning" => {
            state.show_reasoning = !state.show_reasoning;
            state.epoch += 1;
            Vec::new()
        }
        "theme" => {
            state.theme = match (args, state.theme) {
                ("dark", _) => ThemeKind::Dark,
                ("light", _) => ThemeKind::Light,
                (_, ThemeKind::Dark) => ThemeKind::Light,
                (_, ThemeKind::Light) => ThemeKind::Dark,
            };
            state.epoch += 1;
            Vec::new()
        }
        "help" => {
            state.modal = Some(Modal::Help);
            Vec::new()
        }
        "quit" | "exit" => {
            state.quitting = true;
            vec![Effect::Quit]
        }
        "" => Vec::new(),
        _ => vec![Effect::Call {
            method: "command.run",
            params: json!({ "sessionId": sid, "name": name, "args": args }),
            purpose: Purpose::Command {
                name: name.to_owned(),
                args: args.to_owned(),
            },
        }],
    }
}

fn open_picker(state: &mut State) -> Vec<Effect> {
    state.modal = Some(Modal::Picker(Picker {
        rows: Vec::new(),
        cursor: 0,
        renaming: None,
        loading: true,
    }));
    vec![list_for_picker(state)]
}

fn picker_key(state: &mut State, mut p: Picker, key: KeyEvent) -> Vec<Effect> {
    if let Some(title) = &mut p.renaming {
        match key.code {
            KeyCode::Esc => p.renaming = None,
            KeyCode::Enter => {
                let title = title.clone();
                p.renaming = None;
                if let Some(row) = p.cursor.checked_sub(1).and_then(|i| p.rows.get(i)) {
                    let sid = row.session_id.clone();
                    if state.session_id.as_deref() == Some(sid.as_str()) {
                        state.title = title.clone();
                    }
                    state.modal = Some(Modal::Picker(p));
                    return vec![Effect::Call {
                        method: "session.rename",
                        params: json!({ "sessionId": sid, "title": title }),
                        purpose: Purpose::Other("session.rename".into()),
                    }];
                }
            }
            KeyCode::Backspace => {
                title.pop();
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => title.push(c),
            _ => {}
        }
        state.modal = Some(Modal::Picker(p));
        return Vec::new();
    }
    let n = p.rows.len() + 1;
    let row = p.cursor.checked_sub(1).and_then(|i| p.rows.get(i)).cloned();
    match key.code {
        KeyCode::Esc if state.session_id.is_some() => {
            state.modal = None;
            show_next_modal(state);
            return Vec::new();
        }
        KeyCode::Up => p.cursor = step(p.cursor, n, false),
        KeyCode::Down => p.cursor = step(p.cursor, n, true),
        KeyCode::Enter => {
            state.modal = None;
            return match row {
                None => state.create(),
                Some(r) if state.session_id.as_deref() == Some(r.session_id.as_str()) => Vec::new(),
                Some(r) => state.open(&r.session_id),
            };
        }
        KeyCode::Char('n') => {
            state.modal = None;
            return state.create();
        }
        KeyCode::Char('r') if row.is_some() => p.renaming = Some(String::new()),
        KeyCode::Char('d') | KeyCode::Delete => {
            if let Some(r) = row {
                if state.session_id.as_deref() == Some(r.session_id.as_str()) {
                    state.session_id = None;
                    state.clear_transcript();
                }
                p.rows.retain(|x| x.session_id != r.session_id);
                p.cursor = p.cursor.min(p.rows.len());
                state.modal = Some(Modal::Picker(p));
                return vec![Effect::Call {
                    method: "session.close",
                    params: json!({ "sessionId": r.session_id }),
                    purpose: Purpose::Other("session.close".into()),
                }];
            }
        }
        _ => {}
    }
    state.modal = Some(Modal::Picker(p));
    Vec::new()
}

fn approval_key(state: &mut State, key: KeyEvent) -> Vec<Effect> {
    let Some(a) = state.approvals.front_mut() else {
        state.modal = None;
        return Vec::new();
    };
    let pick = |c: &str| a.choices.iter().position(|x| *x == c);
    let chosen = match key.code {
        KeyCode::Left | KeyCode::Up | KeyCode::BackTab => {
            a.cursor = step(a.cursor, a.choices.len(), false);
            None
        }
        KeyCode::Right | KeyCode::Down | KeyCode::Tab => {
            a.cursor = step(a.cursor, a.choices.len(), true);
            None
        }
        KeyCode::Enter => Some(a.cursor),
        KeyCode::Char('y' | '1' | 'o') => pick("once"),
        KeyCode::Char('s' | '2') => pick("session"),
        KeyCode::Char('p' | '3') => pick("project"),
        KeyCode::Char('a' | '4') => pick("always"),
        KeyCode::Char('w') => pick("site"),
        KeyCode::Char('n' | 'd') | KeyCode::Esc => pick("deny"),
        _ => None,
    };
    let Some(i) = chosen else {
        return Vec::new();
    };
    let Some(a) = state.approvals.pop_front() else {
        return Vec::new();
    };
    let choice = a.choices[i];
    let result = if choice == "deny" {
        json!({ "decision": "deny", "reason": format!("the user refused `{}` in snowpea chat", a.tool) })
    } else {
        json!({ "decision": "allow", "scope": choice })
    };
    let shown = if choice == "deny" {
        "denied".to_owned()
    } else {
        format!("allowed ({choice})")
    };
    state.notice(
        format!("{} {shown}", a.tool),
        if choice == "deny" {
            Level::Warn
        } else {
            Level::Info
        },
    );
    state.modal = None;
    show_next_modal(state);
    vec![Effect::Answer {
        request_id: a.request_id,
        result,
        fallback: "approval.respond",
    }]
}

fn question_key(state: &mut State, key: KeyEvent) -> Vec<Effect> {
    let Some(b) = state.questions.front_mut() else {
        state.modal = None;
        return Vec::new();
    };
    if key.code == KeyCode::Esc {
        // Declining answers the batch with no answers.
        let b = state.questions.pop_front().expect("front exists");
        state.notice("question declined", Level::Warn);
        state.modal = None;
        show_next_modal(state);
        return vec![Effect::Answer {
            request_id: b.request_id,
            result: json!({ "answers": [] }),
            fallback: "question.respond",
        }];
    }
    let Some(q) = b.questions.get(b.index).cloned() else {
        return finish_questions(state);
    };
    let rows = q.options.len() + usize::from(q.allow_other);
    let on_text = q.allow_other && b.cursor == q.options.len();
    match key.code {
        KeyCode::Up => b.cursor = step(b.cursor, rows, false),
        KeyCode::Down | KeyCode::Tab => b.cursor = step(b.cursor, rows, true),
        KeyCode::Char(' ') if q.multi && !on_text => {
            if !b.selected.remove(&b.cursor) {
                b.selected.insert(b.cursor);
            }
        }
        KeyCode::Backspace if on_text => {
            b.text.pop();
        }
        KeyCode::Char(c) if on_text && !key.modifiers.contains(KeyModifiers::CONTROL) => {
            b.text.push(c)
        }
        KeyCode::Enter => {
            let mut selected: Vec<String> = if q.multi {
                b.selected
                    .iter()
                    .filter_map(|i| q.options.get(*i))
                    .map(|o| o.0.clone())
                    .collect()
            } else if !on_text {
                q.options
                    .get(b.cursor)
                    .map(|o| vec![o.0.clone()])
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            if q.multi && selected.is_empty() && !on_text {
                if let Some(o) = q.options.get(b.cursor) {
                    selected.push(o.0.clone());
                }
            }
            let text = if b.text.is_empty() {
                Value::Null
            } else {
                Value::String(b.text.clone())
            };
            b.answers
                .push(json!({ "selected": selected, "text": text }));
            b.index += 1;
            b.cursor = 0;
            b.selected.clear();
            b.text.clear();
            if b.index >= b.questions.len() {
                return finish_questions(state);
            }
        }
        _ => {}
    }
    Vec::new()
}

fn finish_questions(state: &mut State) -> Vec<Effect> {
    let Some(b) = state.questions.pop_front() else {
        return Vec::new();
    };
    state.notice(
        format!("answered {} question(s)", b.answers.len()),
        Level::Info,
    );
    state.modal = None;
    show_next_modal(state);
    vec![Effect::Answer {
        request_id: b.request_id,
        result: json!({ "answers": b.answers }),
        fallback: "question.respond",
    }]
}

//! The `HostTools` component (issue 21; spec `tool.register`, `tool.unregister`,
//! `tool.invoke`, `tool.progress`, `tool.cancel`, the host side of `session.toolContent`;
//! capabilities `hostTools`, `hostToolParallel`, `batchedFileTools`, `toolInvokeGuard`).
//!
//! A client lends the agent its own tools: [`registry`] keeps each connection's tools
//! (all-or-nothing validation, dropped at once when the connection closes); a turn offers
//! the tools of its session's host ([`Hosts::host_of`]: `hostToolsFrom`, else the origin
//! connection) as [`invoke::HostTool`]s, which go through the same permission pipeline as
//! a built-in tool and then send `tool.invoke` with a silence deadline ([`invoke`]);
//! [`answer`] checks the shape of a host's result (a wrong type names the field);
//! [`parallel`] decides which calls of one model step run side by side; [`content`] keeps
//! the image-bearing results for `session.toolContent`; [`wait_host`] waits for a
//! scheduled run's host. It owns no table (registrations live as long as their
//! connection; kept content is on disk).

pub mod answer;
pub mod content;
pub mod deferred;
pub mod invoke;
pub mod parallel;
pub mod registry;
pub mod wait_host;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};

use snowpea_common::bus::{BusHub, ConnectionEvent};
use snowpea_common::context::CallContext;
use snowpea_common::home::Home;
use snowpea_proto::rpc::v1::ConnectionInfo;
use snowpea_proto::session::v1 as pb;
use tokio::sync::broadcast::error::RecvError;

use crate::approval::Approvals;
use crate::question::Questions;
use crate::session::{Registry, Session};
use crate::tools::Tools;
pub use invoke::HostTool;
pub use registry::{Host, HostToolDef, Hosts, Parallel};
use snowpea_session_error::{Error, Result};

/// The internal meta key a host tool's [`crate::tools::ToolOutput`] carries its result in
/// (content blocks, images, host meta, sensitivity); `turn/tool_call.rs` takes it out
/// before anything is stored ([`take_result`]).
pub const HOST_RESULT: &str = "__hostResult";

/// What a sensitive result's output is stored as (`meta.sensitive`).
pub const REDACTED: &str = "[redacted]";

/// Host meta copied onto `tool.result` up to this many bytes of JSON (addendum 13).
pub const MAX_META_BYTES: usize = 16 * 1024;

/// What a host answered, as `turn/tool_call.rs` stores and feeds it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostResult {
    /// Blocks for the `tool.result` event: text inline, images as `contentRef`; empty for
    /// a sensitive result.
    pub content: Vec<pb::ContentBlock>,
    /// Images for the model (vision input).
    pub images: Vec<snowpea_session_llm::provider::ToolImage>,
    /// The host's `meta` when ≤ [`MAX_META_BYTES`].
    pub meta: Option<serde_json::Value>,
    /// `meta.sensitive`: output stored as `[redacted]`, no content kept.
    pub sensitive: bool,
}

/// Takes a host tool's result out of a tool output's meta (`None` for other tools).
pub fn take_result(meta: &mut serde_json::Value) -> Option<HostResult> {
    let v = meta.as_object_mut()?.remove(HOST_RESULT)?;
    let blocks = v
        .get("content")
        .and_then(serde_json::Value::as_array)
        .map(|a| a.iter().map(content::block_of).collect())
        .unwrap_or_default();
    let images = crate::clients::mcp::images_of(&v);
    Some(HostResult {
        content: blocks,
        images,
        meta: v.get("meta").filter(|m| !m.is_null()).cloned(),
        sensitive: v.get("sensitive").and_then(serde_json::Value::as_bool) == Some(true),
    })
}

/// One call in flight (see [`invoke`]).
#[derive(Debug)]
struct InFlight {
    connection_id: String,
    /// `tool.progress` messages of the call (empty = keepalive).
    progress: tokio::sync::mpsc::UnboundedSender<String>,
    /// Cancelled when the host connection closes.
    gone: tokio_util::sync::CancellationToken,
}

/// The host tools component.
pub struct HostTools {
    hub: Arc<BusHub>,
    sessions: Registry,
    hosts: Arc<Hosts>,
    tools: Arc<Tools>,
    approvals: Arc<Approvals>,
    questions: Arc<Questions>,
    calls: Mutex<HashMap<String, InFlight>>,
    content: content::ContentStore,
    /// The scheduled run of a session's turn (`tool.invoke.job`), set by `Runs`.
    jobs: Mutex<HashMap<String, pb::tool_invoke_params::Job>>,
    /// How long a session's turns wait for its host ([`wait_host`]).
    waits: Mutex<HashMap<String, std::time::Duration>>,
    /// Woken on every `tool.register` (a waiting turn re-checks its host).
    registered: tokio::sync::Notify,
    /// The latest turn each session's person started (`tool.invoke.userTurn` of later turns).
    user_turns: Mutex<HashMap<String, pb::tool_invoke_params::UserTurn>>,
    /// Calls the host has answered whose `tool.result` may not be out yet ([`Answered`]).
    answered: Mutex<Answered>,
}

/// Most answered calls [`Answered`] remembers.
pub const ANSWERED_KEEP: usize = 256;

/// Calls whose answer arrived, by call id (oldest first), with their host connection and
/// the turn's progress sink. The gateway forwards a host's `tool.progress` notification and
/// its `tool.invoke` answer on separate paths, so progress the host sent just before
/// answering can reach svc-session just after the answer: it is still handed to the turn,
/// which reports it before the call's `tool.result`; once the turn has reported the result
/// (the sink is closed) it is accepted and dropped quietly, never emitted after the result.
#[derive(Default)]
struct Answered {
    calls: std::collections::VecDeque<(String, String, tokio::sync::mpsc::UnboundedSender<String>)>,
}

impl Answered {
    /// Remembers `call_id` of `connection_id`, forgetting calls whose result is out and
    /// the oldest beyond [`ANSWERED_KEEP`].
    fn insert(
        &mut self,
        call_id: String,
        connection_id: String,
        sink: tokio::sync::mpsc::UnboundedSender<String>,
    ) {
        self.calls.retain(|(_, _, s)| !s.is_closed());
        while self.calls.len() >= ANSWERED_KEEP {
            self.calls.pop_front();
        }
        self.calls.push_back((call_id, connection_id, sink));
    }
}

/// Most steered prompts one `tool.invoke.userTurn.steers` keeps (the latest).
pub const MAX_STEERS: usize = 32;

impl std::fmt::Debug for HostTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostTools").finish_non_exhaustive()
    }
}

impl HostTools {
    /// The component: requests over `hub`, sessions of `sessions`, registrations in
    /// `hosts` (shared with [`Tools`] for `tool.list`), daemon tool names from `tools`; the
    /// silence clock pauses while `approvals` or `questions` of the call's session wait.
    pub fn new(
        home: &Home,
        hub: Arc<BusHub>,
        sessions: Registry,
        hosts: Arc<Hosts>,
        tools: Arc<Tools>,
        approvals: Arc<Approvals>,
        questions: Arc<Questions>,
    ) -> Arc<Self> {
        let me = Arc::new(HostTools {
            hub,
            sessions,
            hosts,
            tools,
            approvals,
            questions,
            calls: Mutex::new(HashMap::new()),
            content: content::ContentStore::new(home.root()),
            jobs: Mutex::new(HashMap::new()),
            waits: Mutex::new(HashMap::new()),
            registered: tokio::sync::Notify::new(),
            user_turns: Mutex::new(HashMap::new()),
            answered: Mutex::new(Answered::default()),
        });
        me.watch();
        me
    }

    /// The registrations.
    pub fn hosts(&self) -> &Hosts {
        &self.hosts
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<String, InFlight>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Names of the daemon's own tools (a host may not take them, `browser_*` aside).
    fn daemon_names(&self) -> HashSet<String> {
        let mut names: HashSet<String> = self
            .tools
            .builtin()
            .iter()
            .map(|t| t.name().to_owned())
            .collect();
        names.extend(
            [
                "session_command_list",
                "session_command_run",
                "skill_view",
                invoke::TOOL_SEARCH,
            ]
            .map(str::to_owned),
        );
        names
    }

    /// `tool.register`: validates every entry (all-or-nothing) and adds or replaces them
    /// for the calling connection.
    pub fn register(
        &self,
        ctx: &CallContext,
        p: pb::ToolRegisterParams,
    ) -> Result<pb::ToolRegisterResult> {
        let conn = caller(ctx)?;
        let defs = registry::validate(&p.tools, &self.daemon_names())?;
        let client_id = ctx
            .client_id
            .clone()
            .or_else(|| self.hub.connection(&conn).and_then(|c| c.client_id));
        let registered = self.hosts.register(&conn, client_id, defs);
        self.registered.notify_waiters();
        tracing::info!(connection_id = %conn, tools = registered.len(), "host tools registered");
        Ok(pb::ToolRegisterResult { registered })
    }

    /// `tool.unregister`: removes the named tools of the calling connection.
    pub fn unregister(
        &self,
        ctx: &CallContext,
        p: pb::ToolUnregisterParams,
    ) -> Result<pb::ToolUnregisterResult> {
        let conn = caller(ctx)?;
        let removed = self.hosts.unregister(&conn, &p.names);
        Ok(pb::ToolUnregisterResult { removed })
    }

    /// `tool.progress` from the host: re-emitted as the `tool.progress` event and restarts
    /// the call's silence deadline. Progress that arrives after the call's answer (see
    /// [`Answered`]) is still reported before the call's `tool.result` when the turn has not
    /// reported it yet, and otherwise accepted and dropped (never emitted after the result).
    /// Progress for no known call, or from a connection that is not the call's host, is
    /// ignored (it is a notification).
    pub fn progress(&self, ctx: &CallContext, p: pb::ToolProgressParams) {
        let conn = ctx.connection_id.as_deref();
        {
            let calls = self.calls();
            match calls.get(&p.call_id) {
                Some(c) if conn == Some(c.connection_id.as_str()) => {
                    let _ = c.progress.send(p.message);
                    return;
                }
                Some(_) => {
                    tracing::warn!(call_id = %p.call_id, "tool.progress from a connection that is not the call's host; ignored");
                    return;
                }
                None => {}
            }
        }
        let mut answered = self.answered.lock().unwrap_or_else(|e| e.into_inner());
        let Some(i) = answered.calls.iter().position(|(c, _, _)| *c == p.call_id) else {
            tracing::debug!(call_id = %p.call_id, "tool.progress for no call in flight");
            return;
        };
        let (_, host, sink) = &answered.calls[i];
        if conn != Some(host.as_str()) {
            tracing::warn!(call_id = %p.call_id, "tool.progress from a connection that is not the call's host; ignored");
            return;
        }
        if p.message.is_empty() {
            return;
        }
        if sink.send(p.message).is_err() {
            // The turn has reported the call's result: nothing may follow it.
            answered.calls.remove(i);
            tracing::debug!(call_id = %p.call_id, "tool.progress after the call's tool.result; accepted, not emitted");
        } else {
            tracing::debug!(call_id = %p.call_id, "tool.progress after the host's answer; reported before the result");
        }
    }

    /// The host answered `call_id` (on `connection_id`): later progress goes to `sink`
    /// ([`Answered`]). Called before the call leaves the in-flight table, so no progress
    /// finds neither.
    pub(crate) fn answered(
        &self,
        call_id: &str,
        connection_id: &str,
        sink: tokio::sync::mpsc::UnboundedSender<String>,
    ) {
        self.answered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(call_id.to_owned(), connection_id.to_owned(), sink);
    }

    /// The host tools `session` may call now, as tools of its turn: those of the host of
    /// [`HostTools::host_session`] ([`Hosts::host_of`]), filtered by `session`'s own agent.
    pub fn turn_tools(self: &Arc<Self>, session: &Arc<Session>) -> Vec<Arc<HostTool>> {
        let from = self.host_session(session);
        let Some((conn, host)) = self.hosts.host_of(&self.hub, &from) else {
            return vec![];
        };
        let agent = session.row().agent;
        host.tools
            .values()
            .filter(|d| registry::agent_may_use(d, agent.as_deref()))
            .map(|d| Arc::new(HostTool::new(self.clone(), d.clone(), conn.clone())))
            .collect()
    }

    /// The session whose host `session`'s turns use: a subagent (a session with
    /// `parentSessionId`, issue 19) inherits its parent's host — the parent's
    /// `hostToolsFrom`, else the parent's origin connection as it is now (a parent resumed
    /// from another connection takes its children along) — up to the root of the
    /// delegation chain while those sessions are live; any other session is its own host.
    pub fn host_session(&self, session: &Arc<Session>) -> Arc<Session> {
        let mut at = session.clone();
        for _ in 0..64 {
            let Some(parent) = at
                .row()
                .parent_session_id
                .and_then(|p| self.sessions.get(&p).ok())
            else {
                break;
            };
            at = parent;
        }
        at
    }

    /// Remembers the turn `turn_id` the session's person started with `text`.
    pub fn remember_user_turn(&self, session_id: &str, turn_id: &str, text: &str) {
        self.user_turns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                session_id.to_owned(),
                pb::tool_invoke_params::UserTurn {
                    current: false,
                    message_id: turn_id.to_owned(),
                    steers: vec![],
                    text: text.to_owned(),
                },
            );
    }

    /// A prompt the session's person typed while turn `running_turn_id` ran (`steer_turn_id`
    /// its own id) was folded into that turn: when the person started the running turn it
    /// joins that `userTurn`'s `steers` (in order; the oldest dropped beyond
    /// [`MAX_STEERS`]); otherwise (a turn the agent, a schedule or the system started) it
    /// becomes the person's latest message, not `current`.
    pub fn remember_steer(
        &self,
        session_id: &str,
        running_turn_id: &str,
        steer_turn_id: &str,
        text: &str,
    ) {
        let mut turns = self.user_turns.lock().unwrap_or_else(|e| e.into_inner());
        match turns.get_mut(session_id) {
            Some(u) if u.message_id == running_turn_id => {
                if u.steers.len() == MAX_STEERS {
                    u.steers.remove(0);
                }
                u.steers.push(text.to_owned());
            }
            _ => {
                turns.insert(
                    session_id.to_owned(),
                    pb::tool_invoke_params::UserTurn {
                        current: false,
                        message_id: steer_turn_id.to_owned(),
                        steers: vec![],
                        text: text.to_owned(),
                    },
                );
            }
        }
    }

    /// `tool.invoke.userTurn` for a call in turn `turn_id`: the latest turn the session's
    /// person started (since this process started), `current` when it is this one.
    pub fn user_turn(
        &self,
        session_id: &str,
        turn_id: &str,
    ) -> Option<pb::tool_invoke_params::UserTurn> {
        let mut u = self
            .user_turns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session_id)
            .cloned()?;
        u.current = u.message_id == turn_id;
        Some(u)
    }

    /// `tool.invoke.userTurn` for a call of `session`'s turn `turn_id`: for a root session
    /// [`HostTools::user_turn`]; for a delegated child its root's (the root's running turn
    /// decides `current`), never the delegating agent's task text; `None` until the root's
    /// person has typed a prompt.
    pub fn user_turn_of(
        &self,
        session: &Session,
        turn_id: &str,
    ) -> Option<pb::tool_invoke_params::UserTurn> {
        let Some(mut parent) = session.row().parent_session_id else {
            return self.user_turn(&session.id, turn_id);
        };
        for _ in 0..64 {
            let at = self.sessions.get(&parent).ok()?;
            match at.row().parent_session_id {
                Some(p) => parent = p,
                None => {
                    let running = at.turns().running.as_ref().map(|r| r.turn_id.clone());
                    return self.user_turn(&at.id, running.as_deref().unwrap_or_default());
                }
            }
        }
        None
    }

    /// Records the scheduled run behind `session_id`'s turns (`tool.invoke.job`).
    pub fn set_job(&self, session_id: &str, job: pb::tool_invoke_params::Job) {
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session_id.to_owned(), job);
    }

    fn job_of(&self, session_id: &str) -> Option<pb::tool_invoke_params::Job> {
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session_id)
            .cloned()
    }

    /// `session.toolContent` for a host tool result: the kept blocks with image bytes.
    pub async fn content(
        self: &Arc<Self>,
        session_id: &str,
        call_id: &str,
    ) -> Option<Vec<pb::ContentBlock>> {
        let (me, s, c) = (self.clone(), session_id.to_owned(), call_id.to_owned());
        snowpea_common::db::blocking("session.toolContent", move || {
            Ok::<_, anyhow::Error>(me.content.get(&s, &c))
        })
        .await
        .ok()
        .and_then(|r| r.ok())
        .flatten()
    }

    /// Forgets a deleted session's kept content, job and host wait.
    pub fn remove_session(&self, session_id: &str) {
        self.content.remove_session(session_id);
        self.forget_run(session_id);
    }

    /// Forgets a finished run's job and host wait.
    pub fn forget_run(&self, session_id: &str) {
        self.user_turns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(session_id);
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(session_id);
        self.waits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(session_id);
    }

    /// True while an approval or question of `session_id` waits (the silence clock of its
    /// host calls stops).
    fn paused(&self, session_id: &str) -> bool {
        self.approvals.count(Some(session_id)) > 0 || self.questions.count(Some(session_id)) > 0
    }

    /// A connection closed: its tools are dropped and every call in flight on it fails
    /// "host gone" at once.
    fn on_closed(&self, connection_id: &str) {
        let n = self.hosts.drop_connection(connection_id);
        let calls = self.calls();
        for c in calls.values().filter(|c| c.connection_id == connection_id) {
            c.gone.cancel();
        }
        if n > 0 {
            tracing::info!(
                connection_id,
                tools = n,
                "host connection closed; its tools are dropped"
            );
        }
    }

    fn resync(&self, live: &[ConnectionInfo]) {
        let live: HashSet<&str> = live.iter().map(|c| c.connection_id.as_str()).collect();
        for (conn, _) in self.hosts.all() {
            if !live.contains(conn.as_str()) {
                self.on_closed(&conn);
            }
        }
    }

    fn watch(self: &Arc<Self>) {
        let mut events = self.hub.connection_events();
        let weak: Weak<HostTools> = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let event = events.recv().await;
                let Some(me) = weak.upgrade() else { break };
                match event {
                    Ok(ConnectionEvent::Closed(id)) => me.on_closed(&id),
                    Ok(ConnectionEvent::Opened(_)) => {}
                    Err(RecvError::Lagged(_)) => me.resync(&me.hub.connections()),
                    Err(RecvError::Closed) => break,
                }
            }
        });
    }
}

fn caller(ctx: &CallContext) -> Result<String> {
    ctx.connection_id.clone().ok_or_else(|| {
        Error::Unauthorized(
            "host tools belong to a client connection; call over the gateway".into(),
        )
    })
}

#[cfg(test)]
#[path = "host_tools_tests.rs"]
mod tests;

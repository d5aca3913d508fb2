//! Turns: `session.prompt` starts one (or queues it behind the running turn),
//! `session.interrupt` ends the running one, and a per-session driver task runs turns one
//! after another ([`agent`] is the loop of one turn).
//!
//! Every turn id returned by `session.prompt` gets exactly one `turn.done`: a queued prompt
//! that is dropped (session closed, crash) gets `turn.dequeued{reason:"dropped"}` and
//! `turn.done{reason:"interrupted"}`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use snowpea_common::context::CallContext;
use snowpea_common::time::now_iso;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::typed::SessionEventPayload;
use tokio_util::sync::CancellationToken;

use snowpea_common::home::Home;

use crate::approval::Approvals;
use crate::attachments::{Attachments, Prepared};
use crate::commands::Commands;
use crate::compaction::{Compaction, CompactionCall};
use crate::events::EventLog;
use crate::models::Models;
use crate::session::{Session, Sessions};
use crate::tools::Tools;
use snowpea_session_error::{Error, Result};
use snowpea_session_llm::provider::Providers;

pub mod agent;
pub mod busy;
pub mod command;
pub mod handback;
pub mod history;
mod hooks;
mod host_calls;
pub mod loop_guard;
pub mod refs;
pub mod slash;
pub mod system_prompt;
pub(crate) mod tool_call;
pub mod tool_content;
mod workflow;

/// The running turn and the prompt queue of a session.
#[derive(Debug, Default)]
pub struct TurnState {
    /// The turn that is running, if any.
    pub running: Option<RunningTurn>,
    /// Prompts waiting behind it, oldest first.
    pub queue: VecDeque<QueuedTurn>,
    /// Prompts to fold into the running turn before its next model call (steer mode),
    /// oldest first ([`busy`]).
    pub steers: VecDeque<QueuedTurn>,
    /// `[system]` lines for the model's next call (`session.notice`, a `session.continue`
    /// inside its window), oldest first, at most [`busy::NOTICE_MAX_PENDING`].
    pub notices: Vec<String>,
    /// `session.continue` bookkeeping ([`handback`]).
    pub handback: handback::HandbackState,
}

impl TurnState {
    /// Marks `turn_id` running; returns its cancellation token.
    pub(crate) fn begin(&mut self, turn_id: &str) -> CancellationToken {
        let cancel = CancellationToken::new();
        self.running = Some(RunningTurn {
            turn_id: turn_id.to_owned(),
            cancel: cancel.clone(),
            started_at: now_iso(),
            steered: Vec::new(),
        });
        cancel
    }

    /// Prompts waiting (queued and to be steered).
    pub fn waiting(&self) -> usize {
        self.queue.len() + self.steers.len()
    }
}

/// A running turn.
#[derive(Debug, Clone)]
pub struct RunningTurn {
    /// Its id.
    pub turn_id: String,
    /// Cancelled by `session.interrupt` / `session.close`.
    pub cancel: CancellationToken,
    /// When it started.
    pub started_at: String,
    /// Turn ids of the prompts steered into it; each gets its `turn.done` right after
    /// this turn's.
    pub steered: Vec<String>,
}

/// A prompt waiting in the queue.
#[derive(Debug, Clone)]
pub struct QueuedTurn {
    /// The turn id `session.prompt` returned for it.
    pub turn_id: String,
    /// The prompt text.
    pub text: String,
    /// Its attachments, stored and prepared when it was sent.
    pub attachments: Arc<Prepared>,
    /// Sent on the headless command plane (`command.run` of a `cli` client): a slash
    /// command then needs `--yes` for medium/high-risk writes and runs no model turn.
    pub headless: bool,
}

/// What a turn starts with.
#[derive(Debug, Clone)]
pub struct TurnStart {
    /// Turn id.
    pub turn_id: String,
    /// The user's prompt (for a system turn: its `[system]` input).
    pub text: String,
    /// True when it waited in the queue first.
    pub queued: bool,
    /// Cancelled to interrupt it.
    pub cancel: CancellationToken,
    /// `Some(reason)` for a turn `session.continue` started (`turn.started{initiator:
    /// "system", reason, prompt: null}`, no `message.user`).
    pub system_reason: Option<String>,
    /// The prompt's attachments.
    pub attachments: Arc<Prepared>,
    /// See [`QueuedTurn::headless`].
    pub headless: bool,
}

/// Why a turn ended (`turn.done.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// The model finished.
    Complete,
    /// `session.interrupt` / `session.close`.
    Interrupted,
    /// A provider or internal error.
    Error,
    /// A person denied a tool call, or the turn hit its limit of automatic denials.
    Denied,
    /// The tool-round budget ran out.
    Budget,
    /// Consecutive tool rounds made no new tool or file progress, also after the
    /// `loop.suspected` nudge ([`loop_guard`]).
    Stalled,
    /// The model ended with no text and no tool call, again after one nudge; an `error`
    /// event with code `empty_response` precedes `turn.done` (spec 1.23.0).
    EmptyResponse,
}

impl TurnEnd {
    /// The protocol's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnEnd::Complete => "complete",
            TurnEnd::Interrupted => "interrupted",
            TurnEnd::Error => "error",
            TurnEnd::Denied => "denied",
            TurnEnd::Budget => "budget",
            TurnEnd::Stalled => "stalled",
            TurnEnd::EmptyResponse => "empty_response",
        }
    }
}

/// Limits of a turn (from [`crate::AppConfig`]).
#[derive(Debug, Clone)]
pub struct TurnLimits {
    /// Most model calls with tool use in one turn before it ends with `budget`.
    pub max_tool_rounds: usize,
    /// Cap on a tool's output fed back to the model, in bytes.
    pub output_cap: usize,
    /// Longest wait for the next streamed item of a model call before the turn fails.
    pub provider_idle_timeout: Duration,
}

/// The turn component (`session.prompt`, `session.interrupt`, the agent loop): runs the
/// turns of every session, asking [`Approvals`] before tool calls, with the tools of
/// [`Tools`] and the provider, model and effort [`Models`] chooses. It owns the running turn and the prompt
/// queue of each session ([`TurnState`]); the `turns` table follows the `turn.*` events
/// Most `parentSessionId` steps followed to a delegated child's root (deeper than any
/// `agents.maxDepth` allows; a guard against a cycle in hand-edited rows).
pub const MAX_DELEGATION_CHAIN: usize = 16;

/// ([`EventLog`]).
pub struct Turns {
    home: Home,
    limits: TurnLimits,
    log: EventLog,
    sessions: Arc<Sessions>,
    approvals: Arc<Approvals>,
    tools: Arc<Tools>,
    providers: Providers,
    commands: Arc<Commands>,
    models: Arc<Models>,
    compaction: Arc<Compaction>,
    attachments: Attachments,
    hooks: Arc<crate::hooks::Hooks>,
    /// The agents component (issue 19), attached after both exist ([`Turns::attach_agents`]).
    agents: std::sync::OnceLock<std::sync::Weak<crate::agents::Agents>>,
    /// Host tools (issue 21), given by [`Turns::with_host_tools`].
    host_tools: Option<Arc<crate::host_tools::HostTools>>,
}

impl std::fmt::Debug for Turns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turns")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Turns {
    /// The component over its peers.
    #[allow(clippy::too_many_arguments)] // one per peer, built once in App::open
    pub fn new(
        home: Home,
        limits: TurnLimits,
        log: EventLog,
        sessions: Arc<Sessions>,
        approvals: Arc<Approvals>,
        tools: Arc<Tools>,
        providers: Providers,
        commands: Arc<Commands>,
        models: Arc<Models>,
        compaction: Arc<Compaction>,
        attachments: Attachments,
        hooks: Arc<crate::hooks::Hooks>,
    ) -> Self {
        Turns {
            home,
            limits,
            log,
            sessions,
            approvals,
            tools,
            providers,
            commands,
            models,
            compaction,
            attachments,
            hooks,
            agents: std::sync::OnceLock::new(),
            host_tools: None,
        }
    }

    /// Gives the turns the agents component: the profile of a session's agent definition,
    /// the `delegate_task` tool, child progress, the write guard, the interrupt cascade.
    pub fn attach_agents(&self, agents: &Arc<crate::agents::Agents>) {
        let _ = self.agents.set(Arc::downgrade(agents));
    }

    /// The agents component, once attached.
    pub(crate) fn agents(&self) -> Option<Arc<crate::agents::Agents>> {
        self.agents.get().and_then(std::sync::Weak::upgrade)
    }

    /// The component with the host tools its turns offer (issue 21).
    pub fn with_host_tools(mut self, host_tools: Arc<crate::host_tools::HostTools>) -> Self {
        self.host_tools = Some(host_tools);
        self
    }

    /// The host tools component, when given.
    pub fn host_tools(&self) -> Option<&Arc<crate::host_tools::HostTools>> {
        self.host_tools.as_ref()
    }

    /// Queues a typed session event (committed, then published).
    fn event<E: SessionEventPayload>(&self, session: &Session, payload: &E) {
        self.log.event_to(session, payload);
    }

    /// `session.prompt`: starts a turn now, or — while one runs — steers it into the
    /// running turn or queues it behind (`whenBusy`, default the `agent.busy` setting; see
    /// [`busy`]). Returns the turn id.
    pub async fn prompt(
        self: &Arc<Self>,
        ctx: &CallContext,
        mut p: pb::SessionPromptParams,
    ) -> Result<String> {
        let session = self.sessions.get(&p.session_id)?;
        if p.text.trim().is_empty() {
            return Err(Error::invalid("params.text", "must not be empty"));
        }
        busy::room_to_wait(&session)?;
        let when_busy = match busy::WhenBusy::parse("params.whenBusy", p.when_busy.as_deref())? {
            Some(w) => w,
            None => busy::WhenBusy::from_settings(&self.settings_of(&session)),
        };
        self.sessions.rebind_on_prompt(
            &session,
            ctx.connection_id.as_deref(),
            ctx.client_id.as_deref(),
        );
        self.sessions.mark_active_by_client(&session, ctx);
        let turn_id = snowpea_common::ids::new_id("t");
        // Checked and stored before anything else happens: a refusal loses nothing. The
        // files are written with fsync, so on the blocking pool, not on this worker.
        let attachments = {
            let store = self.attachments.clone();
            let (session_id, id) = (session.id.clone(), turn_id.clone());
            let list = std::mem::take(&mut p.attachments);
            match tokio::task::spawn_blocking(move || store.prepare(&session_id, &id, &list)).await
            {
                Ok(prepared) => Arc::new(prepared?),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => return Err(Error::Internal(e.into())),
            }
        };
        session.update(|r| {
            r.last_prompt = Some(p.text.clone());
            r.last_activity_at = Some(now_iso());
        });
        self.sessions.save(&session);
        // A slash command is its own turn: it waits in the queue, never steered into the
        // running turn.
        let when_busy = if crate::commands::parse_slash(&p.text).is_some() {
            busy::WhenBusy::Queue
        } else {
            when_busy
        };
        if ctx.connection_id.is_some() {
            // The person's own prompt ends a session.setAgent{guardTurn} guard when its turn
            // starts.
            if let Some(a) = self.agents() {
                a.person_prompted(&session.id, &turn_id);
            }
        }
        self.submit(&session, &turn_id, &p.text, when_busy, attachments, false);
        self.sessions.changed(&session, "prompt");
        Ok(turn_id)
    }

    /// Starts a turn of `text` (a slash command: `command.run`, `skill.create`) in
    /// `session` now, or queues it behind the running one; returns its id. `headless`
    /// marks the headless command plane ([`QueuedTurn::headless`]). `session_busy` when
    /// [`snowpea_proto::limits::PROMPTS_WAITING`] prompts already wait.
    pub(crate) fn start(
        self: &Arc<Self>,
        session: &Arc<Session>,
        text: String,
        headless: bool,
    ) -> Result<String> {
        busy::room_to_wait(session)?;
        let turn_id = snowpea_common::ids::new_id("t");
        session.update(|r| {
            r.last_prompt = Some(text.clone());
            r.last_activity_at = Some(now_iso());
        });
        self.sessions.save(session);
        self.submit(
            session,
            &turn_id,
            &text,
            busy::WhenBusy::Queue,
            Arc::new(Prepared::default()),
            headless,
        );
        self.sessions.changed(session, "prompt");
        Ok(turn_id)
    }

    /// The effective settings of `session`'s workdir (`{}` with a warning when unreadable).
    pub(crate) fn settings_of(&self, session: &Session) -> serde_json::Value {
        snowpea_common::settings::load_effective(&self.home, Some(&session.workdir()))
            .unwrap_or_else(|e| {
                tracing::warn!(error = %format!("{e:#}"), "unreadable settings; using defaults");
                serde_json::json!({})
            })
    }

    /// Runs `start` (and then the queue) on the session's driver task.
    pub(crate) fn spawn_drive(self: &Arc<Self>, session: Arc<Session>, start: TurnStart) {
        let turns = self.clone();
        tokio::spawn(async move { turns.drive(session, start).await });
    }

    /// Runs `first`, then every queued prompt, until the queue is empty.
    ///
    /// A turn ends in one step under the turn lock: its `turn.done` is queued to the event
    /// writer and the running slot goes to the next queued prompt (with its
    /// `turn.dequeued{reason:"started"}`) or is cleared. Every busy check (`session.prompt`,
    /// `checkpoint.restore`, `session.list` status, `DeleteSessions`) takes the same lock, so
    /// a client reacting to `turn.done` finds the session idle or running the dequeued turn,
    /// never the ended one; an interrupt arriving then ends the dequeued turn, if any.
    async fn drive(self: Arc<Self>, session: Arc<Session>, first: TurnStart) {
        let mut next = first;
        loop {
            let outcome = self.run_turn(&session, &next).await;
            let end = outcome.end;
            tracing::info!(session_id = %session.id, turn_id = %next.turn_id, reason = end.as_str(), "turn done");
            let dequeued = {
                let mut st = session.turns();
                // Queued before the running slot changes, so whoever waits for the session to
                // be idle and then flushes the log finds `turn.done` committed.
                self.event(
                    &session,
                    &pb::TurnDoneEvent {
                        turn_id: next.turn_id.clone(),
                        reason: end.as_str().to_owned(),
                        ..Default::default()
                    },
                );
                // Prompts steered into it end with it.
                let steered = st.running.as_mut().map(|r| std::mem::take(&mut r.steered));
                for turn_id in steered.unwrap_or_default() {
                    self.event(
                        &session,
                        &pb::TurnDoneEvent {
                            turn_id,
                            reason: end.as_str().to_owned(),
                            ..Default::default()
                        },
                    );
                }
                self.next_in_line(&mut st, &session)
            };
            if let Err(e) = self.log.flush().await {
                tracing::error!(error = %format!("{e:#}"), "turn.done not written");
            }
            // autoSpeak (issue 7): in the background, never affecting the turn.
            if matches!(end, TurnEnd::Complete) {
                crate::clients::audio::spawn_speak_reply(
                    self.home.clone(),
                    self.log.clone(),
                    session.id.clone(),
                    session.host_tools_from(),
                    outcome.text,
                );
            }
            session.update(|r| r.last_activity_at = Some(now_iso()));
            self.sessions.save(&session);
            self.sessions.changed(&session, "turn");
            match dequeued {
                Some(start) => next = start,
                None => break,
            }
        }
    }

    /// Hands the session's running slot to the next waiting prompt — steers that came after
    /// the last model call first, then the queue — with its `turn.dequeued{reason:"started"}`,
    /// or frees it. Called under the turn lock `st` when a turn (or a manual compaction) ends.
    fn next_in_line(&self, st: &mut TurnState, session: &Session) -> Option<TurnStart> {
        while let Some(q) = st.steers.pop_back() {
            st.queue.push_front(q);
        }
        match st.queue.pop_front() {
            Some(q) => {
                let cancel = st.begin(&q.turn_id);
                self.event(
                    session,
                    &pb::TurnDequeuedEvent {
                        turn_id: q.turn_id.clone(),
                        reason: "started".into(),
                        queued: st.waiting() as i64,
                        ..Default::default()
                    },
                );
                Some(TurnStart {
                    turn_id: q.turn_id,
                    text: q.text,
                    queued: true,
                    cancel,
                    system_reason: None,
                    attachments: q.attachments,
                    headless: q.headless,
                })
            }
            None => {
                st.running = None;
                // Under the lock: a prompt arriving now sees the session idle.
                session.idle.send_replace(true);
                None
            }
        }
    }

    /// `session.compact`: summarises the session's history (see [`crate::compaction`]),
    /// holding the session's turn slot meanwhile; a running turn is `session_busy`. A prompt
    /// that arrives during it waits and runs after it.
    pub async fn compact(
        self: &Arc<Self>,
        p: pb::SessionCompactParams,
    ) -> Result<pb::SessionCompactResult> {
        let session = self.sessions.get(&p.session_id)?;
        let cancel = {
            let mut st = session.turns();
            if let Some(t) = &st.running {
                return Err(Error::SessionBusy(format!(
                    "session {} is running turn {}; compact it when the turn has ended (or interrupt it first)",
                    session.id, t.turn_id
                )));
            }
            let cancel = st.begin(&snowpea_common::ids::new_id("compaction"));
            session.idle.send_replace(false);
            cancel
        };
        let result = async {
            self.log.flush().await?;
            let rows = self.log.of_kinds(&session.id, history::KINDS).await?;
            Ok::<_, Error>(history::rebuild(rows))
        }
        .await;
        let outcome = match result {
            Ok(messages) => {
                let call = CompactionCall {
                    turn_id: None,
                    instructions: p.instructions.as_deref(),
                    auto: false,
                    cancel: &cancel,
                };
                Ok(self.compaction.run(&session, messages, call).await)
            }
            Err(e) => Err(e),
        };
        let next = {
            let mut st = session.turns();
            self.next_in_line(&mut st, &session)
        };
        if let Some(start) = next {
            self.spawn_drive(session.clone(), start);
        }
        let done = outcome?;
        self.log.flush().await?;
        self.sessions.changed(&session, "compacted");
        Ok(pb::SessionCompactResult {
            after: done.after as i64,
            before: done.before as i64,
            summary_chars: done.summary_chars as i64,
        })
    }

    /// `session.attachments`: the files attached in this session, oldest first; a delegated
    /// child (a subagent session) reports its root's — the session at the top of its
    /// `parentSessionId` chain, followed at most [`MAX_DELEGATION_CHAIN`] steps.
    pub async fn attachments(
        &self,
        p: pb::SessionAttachmentsParams,
    ) -> Result<pb::SessionAttachmentsResult> {
        let Some(mut row) = self.sessions.registry().row(&p.session_id).await? else {
            return Err(Error::NotFound(format!("no session {:?}", p.session_id)));
        };
        for _ in 0..MAX_DELEGATION_CHAIN {
            let Some(parent) = row.parent_session_id.clone().filter(|s| !s.is_empty()) else {
                break;
            };
            match self.sessions.registry().row(&parent).await? {
                Some(up) => row = up,
                None => break,
            }
        }
        self.attachments.list(&row.id)
    }

    /// `session.interrupt`: cancels the running turn (it ends promptly with
    /// `turn.done{reason:"interrupted"}`) and drops every waiting prompt, queued or to be
    /// steered (`turn.dequeued{reason:"dropped"}` + `turn.done{reason:"interrupted"}` each).
    pub fn interrupt(&self, session_id: &str) -> Result<()> {
        let session = self.sessions.get(session_id)?;
        if let Some(t) = &session.turns().running {
            tracing::info!(session_id, turn_id = %t.turn_id, "interrupting turn");
        }
        // Batches restored after a restart wait on no turn: an interrupt withdraws them too.
        self.sessions.questions().interrupt_session(session_id);
        stop_turns(&self.log, &session, true);
        // Interrupting a parent interrupts its children (issue 19).
        if let Some(a) = self.agents() {
            a.interrupt_children(session_id);
        }
        Ok(())
    }
}

/// Cancels the running turn of `session` and, with `drop_queue`, drops every waiting prompt,
/// steers first (`turn.dequeued{reason:"dropped"}` + `turn.done{reason:"interrupted"}` each).
pub(crate) fn stop_turns(log: &EventLog, session: &Session, drop_queue: bool) {
    let mut st = session.turns();
    if let Some(t) = &st.running {
        t.cancel.cancel();
    }
    if drop_queue {
        while let Some(q) = st.steers.pop_front().or_else(|| st.queue.pop_front()) {
            let left = st.waiting();
            log.event_to(
                session,
                &pb::TurnDequeuedEvent {
                    turn_id: q.turn_id.clone(),
                    reason: "dropped".into(),
                    queued: left as i64,
                    ..Default::default()
                },
            );
            log.event_to(
                session,
                &pb::TurnDoneEvent {
                    turn_id: q.turn_id,
                    reason: "interrupted".into(),
                    ..Default::default()
                },
            );
        }
    }
}

/// Waits (at most `timeout`) until no turn of `session` runs.
pub(crate) async fn wait_idle(session: &Session, timeout: Duration) {
    let mut rx = session.idle.subscribe();
    if tokio::time::timeout(timeout, rx.wait_for(|idle| *idle))
        .await
        .is_err()
    {
        tracing::warn!(session_id = %session.id, "turn did not end within {timeout:?}");
    }
}

#[cfg(test)]
#[path = "turn_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "turn_end_tests.rs"]
mod end_tests;

#[cfg(test)]
#[path = "busy_tests.rs"]
mod busy_tests;

#[cfg(test)]
#[path = "safety_tests.rs"]
mod safety_tests;

#[cfg(test)]
#[path = "message_user_tests.rs"]
mod message_user_tests;

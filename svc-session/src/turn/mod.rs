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
use crate::commands::Commands;
use crate::error::{Error, Result};
use crate::events::EventLog;
use crate::provider::Providers;
use crate::session::{Session, Sessions};
use crate::tools::Tools;

pub mod agent;
mod command;
pub mod history;
pub mod system_prompt;
mod tool_call;

/// The running turn and the prompt queue of a session.
#[derive(Debug, Default)]
pub struct TurnState {
    /// The turn that is running, if any.
    pub running: Option<RunningTurn>,
    /// Prompts waiting behind it, oldest first.
    pub queue: VecDeque<QueuedTurn>,
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
}

/// A prompt waiting in the queue.
#[derive(Debug, Clone)]
pub struct QueuedTurn {
    /// The turn id `session.prompt` returned for it.
    pub turn_id: String,
    /// The prompt text.
    pub text: String,
    /// Sent on the headless command plane (`command.run` of a `cli` client): a slash
    /// command then needs `--yes` for medium/high-risk writes and runs no model turn.
    pub headless: bool,
}

/// What a turn starts with.
#[derive(Debug, Clone)]
pub struct TurnStart {
    /// Turn id.
    pub turn_id: String,
    /// The user's prompt.
    pub text: String,
    /// True when it waited in the queue first.
    pub queued: bool,
    /// Cancelled to interrupt it.
    pub cancel: CancellationToken,
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
/// [`Tools`] and the provider of [`Providers`]. It owns the running turn and the prompt
/// queue of each session ([`TurnState`]); the `turns` table follows the `turn.*` events
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
}

impl std::fmt::Debug for Turns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turns")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Turns {
    /// The component over its peers (one argument per peer component).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        home: Home,
        limits: TurnLimits,
        log: EventLog,
        sessions: Arc<Sessions>,
        approvals: Arc<Approvals>,
        tools: Arc<Tools>,
        providers: Providers,
        commands: Arc<Commands>,
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
        }
    }

    /// Queues a typed session event (committed, then published).
    fn event<E: SessionEventPayload>(&self, session: &Session, payload: &E) {
        self.log.event_to(session, payload);
    }

    /// `session.prompt`: starts a turn now, or queues it behind the running one
    /// (`whenBusy: "steer"` is not supported yet and queues too). Returns the turn id.
    pub async fn prompt(
        self: &Arc<Self>,
        ctx: &CallContext,
        p: pb::SessionPromptParams,
    ) -> Result<String> {
        let session = self.sessions.get(&p.session_id)?;
        if p.text.trim().is_empty() {
            return Err(Error::invalid("params.text", "must not be empty"));
        }
        if let Some(w) = p.when_busy.as_deref() {
            if w != "queue" && w != "steer" {
                return Err(Error::invalid("params.whenBusy", "must be queue or steer"));
            }
        }
        self.sessions.rebind_on_prompt(
            &session,
            ctx.connection_id.as_deref(),
            ctx.client_id.as_deref(),
        );
        Ok(self.start(&session, p.text, false))
    }

    /// Starts a turn of `text` in `session` now, or queues it behind the running one;
    /// returns its id. A `text` starting with `/` runs as a slash command
    /// ([`Turns::command`]).
    pub(crate) fn start(
        self: &Arc<Self>,
        session: &Arc<Session>,
        text: String,
        headless: bool,
    ) -> String {
        let session = session.clone();
        let p = pb::SessionPromptParams {
            text,
            ..Default::default()
        };
        let turn_id = snowpea_common::ids::new_id("t");
        session.update(|r| {
            r.last_prompt = Some(p.text.clone());
            r.last_activity_at = Some(now_iso());
        });
        self.sessions.save(&session);
        let start = {
            let mut st = session.turns();
            if st.running.is_none() {
                let cancel = CancellationToken::new();
                st.running = Some(RunningTurn {
                    turn_id: turn_id.clone(),
                    cancel: cancel.clone(),
                    started_at: now_iso(),
                });
                session.idle.send_replace(false);
                Some(TurnStart {
                    turn_id: turn_id.clone(),
                    text: p.text.clone(),
                    queued: false,
                    cancel,
                    headless,
                })
            } else {
                st.queue.push_back(QueuedTurn {
                    turn_id: turn_id.clone(),
                    text: p.text.clone(),
                    headless,
                });
                let n = st.queue.len();
                // Emitted under the lock so it is ordered before the turn's dequeue.
                self.event(
                    &session,
                    &pb::TurnQueuedEvent {
                        turn_id: turn_id.clone(),
                        position: n as i64,
                        queued: n as i64,
                        ..Default::default()
                    },
                );
                None
            }
        };
        self.sessions.changed(&session, "prompt");
        if let Some(start) = start {
            let turns = self.clone();
            let s = session.clone();
            tokio::spawn(async move { turns.drive(s, start).await });
        }
        turn_id
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
                match st.queue.pop_front() {
                    Some(q) => {
                        let cancel = CancellationToken::new();
                        st.running = Some(RunningTurn {
                            turn_id: q.turn_id.clone(),
                            cancel: cancel.clone(),
                            started_at: now_iso(),
                        });
                        self.event(
                            &session,
                            &pb::TurnDequeuedEvent {
                                turn_id: q.turn_id.clone(),
                                reason: "started".into(),
                                queued: st.queue.len() as i64,
                                ..Default::default()
                            },
                        );
                        Some(TurnStart {
                            turn_id: q.turn_id,
                            text: q.text,
                            queued: true,
                            cancel,
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

    /// `session.interrupt`: cancels the running turn (it ends promptly with
    /// `turn.done{reason:"interrupted"}`); queued prompts still run afterwards.
    pub fn interrupt(&self, session_id: &str) -> Result<()> {
        let session = self.sessions.get(session_id)?;
        if let Some(t) = &session.turns().running {
            tracing::info!(session_id, turn_id = %t.turn_id, "interrupting turn");
            t.cancel.cancel();
        }
        // Batches restored after a restart wait on no turn: an interrupt withdraws them too.
        self.sessions.questions().interrupt_session(session_id);
        Ok(())
    }
}

/// Cancels the running turn of `session` and, with `drop_queue`, drops every queued prompt
/// (`turn.dequeued{reason:"dropped"}` + `turn.done{reason:"interrupted"}` each).
pub(crate) fn stop_turns(log: &EventLog, session: &Session, drop_queue: bool) {
    let mut st = session.turns();
    if let Some(t) = &st.running {
        t.cancel.cancel();
    }
    if drop_queue {
        while let Some(q) = st.queue.pop_front() {
            let left = st.queue.len();
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

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

use serde_json::json;
use snowpea_common::context::CallContext;
use snowpea_common::time::now_iso;
use snowpea_proto::session::v1 as pb;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::error::{Error, Result};
use crate::session::Session;

pub mod agent;
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

impl App {
    /// `session.prompt`: starts a turn now, or queues it behind the running one
    /// (`whenBusy: "steer"` is not supported yet and queues too). Returns the turn id.
    pub async fn prompt(
        self: &Arc<Self>,
        ctx: &CallContext,
        p: pb::SessionPromptParams,
    ) -> Result<String> {
        let session = self.session(&p.session_id)?;
        if p.text.trim().is_empty() {
            return Err(Error::invalid("params.text", "must not be empty"));
        }
        if let Some(w) = p.when_busy.as_deref() {
            if w != "queue" && w != "steer" {
                return Err(Error::invalid("params.whenBusy", "must be queue or steer"));
            }
        }
        self.rebind_on_prompt(
            &session,
            ctx.connection_id.as_deref(),
            ctx.client_id.as_deref(),
        );
        let turn_id = snowpea_common::ids::new_id("t");
        session.update(|r| {
            r.last_prompt = Some(p.text.clone());
            r.last_activity_at = Some(now_iso());
        });
        self.save_session(&session);
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
                })
            } else {
                st.queue.push_back(QueuedTurn {
                    turn_id: turn_id.clone(),
                    text: p.text.clone(),
                });
                let n = st.queue.len();
                // Emitted under the lock so it is ordered before the turn's dequeue.
                self.emit(
                    &session,
                    "turn.queued",
                    json!({ "turnId": turn_id, "position": n, "queued": n }),
                );
                None
            }
        };
        self.sessions_changed(&session, "prompt");
        if let Some(start) = start {
            let app = self.clone();
            let s = session.clone();
            tokio::spawn(async move { app.drive(s, start).await });
        }
        Ok(turn_id)
    }

    /// Runs `first`, then every queued prompt, until the queue is empty.
    async fn drive(self: Arc<Self>, session: Arc<Session>, first: TurnStart) {
        let mut next = first;
        loop {
            let end = self.run_turn(&session, &next).await;
            tracing::info!(session_id = %session.id, turn_id = %next.turn_id, reason = end.as_str(), "turn done");
            let dequeued = {
                let mut st = session.turns();
                match st.queue.pop_front() {
                    Some(q) => {
                        let cancel = CancellationToken::new();
                        st.running = Some(RunningTurn {
                            turn_id: q.turn_id.clone(),
                            cancel: cancel.clone(),
                            started_at: now_iso(),
                        });
                        self.emit(
                            &session,
                            "turn.dequeued",
                            json!({ "turnId": q.turn_id, "reason": "started", "queued": st.queue.len() }),
                        );
                        Some(TurnStart {
                            turn_id: q.turn_id,
                            text: q.text,
                            queued: true,
                            cancel,
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
            session.update(|r| r.last_activity_at = Some(now_iso()));
            self.save_session(&session);
            self.sessions_changed(&session, "turn");
            match dequeued {
                Some(start) => next = start,
                None => break,
            }
        }
    }

    /// `session.interrupt`: cancels the running turn (it ends promptly with
    /// `turn.done{reason:"interrupted"}`); queued prompts still run afterwards.
    pub fn interrupt(&self, session_id: &str) -> Result<()> {
        let session = self.session(session_id)?;
        if let Some(t) = &session.turns().running {
            tracing::info!(session_id, turn_id = %t.turn_id, "interrupting turn");
            t.cancel.cancel();
        }
        Ok(())
    }

    /// Cancels the running turn and, with `drop_queue`, drops every queued prompt.
    pub(crate) fn stop_turns(&self, session: &Session, drop_queue: bool) {
        let mut st = session.turns();
        if let Some(t) = &st.running {
            t.cancel.cancel();
        }
        if drop_queue {
            while let Some(q) = st.queue.pop_front() {
                let left = st.queue.len();
                self.emit(
                    session,
                    "turn.dequeued",
                    json!({ "turnId": q.turn_id, "reason": "dropped", "queued": left }),
                );
                self.emit(
                    session,
                    "turn.done",
                    json!({ "turnId": q.turn_id, "reason": "interrupted" }),
                );
            }
        }
    }

    /// Waits (at most `timeout`) until no turn runs.
    pub(crate) async fn wait_idle(&self, session: &Session, timeout: Duration) {
        let mut rx = session.idle.subscribe();
        if tokio::time::timeout(timeout, rx.wait_for(|idle| *idle))
            .await
            .is_err()
        {
            tracing::warn!(session_id = %session.id, "turn did not end within {timeout:?}");
        }
    }
}

#[cfg(test)]
#[path = "turn_tests.rs"]
mod tests;

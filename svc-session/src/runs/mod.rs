//! The [`Runs`] component: unattended runs for svc-scheduler (issue 5), the logic behind
//! the internal `snowpea.session.v1.SessionInternalService` ([`crate::rpc::internal`]).
//! No JSON-RPC names, so the gateway never exposes them. It owns no table of its own (a
//! run is a `scheduled` session of [`Sessions`] with one turn of [`Turns`]).
//!
//! * `RunUnattended` opens a session of kind `scheduled` (with the job's id, mode,
//!   `hostToolsFrom` and approval timeout) in the job's workdir, prompts the task as one
//!   turn, streams the session id at once and, when the turn has ended, how it ended:
//!   `finished` (turn.done `complete`), `denied_by_timeout` (an approval of the turn timed out:
//!   in a scheduled session that ends the turn at once), `denied` (refused by a person or the
//!   mode), or `failed` (error, budget, interrupted) with the reason. Approvals go to the
//!   shared queue like any turn's. A job naming an `agent` runs in that named agent's own
//!   session (issue 19; queued behind its running turn, if any); an unknown agent is
//!   `not_found` (running the task as a plain session would be a silent substitution).
//! * `WatchRun` waits for the unattended turn of an existing session to end and reports it
//!   like `RunUnattended`'s last update (at once when the turn is not running any more, from
//!   its stored events); svc-scheduler uses it after a restart to record the real result of
//!   a run it had handed over, rather than running it again or failing it.
//! * `DeleteSessions` deletes saved sessions with their events and workspaces; a session
//!   whose turn is running, or a named agent's own session, is skipped.
//! * `EmitEvent` appends a durable event (e.g. `job.done`) to a live session.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use serde_json::Value;
use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use crate::events::EventLog;
use crate::session::{SessionSetup, Sessions};
use crate::store::sessions::KIND_SCHEDULED;
use crate::turn::Turns;
use snowpea_session_error::{Error, Result};

/// Longest an unattended turn may run before it is interrupted (the scheduler has its own,
/// usually shorter, `scheduler.runTimeoutSec`).
const MAX_RUN: Duration = Duration::from_secs(6 * 3600);

/// How long an unattended turn may run: the request's `run_timeout_sec` (the job's
/// `scheduler.runTimeoutSec`) when set, capped by [`MAX_RUN`].
fn run_limit(run_timeout_sec: i64) -> Duration {
    if run_timeout_sec > 0 {
        Duration::from_secs(run_timeout_sec as u64).min(MAX_RUN)
    } else {
        MAX_RUN
    }
}

/// The runs component.
#[derive(Debug)]
pub struct Runs {
    sessions: Arc<Sessions>,
    turns: Arc<Turns>,
    log: EventLog,
    agents: Arc<crate::agents::Agents>,
}

/// The update stream of `RunUnattended` / `WatchRun`.
pub type RunStream = Pin<Box<dyn Stream<Item = Result<pb::RunUnattendedUpdate, Status>> + Send>>;

/// How an unattended run ended, as `RunUnattendedReply` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// `finished`, `denied_by_timeout`, `denied` or `failed`.
    pub status: &'static str,
    /// The turn's final answer (`message.done.text`).
    pub text: String,
    /// Why it did not finish (the turn's last `error` message, or its end reason).
    pub error: String,
}

/// How the turn `turn_id` ended, read from its committed events (`message.done`, `error`,
/// `turn.done` carrying that `turnId`).
pub fn outcome(events: &[(String, Value)], turn_id: &str) -> RunOutcome {
    let mut text = String::new();
    let mut reason = None;
    let mut error = String::new();
    let mut timed_out = false;
    for (kind, payload) in events {
        if payload["turnId"].as_str() != Some(turn_id) {
            continue;
        }
        match kind.as_str() {
            "message.done" => {
                if let Some(t) = payload["text"].as_str() {
                    text = t.to_owned();
                }
            }
            "error" => {
                if let Some(m) = payload["message"].as_str() {
                    error = m.to_owned();
                }
                timed_out |= payload["code"].as_str() == Some("approval_timeout");
            }
            "turn.done" => reason = payload["reason"].as_str().map(str::to_owned),
            _ => {}
        }
    }
    let status = match reason.as_deref() {
        Some("complete") => "finished",
        Some("denied") if timed_out => "denied_by_timeout",
        Some("denied") => "denied",
        None => {
            error = "the turn ended without turn.done".into();
            "failed"
        }
        Some(other) => {
            if error.is_empty() {
                error = format!("the turn ended with reason {other}");
            }
            "failed"
        }
    };
    RunOutcome {
        status,
        text,
        error,
    }
}

/// The committed events of session `sid` as (kind, payload).
async fn stored_events(log: &EventLog, sid: &str) -> Vec<(String, Value)> {
    log.after(sid, 0)
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.kind, e.payload))
        .collect()
}

/// [`outcome`] of turn `turn_id` of session `sid`, from the database.
async fn stored_outcome(log: &EventLog, sid: &str, turn_id: &str) -> RunOutcome {
    outcome(&stored_events(log, sid).await, turn_id)
}

/// The id of the last turn in `events` (the one a `turn.*` event names last).
pub fn last_turn(events: &[(String, Value)]) -> Option<String> {
    events
        .iter()
        .rev()
        .filter(|(kind, _)| kind.starts_with("turn."))
        .find_map(|(_, p)| p["turnId"].as_str().map(str::to_owned))
}

/// [`outcome`] of the last turn of session `sid`, from the database (`failed` when the
/// session never had a turn).
async fn last_outcome(log: &EventLog, sid: &str) -> RunOutcome {
    let events = stored_events(log, sid).await;
    match last_turn(&events) {
        Some(turn_id) => outcome(&events, &turn_id),
        None => RunOutcome {
            status: "failed",
            text: String::new(),
            error: "the session never started a turn".into(),
        },
    }
}

/// The final update of a run stream.
fn done_update(sid: String, o: RunOutcome) -> pb::RunUnattendedUpdate {
    pb::RunUnattendedUpdate {
        session_id: sid.clone(),
        done: Some(pb::RunUnattendedReply {
            session_id: sid,
            status: o.status.to_owned(),
            text: o.text,
            error: o.error,
        }),
    }
}

impl Runs {
    /// The component over its peers.
    pub fn new(
        sessions: Arc<Sessions>,
        turns: Arc<Turns>,
        log: EventLog,
        agents: Arc<crate::agents::Agents>,
    ) -> Self {
        Runs {
            sessions,
            turns,
            log,
            agents,
        }
    }

    /// `RunUnattended`: opens a `scheduled` session, prompts the task as one turn and
    /// streams the session id at once, then how the turn ended (see the module doc).
    pub async fn run_unattended(&self, p: pb::RunUnattendedRequest) -> Result<RunStream> {
        let ctx = CallContext::default();
        let named = match p.agent.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
            Some(agent) => Some(self.agents.named_session(agent).await?),
            None => None,
        };
        let session = match named {
            Some(s) => s,
            None => self.scheduled_session(&ctx, &p).await?,
        };
        let sid = session.id.clone();
        if let Some(hosts) = self.turns.host_tools() {
            // `tool.invoke.job` and the host wait of this run's turns (issue 21).
            if let Some(j) = &p.job {
                hosts.set_job(
                    &sid,
                    pb::tool_invoke_params::Job {
                        created_via: j.created_via.clone(),
                        fingerprint: j.fingerprint.clone().unwrap_or_default(),
                        id: j.job_id.clone(),
                        meta: j.meta.clone(),
                        owner_client_id: j.owner_client_id.clone(),
                        run_id: j.run_id.clone(),
                        scheduled_at: j.scheduled_at.clone(),
                        trigger: j.trigger.clone(),
                    },
                );
            }
            hosts.set_host_wait(
                &sid,
                std::time::Duration::from_secs(p.host_wait_sec.max(0) as u64),
            );
        }
        let turn_id = self
            .turns
            .prompt(
                &ctx,
                pb::SessionPromptParams {
                    session_id: sid.clone(),
                    text: p.task.clone(),
                    when_busy: Some("queue".into()),
                    ..Default::default()
                },
            )
            .await?;
        tracing::info!(session_id = %sid, job_id = %p.job_id, agent = ?p.agent, "unattended run started");
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let _ = tx
            .send(Ok(pb::RunUnattendedUpdate {
                session_id: sid.clone(),
                done: None,
            }))
            .await;
        let (turns, log) = (self.turns.clone(), self.log.clone());
        let limit = run_limit(p.run_timeout_sec);
        let hosts = self.turns.host_tools().cloned();
        tokio::spawn(async move {
            // Idle again once this run's turn (queued behind a named agent's running turn,
            // if any) and everything queued with it has ended.
            let mut idle = session.idle.subscribe();
            let ended = idle.wait_for(|i| *i);
            let timed_out = tokio::time::timeout(limit, ended).await.is_err();
            if timed_out {
                // The run is over for the scheduler: stop the turn, so it never goes on
                // beside the job's next run.
                let _ = turns.interrupt(&sid);
                let mut idle = session.idle.subscribe();
                let _ = tokio::time::timeout(Duration::from_secs(10), idle.wait_for(|i| *i)).await;
            }
            let _ = log.flush().await;
            let mut o = stored_outcome(&log, &sid, &turn_id).await;
            if timed_out {
                o.status = "failed";
                o.error = format!(
                    "the run took longer than its run timeout ({} s) and was interrupted",
                    limit.as_secs()
                );
            }
            if let Some(hosts) = hosts {
                hosts.forget_run(&sid);
            }
            tracing::info!(session_id = %sid, status = o.status, "unattended run ended");
            let _ = tx.send(Ok(done_update(sid, o))).await;
        });
        Ok(Box::pin(ReceiverStream::new(rx)))
    }

    /// The `scheduled` session of a run without an agent.
    async fn scheduled_session(
        &self,
        ctx: &CallContext,
        p: &pb::RunUnattendedRequest,
    ) -> Result<Arc<crate::session::Session>> {
        let created = self
            .sessions
            .create_with(
                ctx,
                pb::SessionCreateParams {
                    workdir: p.workdir.clone(),
                    mode: Some(p.mode.clone()).filter(|m| !m.is_empty()),
                    host_tools_from: p.host_tools_from.clone(),
                    origin_surface: Some("scheduler".into()),
                    ..Default::default()
                },
                SessionSetup {
                    kind: KIND_SCHEDULED,
                    agent: None,
                    job_id: Some(p.job_id.clone()).filter(|j| !j.is_empty()),
                    approval_timeout_sec: Some(p.approval_timeout_sec).filter(|s| *s > 0),
                    parent_session_id: None,
                    definition_mode: None,
                },
            )
            .await?;
        self.sessions.get(&created.session_id)
    }

    /// `WatchRun`: waits for the unattended turn of session `sid` to end and reports it
    /// like `RunUnattended`'s last update.
    pub async fn watch_run(&self, sid: String) -> Result<RunStream> {
        let live = self.sessions.get(&sid).ok();
        if live.is_none() && self.sessions.registry().row(&sid).await?.is_none() {
            return Err(Error::NotFound(format!("no session {sid:?}")));
        }
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let _ = tx
            .send(Ok(pb::RunUnattendedUpdate {
                session_id: sid.clone(),
                done: None,
            }))
            .await;
        let log = self.log.clone();
        tokio::spawn(async move {
            if let Some(session) = live {
                // The turn RunUnattended started ends by MAX_RUN at the latest (it interrupts
                // it); this wait is bounded the same way.
                let mut idle = session.idle.subscribe();
                let _ = tokio::time::timeout(MAX_RUN, idle.wait_for(|i| *i)).await;
            }
            let _ = log.flush().await;
            let o = last_outcome(&log, &sid).await;
            tracing::info!(session_id = %sid, status = o.status, "watched run ended");
            let _ = tx.send(Ok(done_update(sid, o))).await;
        });
        Ok(Box::pin(ReceiverStream::new(rx)))
    }

    /// `DeleteSessions`: deletes saved sessions with their events and workspaces; a
    /// session whose turn is running is skipped.
    pub async fn delete_sessions(&self, ids: Vec<String>) -> Result<pb::DeleteSessionsReply> {
        let mut deleted = 0;
        let mut skipped = Vec::new();
        for id in ids {
            if let Ok(s) = self.sessions.get(&id) {
                // A named agent's own session outlives the job runs it served (issue 19).
                if s.turns().running.is_some()
                    || s.row().kind() == crate::store::sessions::KIND_AGENT
                {
                    skipped.push(id);
                    continue;
                }
            }
            if self.sessions.delete(&id).await? {
                deleted += 1;
            }
        }
        Ok(pb::DeleteSessionsReply { deleted, skipped })
    }

    /// `EmitEvent`: appends a durable typed event (`job.done`, `job.failed`) to a live
    /// session.
    pub async fn emit_event(&self, p: pb::EmitEventRequest) -> Result<pb::EmitEventReply> {
        use pb::emit_event_request::Event;
        let session = self.sessions.get(&p.session_id)?;
        let e = match p.event {
            Some(Event::JobDone(e)) => self.log.event_to_committed(&session, &e).await?,
            Some(Event::JobFailed(e)) => self.log.event_to_committed(&session, &e).await?,
            None => return Err(Error::invalid("event", "is required")),
        };
        Ok(pb::EmitEventReply { seq: e.seq })
    }
}

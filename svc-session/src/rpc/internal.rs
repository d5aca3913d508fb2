//! `snowpea.session.v1.SessionInternalService` (issue 5): the internal rpcs svc-scheduler
//! calls. No JSON-RPC names, so the gateway never exposes them.
//!
//! * `RunUnattended` opens a session of kind `scheduled` (with the job's id, mode,
//!   `hostToolsFrom` and approval timeout) in the job's workdir, prompts the task as one
//!   turn, streams the session id at once and, when the turn has ended, how it ended:
//!   `finished` (turn.done `complete`), `denied_by_timeout` (an approval of the turn timed out:
//!   in a scheduled session that ends the turn at once), `denied` (refused by a person or the
//!   mode), or `failed` (error, budget, interrupted) with the reason. Approvals go to the
//!   shared queue like any turn's. A named `agent` is refused with `not_found`: no agent can
//!   be defined yet (`agent.*` answer `not_implemented`), and running the task as a plain
//!   session instead would be a silent substitution.
//! * `WatchRun` waits for the unattended turn of an existing session to end and reports it
//!   like `RunUnattended`'s last update (at once when the turn is not running any more, from
//!   its stored events); svc-scheduler uses it after a restart to record the real result of
//!   a run it had handed over, rather than running it again or failing it.
//! * `DeleteSessions` deletes saved sessions with their events and workspaces; a session
//!   whose turn is running is skipped.
//! * `EmitEvent` appends a durable event (e.g. `job.done`) to a live session.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use serde_json::Value;
use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::session_internal_service_server::{
    SessionInternalService, SessionInternalServiceServer,
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::app::App;
use crate::error::Error;
use crate::session::SessionSetup;
use crate::store::{self, sessions::KIND_SCHEDULED};

/// Fully qualified name of the service (for health and reflection).
pub const SERVICE_NAME: &str = "snowpea.session.v1.SessionInternalService";

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

/// The gRPC service.
#[derive(Debug, Clone)]
pub struct InternalRpc {
    app: Arc<App>,
}

impl InternalRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        InternalRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> SessionInternalServiceServer<Self> {
        SessionInternalServiceServer::new(self)
    }
}

type RunStream = Pin<Box<dyn Stream<Item = Result<pb::RunUnattendedUpdate, Status>> + Send>>;

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
fn stored_events(app: &App, sid: &str) -> Vec<(String, Value)> {
    let rows = app
        .store
        .read(|c| store::events::after(c, sid, 0))
        .unwrap_or_default();
    rows.into_iter()
        .map(|r| {
            let payload = serde_json::from_str(&r.payload).unwrap_or(Value::Null);
            (r.kind, payload)
        })
        .collect()
}

/// [`outcome`] of turn `turn_id` of session `sid`, from the database.
fn stored_outcome(app: &App, sid: &str, turn_id: &str) -> RunOutcome {
    outcome(&stored_events(app, sid), turn_id)
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
fn last_outcome(app: &App, sid: &str) -> RunOutcome {
    let events = stored_events(app, sid);
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

#[tonic::async_trait]
impl SessionInternalService for InternalRpc {
    async fn run_unattended(
        &self,
        req: Request<pb::RunUnattendedRequest>,
    ) -> Result<Response<RunStream>, Status> {
        let p = req.into_inner();
        if let Some(agent) = p.agent.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
            return Err(Error::NotFound(format!(
                "no agent named {agent:?}: named agents cannot be defined yet (agent.* is not implemented)"
            ))
            .into());
        }
        let ctx = CallContext::default();
        let created = self
            .app
            .create_session_with(
                &ctx,
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
                },
            )
            .await?;
        let sid = created.session_id;
        let session = self.app.session(&sid)?;
        let turn_id = self
            .app
            .prompt(
                &ctx,
                pb::SessionPromptParams {
                    session_id: sid.clone(),
                    text: p.task.clone(),
                    ..Default::default()
                },
            )
            .await?;
        tracing::info!(session_id = %sid, job_id = %p.job_id, "unattended run started");
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let _ = tx
            .send(Ok(pb::RunUnattendedUpdate {
                session_id: sid.clone(),
                done: None,
            }))
            .await;
        let app = self.app.clone();
        let limit = run_limit(p.run_timeout_sec);
        tokio::spawn(async move {
            let mut idle = session.idle.subscribe();
            let timed_out = tokio::time::timeout(limit, idle.wait_for(|i| *i))
                .await
                .is_err();
            if timed_out {
                // The run is over for the scheduler: stop the turn, so it never goes on
                // beside the job's next run.
                let _ = app.interrupt(&sid);
                let _ = tokio::time::timeout(Duration::from_secs(10), idle.wait_for(|i| *i)).await;
            }
            let _ = app.flush().await;
            let mut o = stored_outcome(&app, &sid, &turn_id);
            if timed_out {
                o.status = "failed";
                o.error = format!(
                    "the run took longer than its run timeout ({} s) and was interrupted",
                    limit.as_secs()
                );
            }
            tracing::info!(session_id = %sid, status = o.status, "unattended run ended");
            let _ = tx.send(Ok(done_update(sid, o))).await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn watch_run(
        &self,
        req: Request<pb::WatchRunRequest>,
    ) -> Result<Response<RunStream>, Status> {
        let sid = req.into_inner().session_id;
        let live = self.app.session(&sid).ok();
        if live.is_none() {
            let saved = self
                .app
                .store
                .read(|c| store::sessions::get(c, &sid))
                .map_err(|e| Status::internal(format!("{e:#}")))?;
            if saved.is_none() {
                return Err(Error::NotFound(format!("no session {sid:?}")).into());
            }
        }
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let _ = tx
            .send(Ok(pb::RunUnattendedUpdate {
                session_id: sid.clone(),
                done: None,
            }))
            .await;
        let app = self.app.clone();
        tokio::spawn(async move {
            if let Some(session) = live {
                // The turn RunUnattended started ends by MAX_RUN at the latest (it interrupts
                // it); this wait is bounded the same way.
                let mut idle = session.idle.subscribe();
                let _ = tokio::time::timeout(MAX_RUN, idle.wait_for(|i| *i)).await;
            }
            let _ = app.flush().await;
            let o = last_outcome(&app, &sid);
            tracing::info!(session_id = %sid, status = o.status, "watched run ended");
            let _ = tx.send(Ok(done_update(sid, o))).await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delete_sessions(
        &self,
        req: Request<pb::DeleteSessionsRequest>,
    ) -> Result<Response<pb::DeleteSessionsReply>, Status> {
        let mut deleted = 0;
        let mut skipped = Vec::new();
        for id in req.into_inner().session_ids {
            if let Ok(s) = self.app.session(&id) {
                if s.turns().running.is_some() {
                    skipped.push(id);
                    continue;
                }
                self.app.close_session(&id).await?;
            }
            let Some(row) = self
                .app
                .store
                .read(|c| store::sessions::get(c, &id))
                .map_err(|e| Status::internal(format!("{e:#}")))?
            else {
                continue;
            };
            let sid = id.clone();
            self.app
                .log
                .write(move |c| {
                    c.execute("DELETE FROM events WHERE session_id = ?1", [&sid])?;
                    c.execute("DELETE FROM turns WHERE session_id = ?1", [&sid])?;
                    c.execute("DELETE FROM sessions WHERE id = ?1", [&sid])?;
                    Ok(())
                })
                .await
                .map_err(|e| Status::internal(format!("{e:#}")))?;
            if !row.workspace_dir.is_empty() {
                let _ = std::fs::remove_dir_all(&row.workspace_dir);
            }
            deleted += 1;
        }
        Ok(Response::new(pb::DeleteSessionsReply { deleted, skipped }))
    }

    async fn emit_event(
        &self,
        req: Request<pb::EmitEventRequest>,
    ) -> Result<Response<pb::EmitEventReply>, Status> {
        let p = req.into_inner();
        let session = self.app.session(&p.session_id)?;
        let payload = p
            .payload
            .map(|s| snowpea_proto::wkt::from_struct(&s))
            .unwrap_or(Value::Object(Default::default()));
        let e = self.app.emit_committed(&session, &p.kind, payload).await?;
        Ok(Response::new(pb::EmitEventReply { seq: e.seq }))
    }
}

#[cfg(test)]
#[path = "internal_tests.rs"]
mod tests;

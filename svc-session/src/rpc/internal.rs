//! `snowpea.session.v1.SessionInternalService` (issue 5): the internal rpcs svc-scheduler
//! calls. No JSON-RPC names, so the gateway never exposes them.
//!
//! * `RunUnattended` opens a session in the job's workdir with its mode (and `hostToolsFrom`),
//!   prompts the task as one turn, streams the session id at once and, when the turn has
//!   ended, how it ended: `finished` (turn.done `complete`), `denied_by_timeout` (denied after
//!   an approval timed out), `denied`, or `failed` (error, budget, interrupted). Approvals go to
//!   the shared queue like any turn's; their timeout is the session's `approvals.timeoutSec`.
//! * `DeleteSessions` deletes saved sessions with their events and workspaces; a session
//!   whose turn is running is skipped.
//! * `EmitEvent` appends a durable event (e.g. `job.done`) to a live session.
//!
//! Known gaps (the session model has no `kind` yet): the session is not marked `scheduled`
//! and the request's `agent` and `approval_timeout_sec` are not applied.

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
use crate::store;

/// Fully qualified name of the service (for health and reflection).
pub const SERVICE_NAME: &str = "snowpea.session.v1.SessionInternalService";

/// Longest an unattended turn may run before it is interrupted (the scheduler has its own,
/// usually shorter, `scheduler.runTimeoutSec`).
const MAX_RUN: Duration = Duration::from_secs(6 * 3600);

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

/// How the turn `turn_id` of session `sid` ended: (status, text, error).
fn outcome(app: &App, sid: &str, turn_id: &str) -> (String, String, String) {
    let rows = app
        .store
        .read(|c| store::events::after(c, sid, 0))
        .unwrap_or_default();
    let mut text = String::new();
    let mut reason = String::new();
    let mut error = String::new();
    let mut timed_out = false;
    for r in rows {
        let payload: Value = serde_json::from_str(&r.payload).unwrap_or(Value::Null);
        match r.kind.as_str() {
            "message.done" => {
                if let Some(t) = payload["text"].as_str() {
                    text = t.to_owned();
                }
            }
            "error" => {
                if let Some(m) = payload["message"].as_str() {
                    error = m.to_owned();
                }
            }
            "turn.done" if payload["turnId"].as_str() == Some(turn_id) => {
                reason = payload["reason"].as_str().unwrap_or("").to_owned();
            }
            _ => {}
        }
        if r.payload.contains("approval_timeout") || r.payload.contains("\"timeout\"") {
            timed_out = true;
        }
    }
    let status = match reason.as_str() {
        "complete" => "finished",
        "denied" if timed_out => "denied_by_timeout",
        "denied" => "denied",
        "" => {
            error = "the turn ended without turn.done".into();
            "failed"
        }
        other => {
            if error.is_empty() {
                error = format!("the turn ended with reason {other}");
            }
            "failed"
        }
    };
    (status.to_owned(), text, error)
}

#[tonic::async_trait]
impl SessionInternalService for InternalRpc {
    async fn run_unattended(
        &self,
        req: Request<pb::RunUnattendedRequest>,
    ) -> Result<Response<RunStream>, Status> {
        let p = req.into_inner();
        let ctx = CallContext::default();
        let created = self
            .app
            .create_session(
                &ctx,
                pb::SessionCreateParams {
                    workdir: p.workdir.clone(),
                    mode: Some(p.mode.clone()).filter(|m| !m.is_empty()),
                    host_tools_from: p.host_tools_from.clone(),
                    origin_surface: Some("scheduler".into()),
                    ..Default::default()
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
        tokio::spawn(async move {
            let mut idle = session.idle.subscribe();
            if tokio::time::timeout(MAX_RUN, idle.wait_for(|i| *i))
                .await
                .is_err()
            {
                let _ = app.interrupt(&sid);
                let _ = tokio::time::timeout(Duration::from_secs(10), idle.wait_for(|i| *i)).await;
            }
            let _ = app.flush().await;
            let (status, text, error) = outcome(&app, &sid, &turn_id);
            tracing::info!(session_id = %sid, status, "unattended run ended");
            let _ = tx
                .send(Ok(pb::RunUnattendedUpdate {
                    session_id: sid.clone(),
                    done: Some(pb::RunUnattendedReply {
                        session_id: sid,
                        status,
                        text,
                        error,
                    }),
                }))
                .await;
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

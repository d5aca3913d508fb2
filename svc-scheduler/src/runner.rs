//! Running one occurrence (issue 5 "Runs"): wait for the job's host when it needs one, hand
//! the task to svc-session as an unattended turn, record the result and publish it
//! (`job.event` `started` → `finished` / `failed` / `denied`, `notify` for jobs with meta,
//! `job.done` / `job.failed` on the origin session).
//!
//! svc-session is reached through the [`SessionRunner`] trait: [`GrpcSessionRunner`] calls the
//! internal `snowpea.session.v1.SessionInternalService` over `run/session.sock`; unit tests use
//! a fake. Every wait is bounded: the host wait by `hostWaitSec`, the run by
//! `scheduler.runTimeoutSec`, the origin-session event by [`EMIT_TIMEOUT`]. svc-session down or
//! dying during a run ends the run `failed` with the reason; the job's next occurrence is
//! unaffected.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::{json, Value};
use snowpea_common::bus::ConnectionEvent;
use snowpea_proto::session::v1::session_internal_service_client::SessionInternalServiceClient;
use snowpea_proto::session::v1::{
    DeleteSessionsReply, DeleteSessionsRequest, EmitEventRequest, JobDoneEvent, JobFailedEvent,
    RunUnattendedReply, RunUnattendedRequest, RunUnattendedUpdate, ScheduledJobInfo,
    WatchRunRequest,
};
use snowpea_proto::typed::SessionEventPayload;
use tonic::transport::Channel;

use crate::config::MAX_HOST_WAIT_SEC;
use crate::scheduler::Scheduler;
use crate::spec::iso;
use crate::store::{JobRow, OccurrenceRow, Outcome};

/// Longest wait for svc-session to take a `job.done` / `job.failed` event or a delete.
pub const EMIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call to svc-session failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// svc-session is not reachable (down or restarting).
    #[error("svc-session is unavailable: {0}")]
    Unavailable(String),
    /// The call reached svc-session but did not complete.
    #[error("{0}")]
    Failed(String),
}

impl From<tonic::Status> for SessionError {
    fn from(s: tonic::Status) -> Self {
        match s.code() {
            tonic::Code::Unavailable | tonic::Code::Cancelled | tonic::Code::Unknown => {
                SessionError::Unavailable(s.message().to_owned())
            }
            _ => SessionError::Failed(format!("svc-session: {}", s.message())),
        }
    }
}

/// Callback told the run's session id as soon as svc-session names it.
pub type OnSession<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// What the scheduler needs from svc-session.
#[tonic::async_trait]
pub trait SessionRunner: Send + Sync + std::fmt::Debug + 'static {
    /// Runs `req` as an unattended turn in a new `scheduled` session and returns how it ended.
    async fn run(
        &self,
        req: RunUnattendedRequest,
        on_session: OnSession<'_>,
    ) -> Result<RunUnattendedReply, SessionError>;
    /// Waits for the run in session `session_id` (opened by an earlier [`SessionRunner::run`],
    /// perhaps by an earlier svc-scheduler process) to end and returns how it ended; at once
    /// when it already has.
    async fn watch(&self, session_id: &str) -> Result<RunUnattendedReply, SessionError>;
    /// Deletes saved sessions (never one still running).
    async fn delete_sessions(
        &self,
        session_ids: Vec<String>,
    ) -> Result<DeleteSessionsReply, SessionError>;
    /// Appends a typed event (`job.done` / `job.failed`) to a session.
    async fn emit_event(&self, session_id: &str, event: OriginEvent) -> Result<(), SessionError>;
}

/// An event svc-scheduler puts on a job's origin session (`EmitEventRequest.event`).
pub type OriginEvent = snowpea_proto::session::v1::emit_event_request::Event;

/// The kind and payload of `event` as its `session.event` carries them.
pub fn origin_event_json(event: &OriginEvent) -> (&'static str, Value) {
    match event {
        OriginEvent::JobDone(e) => (JobDoneEvent::KIND, e.to_payload()),
        OriginEvent::JobFailed(e) => (JobFailedEvent::KIND, e.to_payload()),
    }
}

/// How much longer than `scheduler.runTimeoutSec` a run waits for svc-session's answer: it
/// interrupts the turn at the timeout itself and says so ([`RunUnattendedRequest`]'s
/// `run_timeout_sec`).
pub const RUN_TIMEOUT_GRACE: Duration = Duration::from_secs(30);

/// How long a run waits for svc-session to be SERVING before it starts (svc-session may be
/// starting with the suite, or restarting after a crash); after that the run fails
/// `unavailable`.
pub const SESSION_WAIT: Duration = Duration::from_secs(30);

/// [`SessionRunner`] over gRPC to svc-session's internal service.
#[derive(Debug, Clone)]
pub struct GrpcSessionRunner {
    client: SessionInternalServiceClient<Channel>,
    socket: std::path::PathBuf,
}

impl GrpcSessionRunner {
    /// A runner calling the svc-session socket (lazy: svc-session may be down now).
    pub fn new(socket: std::path::PathBuf) -> Self {
        GrpcSessionRunner {
            client: SessionInternalServiceClient::new(snowpea_common::client::unix_channel(
                socket.clone(),
            ))
            .max_decoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_REQUEST),
            socket,
        }
    }

    /// Waits (at most [`SESSION_WAIT`]) until svc-session answers SERVING.
    async fn session_serving(&self) -> Result<(), SessionError> {
        let deadline = tokio::time::Instant::now() + SESSION_WAIT;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if snowpea_common::client::is_serving(
                &self.socket,
                "",
                left.min(Duration::from_secs(1)),
            )
            .await
            {
                return Ok(());
            }
            if left.is_zero() {
                return Err(SessionError::Unavailable(format!(
                    "svc-session did not answer SERVING within {}s",
                    SESSION_WAIT.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50).min(left)).await;
        }
    }
}

#[tonic::async_trait]
impl SessionRunner for GrpcSessionRunner {
    async fn run(
        &self,
        req: RunUnattendedRequest,
        on_session: OnSession<'_>,
    ) -> Result<RunUnattendedReply, SessionError> {
        // A run never starts against a svc-session that is (re)starting: it waits for it.
        self.session_serving().await?;
        let stream = self.client.clone().run_unattended(req).await?.into_inner();
        follow(stream, on_session).await
    }

    async fn watch(&self, session_id: &str) -> Result<RunUnattendedReply, SessionError> {
        self.session_serving().await?;
        let stream = self
            .client
            .clone()
            .watch_run(WatchRunRequest {
                session_id: session_id.to_owned(),
            })
            .await?
            .into_inner();
        follow(stream, &|_| {}).await
    }

    async fn delete_sessions(
        &self,
        session_ids: Vec<String>,
    ) -> Result<DeleteSessionsReply, SessionError> {
        let mut client = self.client.clone();
        let call = client.delete_sessions(DeleteSessionsRequest { session_ids });
        match tokio::time::timeout(EMIT_TIMEOUT, call).await {
            Ok(r) => Ok(r?.into_inner()),
            Err(_) => Err(SessionError::Unavailable(format!(
                "no answer within {EMIT_TIMEOUT:?}"
            ))),
        }
    }

    async fn emit_event(&self, session_id: &str, event: OriginEvent) -> Result<(), SessionError> {
        let mut client = self.client.clone();
        let call = client.emit_event(EmitEventRequest {
            session_id: session_id.to_owned(),
            event: Some(event),
        });
        match tokio::time::timeout(EMIT_TIMEOUT, call).await {
            Ok(r) => r.map(|_| ()).map_err(Into::into),
            Err(_) => Err(SessionError::Unavailable(format!(
                "no answer within {EMIT_TIMEOUT:?}"
            ))),
        }
    }
}

/// Reads a `RunUnattended` / `WatchRun` stream to its `done`, telling `on_session` the
/// session id as soon as it is named.
async fn follow(
    mut stream: tonic::Streaming<RunUnattendedUpdate>,
    on_session: OnSession<'_>,
) -> Result<RunUnattendedReply, SessionError> {
    let mut session_id = String::new();
    loop {
        match stream.message().await {
            Ok(Some(update)) => {
                if !update.session_id.is_empty() && update.session_id != session_id {
                    session_id = update.session_id.clone();
                    on_session(&session_id);
                }
                if let Some(done) = update.done {
                    return Ok(done);
                }
            }
            Ok(None) => {
                return Err(SessionError::Failed(
                    "svc-session ended the run without a result (it may have restarted)".into(),
                ))
            }
            Err(s) => {
                return Err(SessionError::Failed(format!(
                    "svc-session went away during the run ({}: {})",
                    s.code(),
                    s.message()
                )))
            }
        }
    }
}

/// Maps a run's end to (occurrence status, lastStatus, job.event kind).
fn classify(status: &str) -> (&'static str, &'static str, &'static str) {
    match status {
        "finished" | "ok" => ("finished", "ok", "finished"),
        "denied_by_timeout" => ("denied_by_timeout", "denied_by_timeout", "denied"),
        "denied" => ("denied", "error", "denied"),
        _ => ("failed", "error", "failed"),
    }
}

impl Scheduler {
    /// Runs a claimed occurrence to its end. Spawned by the tick, `job.runNow` and recovery.
    pub async fn run_occurrence(self: Arc<Self>, job: JobRow, occ: OccurrenceRow) {
        let job_id = job.job_id.clone();
        let scheduled_at = iso(ts(occ.scheduled_ms));
        if let Some(host) = job.host_tools_from.clone() {
            if !self.host_connected(&host) && !self.wait_for_host(&job, &occ, &host).await {
                return;
            }
        }
        let now = self.clock.now();
        let (jid, sms) = (job_id.clone(), occ.scheduled_ms);
        if let Err(e) = self
            .db("mark the run started", move |s| {
                s.mark_running(&jid, sms, now.as_millisecond())
            })
            .await
        {
            tracing::error!(job_id, error = %format!("{e:#}"), "cannot mark the run started; not running it");
            return;
        }
        self.job_event(
            &job,
            "started",
            json!({
                "scheduledAt": scheduled_at, "runId": occ.run_id, "trigger": occ.trigger,
            }),
        );

        // Settings are re-read before each run (timeouts, keepRuns).
        let cfg = self.reload_config();
        let req = RunUnattendedRequest {
            workdir: job.workdir.clone(),
            mode: job.mode.clone(),
            agent: job.agent.clone(),
            task: job.task.clone(),
            kind: "scheduled".into(),
            job_id: job_id.clone(),
            approval_timeout_sec: cfg.approval_timeout_sec,
            run_timeout_sec: cfg.run_timeout_sec,
            host_tools_from: job.host_tools_from.clone(),
            host_wait_sec: job.host_wait_sec.max(0),
            channel: job.channel.clone(),
            job: Some(ScheduledJobInfo {
                job_id: job_id.clone(),
                run_id: occ.run_id.clone(),
                scheduled_at: scheduled_at.clone(),
                trigger: occ.trigger.clone(),
                created_via: job.created_via.clone(),
                fingerprint: job.fingerprint.clone(),
                meta: job
                    .meta
                    .as_deref()
                    .and_then(|m| serde_json::from_str::<Value>(m).ok())
                    .map(|m| snowpea_proto::wkt::to_struct(&m)),
                owner_client_id: job.owner_client_id.clone(),
            }),
        };
        // The session id is committed on the blocking pool as soon as svc-session names it;
        // the run's end waits for those writes, so they never land after it.
        let recording: Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let on_session = {
            let (me, jid, sms, recording) = (
                self.clone(),
                job_id.clone(),
                occ.scheduled_ms,
                recording.clone(),
            );
            move |sid: &str| {
                let (me, jid, sid) = (me.clone(), jid.clone(), sid.to_owned());
                let write = tokio::spawn(async move {
                    let j = jid.clone();
                    if let Err(e) = me
                        .db("record the run's session", move |s| {
                            s.set_session(&j, sms, &sid)
                        })
                        .await
                    {
                        tracing::warn!(job_id = jid, error = %format!("{e:#}"), "cannot record the run's session");
                    }
                });
                recording
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(write);
            }
        };
        // svc-session interrupts the turn at runTimeoutSec and reports it; this wait only
        // covers a svc-session that does not answer at all.
        let limit = Duration::from_secs(cfg.run_timeout_sec as u64) + RUN_TIMEOUT_GRACE;
        let result = match tokio::time::timeout(limit, self.session.run(req, &on_session)).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "the run took longer than scheduler.runTimeoutSec ({}s)",
                cfg.run_timeout_sec
            )),
        };
        let writes: Vec<_> =
            std::mem::take(&mut *recording.lock().unwrap_or_else(|e| e.into_inner()));
        for w in writes {
            let _ = tokio::time::timeout(snowpea_common::db::CALL_TIMEOUT, w).await;
        }
        self.record_end(&job, &occ, result).await;
    }

    /// Follows a run svc-session was running when svc-scheduler stopped (recovery of a
    /// `running` occurrence with a recorded session): waits, through svc-session's `WatchRun`
    /// and at most `scheduler.runTimeoutSec` from now, for the session's turn to end and
    /// records its real result, exactly as if the run had been followed from the start. The
    /// occurrence is never run again; if the run cannot be followed it ends `failed` with the
    /// reason.
    pub async fn watch_occurrence(
        self: Arc<Self>,
        job: JobRow,
        occ: OccurrenceRow,
        session_id: String,
    ) {
        let cfg = self.reload_config();
        let limit = Duration::from_secs(cfg.run_timeout_sec as u64);
        tracing::info!(
            job_id = job.job_id,
            session_id,
            "following a run a restart of svc-scheduler interrupted"
        );
        let result = match tokio::time::timeout(limit, self.session.watch(&session_id)).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(format!(
                "interrupted: svc-scheduler stopped while the run was in progress and could not follow session {session_id} afterwards ({e})"
            )),
            Err(_) => Err(format!(
                "the run took longer than scheduler.runTimeoutSec ({}s) after svc-scheduler restarted",
                cfg.run_timeout_sec
            )),
        };
        self.record_end(&job, &occ, result).await;
    }

    /// Records how a run ended (committed first), then publishes it: `job.event`
    /// `finished` / `failed` / `denied`, `notify` for a job with meta, `job.done` /
    /// `job.failed` on the origin session.
    async fn record_end(
        &self,
        job: &JobRow,
        occ: &OccurrenceRow,
        result: Result<RunUnattendedReply, String>,
    ) {
        let job_id = job.job_id.clone();
        let scheduled_at = iso(ts(occ.scheduled_ms));
        let (status, session_id, text, error) = match result {
            Ok(r) => {
                let err = (!r.error.is_empty()).then_some(r.error);
                (
                    r.status,
                    (!r.session_id.is_empty()).then_some(r.session_id),
                    r.text,
                    err,
                )
            }
            Err(e) => ("failed".to_owned(), None, String::new(), Some(e)),
        };
        let (occ_status, last_status, kind) = classify(&status);
        let outcome = Outcome {
            status: occ_status.into(),
            last_status: Some(last_status.into()),
            session_id: session_id.clone(),
            text: text.clone(),
            error: error.clone(),
            now_ms: self.clock.now().as_millisecond(),
        };
        // Committed before it is published (DESIGN.md §6).
        let (jid, sms) = (job_id.clone(), occ.scheduled_ms);
        let recorded = self
            .db("record the run's end", move |s| {
                s.finish(&jid, sms, &outcome)?;
                // The recorded session id (from the stream's first update) for a reply
                // that has none.
                Ok(s.occurrences(&jid, 1)
                    .ok()
                    .and_then(|o| o.into_iter().find(|o| o.scheduled_ms == sms))
                    .and_then(|o| o.session_id))
            })
            .await;
        let recorded = match recorded {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(job_id, error = %format!("{e:#}"), "cannot record the run's end");
                None
            }
        };
        let session_id = session_id.or(recorded);
        self.job_event(
            job,
            kind,
            json!({
                "scheduledAt": scheduled_at, "runId": occ.run_id, "trigger": occ.trigger,
                "status": occ_status, "lastStatus": last_status, "sessionId": session_id,
                "text": text, "error": error,
            }),
        );
        if job.meta.is_some() {
            self.notify_owner(
                job,
                json!({ "status": occ_status, "sessionId": session_id, "text": text }),
            );
        }
        if let Some(origin) = &job.origin_session_id {
            let (ev, event) = if kind == "finished" {
                let e = JobDoneEvent {
                    job_id: job_id.clone(),
                    session_id: session_id.clone(),
                    status: occ_status.to_string(),
                    text: text.clone(),
                    ..Default::default()
                };
                (JobDoneEvent::KIND, OriginEvent::JobDone(e))
            } else {
                let e = JobFailedEvent {
                    job_id: job_id.clone(),
                    session_id: session_id.clone(),
                    status: occ_status.to_string(),
                    text: error.clone().unwrap_or(text.clone()),
                    ..Default::default()
                };
                (JobFailedEvent::KIND, OriginEvent::JobFailed(e))
            };
            if let Err(e) = self.session.emit_event(origin, event).await {
                tracing::warn!(job_id, origin, error = %e, "cannot put {ev} on the origin session");
            }
        }
        self.wake();
        self.prune_runs(job).await;
    }

    /// Retention (`scheduler.keepRuns`, default 100, 0 = keep all): deletes the job's run
    /// sessions older than the newest `keepRuns` through svc-session's `DeleteSessions` (never
    /// one still running: svc-session skips it, and so does the query); their occurrence rows
    /// keep their status and text but lose the session id. Failures are logged and retried
    /// after the next run.
    pub async fn prune_runs(&self, job: &JobRow) {
        /// Sessions per DeleteSessions call.
        const BATCH: usize = 256;
        let keep = self.config().keep_runs;
        if keep <= 0 {
            return;
        }
        let jid = job.job_id.clone();
        let keep_n = usize::try_from(keep).unwrap_or(usize::MAX);
        let old = match self
            .db("list old run sessions", move |s| {
                s.run_sessions_beyond(&jid, keep_n)
            })
            .await
        {
            Ok(old) => old,
            Err(e) => {
                tracing::warn!(job_id = job.job_id, error = %format!("{e:#}"), "cannot list old run sessions");
                return;
            }
        };
        for batch in old.chunks(BATCH) {
            let reply = match self.session.delete_sessions(batch.to_vec()).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(job_id = job.job_id, error = %e, "cannot delete old run sessions; retrying after the next run");
                    return;
                }
            };
            let gone: Vec<String> = batch
                .iter()
                .filter(|s| !reply.skipped.contains(s))
                .cloned()
                .collect();
            let jid = job.job_id.clone();
            if let Err(e) = self
                .db("forget deleted run sessions", move |s| {
                    s.forget_sessions(&jid, &gone)
                })
                .await
            {
                tracing::warn!(job_id = job.job_id, error = %format!("{e:#}"), "cannot forget deleted run sessions");
                return;
            }
            tracing::info!(
                job_id = job.job_id,
                deleted = reply.deleted,
                skipped = reply.skipped.len(),
                keep,
                "old run sessions deleted (scheduler.keepRuns)"
            );
        }
    }

    /// True when a connection of browser clientId `host` is live.
    pub fn host_connected(&self, host: &str) -> bool {
        self.bus
            .connections()
            .iter()
            .any(|c| c.client_id.as_deref() == Some(host))
    }

    /// Waits for the job's host up to its deadline; false (and the occurrence recorded
    /// `missed`) when it never came.
    async fn wait_for_host(
        self: &Arc<Self>,
        job: &JobRow,
        occ: &OccurrenceRow,
        host: &str,
    ) -> bool {
        let mut events = self.bus.connection_events();
        let mut no_wait = false;
        let deadline = match occ.wait_until_ms {
            Some(ms) => ts(ms),
            None => {
                // 0 = do not wait: the occurrence is missed at once unless the host is there.
                let wait = clamped(job, "hostWaitSec", job.host_wait_sec, MAX_HOST_WAIT_SEC);
                let now = self.clock.now();
                if wait == 0 {
                    no_wait = true;
                }
                let Ok(d) = now.checked_add(SignedDuration::from_secs(wait)) else {
                    // Never panic on stored data: the occurrence ends with the reason.
                    let reason = format!(
                        "cannot wait for host {host}: {} + {wait} s is beyond the last representable time",
                        iso(now)
                    );
                    tracing::error!(job_id = job.job_id, reason, "host wait out of range");
                    let (j, o) = (job.clone(), occ.clone());
                    let _ = self
                        .blocking("record the failed run", move |s| {
                            s.fail_open(&j, &o, &reason)
                        })
                        .await;
                    return false;
                };
                if !no_wait {
                    let (jid, sms, until) =
                        (job.job_id.clone(), occ.scheduled_ms, d.as_millisecond());
                    if let Err(e) = self
                        .db("record the host wait", move |s| {
                            s.set_waiting(&jid, sms, until)
                        })
                        .await
                    {
                        tracing::error!(job_id = job.job_id, error = %format!("{e:#}"), "cannot record the host wait");
                    }
                    self.job_event(
                        job,
                        "waiting_for_host",
                        json!({
                            "scheduledAt": iso(ts(occ.scheduled_ms)), "runId": occ.run_id,
                            "hostToolsFrom": host, "waitUntil": iso(d),
                        }),
                    );
                }
                d
            }
        };
        // Re-check after subscribing: the host may have connected in between.
        if self.host_connected(host) {
            return true;
        }
        let mut sleep = self.clock.sleep_until(deadline);
        if !no_wait {
            loop {
                tokio::select! {
                    _ = &mut sleep => break,
                    ev = events.recv() => match ev {
                        Ok(ConnectionEvent::Opened(c)) if c.client_id.as_deref() == Some(host) => return true,
                        Ok(_) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            if self.host_connected(host) { return true; }
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                    },
                }
            }
        }
        if self.host_connected(host) {
            return true;
        }
        let reason = if no_wait {
            format!("host {host} is not connected and the job's hostWaitSec is 0 (no wait)")
        } else {
            format!("host {host} did not connect by {}", iso(deadline))
        };
        let outcome = Outcome {
            status: "missed".into(),
            last_status: None,
            session_id: None,
            text: String::new(),
            error: Some(reason.clone()),
            now_ms: self.clock.now().as_millisecond(),
        };
        let (jid, sms) = (job.job_id.clone(), occ.scheduled_ms);
        if let Err(e) = self
            .db("record the missed run", move |s| {
                s.finish(&jid, sms, &outcome)
            })
            .await
        {
            tracing::error!(job_id = job.job_id, error = %format!("{e:#}"), "cannot record the missed run");
        }
        self.job_event(
            job,
            "missed",
            json!({
                "scheduledAt": iso(ts(occ.scheduled_ms)), "count": 1, "reason": reason,
            }),
        );
        self.wake();
        false
    }
}

/// A job's stored number clamped into `0..=max` (a row written before the ranges were checked
/// may hold anything); a clamped value is logged.
fn clamped(job: &JobRow, what: &str, value: i64, max: i64) -> i64 {
    let v = value.clamp(0, max);
    if v != value {
        tracing::warn!(
            job_id = job.job_id,
            what,
            stored = value,
            used = v,
            "stored value out of range; clamped"
        );
    }
    v
}

/// A timestamp from ms since the epoch, clamped into jiff's range (a stored value far out of
/// range reads as the first or last representable instant, never as an error or a panic).
pub fn ts(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(if ms < 0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

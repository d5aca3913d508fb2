//! `snowpea.scheduler.v1.JobService`: `job.schedule`, `job.list`, `job.cancel`, `job.delete`,
//! `job.runNow`, `job.update`, `job.preview`, `job.nextRunForClient` (protocol 1.25.0).
//!
//! [`JobApi`] holds the logic, shared with the agent tools of [`super::internal`]; it is
//! synchronous over the store and runs on the blocking pool ([`JobApi::blocking`]). The trait
//! impl at the bottom only reads the caller's context, delegates and maps errors.

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{json, Value};
use snowpea_common::context::CallContext;
use snowpea_common::home::Home;
use snowpea_proto::rpc::v1::OkResult;
use snowpea_proto::scheduler::v1::job::Held;
use snowpea_proto::scheduler::v1::job_service_server::{JobService, JobServiceServer};
use snowpea_proto::scheduler::v1::*;
use tonic::{Request, Response, Status};

use crate::config::{Config, MAX_CATCH_UP_WINDOW_MINUTES, MAX_HOST_WAIT_SEC};
use crate::error::JobError;
use crate::ownership::{check_may_change, check_meta, Caller};
use crate::runner::ts;
use crate::scheduler::{schedule_of, RunNow, Scheduler};
use crate::spec::{self, iso, Kind};
use crate::store::JobRow;

const MODES: [&str; 3] = ["plan", "accept", "auto"];

/// A new job, as `job.schedule` or `schedule_create` asks for it.
#[derive(Debug, Clone, Default)]
pub struct NewJob {
    /// The spec.
    pub spec: String,
    /// The task.
    pub task: String,
    /// Mode, if given.
    pub mode: Option<String>,
    /// Agent, if given.
    pub agent: Option<String>,
    /// Channel, if given.
    pub channel: Option<String>,
    /// Workdir, if given.
    pub workdir: Option<String>,
    /// Meta, if given.
    pub meta: Option<Value>,
    /// `sessionTemplate.hostToolsFrom`.
    pub host_tools_from: Option<String>,
    /// `sessionTemplate.hostWaitSec` (absent = the settings' default; 0 = do not wait).
    pub host_wait_sec: Option<i64>,
    /// `sessionTemplate.catchUpWindowMinutes` (absent = the settings' default).
    pub catch_up_window_minutes: Option<i64>,
    /// `rpc` or `tool`.
    pub created_via: &'static str,
    /// The session that asked (tools).
    pub origin_session_id: Option<String>,
}

/// The `job.*` logic.
#[derive(Debug, Clone)]
pub struct JobApi {
    /// The scheduler.
    pub sched: Arc<Scheduler>,
    /// The home (settings, default workdir).
    pub home: Home,
}

/// Checks a named agent (`job.schedule{agent}` / `sessionTemplate.agent`): an agent name
/// (`^[a-z0-9][a-z0-9._-]*$`, at most 64 characters). Whether it exists is svc-session's
/// to say when the job runs (a run naming an unknown agent fails `not_found`).
fn check_agent(agent: Option<&str>) -> Result<(), JobError> {
    let Some(a) = agent else {
        return Ok(());
    };
    let mut chars = a.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && a.chars().count() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(JobError::Invalid {
            field: "agent",
            message: format!(
                "{} is not an agent name (lower-case letters, digits, '.', '_', '-')",
                spec::quote(a)
            ),
        })
    }
}

/// Longest `spec` (and `job.update` `schedule`), characters.
pub const MAX_SPEC_CHARS: usize = 512;
/// Longest `task`, characters.
pub const MAX_TASK_CHARS: usize = 32_768;
/// Longest `jobId` a job can have, characters (ids are `job_` + 32 hex digits).
pub const MAX_JOB_ID_CHARS: usize = 128;

/// Refuses a text param longer than `max` characters (`field` as in the params).
fn check_len(field: &'static str, value: &str, max: usize) -> Result<(), JobError> {
    if value.chars().nth(max).is_some() {
        return Err(JobError::Invalid {
            field,
            message: format!(
                "is {} characters long; at most {max} are allowed",
                value.chars().count()
            ),
        });
    }
    Ok(())
}

/// Checks a `sessionTemplate` number against `0..=max` (`field` as in the params, e.g.
/// `sessionTemplate.hostWaitSec`).
fn check_range(field: &'static str, value: i64, max: i64, unit: &str) -> Result<i64, JobError> {
    if value < 0 {
        return Err(JobError::Invalid {
            field,
            message: format!("must not be negative, got {value}"),
        });
    }
    if value > max {
        return Err(JobError::Invalid {
            field,
            message: format!("must be at most {max} {unit}, got {value}"),
        });
    }
    Ok(value)
}

fn nonempty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.trim().is_empty())
}

impl JobApi {
    /// Runs synchronous `job.*` logic (it reads and writes the store) on the blocking pool:
    /// SQLite never runs on an async worker thread (`snowpea_common::db::blocking`).
    pub async fn blocking<T: Send + 'static>(
        &self,
        what: &'static str,
        f: impl FnOnce(&JobApi) -> Result<T, JobError> + Send + 'static,
    ) -> Result<T, JobError> {
        let api = self.clone();
        snowpea_common::db::blocking(what, move || f(&api)).await?
    }

    /// Re-reads the settings (the zone and defaults may have changed). Bad settings fall back
    /// to their defaults with a warning in the log: they are never blamed on the params.
    fn config(&self) -> Config {
        self.sched.reload_config()
    }

    fn find(&self, job_id: &str) -> Result<JobRow, JobError> {
        check_len("jobId", job_id, MAX_JOB_ID_CHARS)?;
        self.sched
            .store
            .job(job_id)?
            .ok_or_else(|| JobError::NotFound(job_id.to_owned()))
    }

    /// `job.schedule`.
    pub fn schedule(&self, caller: &Caller, p: NewJob) -> Result<JobScheduleResult, JobError> {
        check_agent(p.agent.as_deref())?;
        check_len("spec", &p.spec, MAX_SPEC_CHARS)?;
        check_len("task", &p.task, MAX_TASK_CHARS)?;
        if p.task.trim().is_empty() {
            return Err(JobError::Invalid {
                field: "task",
                message: "must not be empty".into(),
            });
        }
        let mode = nonempty(p.mode).unwrap_or_else(|| "accept".into());
        if !MODES.contains(&mode.as_str()) {
            return Err(JobError::Invalid {
                field: "mode",
                message: format!("{} is not one of plan, accept, auto", spec::quote(&mode)),
            });
        }
        let host_wait_sec = p
            .host_wait_sec
            .map(|v| {
                check_range(
                    "sessionTemplate.hostWaitSec",
                    v,
                    MAX_HOST_WAIT_SEC,
                    "seconds (7 days)",
                )
            })
            .transpose()?;
        let catch_up_window_minutes = p
            .catch_up_window_minutes
            .map(|v| {
                check_range(
                    "sessionTemplate.catchUpWindowMinutes",
                    v,
                    MAX_CATCH_UP_WINDOW_MINUTES,
                    "minutes (1 year)",
                )
            })
            .transpose()?;
        let cfg = self.config();
        let now = self.sched.clock.now();
        let parsed =
            spec::parse(&p.spec, now, &cfg.time_zone).map_err(|source| JobError::Spec {
                field: "spec",
                source,
            })?;
        let owner = check_meta(caller, p.meta.as_ref())?;
        let workdir = nonempty(p.workdir).unwrap_or_else(|| self.home.root().display().to_string());
        if !std::path::Path::new(&workdir).is_absolute() {
            return Err(JobError::Invalid {
                field: "workdir",
                message: format!("{} is not an absolute path", spec::quote(&workdir)),
            });
        }
        // Refuse now rather than fail every run later.
        if !std::path::Path::new(&workdir).is_dir() {
            return Err(JobError::Invalid {
                field: "workdir",
                message: format!("{} is not an existing directory", spec::quote(&workdir)),
            });
        }
        let job_id = snowpea_common::ids::new_id("job");
        let fingerprint = owner
            .as_ref()
            .map(|_| format!("fp_{}", snowpea_common::ids::random_hex(16)));
        let now_ms = now.as_millisecond();
        let row = JobRow {
            job_id: job_id.clone(),
            spec: p.spec.clone(),
            kind: parsed.schedule.kind().as_str().into(),
            normalized: parsed.schedule.normalized(),
            anchor_ms: parsed.anchor.as_millisecond(),
            time_zone: cfg.time_zone_name.clone(),
            task: p.task,
            mode,
            agent: nonempty(p.agent),
            channel: nonempty(p.channel),
            workdir,
            host_tools_from: nonempty(p.host_tools_from),
            // An explicit 0 is kept; only an absent value takes the settings' default.
            host_wait_sec: host_wait_sec.unwrap_or(cfg.host_wait_sec),
            catch_up_window_minutes: catch_up_window_minutes.unwrap_or(cfg.catch_up_window_minutes),
            meta: owner.as_ref().map(|(m, _)| m.clone()),
            owner_client_id: owner.map(|(_, o)| o),
            fingerprint: fingerprint.clone(),
            origin_session_id: p.origin_session_id,
            created_via: p.created_via.into(),
            enabled: true,
            cancelled: false,
            running: false,
            next_run_ms: Some(parsed.next_run.as_millisecond()),
            last_run_ms: None,
            last_status: None,
            created_ms: now_ms,
            updated_ms: now_ms,
        };
        self.sched.store.insert_job(&row)?;
        self.sched.wake();
        tracing::info!(job_id, kind = row.kind, next_run_at = %iso(parsed.next_run), "job scheduled");
        Ok(JobScheduleResult {
            fingerprint,
            job_id,
            next_run_at: Some(iso(parsed.next_run)),
        })
    }

    /// `job.list`.
    pub fn list(&self, caller: &Caller) -> Result<JobListResult, JobError> {
        let jobs = self.sched.store.jobs()?;
        let jobs = jobs
            .iter()
            .map(|j| self.view(caller, j))
            .collect::<Result<_, _>>()?;
        Ok(JobListResult { jobs })
    }

    /// A job as `caller` may see it.
    pub fn view(&self, caller: &Caller, j: &JobRow) -> Result<Job, JobError> {
        let owner = caller.owns(j);
        let held = self
            .sched
            .store
            .occurrences(&j.job_id, 1)?
            .into_iter()
            .next()
            .filter(|o| o.status == "waiting_for_host" || o.status == "missed")
            .map(|o| Held {
                scheduled_at: iso(ts(o.scheduled_ms)),
                status: o.status,
            });
        Ok(Job {
            catch_up_window_minutes: j.catch_up_window_minutes,
            channel: j.channel.clone(),
            created_via: j.created_via.clone(),
            enabled: j.enabled,
            fingerprint: j.fingerprint.clone().filter(|_| owner),
            held,
            job_id: j.job_id.clone(),
            kind: j.kind.clone(),
            last_run_at: j.last_run_ms.map(|ms| iso(ts(ms))),
            last_status: j.last_status.clone(),
            meta: j
                .meta
                .as_deref()
                .filter(|_| owner)
                .and_then(|m| serde_json::from_str::<Value>(m).ok())
                .map(|m| snowpea_proto::wkt::to_struct(&m)),
            mode: j.mode.clone(),
            next_run_at: j.next_run_ms.filter(|_| j.enabled).map(|ms| iso(ts(ms))),
            origin_session_id: j.origin_session_id.clone(),
            owned: j.owner_client_id.is_some(),
            owner_client_id: j.owner_client_id.clone().filter(|_| owner),
            spec: j.spec.clone(),
            state: if j.cancelled {
                "cancelled"
            } else if j.running {
                "running"
            } else {
                "scheduled"
            }
            .into(),
            task: j.task.clone(),
        })
    }

    /// Cancels every job that names agent `agent` and is not cancelled yet (`agent.delete`);
    /// returns their ids. A job owned by a browser client is left alone (only its owner may
    /// change it).
    pub fn cancel_agent_jobs(&self, agent: &str) -> Result<Vec<String>, JobError> {
        let caller = Caller::Client(Default::default());
        let mut out = Vec::new();
        for j in self.sched.store.jobs()? {
            if j.agent.as_deref() == Some(agent) && !j.cancelled && j.owner_client_id.is_none() {
                self.cancel(&caller, &j.job_id)?;
                out.push(j.job_id.clone());
            }
        }
        Ok(out)
    }

    /// `job.cancel`.
    pub fn cancel(&self, caller: &Caller, job_id: &str) -> Result<OkResult, JobError> {
        let mut j = self.find(job_id)?;
        check_may_change(caller, &j, "cancel")?;
        j.enabled = false;
        j.cancelled = true;
        j.next_run_ms = None;
        j.updated_ms = self.sched.clock.now().as_millisecond();
        self.sched.store.update_job(&j)?;
        self.sched.job_event(
            &j,
            "updated",
            json!({ "enabled": false, "state": "cancelled", "nextRunAt": null }),
        );
        self.sched.wake();
        Ok(OkResult { ok: true })
    }

    /// `job.delete`.
    pub async fn delete(
        &self,
        caller: &Caller,
        job_id: &str,
        delete_runs: bool,
    ) -> Result<JobDeleteResult, JobError> {
        let (who, id) = (caller.clone(), job_id.to_owned());
        let (j, sessions) = self
            .blocking("job.delete", move |api| {
                let j = api.find(&id)?;
                check_may_change(&who, &j, "delete")?;
                if !delete_runs {
                    return Ok((j, Vec::new()));
                }
                // Sessions of runs that ended; a run still in progress is left alone.
                let sessions: Vec<String> = api
                    .sched
                    .store
                    .occurrences(&id, usize::MAX >> 1)?
                    .into_iter()
                    .filter(|o| {
                        !matches!(
                            o.status.as_str(),
                            "claimed" | "waiting_for_host" | "running"
                        )
                    })
                    .filter_map(|o| o.session_id)
                    .collect();
                Ok((j, sessions))
            })
            .await?;
        let mut deleted_sessions = 0;
        if !sessions.is_empty() {
            let r = self
                .sched
                .session
                .delete_sessions(sessions)
                .await
                .map_err(|e| JobError::SessionUnavailable(e.to_string()))?;
            deleted_sessions = r.deleted;
        }
        let id = job_id.to_owned();
        let deleted = self
            .blocking("job.delete", move |api| {
                Ok(api.sched.store.delete_job(&id)?)
            })
            .await?;
        if deleted.is_none() {
            return Err(JobError::NotFound(job_id.to_owned()));
        }
        self.sched.job_event(
            &j,
            "deleted",
            json!({ "deletedSessions": deleted_sessions }),
        );
        self.sched.wake();
        Ok(JobDeleteResult {
            deleted_sessions,
            job_id: job_id.to_owned(),
        })
    }

    /// `job.runNow`: `ok` is false when a run of the job is already in progress (no second
    /// run is started).
    pub fn run_now(&self, caller: &Caller, job_id: &str) -> Result<OkResult, JobError> {
        let j = self.find(job_id)?;
        check_may_change(caller, &j, "run")?;
        if j.cancelled {
            return Err(JobError::Cancelled(j.job_id));
        }
        let r = self.sched.run_now(j)?;
        Ok(OkResult {
            ok: r == RunNow::Started,
        })
    }

    /// `job.update`.
    pub fn update(&self, caller: &Caller, p: JobUpdateParams) -> Result<Job, JobError> {
        let mut j = self.find(&p.job_id)?;
        check_may_change(caller, &j, "update")?;
        let now = self.sched.clock.now();
        let mut reschedule = false;
        if let Some(spec_text) = nonempty(p.schedule) {
            check_len("schedule", &spec_text, MAX_SPEC_CHARS)?;
            let cfg = self.config();
            let parsed =
                spec::parse(&spec_text, now, &cfg.time_zone).map_err(|source| JobError::Spec {
                    field: "schedule",
                    source,
                })?;
            j.spec = spec_text;
            j.kind = parsed.schedule.kind().as_str().into();
            j.normalized = parsed.schedule.normalized();
            j.anchor_ms = parsed.anchor.as_millisecond();
            j.time_zone = cfg.time_zone_name;
            reschedule = true;
        }
        if let Some(t) = p.session_template {
            if let Some(w) = t.catch_up_window_minutes {
                j.catch_up_window_minutes = check_range(
                    "sessionTemplate.catchUpWindowMinutes",
                    w,
                    MAX_CATCH_UP_WINDOW_MINUTES,
                    "minutes (1 year)",
                )?;
            }
            if let Some(w) = t.host_wait_sec {
                j.host_wait_sec = check_range(
                    "sessionTemplate.hostWaitSec",
                    w,
                    MAX_HOST_WAIT_SEC,
                    "seconds (7 days)",
                )?;
            }
        }
        match p.enabled {
            Some(false) => {
                j.enabled = false;
                j.next_run_ms = None;
            }
            Some(true) => {
                j.enabled = true;
                j.cancelled = false;
                if j.kind == Kind::Interval.as_str() {
                    // Resume from now: the interval restarts at this instant.
                    j.anchor_ms = spec::trunc_secs(now).as_millisecond();
                }
                reschedule = true;
            }
            None => {}
        }
        if reschedule && j.enabled {
            let (schedule, tz) = schedule_of(&j)?;
            let next = schedule
                .next_after(now, ts(j.anchor_ms), &tz)
                .ok_or_else(|| JobError::Spec {
                    field: if p.enabled == Some(true) {
                        "enabled"
                    } else {
                        "schedule"
                    },
                    source: spec::SpecError(format!(
                        "{} would never fire again; give a new schedule",
                        spec::quote(&j.spec)
                    )),
                })?;
            j.next_run_ms = Some(next.as_millisecond());
        }
        j.updated_ms = now.as_millisecond();
        self.sched.store.update_job(&j)?;
        let j = self.find(&j.job_id)?;
        self.sched.job_event(&j, "updated", json!({
            "enabled": j.enabled, "spec": j.spec, "nextRunAt": j.next_run_ms.filter(|_| j.enabled).map(|ms| iso(ts(ms))),
        }));
        self.sched.wake();
        self.view(caller, &j)
    }

    /// `job.preview`.
    pub fn preview(&self, spec_text: &str) -> Result<JobPreviewResult, JobError> {
        check_len("spec", spec_text, MAX_SPEC_CHARS)?;
        let cfg = self.config();
        let parsed =
            spec::parse(spec_text, self.sched.clock.now(), &cfg.time_zone).map_err(|source| {
                JobError::Spec {
                    field: "spec",
                    source,
                }
            })?;
        Ok(JobPreviewResult {
            kind: parsed.schedule.kind().as_str().into(),
            next_run_at: Some(iso(parsed.next_run)),
            normalized: Some(parsed.schedule.normalized()),
        })
    }

    /// `job.nextRunForClient`.
    pub fn next_run_for_client(
        &self,
        client_id: &str,
    ) -> Result<JobNextRunForClientResult, JobError> {
        let mut best: Option<i64> = None;
        for j in self.sched.store.jobs()? {
            if j.host_tools_from.as_deref() != Some(client_id) {
                continue;
            }
            let held = self
                .sched
                .store
                .occurrences(&j.job_id, 1)?
                .into_iter()
                .find(|o| o.status == "waiting_for_host")
                .map(|o| o.scheduled_ms);
            let next = j.next_run_ms.filter(|_| j.enabled);
            for t in [held, next].into_iter().flatten() {
                best = Some(best.map_or(t, |b: i64| b.min(t)));
            }
        }
        Ok(JobNextRunForClientResult {
            next_run_at: best.map(|ms| iso(ts(ms))),
        })
    }
}

/// The gRPC service.
#[derive(Debug, Clone)]
pub struct JobRpc {
    api: JobApi,
}

impl JobRpc {
    /// Serves `api`.
    pub fn new(api: JobApi) -> Self {
        JobRpc { api }
    }

    /// The tonic server wrapper (decoding requests up to [`snowpea_proto::limits::GRPC_REQUEST`], so an oversized
    /// `task` reaches the handler and is `invalid_params` naming it).
    pub fn into_server(self) -> JobServiceServer<Self> {
        JobServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

/// The trait impl: each call reads the caller's context and hands the params to [`JobApi`] on
/// the blocking pool (the shared call layer opens the span and counts the call).
#[tonic::async_trait]
impl JobService for JobRpc {
    async fn cancel(&self, req: Request<JobCancelParams>) -> Result<Response<OkResult>, Status> {
        let caller = Caller::Client(CallContext::of(&req));
        let job_id = req.into_inner().job_id;
        reply(
            self.api
                .blocking("job.cancel", move |api| api.cancel(&caller, &job_id))
                .await,
        )
    }

    async fn delete(
        &self,
        req: Request<JobDeleteParams>,
    ) -> Result<Response<JobDeleteResult>, Status> {
        let caller = Caller::Client(CallContext::of(&req));
        let p = req.into_inner();
        reply(self.api.delete(&caller, &p.job_id, p.delete_runs).await)
    }

    async fn list(&self, req: Request<()>) -> Result<Response<JobListResult>, Status> {
        let caller = Caller::Client(CallContext::of(&req));
        reply(
            self.api
                .blocking("job.list", move |api| api.list(&caller))
                .await,
        )
    }

    async fn next_run_for_client(
        &self,
        req: Request<JobNextRunForClientParams>,
    ) -> Result<Response<JobNextRunForClientResult>, Status> {
        let client_id = req.into_inner().client_id;
        reply(
            self.api
                .blocking("job.nextRunForClient", move |api| {
                    api.next_run_for_client(&client_id)
                })
                .await,
        )
    }

    async fn preview(
        &self,
        req: Request<JobPreviewParams>,
    ) -> Result<Response<JobPreviewResult>, Status> {
        let spec = req.into_inner().spec;
        reply(
            self.api
                .blocking("job.preview", move |api| api.preview(&spec))
                .await,
        )
    }

    async fn run_now(&self, req: Request<JobRunNowParams>) -> Result<Response<OkResult>, Status> {
        let caller = Caller::Client(CallContext::of(&req));
        let job_id = req.into_inner().job_id;
        reply(
            self.api
                .blocking("job.runNow", move |api| api.run_now(&caller, &job_id))
                .await,
        )
    }

    async fn schedule(
        &self,
        req: Request<JobScheduleParams>,
    ) -> Result<Response<JobScheduleResult>, Status> {
        let caller = Caller::Client(CallContext::of(&req));
        let new = NewJob::from_params(req.into_inner());
        reply(
            self.api
                .blocking("job.schedule", move |api| api.schedule(&caller, new))
                .await,
        )
    }

    async fn update(&self, req: Request<JobUpdateParams>) -> Result<Response<Job>, Status> {
        let caller = Caller::Client(CallContext::of(&req));
        let p = req.into_inner();
        reply(
            self.api
                .blocking("job.update", move |api| api.update(&caller, p))
                .await,
        )
    }
}

/// The one mapping of this boundary: a result, or the protocol error of [`JobError`].
fn reply<T>(r: Result<T, JobError>) -> Result<Response<T>, Status> {
    r.map(Response::new).map_err(Into::into)
}

impl NewJob {
    /// The `job.schedule` params as a new job (`sessionTemplate` fills what the top level
    /// leaves out).
    fn from_params(p: JobScheduleParams) -> NewJob {
        let t = p.session_template.unwrap_or_default();
        NewJob {
            spec: p.spec,
            task: p.task,
            mode: nonempty(Some(p.mode)).or(t.mode),
            agent: p.agent.or(t.agent),
            channel: p.channel,
            workdir: p.workdir,
            meta: p.meta.map(|m| snowpea_proto::wkt::from_struct(&m)),
            host_tools_from: t.host_tools_from,
            host_wait_sec: t.host_wait_sec,
            catch_up_window_minutes: t.catch_up_window_minutes,
            created_via: "rpc",
            origin_session_id: None,
        }
    }
}

/// Parses a UTC ISO-8601 time reported by this service (tests).
pub fn parse_iso(s: &str) -> Option<Timestamp> {
    s.parse().ok()
}

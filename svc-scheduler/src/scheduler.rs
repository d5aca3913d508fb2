//! The scheduler's shared state and the claim logic every path goes through: the tick
//! ([`Scheduler::process_due`]), `job.runNow` ([`Scheduler::run_now`]) and crash recovery
//! ([`Scheduler::recover`]).

use std::sync::{Arc, Mutex};

use jiff::tz::TimeZone;
use serde_json::{json, Value};
use snowpea_common::bus::BusHub;
use snowpea_proto::scheduler::v1::JobEventNotification;
use tokio::sync::Notify;

use crate::catchup;
use crate::clock::Clock;
use crate::config::Config;
use crate::runner::{ts, SessionRunner};
use crate::spec::{iso, Kind, Schedule};
use crate::store::{Claim, JobRow, OccurrenceRow, Outcome, Store};

/// Most due jobs handled per tick pass (the pass repeats until none is left).
const DUE_BATCH: usize = 512;

/// The scheduler: store, clock, svc-session, bus and settings.
#[derive(Debug)]
pub struct Scheduler {
    /// The database.
    pub store: Arc<Store>,
    /// Now and timers.
    pub clock: Arc<dyn Clock>,
    /// svc-session.
    pub session: Arc<dyn SessionRunner>,
    /// Notifications out, connections in.
    pub bus: Arc<BusHub>,
    config: Mutex<Config>,
    /// `settings.json`, re-read by [`Scheduler::reload_config`] (none: the config stays as given).
    settings_path: std::sync::OnceLock<std::path::PathBuf>,
    /// Settings problems already logged (each distinct one is logged once).
    warned: Mutex<std::collections::HashSet<String>>,
    wake: Notify,
}

/// Outcome of `job.runNow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunNow {
    /// A run started.
    Started,
    /// A run of the job is already in progress; no second one was started.
    AlreadyRunning,
}

impl Scheduler {
    /// Runs store work on the blocking pool (`snowpea_common::db::blocking`: SQLite never
    /// runs on an async worker thread); `what` names it in errors.
    pub async fn db<T: Send + 'static>(
        &self,
        what: &'static str,
        f: impl FnOnce(&Store) -> anyhow::Result<T> + Send + 'static,
    ) -> anyhow::Result<T> {
        let store = self.store.clone();
        snowpea_common::db::blocking(what, move || f(&store)).await?
    }

    /// Runs synchronous scheduler work that reads and writes the store (claims, recovery,
    /// the `job.*` logic) on the blocking pool, with the bounded wait of
    /// `snowpea_common::db::blocking`.
    pub async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        what: &'static str,
        f: impl FnOnce(&Arc<Scheduler>) -> T + Send + 'static,
    ) -> Result<T, snowpea_common::db::DbError> {
        let me = self.clone();
        snowpea_common::db::blocking(what, move || f(&me)).await
    }

    /// A scheduler over its parts.
    pub fn new(
        store: Arc<Store>,
        clock: Arc<dyn Clock>,
        session: Arc<dyn SessionRunner>,
        bus: Arc<BusHub>,
        config: Config,
    ) -> Arc<Self> {
        Arc::new(Scheduler {
            store,
            clock,
            session,
            bus,
            config: Mutex::new(config),
            settings_path: std::sync::OnceLock::new(),
            warned: Mutex::default(),
            wake: Notify::new(),
        })
    }

    /// The current settings.
    pub fn config(&self) -> Config {
        self.config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the settings (re-read by the handlers that create or change jobs).
    pub fn set_config(&self, c: Config) {
        *self.config.lock().unwrap_or_else(|e| e.into_inner()) = c;
    }

    /// Makes [`Scheduler::reload_config`] read the settings from `path` (set once).
    pub fn use_settings_file(&self, path: std::path::PathBuf) {
        let _ = self.settings_path.set(path);
    }

    /// Re-reads the settings file (see [`Scheduler::use_settings_file`]) and makes it the
    /// current config. Never fails: every bad setting falls back to its default, and each
    /// distinct problem is logged once as a warning naming the setting.
    pub fn reload_config(&self) -> Config {
        let Some(path) = self.settings_path.get() else {
            return self.config();
        };
        let loaded = crate::config::Config::load(path);
        self.note_settings_warnings(&loaded.warnings);
        self.set_config(loaded.config.clone());
        loaded.config
    }

    /// Applies settings changes the settings owner announces (`ServiceBus.SettingsChanged`)
    /// without a restart: a change of `scheduler` or `approvals` (or a missed
    /// announcement) re-reads the file ([`Scheduler::reload_config`]) and wakes the tick.
    /// Runs until the bus hub is dropped.
    pub fn follow_settings(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        use tokio::sync::broadcast::error::RecvError;
        let mut changes = self.bus.settings_changes();
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let relevant = match changes.recv().await {
                    Ok(c) => c.keys.iter().any(|k| k == "scheduler" || k == "approvals"),
                    Err(RecvError::Lagged(_)) => true,
                    Err(RecvError::Closed) => return,
                };
                if relevant {
                    let c = me.reload_config();
                    tracing::info!(time_zone = %c.time_zone_name, "scheduler settings applied");
                    me.wake();
                }
            }
        })
    }

    /// Logs the settings problems not logged before; returns them.
    pub fn note_settings_warnings(&self, warnings: &[String]) -> Vec<String> {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        let new: Vec<String> = warnings
            .iter()
            .filter(|w| warned.insert((*w).clone()))
            .cloned()
            .collect();
        for w in &new {
            tracing::warn!(problem = %w, "bad scheduler setting; using the fallback");
        }
        new
    }

    /// Wakes the tick early (a job changed, a run ended).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Resolves when [`Scheduler::wake`] is called.
    pub async fn woken(&self) {
        self.wake.notified().await
    }

    /// Publishes `job.event` to every connection.
    pub fn job_event(&self, job: &JobRow, kind: &str, payload: Value) {
        tracing::info!(job_id = job.job_id, kind, "job.event");
        self.bus
            .publish(&job_event_params(job, kind, &payload), vec![]);
    }

    /// Publishes `job.event` `notify` to the owning browser's live connections only.
    pub fn notify_owner(&self, job: &JobRow, payload: Value) {
        let Some(owner) = &job.owner_client_id else {
            return;
        };
        let targets: Vec<String> = self
            .bus
            .connections()
            .into_iter()
            .filter(|c| c.client_id.as_deref() == Some(owner.as_str()))
            .map(|c| c.connection_id)
            .collect();
        if targets.is_empty() {
            return;
        }
        self.bus
            .publish(&job_event_params(job, "notify", &payload), targets);
    }

    /// Handles every due job at the clock's now: claims and spawns the runs that fire,
    /// records the missed ones. Returns how many runs were started.
    pub fn process_due(self: &Arc<Self>) -> anyhow::Result<usize> {
        let mut started = 0;
        loop {
            let now = self.clock.now();
            let due = self.store.due_jobs(now.as_millisecond(), DUE_BATCH)?;
            let n = due.len();
            for job in due {
                match self.fire_due(job, now) {
                    Ok(true) => started += 1,
                    Ok(false) => {}
                    Err(e) => tracing::error!(error = %format!("{e:#}"), "cannot handle a due job"),
                }
            }
            if n < DUE_BATCH {
                return Ok(started);
            }
        }
    }

    fn fire_due(self: &Arc<Self>, job: JobRow, now: jiff::Timestamp) -> anyhow::Result<bool> {
        let Some(first_due) = job.next_run_ms else {
            return Ok(false);
        };
        let (schedule, tz) = match schedule_of(&job) {
            Ok(s) => s,
            Err(e) => {
                // A stored schedule that cannot be read would be due forever: pause the job.
                self.disable_broken(&job, &format!("{e:#}"))?;
                return Ok(false);
            }
        };
        let plan = catchup::plan(
            &schedule,
            ts(job.anchor_ms),
            &tz,
            first_due,
            now,
            job.catch_up_window_minutes,
        );
        let now_ms = now.as_millisecond();
        let missed = missed_reasons(&plan, now_ms, job.catch_up_window_minutes);
        let claim = Claim {
            job_id: job.job_id.clone(),
            scheduled_ms: plan.fire.unwrap_or(first_due),
            run_id: snowpea_common::ids::new_id("run"),
            trigger: "schedule".into(),
            now_ms,
            expect_next_ms: Some(Some(first_due)),
            new_next_ms: plan.next,
            new_enabled: plan.enabled,
            missed,
        };
        if plan.fire.is_none() {
            if self.store.skip_missed(&claim)? {
                self.missed_event(&job, &claim.missed, plan.missed_total);
            }
            return Ok(false);
        }
        if !self.store.claim(&claim)? {
            return Ok(false);
        }
        if !claim.missed.is_empty() {
            self.missed_event(&job, &claim.missed, plan.missed_total);
        }
        self.spawn_run(job, &claim);
        Ok(true)
    }

    /// Pauses a job whose stored schedule cannot be read (logged, `job.event` `updated`).
    fn disable_broken(&self, job: &JobRow, reason: &str) -> anyhow::Result<()> {
        tracing::error!(
            job_id = job.job_id,
            reason,
            "stored schedule unreadable; job paused"
        );
        let mut j = job.clone();
        j.enabled = false;
        j.next_run_ms = None;
        j.updated_ms = self.clock.now().as_millisecond();
        self.store.update_job(&j)?;
        self.job_event(
            &j,
            "updated",
            json!({ "enabled": false, "nextRunAt": null, "error": reason }),
        );
        Ok(())
    }

    /// Ends an occurrence that is still open as `failed` with `reason` (logged and published as
    /// `job.event` `failed`); does nothing when it has already ended.
    pub fn fail_open(&self, job: &JobRow, occ: &OccurrenceRow, reason: &str) {
        let outcome = Outcome {
            status: "failed".into(),
            last_status: Some("error".into()),
            session_id: None,
            text: String::new(),
            error: Some(reason.to_owned()),
            now_ms: self.clock.now().as_millisecond(),
        };
        match self
            .store
            .finish_open(&job.job_id, occ.scheduled_ms, &outcome)
        {
            Ok(true) => {
                self.job_event(
                    job,
                    "failed",
                    json!({
                        "scheduledAt": iso(ts(occ.scheduled_ms)), "runId": occ.run_id,
                        "trigger": occ.trigger, "status": "failed", "lastStatus": "error",
                        "sessionId": occ.session_id, "error": reason,
                    }),
                );
                self.wake();
            }
            Ok(false) => {}
            Err(e) => {
                tracing::error!(job_id = job.job_id, error = %format!("{e:#}"), "cannot record the failed run")
            }
        }
    }

    /// Spawns [`Scheduler::run_occurrence`] guarded: should the run's task panic, its
    /// occurrence is recorded `failed` instead of leaving the job `running` forever.
    pub fn spawn_occurrence(self: &Arc<Self>, job: JobRow, occ: OccurrenceRow) {
        let run = self.clone().run_occurrence(job.clone(), occ.clone());
        self.spawn_guarded(job, occ, run);
    }

    /// Spawns [`Scheduler::watch_occurrence`] (recovery of a run svc-session still has),
    /// guarded like [`Scheduler::spawn_occurrence`].
    pub fn spawn_watch(self: &Arc<Self>, job: JobRow, occ: OccurrenceRow, session_id: String) {
        let watch = self
            .clone()
            .watch_occurrence(job.clone(), occ.clone(), session_id);
        self.spawn_guarded(job, occ, watch);
    }

    fn spawn_guarded(
        self: &Arc<Self>,
        job: JobRow,
        occ: OccurrenceRow,
        fut: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let run = tokio::spawn(fut);
        let me = self.clone();
        tokio::spawn(async move {
            if let Err(e) = run.await {
                if e.is_panic() {
                    let p = e.into_panic();
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    tracing::error!(job_id = job.job_id, panic = msg, "a run panicked");
                    let reason = format!("internal error in svc-scheduler: {msg}");
                    let _ = me
                        .blocking("record the failed run", move |s| {
                            s.fail_open(&job, &occ, &reason)
                        })
                        .await;
                }
            }
        });
    }

    /// One `job.event` `missed` for a catch-up: the newest missed occurrence, its reason, and
    /// how many were missed in all.
    fn missed_event(&self, job: &JobRow, missed: &[(i64, String)], total: u64) {
        if let Some((newest, reason)) = missed.last() {
            self.job_event(
                job,
                "missed",
                json!({
                    "scheduledAt": iso(ts(*newest)), "count": total, "reason": reason,
                }),
            );
        }
    }

    fn spawn_run(self: &Arc<Self>, job: JobRow, c: &Claim) {
        let occ = OccurrenceRow {
            job_id: c.job_id.clone(),
            scheduled_ms: c.scheduled_ms,
            run_id: c.run_id.clone(),
            trigger: c.trigger.clone(),
            status: "claimed".into(),
            wait_until_ms: None,
            session_id: None,
            text: None,
            error: None,
            claimed_ms: c.now_ms,
        };
        self.spawn_occurrence(job, occ);
    }

    /// `job.runNow`: fires the job now. When an occurrence is due right now the run claims
    /// that occurrence (so racing the tick yields one run); otherwise it claims an occurrence
    /// at the current instant with trigger `runNow`. A job with a run in progress is not run
    /// twice.
    pub fn run_now(self: &Arc<Self>, job: JobRow) -> anyhow::Result<RunNow> {
        let now = self.clock.now();
        let now_ms = now.as_millisecond();
        let due = job.enabled && job.next_run_ms.is_some_and(|n| n <= now_ms);
        let (scheduled, next, enabled, expect) = if due {
            let (schedule, tz) = schedule_of(&job)?;
            let next = schedule
                .next_after(now, ts(job.anchor_ms), &tz)
                .map(|t| t.as_millisecond());
            let newest = schedule
                .prev_at_or_before(now, ts(job.anchor_ms), &tz)
                .map(|t| t.as_millisecond())
                .unwrap_or(job.next_run_ms.unwrap_or(now_ms));
            (newest, next, next.is_some(), Some(job.next_run_ms))
        } else {
            // A one-shot run now is spent; a recurring job keeps its schedule.
            let spent = job.kind == Kind::Once.as_str();
            let next = if spent { None } else { job.next_run_ms };
            // A distinct instant from every recorded occurrence (a scheduled one may sit at
            // this very millisecond).
            let mut at = now_ms;
            while self.store.occurrence_exists(&job.job_id, at)? {
                at += 1;
            }
            (at, next, job.enabled && !spent, None)
        };
        let claim = Claim {
            job_id: job.job_id.clone(),
            scheduled_ms: scheduled,
            run_id: snowpea_common::ids::new_id("run"),
            trigger: "runNow".into(),
            now_ms,
            expect_next_ms: expect,
            new_next_ms: next,
            new_enabled: enabled,
            missed: vec![],
        };
        if !self.store.claim(&claim)? {
            return Ok(RunNow::AlreadyRunning);
        }
        self.spawn_run(job, &claim);
        self.wake();
        Ok(RunNow::Started)
    }

    /// Repairs what a crash left open (DESIGN.md §6: neither double-fire nor silently skip):
    /// * `running` (handed to svc-session before the crash) with a recorded session → followed
    ///   through svc-session's `WatchRun` and recorded with the run's real result; without one
    ///   → `failed`; never run again;
    /// * `claimed` (never handed over) → run now when within the catch-up window, else `missed`;
    /// * `waiting_for_host` → keeps waiting until its recorded deadline.
    pub fn recover(self: &Arc<Self>) -> anyhow::Result<()> {
        let now = self.clock.now();
        for occ in self.store.open_occurrences()? {
            let Some(job) = self.store.job(&occ.job_id)? else {
                continue;
            };
            // Saturating: stored values may be anything.
            let late = now.as_millisecond().saturating_sub(occ.scheduled_ms);
            let window = job
                .catch_up_window_minutes
                .max(0)
                .saturating_mul(60_000)
                .saturating_add(catchup::ON_TIME_GRACE_MS);
            match occ.status.as_str() {
                "running" => match occ.session_id.clone() {
                    // svc-session has the run: follow it to its real end (never run it again).
                    Some(session_id) => self.spawn_watch(job, occ, session_id),
                    // Handed over but never named a session: nothing to follow.
                    None => {
                        let reason =
                            "interrupted: svc-scheduler stopped while the run was in progress"
                                .to_owned();
                        self.store.finish(
                            &job.job_id,
                            occ.scheduled_ms,
                            &Outcome {
                                status: "failed".into(),
                                last_status: Some("error".into()),
                                session_id: None,
                                text: String::new(),
                                error: Some(reason.clone()),
                                now_ms: now.as_millisecond(),
                            },
                        )?;
                        self.job_event(&job, "failed", json!({
                            "scheduledAt": iso(ts(occ.scheduled_ms)), "runId": occ.run_id, "trigger": occ.trigger,
                            "status": "failed", "lastStatus": "error", "sessionId": null, "error": reason,
                        }));
                    }
                },
                "claimed" if late > window && occ.trigger == "schedule" => {
                    let reason = "svc-scheduler stopped after claiming it; restarted beyond the catch-up window".to_owned();
                    self.store.finish(
                        &job.job_id,
                        occ.scheduled_ms,
                        &Outcome {
                            status: "missed".into(),
                            last_status: None,
                            session_id: None,
                            text: String::new(),
                            error: Some(reason.clone()),
                            now_ms: now.as_millisecond(),
                        },
                    )?;
                    self.missed_event(&job, &[(occ.scheduled_ms, reason)], 1);
                }
                _ => {
                    tracing::info!(
                        job_id = job.job_id,
                        status = occ.status,
                        "resuming an occurrence a restart interrupted"
                    );
                    self.spawn_occurrence(job, occ);
                }
            }
        }
        Ok(())
    }
}

/// Each missed occurrence of a catch-up `plan` with a truthful reason: one within the catch-up
/// window that was only passed over because a newer occurrence fires in its place is
/// "coalesced into the catch-up run at <time>"; one older than the window is "missed by more
/// than the catch-up window".
fn missed_reasons(plan: &catchup::Plan, now_ms: i64, window_minutes: i64) -> Vec<(i64, String)> {
    let window_ms = window_minutes
        .max(0)
        .saturating_mul(60_000)
        .saturating_add(catchup::ON_TIME_GRACE_MS);
    let beyond = format!("missed by more than the catch-up window ({window_minutes} min)");
    plan.missed
        .iter()
        .map(|&ms| match plan.fire {
            Some(fire) if now_ms.saturating_sub(ms) <= window_ms => (
                ms,
                format!("coalesced into the catch-up run at {}", iso(ts(fire))),
            ),
            _ => (ms, beyond.clone()),
        })
        .collect()
}

/// A job's schedule and zone, read back from the store.
pub fn schedule_of(job: &JobRow) -> anyhow::Result<(Schedule, TimeZone)> {
    let kind = match job.kind.as_str() {
        "cron" => Kind::Cron,
        "once" => Kind::Once,
        _ => Kind::Interval,
    };
    let schedule = Schedule::from_normalized(kind, &job.normalized)?;
    let tz = TimeZone::get(&job.time_zone).unwrap_or(TimeZone::UTC);
    Ok((schedule, tz))
}

/// The `job.event` params of `job`: `kind` and its free-form `payload` (an object).
fn job_event_params(job: &JobRow, kind: &str, payload: &Value) -> JobEventNotification {
    JobEventNotification {
        job_id: job.job_id.clone(),
        kind: kind.to_owned(),
        payload: Some(snowpea_proto::wkt::to_struct(payload)),
    }
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;

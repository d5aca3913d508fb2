//! The [`Sessions`] component: the registry of live sessions, the `sessions` table and the
//! session-level methods (`session.create`, `list`, `close`, `rename`, `setMode`, `attach`,
//! `resume`).
//!
//! A session persists in the `sessions` table and its events in `events`; the live
//! [`Registry`] holds the sessions that are not closed (all of them are loaded again after
//! a restart). Every session has an *origin connection*: the one that created or last
//! attached it, which receives its `approval.request`s ([`origin`]).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};
use snowpea_common::bus::BusHub;
use snowpea_common::context::CallContext;
use snowpea_common::home::Home;
use snowpea_common::time::now_iso;
use snowpea_proto::session::v1 as pb;
use tokio::sync::watch;

use crate::checkpoints::Checkpoints;
use crate::events::EventLog;
use crate::permissions::Mode;
use crate::question::Questions;
use crate::store::{self, sessions::SessionRow, Store};
use crate::turn::TurnState;
use snowpea_session_core::workdir::check_workdir;
use snowpea_session_error::{Error, Result};
use snowpea_session_llm::provider::Providers;

/// Longest session title `session.rename` accepts, in characters.
pub const MAX_TITLE_CHARS: usize = 500;

pub(crate) mod ask_origin;
pub mod callers;
pub mod delegation;
pub mod origin;
pub mod prefs;
pub mod saved;
pub mod turn_guards;

/// Most concurrent subagents `session.create{maxConcurrent}` may ask for.
pub const MAX_CONCURRENT: i64 = 64;

/// True when `tag` looks like a BCP 47 language tag (`en`, `ko-KR`, `zh-Hant-TW`): a 2–3
/// letter language, then subtags of 1–8 letters or digits.
pub fn is_language_tag(tag: &str) -> bool {
    let mut parts = tag.split('-');
    let lang = parts.next().unwrap_or_default();
    (2..=3).contains(&lang.len())
        && lang.chars().all(|c| c.is_ascii_alphabetic())
        && parts.all(|p| (1..=8).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// Setting naming the mode a session starts in when `session.create` gives none.
pub const DEFAULT_MODE_SETTING: &str = "permissions.defaultMode";

/// One live session.
pub struct Session {
    /// The `s_…` id.
    pub id: String,
    pub(crate) row: Mutex<SessionRow>,
    pub(crate) turns: Mutex<TurnState>,
    /// Current origin connection id (it may have closed; see [`origin`]).
    pub(crate) origin: watch::Sender<Option<String>>,
    /// Tool calls a person allowed with scope `session` ([`Session::allow_key`]).
    pub(crate) allowed: Mutex<HashSet<String>>,
    /// True while no turn runs (waited on by `session.close`).
    pub(crate) idle: watch::Sender<bool>,
    /// Approvals of the session now pending (kept by [`crate::approval::Approvals`]).
    pending_approvals: AtomicUsize,
    /// Question batches of the session now pending (kept by [`crate::question::Questions`]).
    pending_questions: AtomicUsize,
    /// Where its tools run (`backend.set`, [`crate::backend::Backends`]); not persisted.
    backend: Mutex<Arc<dyn crate::backend::Backend>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Session {
    /// A live session from its row.
    pub fn new(row: SessionRow) -> Self {
        let origin = watch::channel(row.origin_connection_id.clone()).0;
        Session {
            id: row.id.clone(),
            row: Mutex::new(row),
            turns: Mutex::new(TurnState::default()),
            origin,
            allowed: Mutex::new(HashSet::new()),
            idle: watch::channel(true).0,
            pending_approvals: AtomicUsize::new(0),
            pending_questions: AtomicUsize::new(0),
            backend: Mutex::new(crate::backend::local()),
        }
    }

    /// Where the session's tools run (issue 23; `local` until `backend.set`).
    pub fn backend(&self) -> Arc<dyn crate::backend::Backend> {
        lock(&self.backend).clone()
    }

    /// Puts `backend` in place, returning the one it replaces (the caller closes it).
    pub(crate) fn replace_backend(
        &self,
        backend: Arc<dyn crate::backend::Backend>,
    ) -> Arc<dyn crate::backend::Backend> {
        std::mem::replace(&mut *lock(&self.backend), backend)
    }

    /// The directory tools work in: the backend's (`config.workdir`/`config.cwd`), else
    /// the session's workdir.
    pub fn tool_workdir(&self) -> PathBuf {
        self.backend().workdir().unwrap_or_else(|| self.workdir())
    }

    /// Records how many approvals of the session are pending (its `awaiting_approval` status).
    pub(crate) fn set_pending_approvals(&self, n: usize) {
        self.pending_approvals.store(n, Ordering::SeqCst);
    }

    /// Records how many question batches of the session are pending (its
    /// `awaiting_question` status, `session.list` `pendingQuestions`).
    pub(crate) fn set_pending_questions(&self, n: usize) {
        self.pending_questions.store(n, Ordering::SeqCst);
    }

    /// Question batches of the session now pending.
    pub fn pending_questions(&self) -> usize {
        self.pending_questions.load(Ordering::SeqCst)
    }

    /// Publishes `sessions.changed` with the session's status now.
    pub(crate) fn notify_changed(&self, log: &EventLog, reason: &str) {
        notify_changed(log, self, reason);
    }

    /// A copy of the persisted fields.
    pub fn row(&self) -> SessionRow {
        lock(&self.row).clone()
    }

    /// Changes the persisted fields (the caller saves them with [`Sessions::save`]).
    pub(crate) fn update<T>(&self, f: impl FnOnce(&mut SessionRow) -> T) -> T {
        f(&mut lock(&self.row))
    }

    /// The session's mode.
    pub fn mode(&self) -> Mode {
        Mode::parse(&lock(&self.row).mode).unwrap_or(Mode::Accept)
    }

    /// The session's `hostToolsFrom`.
    pub fn host_tools_from(&self) -> Option<String> {
        lock(&self.row).host_tools_from.clone()
    }

    /// The working directory.
    pub fn workdir(&self) -> PathBuf {
        PathBuf::from(&lock(&self.row).workdir)
    }

    /// The origin connection id, if one was ever bound.
    pub fn origin(&self) -> Option<String> {
        self.origin.borrow().clone()
    }

    pub(crate) fn turns(&self) -> MutexGuard<'_, TurnState> {
        lock(&self.turns)
    }

    /// Key of a `session`-scope allowance: tool, permission tag and whether the call
    /// leaves the workdir.
    pub(crate) fn allow_key(tool: &str, permission: &str, outside: bool) -> String {
        format!("{tool}\u{0}{permission}\u{0}{outside}")
    }

    pub(crate) fn is_allowed(&self, key: &str) -> bool {
        lock(&self.allowed).contains(key)
    }

    pub(crate) fn remember_allowed(&self, key: String) {
        lock(&self.allowed).insert(key);
    }
}

/// What the daemon itself sets on a session it creates (never a `session.create` param).
#[derive(Debug, Clone)]
pub struct SessionSetup {
    /// `chat` or `scheduled` ([`store::sessions::KIND_CHAT`], [`store::sessions::KIND_SCHEDULED`]).
    pub kind: &'static str,
    /// Named agent the session runs as.
    pub agent: Option<String>,
    /// The scheduled job the session runs.
    pub job_id: Option<String>,
    /// Seconds before an unanswered approval is denied (`None` or ≤ 0: the
    /// `approvals.timeoutSec` setting).
    pub approval_timeout_sec: Option<i64>,
    /// The session that spawned this one (a subagent's parent, issue 19).
    pub parent_session_id: Option<String>,
    /// The mode the agent definition the session runs as names (its `permission`): the
    /// starting mode (`params.mode`, else `permissions.defaultMode`) is narrowed to it,
    /// never widened ([`crate::permissions::Mode::narrower`]).
    pub definition_mode: Option<Mode>,
}

impl Default for SessionSetup {
    fn default() -> Self {
        SessionSetup {
            kind: store::sessions::KIND_CHAT,
            agent: None,
            job_id: None,
            approval_timeout_sec: None,
            parent_session_id: None,
            definition_mode: None,
        }
    }
}

impl Session {
    /// True for a scheduled job's unattended session: nobody watches it, so an approval
    /// that times out ends the turn (issue 5: the run ends `denied_by_timeout`).
    pub fn is_unattended(&self) -> bool {
        let row = lock(&self.row);
        // A named agent's own session is unattended too (issue 19).
        row.kind() == store::sessions::KIND_SCHEDULED || row.kind() == store::sessions::KIND_AGENT
    }
}

fn parse_mode(field: &str, mode: &str) -> Result<Mode> {
    Mode::parse(mode)
        .ok_or_else(|| Error::invalid(field, format!("must be plan, accept or auto, not {mode:?}")))
}

fn nonempty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// The live sessions, and the saved ones read from the `sessions` table: the lookup every
/// component shares ([`Sessions`] changes it; `Approvals` and `Tools` only read it).
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct Registry {
    live: Arc<Mutex<HashMap<String, Arc<Session>>>>,
    store: Store,
}

impl snowpea_session_skills::OpenWorkdirs for Registry {
    fn open_workdirs(&self) -> Vec<String> {
        self.all().iter().map(|s| s.row().workdir).collect()
    }
}

impl Registry {
    /// A registry of `saved` (the open sessions of the database) reading `store`.
    pub fn new(store: Store, saved: Vec<SessionRow>) -> Self {
        let live = saved
            .into_iter()
            .map(|row| (row.id.clone(), Arc::new(Session::new(row))))
            .collect();
        Registry {
            live: Arc::new(Mutex::new(live)),
            store,
        }
    }

    /// The live session `id`, or `not_found`.
    pub fn get(&self, id: &str) -> Result<Arc<Session>> {
        lock(&self.live)
            .get(id)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("no live session {id:?}")))
    }

    /// Every live session.
    pub fn all(&self) -> Vec<Arc<Session>> {
        lock(&self.live).values().cloned().collect()
    }

    /// The row of session `id`: the live copy (newer than the stored one while its writes
    /// are queued), else the saved one (closed sessions, after a restart), else `None`.
    pub async fn row(&self, id: &str) -> Result<Option<SessionRow>> {
        if let Ok(s) = self.get(id) {
            return Ok(Some(s.row()));
        }
        let id = id.to_owned();
        self.store
            .read("sessions.get", move |c| store::sessions::get(c, &id))
            .await
    }

    fn insert(&self, session: Arc<Session>) {
        lock(&self.live).insert(session.id.clone(), session);
    }

    fn remove(&self, id: &str) {
        lock(&self.live).remove(id);
    }
}

/// The session's status as `session.list` / `sessions.changed` report it: a pending
/// approval, then a pending question, then whether a turn runs.
pub(crate) fn status(session: &Session) -> &'static str {
    if session.pending_approvals.load(Ordering::SeqCst) > 0 {
        "awaiting_approval"
    } else if session.pending_questions() > 0 {
        "awaiting_question"
    } else if session.turns().running.is_some() {
        "running"
    } else {
        "idle"
    }
}

/// Publishes `sessions.changed` (after everything queued before it is committed).
pub(crate) fn notify_changed(log: &EventLog, session: &Session, reason: &str) {
    let row = session.row();
    let status = if row.closed_at.is_some() {
        "closed"
    } else {
        status(session)
    };
    log.publish(&pb::SessionsChangedNotification {
        session_id: session.id.clone(),
        reason: reason.to_owned(),
        status: Some(status.to_owned()),
        title: row.title.clone(),
        host_tools_from: row.host_tools_from.clone(),
        browser_provider: prefs::listed_browser_provider(&row),
    });
}

/// The `session.*` component: creates, lists, closes, renames, re-modes, attaches and
/// resumes sessions; owns the `sessions` table and the live [`Registry`].
pub struct Sessions {
    home: Home,
    store: Store,
    log: EventLog,
    hub: Arc<BusHub>,
    registry: Registry,
    questions: Arc<Questions>,
    checkpoints: Arc<Checkpoints>,
    providers: Providers,
    /// Called with the id of a session being closed (the agents component interrupts its
    /// children; issue 19).
    on_close: std::sync::OnceLock<CloseHook>,
    /// Announces every `session.create` / `session.resume` ([`Sessions::subscribe_opened`]).
    opened: tokio::sync::broadcast::Sender<Opened>,
    /// The host tools of the connections (`session.attach` reports the session's; issue 21).
    hosts: Option<Arc<crate::host_tools::Hosts>>,
}

/// A session a client just created or resumed (the command registry answers it with that
/// workdir's `commands.changed`).
#[derive(Debug, Clone)]
pub struct Opened {
    /// The session.
    pub session_id: String,
    /// The session's workdir.
    pub workdir: PathBuf,
    /// The connection that asked (`None` for the daemon's own sessions).
    pub connection_id: Option<String>,
    /// `session.create` or `session.resume`.
    pub reason: &'static str,
}

/// A hook [`Sessions::close`] calls with the session id.
pub type CloseHook = Box<dyn Fn(&str) + Send + Sync>;

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

impl Sessions {
    /// The component over `registry`, writing through `log`, counting `approvals`; a closed
    /// session's pending questions are declined ([`Questions::interrupt_session`]), a
    /// deleted session's checkpoints go with it ([`Checkpoints::delete_session`]);
    /// `providers` says which vendors `session.create{provider, model}` may name.
    #[allow(clippy::too_many_arguments)] // one per peer, built once in App::open
    pub fn new(
        home: Home,
        store: Store,
        log: EventLog,
        hub: Arc<BusHub>,
        registry: Registry,
        questions: Arc<Questions>,
        checkpoints: Arc<Checkpoints>,
        providers: Providers,
    ) -> Self {
        Sessions {
            home,
            store,
            log,
            hub,
            registry,
            questions,
            checkpoints,
            providers,
            on_close: std::sync::OnceLock::new(),
            opened: tokio::sync::broadcast::channel(64).0,
            hosts: None,
        }
    }

    /// Every `session.create` / `session.resume` from now on (a slow reader loses the oldest).
    pub fn subscribe_opened(&self) -> tokio::sync::broadcast::Receiver<Opened> {
        self.opened.subscribe()
    }

    /// The bus hub (for a notification to one connection).
    pub(crate) fn hub(&self) -> &Arc<BusHub> {
        &self.hub
    }

    fn announce_opened(
        &self,
        session_id: &str,
        workdir: PathBuf,
        ctx: &CallContext,
        reason: &'static str,
    ) {
        let _ = self.opened.send(Opened {
            session_id: session_id.to_owned(),
            workdir,
            connection_id: ctx.connection_id.clone(),
            reason,
        });
    }

    /// Sets the hook `session.close` calls first (once; a second call is ignored).
    pub fn on_close(&self, hook: CloseHook) {
        let _ = self.on_close.set(hook);
    }

    /// The component reporting the host tools of `hosts` in `session.attach`.
    pub fn with_hosts(mut self, hosts: Arc<crate::host_tools::Hosts>) -> Self {
        self.hosts = Some(hosts);
        self
    }

    /// Names of the host tools `session` sees now (its host's, [`crate::host_tools::Hosts::host_of`]).
    fn host_tool_names(&self, session: &Session) -> Vec<String> {
        self.hosts
            .as_ref()
            .and_then(|h| h.host_of(&self.hub, session))
            .map(|(_, host)| host.tools.into_keys().collect())
            .unwrap_or_default()
    }

    /// The live session `id`, or `not_found`.
    pub fn get(&self, id: &str) -> Result<Arc<Session>> {
        self.registry.get(id)
    }

    /// The question batches of the sessions (`session.interrupt` declines a session's).
    pub fn questions(&self) -> &Questions {
        &self.questions
    }

    /// The shared lookup of sessions.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Queues a write of the session's row (committed in order with its events).
    pub(crate) fn save(&self, session: &Session) {
        let row = session.row();
        self.log
            .write_later(move |c| store::sessions::save(c, &row));
    }

    /// The session's status as `session.list` / `sessions.changed` report it.
    pub(crate) fn status(&self, session: &Session) -> &'static str {
        status(session)
    }

    /// Publishes `sessions.changed` (after everything queued before it is committed).
    pub(crate) fn changed(&self, session: &Session, reason: &str) {
        notify_changed(&self.log, session, reason);
    }

    /// `session.create`: a `chat` session.
    pub async fn create(
        &self,
        ctx: &CallContext,
        p: pb::SessionCreateParams,
    ) -> Result<pb::SessionCreateResult> {
        self.create_with(ctx, p, SessionSetup::default()).await
    }

    /// Creates a session from `session.create` params plus what only the daemon sets
    /// (kind, agent, job, approval timeout; see [`SessionSetup`]).
    pub async fn create_with(
        &self,
        ctx: &CallContext,
        p: pb::SessionCreateParams,
        setup: SessionSetup,
    ) -> Result<pb::SessionCreateResult> {
        let workdir = check_workdir(&p.workdir)?;
        let settings = snowpea_common::settings::load_effective(&self.home, Some(&workdir))
            .unwrap_or_else(|e| {
                tracing::warn!(error = %format!("{e:#}"), "unreadable settings; using defaults");
                json!({})
            });
        let mode = match nonempty(p.mode) {
            Some(m) => parse_mode("params.mode", &m)?,
            None => snowpea_common::settings::get(&settings, DEFAULT_MODE_SETTING)
                .and_then(Value::as_str)
                .and_then(Mode::parse)
                .unwrap_or(Mode::Accept),
        };
        let mode = setup.definition_mode.map_or(mode, |m| mode.narrower(m));
        let pin = snowpea_session_llm::routing::check_create(
            &settings,
            nonempty(p.provider),
            nonempty(p.model),
            &|v| self.providers.is_configured(&settings, v),
        )?;
        let effort = match nonempty(p.effort) {
            Some(e) => Some(snowpea_session_llm::effort::parse(&e).ok_or_else(|| {
                Error::invalid(
                    "params.effort",
                    format!("must be low, medium, high, max or null, not {e:?}"),
                )
            })?),
            None => None,
        };
        if let Some(n) = p.max_concurrent {
            if !(1..=MAX_CONCURRENT).contains(&n) {
                return Err(Error::invalid(
                    "params.maxConcurrent",
                    format!("must be between 1 and {MAX_CONCURRENT}, got {n}"),
                ));
            }
        }
        let browser = ctx.client_kind.as_deref() == Some(callers::BROWSER);
        let id = snowpea_common::ids::new_id("s");
        let date = jiff::Timestamp::now().strftime("%Y-%m-%d").to_string();
        let workspace = self.home.sessions_dir().join(format!("{date}_{id}"));
        for sub in ["tmp", "artifacts"] {
            // Owner-only like the rest of the home (a session's files are its user's).
            std::os::unix::fs::DirBuilderExt::mode(
                std::fs::DirBuilder::new().recursive(true),
                0o700,
            )
            .create(workspace.join(sub))
            .map_err(|e| Error::Internal(anyhow::anyhow!("create {}: {e}", workspace.display())))?;
        }
        let row = SessionRow {
            id: id.clone(),
            workdir: workdir.to_string_lossy().into_owned(),
            workspace_dir: workspace.to_string_lossy().into_owned(),
            mode: mode.as_str().to_owned(),
            provider: pin.vendor,
            model: pin.model,
            effort: effort.map(str::to_owned),
            max_concurrent: p.max_concurrent,
            locale: nonempty(p.locale).filter(|l| is_language_tag(l)),
            browser_memory: Some(p.browser_memory.unwrap_or(browser)),
            deny_exec: p.deny_exec.unwrap_or(false),
            host_tools_from: nonempty(p.host_tools_from).or_else(|| ctx.client_id.clone()),
            origin_surface: nonempty(p.origin_surface),
            origin_client_id: ctx.client_id.clone(),
            origin_client_kind: ctx.client_kind.clone(),
            origin_connection_id: ctx.connection_id.clone(),
            created_at: now_iso(),
            kind: setup.kind.to_owned(),
            agent: setup.agent,
            job_id: setup.job_id,
            approval_timeout_sec: setup.approval_timeout_sec.filter(|s| *s > 0),
            parent_session_id: setup.parent_session_id,
            ..Default::default()
        };
        let saved = row.clone();
        self.log
            .write(move |c| store::sessions::save(c, &saved))
            .await?;
        let session = Arc::new(Session::new(row));
        self.registry.insert(session.clone());
        self.changed(&session, "create");
        self.announce_opened(&id, workdir.clone(), ctx, "session.create");
        tracing::info!(session_id = %id, workdir = %workdir.display(), mode = mode.as_str(), kind = setup.kind, "session created");
        Ok(pb::SessionCreateResult {
            delegation: session
                .row()
                .delegation
                .unwrap_or_else(|| delegation::by_default(&settings)),
            session_id: id,
            workspace_dir: Some(workspace.to_string_lossy().into_owned()),
        })
    }

    /// Re-opens a saved session under its id (a named agent's after it was closed; issue 19).
    pub async fn reopen(&self, mut row: SessionRow) -> Result<()> {
        row.closed_at = None;
        let saved = row.clone();
        self.log
            .write(move |c| store::sessions::save(c, &saved))
            .await?;
        let session = Arc::new(Session::new(row));
        self.registry.insert(session.clone());
        self.changed(&session, "create");
        Ok(())
    }

    /// `session.list`.
    pub async fn list(&self, p: pb::SessionListParams) -> Result<pb::SessionListResult> {
        // An empty `kinds` (or none) means every kind.
        let kinds: HashSet<&str> = p.kinds.iter().map(|k| k.trim()).collect();
        let workdir = nonempty(p.workdir).map(|w| {
            std::fs::canonicalize(&w)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or(w)
        });
        let include_closed = p.include_closed;
        let rows = self
            .store
            .read("session.list", move |c| {
                store::sessions::list(c, include_closed)
            })
            .await?;
        let host_filter = nonempty(p.host_tools_from);
        let mut out = Vec::new();
        for stored in rows {
            if workdir.as_ref().is_some_and(|w| *w != stored.workdir)
                || (!kinds.is_empty() && !kinds.contains(stored.kind()))
            {
                continue;
            }
            let live = self.registry.get(&stored.id).ok();
            // The live copy is newer than the stored one (its writes may still be queued).
            let row = live.as_ref().map(|s| s.row()).unwrap_or(stored);
            if let Some(h) = &host_filter {
                let unhosted_ok = p.include_unhosted && row.host_tools_from.is_none();
                if row.host_tools_from.as_deref() != Some(h.as_str()) && !unhosted_ok {
                    continue;
                }
            }
            let seq = self.log.last_seq(&row.id).await?;
            let (running, turn_started_at, status) = match &live {
                Some(s) if row.closed_at.is_none() => {
                    let started = s.turns().running.as_ref().map(|t| t.started_at.clone());
                    (started.is_some(), started, self.status(s).to_owned())
                }
                _ => (false, None, "idle".to_owned()),
            };
            out.push(pb::SessionSummary {
                context_used: row.context_used,
                context_window: row.context_window,
                created_at: row.created_at.clone(),
                host_tools_from: row.host_tools_from.clone(),
                kind: row.kind().to_owned(),
                agent: row.agent.clone(),
                job_id: row.job_id.clone(),
                last_activity_at: row.last_activity_at.clone(),
                last_prompt: row.last_prompt.as_deref().map(clip_prompt),
                mode: row.mode.clone(),
                model: row.model_in_use.clone().or(row.model.clone()),
                origin_surface: row.origin_surface.clone(),
                pending_approvals: live
                    .as_ref()
                    .map_or(0, |s| s.pending_approvals.load(Ordering::SeqCst))
                    as i64,
                pending_questions: live.as_ref().map_or(0, |s| s.pending_questions()) as i64,
                provider: row.provider_in_use.clone().or(row.provider.clone()),
                running,
                seq,
                session_id: row.id.clone(),
                status,
                title: row.title.clone(),
                turn_started_at,
                workdir: row.workdir.clone(),
                workspace_dir: Some(row.workspace_dir.clone()),
                browser_provider: prefs::listed_browser_provider(&row),
                effort: row.effort.clone(),
                parent_session_id: row.parent_session_id.clone(),
            });
        }
        Ok(pb::SessionListResult { sessions: out })
    }

    /// `session.close`: ends a running turn (interrupted), drops queued prompts, marks
    /// the session closed and removes it from the live registry. Closing a closed
    /// session is a no-op; an unknown one is `not_found`.
    pub async fn close(&self, id: &str) -> Result<()> {
        let Ok(session) = self.get(id) else {
            return match self.registry.row(id).await? {
                Some(_) => Ok(()),
                None => Err(Error::NotFound(format!("no session {id:?}"))),
            };
        };
        if let Some(hook) = self.on_close.get() {
            hook(id);
        }
        crate::turn::stop_turns(&self.log, &session, true);
        self.questions.interrupt_session(id);
        crate::turn::wait_idle(&session, std::time::Duration::from_secs(10)).await;
        session.update(|r| {
            r.closed_at = Some(now_iso());
            r.last_activity_at = Some(now_iso());
        });
        self.save(&session);
        self.registry.remove(id);
        // Its ssh connection or container goes with it (issue 23).
        session
            .replace_backend(crate::backend::local())
            .close()
            .await;
        self.changed(&session, "close");
        self.log.flush().await?;
        tracing::info!(session_id = %id, "session closed");
        Ok(())
    }

    /// `session.rename` (an empty title clears it).
    pub async fn rename(&self, id: &str, title: &str) -> Result<()> {
        // Titles are shown in lists: a cap keeps one client from making session.list huge.
        if title.chars().count() > MAX_TITLE_CHARS {
            return Err(Error::invalid(
                "params.title",
                format!("is longer than {MAX_TITLE_CHARS} characters"),
            ));
        }
        let session = self.get(id)?;
        let title = Some(title.trim().to_owned()).filter(|t| !t.is_empty());
        session.update(|r| r.title = title);
        self.save(&session);
        self.changed(&session, "renamed");
        self.log.flush().await?;
        Ok(())
    }

    /// `session.setMode`: persists the mode, emits `mode.changed` and `sessions.changed`.
    pub async fn set_mode(&self, id: &str, mode: &str) -> Result<Mode> {
        let mode = parse_mode("params.mode", mode)?;
        let session = self.get(id)?;
        session.update(|r| r.mode = mode.as_str().to_owned());
        self.save(&session);
        self.log
            .event_to_committed(
                &session,
                &pb::ModeChangedEvent {
                    mode: mode.as_str().to_owned(),
                    ..Default::default()
                },
            )
            .await?;
        self.changed(&session, "mode");
        Ok(mode)
    }

    /// `session.attach`: the calling connection becomes the session's origin.
    pub async fn attach(
        &self,
        ctx: &CallContext,
        p: pb::SessionAttachParams,
    ) -> Result<pb::SessionAttachResult> {
        let session = self.get(&p.session_id)?;
        let Some(conn) = ctx.connection_id.clone() else {
            return Err(Error::invalid(
                "params.sessionId",
                "session.attach needs a client connection",
            ));
        };
        if let Some(host) = nonempty(p.host_tools_from) {
            let ok = self.hub.connections().iter().any(|c| {
                c.client_id.as_deref() == Some(host.as_str())
                    && c.client_kind.as_deref() == Some("browser")
            });
            if !ok {
                return Err(Error::invalid(
                    "params.hostToolsFrom",
                    format!("{host:?} is not an open browser connection"),
                ));
            }
            session.update(|r| r.host_tools_from = Some(host));
            self.changed(&session, "host");
        }
        // A locale that is not a language tag is ignored (spec session.create{locale}).
        if let Some(locale) = nonempty(p.locale).filter(|l| is_language_tag(l)) {
            session.update(|r| r.locale = Some(locale));
        }
        self.bind_origin(&session, conn, ctx.client_id.clone());
        self.log.flush().await?;
        Ok(pb::SessionAttachResult {
            host_tools: self.host_tool_names(&session),
            host_tools_from: session.host_tools_from(),
            session_id: session.id.clone(),
        })
    }

    /// `session.resume` from a client: [`Sessions::resume`], then the command table of the
    /// session's workdir goes to the caller as `commands.changed{reason:"session.resume"}`.
    pub async fn resume_from(
        &self,
        ctx: &CallContext,
        p: pb::SessionResumeParams,
    ) -> Result<pb::SessionResumeResult> {
        let r = self.resume(p).await?;
        if let Some(row) = self.registry.row(&r.session_id).await? {
            self.announce_opened(&row.id, PathBuf::from(row.workdir), ctx, "session.resume");
        }
        Ok(r)
    }

    /// `session.resume`: the events after `afterSeq` from the database (also for closed
    /// sessions and after a restart), with the session's mode, provider and model.
    pub async fn resume(&self, p: pb::SessionResumeParams) -> Result<pb::SessionResumeResult> {
        let id = p.session_id.as_str();
        let row = self
            .registry
            .row(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("no session {id:?}")))?;
        let after = p.after_seq.unwrap_or(0);
        if after < 0 {
            return Err(Error::invalid("params.afterSeq", "must not be negative"));
        }
        let events = self
            .log
            .after(id, after)
            .await?
            .into_iter()
            .map(|e| e.to_proto())
            .collect();
        let delegation = row.delegation.unwrap_or_else(|| {
            delegation::by_default(
                &snowpea_common::settings::load_effective(
                    &self.home,
                    Some(Path::new(&row.workdir)),
                )
                .unwrap_or_default(),
            )
        });
        Ok(pb::SessionResumeResult {
            delegation,
            effort: row.effort.clone(),
            events,
            mode: Some(row.mode.clone()),
            model: row.model_in_use.clone().or(row.model.clone()),
            provider: row.provider_in_use.clone().or(row.provider.clone()),
            session_id: row.id,
        })
    }

    /// `DeleteSessions` (svc-scheduler, issue 5): closes and deletes the saved session `id`
    /// with its events, turns, workspace and checkpoints. Returns false when there is no such
    /// session.
    pub async fn delete(&self, id: &str) -> Result<bool> {
        self.delete_with(id, true).await
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;

/// Most characters of `lastPrompt` a session listing carries (a prompt can be megabytes).
pub const LAST_PROMPT_CHARS: usize = 500;

/// `text` cut to [`LAST_PROMPT_CHARS`] characters, with `…` when cut.
pub fn clip_prompt(text: &str) -> String {
    match text.char_indices().nth(LAST_PROMPT_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

//! The [`Teams`] component (issue 19 part B; protocol 1.25.0 "team.start", "team.status",
//! "team.guide.*", the `team.task.update` event and the `teams.changed` notification;
//! upstream-behaviour §4 "team.start", "Team guides").
//!
//! * `team.start{sessionId, n, task}` answers `{teamId}` (`tm` + 8 hex) at once after the
//!   setup checks (`not_found` for an unknown session; `invalid_params` naming
//!   `params.task` or `params.sessionId` when the session's workdir is not in a git
//!   repository with a commit); `n` is clamped to 1–16. In the background
//!   ([`run`]): a planner call ([`planner`]) returns at most 24 tasks with dependencies;
//!   each worker gets a worktree `<top>/.snowpea/worktrees/<teamId>-<k>` on the branch
//!   `snowpea/team-<teamId>-<k>` ([`worktrees`]); workers claim tasks whose dependencies
//!   are merged (one SQLite transaction, [`crate::store::teams::claim`]), run each through a
//!   [`TaskRunner`] in their worktree, commit, and the lead merges with
//!   `git merge --no-ff` ([`merge`]). A conflict captures the hunks, marks the task
//!   `conflict` and re-queues it to the same worker, which merges the lead's `HEAD` into its
//!   branch and asks its agent to resolve the markers; after `team.maxConflictRetries` (2)
//!   the task is `failed` and so is every task depending on it.
//! * The planner is told the `default` team's guide (persona and routing rules; project
//!   before global) when there is one.
//! * Every state change is a `team.task.update` event on the lead's session.
//! * Worktrees and branches are removed when the team ends, when it is interrupted
//!   (`session.interrupt` / `session.close` of the lead), and — for a team a killed
//!   svc-session left `running` — at the next start ([`Teams::recover`]).
//! * `team.guide.*` read and write the guide files ([`guides`]) and publish
//!   `teams.changed{reason, team}`.
//!
//! Git is the `git` binary run by argv (docs/ARCHITECTURE.md "svc-session components").
//! Tables: `teams`, `team_tasks` ([`crate::store::teams`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use snowpea_common::context::CallContext;
use snowpea_common::home::Home;
use snowpea_proto::rpc::v1::OkResult;
use snowpea_proto::session::v1 as pb;
use tokio_util::sync::CancellationToken;

use crate::events::EventLog;
use crate::session::Sessions;
use crate::store::teams::{self as table, TaskRow, TeamRow};
use crate::store::Store;
use snowpea_session_error::{Error, Result};
use snowpea_session_llm::provider::Providers;
use snowpea_session_skills::{Kind, Skills};

pub mod guides;
pub mod list;
pub mod merge;
pub mod planner;
mod run;
pub mod runner;
pub mod worktrees;

pub use runner::{SubagentTaskRunner, TaskResult, TaskRunner, TaskSpec};

/// `taskId` of the row `team.status` shows for a team that ended before it had a board.
pub const PLAN_TASK_ID: &str = "plan";
/// Most workers of one team (`n` is clamped to 1–16).
pub const MAX_WORKERS: i64 = 16;
/// `team.workers` when the settings do not say (`/team <task>` without `--workers`).
pub const DEFAULT_WORKERS: i64 = 3;
/// `team.maxConflictRetries` when the settings do not say.
pub const DEFAULT_CONFLICT_RETRIES: i64 = 2;
/// `team.taskTimeoutSec` when the settings do not say: longest one task may run.
pub const DEFAULT_TASK_TIMEOUT_SEC: u64 = 1800;

/// A team running in this process.
#[derive(Debug, Clone)]
struct Live {
    session_id: String,
    cancel: CancellationToken,
}

/// The teams component.
pub struct Teams {
    home: Home,
    store: Store,
    log: EventLog,
    sessions: Arc<Sessions>,
    providers: Providers,
    skills: Arc<Skills>,
    runner: Arc<dyn TaskRunner>,
    live: Mutex<HashMap<String, Live>>,
    /// Serialises merges into a lead repository (two teams may share one).
    merging: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Teams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Teams").finish_non_exhaustive()
    }
}

/// Knobs of one team, read from the effective settings when it starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Knobs {
    pub max_conflict_retries: i64,
    pub task_timeout: std::time::Duration,
}

fn knobs(settings: &serde_json::Value) -> Knobs {
    let get = |k: &str| snowpea_common::settings::get(settings, k).and_then(|v| v.as_u64());
    Knobs {
        max_conflict_retries: get("team.maxConflictRetries")
            .map(|n| n.min(10) as i64)
            .unwrap_or(DEFAULT_CONFLICT_RETRIES),
        task_timeout: std::time::Duration::from_secs(
            get("team.taskTimeoutSec")
                .filter(|s| *s > 0)
                .unwrap_or(DEFAULT_TASK_TIMEOUT_SEC),
        ),
    }
}

fn nonempty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

impl Teams {
    /// The component: boards in `store`/`log`, lead sessions from `sessions`, the planner
    /// on `providers`, agent definitions (a rule's `known`) from `skills`, tasks run by
    /// `runner`.
    pub fn new(
        home: Home,
        store: Store,
        log: EventLog,
        sessions: Arc<Sessions>,
        providers: Providers,
        skills: Arc<Skills>,
        runner: Arc<dyn TaskRunner>,
    ) -> Self {
        Teams {
            home,
            store,
            log,
            sessions,
            providers,
            skills,
            runner,
            live: Mutex::new(HashMap::new()),
            merging: tokio::sync::Mutex::new(()),
        }
    }

    /// Workers of a `/team <task>` without `--workers`: the setting `team.workers`, else
    /// [`DEFAULT_WORKERS`].
    pub fn default_workers(&self, workdir: &std::path::Path) -> i64 {
        let settings =
            snowpea_common::settings::load_effective(&self.home, Some(workdir)).unwrap_or_default();
        snowpea_common::settings::get(&settings, "team.workers")
            .and_then(|v| v.as_i64())
            .unwrap_or(DEFAULT_WORKERS)
            .clamp(1, MAX_WORKERS)
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, Live>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `team.start{sessionId, n, task}` (see the module doc). `ctx` is unused beyond
    /// logging; the team works for the session, whoever asked.
    ///
    /// Limits: `n` (the maximum number of parallel workers) is clamped to 1–[`MAX_WORKERS`]
    /// (16) without an error — `n ≤ 0` runs one worker, `n > 16` runs sixteen — and
    /// `team.status.workers` reports the clamped value; no more workers start than the plan
    /// has tasks (at most [`planner::MAX_TASKS`]). `task` is 1–32,768 characters
    /// (`invalid_params` on `params.task` otherwise). The setting `team.workers` (the
    /// default of `/team`) is clamped the same way.
    pub async fn start(
        self: &Arc<Self>,
        _ctx: &CallContext,
        p: pb::TeamStartParams,
    ) -> Result<pb::TeamStartResult> {
        let session = self.sessions.get(&p.session_id)?;
        let task = p.task.trim().to_owned();
        if task.is_empty() {
            return Err(Error::invalid("params.task", "must not be empty"));
        }
        if task.chars().count() > crate::agents::spawn::MAX_TASK_CHARS {
            return Err(Error::invalid(
                "params.task",
                format!(
                    "must be at most {} characters",
                    crate::agents::spawn::MAX_TASK_CHARS
                ),
            ));
        }
        let workers = p.n.clamp(1, MAX_WORKERS);
        let workdir = session.workdir();
        let top = worktrees::repository(&workdir).await.map_err(|why| {
            Error::invalid(
                "params.sessionId",
                format!("a team needs a git repository: the session's workdir {why}"),
            )
        })?;
        let settings = snowpea_common::settings::load_effective(&self.home, Some(&workdir))
            .unwrap_or_default();
        let knobs = knobs(&settings);
        let id = format!("tm{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let row = TeamRow {
            id: id.clone(),
            session_id: session.id.clone(),
            workdir: top.to_string_lossy().into_owned(),
            task: task.clone(),
            workers,
            state: "running".into(),
            created_at: snowpea_common::time::now_iso(),
            ..Default::default()
        };
        let saved = row.clone();
        self.log
            .write(move |c| table::insert_team(c, &saved))
            .await?;
        let cancel = CancellationToken::new();
        self.live().insert(
            id.clone(),
            Live {
                session_id: session.id.clone(),
                cancel: cancel.clone(),
            },
        );
        tracing::info!(team_id = %id, session_id = %session.id, workers, top = %top.display(), "team started");
        let me = self.clone();
        let live_id = id.clone();
        tokio::spawn(async move {
            run::Team::new(me.clone(), row, knobs, cancel).run().await;
            me.live().remove(&live_id);
        });
        Ok(pb::TeamStartResult { team_id: id })
    }

    /// `team.status{teamId?}`: the board of the team (the most recent one when `teamId`
    /// is empty); `not_found` when there is none.
    ///
    /// Why a `failed` (or `interrupted`) team ended is in its tasks' `note` — the failing
    /// task's error, `depends on failed task <id>` for its dependants. A team that ended
    /// before it had a board (no plan, its session gone, interrupted while planning) has no
    /// task to carry it, so its board is one row [`PLAN_TASK_ID`] `failed` whose `note` is the
    /// reason (the spec's `team.status` has no top-level reason field; `note` is the closest).
    pub async fn status(&self, p: pb::TeamStatusParams) -> Result<pb::TeamStatusResult> {
        self.log.flush().await?;
        let id = p.team_id.trim().to_owned();
        let team = self
            .store
            .read("team.status", move |c| {
                if id.is_empty() {
                    table::latest(c)
                } else {
                    table::team(c, &id)
                }
            })
            .await?
            .ok_or_else(|| match p.team_id.trim() {
                "" => Error::NotFound("no team has been started".into()),
                id => Error::NotFound(format!("no team {id:?}")),
            })?;
        let tid = team.id.clone();
        let tasks = self
            .store
            .read("team.status", move |c| table::tasks(c, &tid))
            .await?;
        let wts = worktrees::list(std::path::Path::new(&team.workdir), &team.id).await;
        let mut board: Vec<_> = tasks.iter().map(task_pb).collect();
        if board.is_empty() && matches!(team.state.as_str(), "failed" | "interrupted") {
            board.push(pb::team_status_result::Task {
                task_id: PLAN_TASK_ID.into(),
                title: "Plan the team's tasks".into(),
                status: "failed".into(),
                note: if team.note.is_empty() {
                    format!("the team {} before it had a plan", team.state)
                } else {
                    team.note.clone()
                },
                ..Default::default()
            });
        }
        Ok(pb::TeamStatusResult {
            state: team.state,
            task: team.task,
            tasks: board,
            team_id: team.id,
            workers: team.workers,
            worktrees: wts,
        })
    }

    /// Interrupts every team of session `session_id` running here (its workers' children
    /// are interrupted, the team ends `interrupted`, its worktrees and branches are
    /// removed). Called on `session.interrupt` and `session.close` of the lead.
    pub fn interrupt_session(&self, session_id: &str) {
        for (id, l) in self.live().iter() {
            if l.session_id == session_id {
                tracing::info!(team_id = %id, session_id, "interrupting team");
                l.cancel.cancel();
            }
        }
    }

    /// The teams a previous svc-session left `running` (read at start-up, before anything
    /// is served, so a team started by this process is never among them).
    pub async fn dead(&self) -> Result<Vec<TeamRow>> {
        self.store.read("team.recover", table::running).await
    }

    /// Ends the `dead` teams: removes their worktrees and branches, marks unfinished tasks
    /// `failed` and the team `interrupted`, closes the children it had running. Runs once
    /// at start-up (in the background).
    pub async fn recover(self: &Arc<Self>, dead: Vec<TeamRow>) -> Result<()> {
        for team in dead {
            tracing::info!(team_id = %team.id, "cleaning up a team a previous svc-session left running");
            worktrees::cleanup(std::path::Path::new(&team.workdir), &team.id).await;
            let tid = team.id.clone();
            let tasks = self
                .store
                .read("team.recover", move |c| table::tasks(c, &tid))
                .await?;
            for mut t in tasks.into_iter().filter(|t| !table::is_terminal(&t.status)) {
                if let Some(child) = t.child_session_id.clone() {
                    if self.sessions.get(&child).is_ok() {
                        let _ = self.sessions.close(&child).await;
                    }
                }
                t.status = "failed".into();
                t.note = "svc-session restarted while the team was running".into();
                self.save_task(&team, &t);
            }
            let id = team.id.clone();
            self.log
                .write(move |c| {
                    table::set_state(
                        c,
                        &id,
                        "interrupted",
                        "svc-session restarted while the team was running",
                    )
                })
                .await?;
        }
        Ok(())
    }

    /// Saves `t` and emits its `team.task.update` on the lead's session (committed in
    /// that order).
    pub(crate) fn save_task(&self, team: &TeamRow, t: &TaskRow) {
        let row = t.clone();
        self.log.write_later(move |c| table::save_task(c, &row));
        self.emit(team, t);
    }

    /// The `team.task.update` of `t` on the lead's session.
    pub(crate) fn emit(&self, team: &TeamRow, t: &TaskRow) {
        let host = self
            .sessions
            .get(&team.session_id)
            .ok()
            .and_then(|s| s.host_tools_from());
        self.log.event(
            &team.session_id,
            host,
            &pb::TeamTaskUpdateEvent {
                agent_n: t.agent_n,
                assignee: t.assignee.clone(),
                retries: t.retries,
                status: t.status.clone(),
                task_id: t.task_id.clone(),
                team_id: t.team_id.clone(),
                ..Default::default()
            },
            &[],
        );
    }

    // ---- team.guide.* ----

    /// The project folder a guide call refers to: `params.workdir`, else the session's
    /// workdir, else none (global guides only).
    fn guide_workdir(
        &self,
        workdir: Option<String>,
        session_id: Option<String>,
    ) -> Result<Option<PathBuf>> {
        if let Some(w) = nonempty(workdir) {
            let p = PathBuf::from(&w);
            if !p.is_absolute() {
                return Err(Error::invalid("params.workdir", "must be an absolute path"));
            }
            let p = std::fs::canonicalize(&p).map_err(|e| {
                Error::invalid("params.workdir", format!("{w:?} is not a folder: {e}"))
            })?;
            if !p.is_dir() {
                return Err(Error::invalid(
                    "params.workdir",
                    format!("{w:?} is not a folder"),
                ));
            }
            return Ok(Some(p));
        }
        match nonempty(session_id) {
            Some(sid) => Ok(Some(self.sessions.get(&sid)?.workdir())),
            None => Ok(None),
        }
    }

    fn check_team(team: &str) -> Result<String> {
        let t = team.trim();
        guides::check_team(t).map_err(|e| Error::invalid("params.team", e))?;
        Ok(t.to_owned())
    }

    fn known(&self, workdir: Option<&std::path::Path>) -> impl Fn(&str) -> bool {
        let agents: std::collections::HashSet<String> = self
            .skills
            .catalog(workdir)
            .into_iter()
            .filter(|e| e.kind == Kind::Agent && e.error.is_none())
            .map(|e| e.name)
            .collect();
        move |name: &str| agents.contains(name)
    }

    /// The guide of `team` visible from `workdir` (project wins), with its source and file.
    fn find_guide(
        &self,
        workdir: Option<&std::path::Path>,
        team: &str,
    ) -> Option<(&'static str, PathBuf, guides::Guide)> {
        let project = workdir.map(|w| ("project", guides::project_file(w, team)));
        let global = Some(("global", guides::global_file(self.home.root(), team)));
        [project, global]
            .into_iter()
            .flatten()
            .find_map(|(src, path)| {
                let text = std::fs::read_to_string(&path).ok()?;
                Some((src, path, guides::parse(&text)))
            })
    }

    /// `team.guide.get{sessionId?, team?, workdir?}`: the guide of `team` (default: the
    /// `default` team), project before global; `guide: null` when there is none.
    pub async fn guide_get(&self, p: pb::TeamGuideGetParams) -> Result<pb::TeamGuideGetResult> {
        let workdir = self.guide_workdir(p.workdir, p.session_id)?;
        let team = match nonempty(p.team) {
            Some(t) => Self::check_team(&t)?,
            None => guides::DEFAULT_TEAM.to_owned(),
        };
        let known = self.known(workdir.as_deref());
        let guide = self
            .find_guide(workdir.as_deref(), &team)
            .map(|(src, path, g)| guides::to_pb(&team, src, &path, &g, &known));
        Ok(pb::TeamGuideGetResult {
            effective_team: team,
            guide,
        })
    }

    /// `team.guide.list{sessionId?, workdir?}`: every visible guide, sorted by team; a
    /// project guide hides the global one of the same team.
    pub async fn guide_list(&self, p: pb::TeamGuideListParams) -> Result<pb::TeamGuideListResult> {
        let workdir = self.guide_workdir(p.workdir, p.session_id)?;
        let mut names = guides::names_in(&self.home.root().join("teams"));
        if let Some(w) = &workdir {
            names.extend(guides::names_in(&w.join(".snowpea").join("teams")));
        }
        names.sort();
        names.dedup();
        let known = self.known(workdir.as_deref());
        let out = names
            .iter()
            .filter_map(|team| {
                let (src, path, g) = self.find_guide(workdir.as_deref(), team)?;
                Some(guides::to_pb(team, src, &path, &g, &known))
            })
            .collect();
        Ok(pb::TeamGuideListResult { guides: out })
    }

    /// `team.guide.set{team, scope, persona, routing, description?, workdir?, sessionId?}`:
    /// writes the guide (0600) and publishes `teams.changed{reason:"set"}`.
    pub async fn guide_set(&self, p: pb::TeamGuideSetParams) -> Result<pb::TeamGuideSetResult> {
        let team = Self::check_team(&p.team)?;
        let workdir = self.guide_workdir(p.workdir, p.session_id)?;
        let guide = guides::Guide {
            description: p.description.unwrap_or_default().trim().to_owned(),
            persona: p.persona.trim().to_owned(),
            routing: p
                .routing
                .into_iter()
                .map(|r| (r.when.trim().to_owned(), r.agent.trim().to_owned()))
                .collect(),
        };
        guides::check(&guide).map_err(|(field, why)| Error::invalid(&field, why))?;
        let (source, path) = self.scope_file(&p.scope, workdir.as_deref(), &team)?;
        let text = guides::render(&guide);
        let write_path = path.clone();
        snowpea_common::db::blocking("team.guide.set", move || guides::write(&write_path, &text))
            .await
            .map_err(|e| Error::Internal(anyhow::anyhow!("{e}")))?
            .map_err(Error::Internal)?;
        self.changed("set", &team);
        let known = self.known(workdir.as_deref());
        Ok(pb::TeamGuideSetResult {
            guide: Some(guides::to_pb(&team, source, &path, &guide, &known)),
        })
    }

    /// `team.guide.delete{team, scope, workdir?, sessionId?}`: deletes that copy;
    /// `not_found` when it does not exist; publishes `teams.changed{reason:"delete"}`.
    pub async fn guide_delete(&self, p: pb::TeamGuideDeleteParams) -> Result<OkResult> {
        let team = Self::check_team(&p.team)?;
        let workdir = self.guide_workdir(p.workdir, p.session_id)?;
        let (source, path) = self.scope_file(&p.scope, workdir.as_deref(), &team)?;
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotFound(format!(
                    "no {source} guide for team {team:?}"
                )))
            }
            Err(e) => {
                return Err(Error::Internal(anyhow::anyhow!(
                    "delete {}: {e}",
                    path.display()
                )))
            }
        }
        self.changed("delete", &team);
        Ok(OkResult { ok: true })
    }

    fn scope_file(
        &self,
        scope: &str,
        workdir: Option<&std::path::Path>,
        team: &str,
    ) -> Result<(&'static str, PathBuf)> {
        match scope {
            "project" => {
                let w = workdir.ok_or_else(|| {
                    Error::invalid(
                        "params.workdir",
                        "scope project needs a workdir or a sessionId",
                    )
                })?;
                Ok(("project", guides::project_file(w, team)))
            }
            "global" => Ok(("global", guides::global_file(self.home.root(), team))),
            other => Err(Error::invalid(
                "params.scope",
                format!("must be project or global, not {other:?}"),
            )),
        }
    }

    fn changed(&self, reason: &str, team: &str) {
        self.log.publish(&pb::TeamsChangedNotification {
            reason: reason.to_owned(),
            team: Some(team.to_owned()),
        });
    }
}

/// The wire row of a task.
fn task_pb(t: &TaskRow) -> pb::team_status_result::Task {
    pb::team_status_result::Task {
        agent_n: t.agent_n,
        assignee: t.assignee.clone(),
        branch: t.branch.clone(),
        conflict_hunks: t.conflict_hunks.clone(),
        conflict_summary: t.conflict_summary.clone(),
        depends_on: t.depends_on.clone(),
        note: t.note.clone(),
        retries: t.retries,
        status: t.status.clone(),
        task_id: t.task_id.clone(),
        title: t.title.clone(),
    }
}

#[cfg(test)]
#[path = "teams_tests.rs"]
mod tests;

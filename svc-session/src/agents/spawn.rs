//! The child-session runner (issue 19 "Subagents"): [`Agents::spawn_child`] starts a child
//! in its own session — kind `subagent`, `parentSessionId` set, inheriting the parent's
//! workdir (or [`ChildSpec::workdir`]), mode (narrowed, never widened, by the definition's
//! `permission`: [`super::definitions::Definition::mode_under`]), provider/model pin, `denyExec`, host
//! (`hostToolsFrom`) and origin connection (so the child's approvals reach the parent's
//! people) — and returns a [`ChildHandle`] at once. Teams (issue 19 part B) call it too.
//!
//! On the parent session: `subagent.spawn{status: "queued"}` (every child starts queued, as
//! the reference implementation's clients expect: it waits there while the parent's slots
//! are taken, see [`super::concurrency`]; issue 32 item 7) → `subagent.update{status:
//! "running"}` when it starts, then one on each child model answer and tool call, with
//! cumulative usage → `subagent.done{ok, result, summary, usage, reason, status}`. The child
//! ends `done` (its turn completed), `error` (failed, budget, stalled, empty answers, denied,
//! timed out, or svc-session restarted: see [`Agents::restore`]) or
//! `interrupted` (the handle's cancel, the parent's interrupt). The child session is closed
//! when it ends (its events stay readable with `session.resume`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use snowpea_common::context::CallContext;
use snowpea_common::time::now_iso;
use snowpea_proto::session::v1 as pb;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Agents;
use crate::session::{Session, SessionSetup};
use crate::store::agents::SubagentRow;
use crate::store::sessions::KIND_SUBAGENT;
use snowpea_session_error::{Error, Result};

/// How long a child may run when neither the spec nor `agents.timeoutSec` says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// Longest summary (the first part of the answer), characters.
pub const SUMMARY_CHARS: usize = 500;
/// Longest task, characters.
pub const MAX_TASK_CHARS: usize = 32_768;

/// What to run as a child.
#[derive(Debug, Clone, Default)]
pub struct ChildSpec {
    /// The delegating session (must be live).
    pub parent_session_id: String,
    /// Agent definition to run as (persona, tools, model, budget); `None` for a plain child.
    pub agent: Option<String>,
    /// The task: the child's one prompt.
    pub task: String,
    /// One-line label for the delegation (`subagent.*` `title`).
    pub title: String,
    /// A model reference outranking the definition's (`agent.spawn{model}`).
    pub model: Option<String>,
    /// Workdir of the child (a team worker's worktree); `None` inherits the parent's.
    pub workdir: Option<PathBuf>,
    /// Longest run before the child is interrupted; `None`: `agents.timeoutSec`.
    pub timeout: Option<Duration>,
    /// The team (issue 19 part B) whose worker runs this child: the team's own worker
    /// count is its concurrency limit (the parent's `maxConcurrent` slots are not taken)
    /// and the `duplicate_task` guard does not apply (a team re-runs a task whose merge
    /// conflicted). `None` for `agent.spawn` and `delegate_task`.
    pub team_id: Option<String>,
}

/// How a child ended (`subagent.done`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChildResult {
    /// True when its turn completed.
    pub ok: bool,
    /// `done`, `error` or `interrupted`.
    pub status: String,
    /// `complete`, `budget`, `timeout`, `error`, `interrupted` or `denied`.
    pub reason: String,
    /// The final report (its answer; on failure what went wrong).
    pub result: String,
    /// The first part of the answer (at most [`SUMMARY_CHARS`]).
    pub summary: String,
    /// Tokens it used (input, output).
    pub usage: (i64, i64),
    /// Its model calls that asked for tools.
    pub rounds: i64,
    /// Its session.
    pub session_id: Option<String>,
}

/// A running child: its id, a way to stop it, and its result when it ends.
#[derive(Debug, Clone)]
pub struct ChildHandle {
    /// `a-` + 12 hex (`subagent.*` `agentId`).
    pub agent_id: String,
    cancel: CancellationToken,
    done: watch::Receiver<Option<ChildResult>>,
}

impl ChildHandle {
    /// Interrupts the child (queued: it never starts); its result says `interrupted`.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Waits for the result, at most `timeout` (`None` when it did not end by then).
    pub async fn wait(&mut self, timeout: Duration) -> Option<ChildResult> {
        let r = tokio::time::timeout(timeout, self.done.wait_for(|d| d.is_some())).await;
        match r {
            Ok(Ok(v)) => v.clone(),
            _ => None,
        }
    }
}

/// The live record of one delegation.
#[derive(Debug)]
pub(crate) struct ChildRun {
    pub agent_id: String,
    pub parent_session_id: String,
    pub name: String,
    pub task: String,
    pub title: String,
    pub depth: usize,
    pub model: Option<String>,
    pub cancel: CancellationToken,
    pub created_at: String,
    inner: Mutex<RunState>,
    done: watch::Sender<Option<ChildResult>>,
}

#[derive(Debug, Default)]
struct RunState {
    status: String,
    session_id: Option<String>,
    usage: (i64, i64),
    last_text: String,
    rounds: i64,
}

impl ChildRun {
    fn st(&self) -> std::sync::MutexGuard<'_, RunState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// `queued`, `running`, `done`, `error`, `interrupted`.
    pub fn status(&self) -> String {
        self.st().status.clone()
    }
    /// The child's session, once it has one.
    pub fn session_id(&self) -> Option<String> {
        self.st().session_id.clone()
    }
    fn row(&self) -> SubagentRow {
        let st = self.st();
        let result = self.done.borrow().as_ref().map(|r| r.result.clone());
        SubagentRow {
            agent_id: self.agent_id.clone(),
            parent_session_id: self.parent_session_id.clone(),
            session_id: st.session_id.clone(),
            name: self.name.clone(),
            task: self.task.clone(),
            title: self.title.clone(),
            status: st.status.clone(),
            depth: self.depth as i64,
            created_at: self.created_at.clone(),
            ended_at: result.is_some().then(now_iso),
            result,
        }
    }
}

/// What a child's turn reports to its parent ([`Agents::child_progress`]).
#[derive(Debug, Clone)]
pub enum Progress {
    /// A model answer (the text of one call).
    Message {
        /// What the model wrote.
        text: String,
        /// Whether it asked for tools (one tool round).
        tool_calls: bool,
    },
    /// A tool call.
    Tool {
        /// The tool.
        name: String,
    },
    /// Tokens of one model call.
    Usage {
        /// Input tokens.
        input: i64,
        /// Output tokens.
        output: i64,
    },
}

/// The first [`SUMMARY_CHARS`] of `text`'s first paragraph.
pub fn summarize(text: &str) -> String {
    let first = text.trim().split("\n\n").next().unwrap_or_default();
    let mut s: String = first.chars().take(SUMMARY_CHARS).collect();
    if first.chars().count() > SUMMARY_CHARS {
        s.push('…');
    }
    s
}

impl Agents {
    pub(crate) fn run_of_child(&self, session_id: &str) -> Option<Arc<ChildRun>> {
        let st = self.lock();
        st.by_child
            .get(session_id)
            .and_then(|a| st.runs.get(a))
            .cloned()
    }

    /// Starts a child (module doc) and returns its handle at once. Refusals: an unknown
    /// parent (`not_found`), an empty or too long task (`params.task`), an unknown or
    /// malformed definition (`not_found` / `params.name`), a bad model reference
    /// (`params.model`), the guards of [`super::guards`].
    pub async fn spawn_child(self: &Arc<Self>, spec: ChildSpec) -> Result<ChildHandle> {
        let parent = self.sessions.get(&spec.parent_session_id)?;
        if spec.task.trim().is_empty() {
            return Err(Error::invalid("params.task", "must not be empty"));
        }
        if spec.task.chars().count() > MAX_TASK_CHARS {
            return Err(Error::invalid(
                "params.task",
                format!("must be at most {MAX_TASK_CHARS} characters"),
            ));
        }
        let workdir = spec.workdir.clone().unwrap_or_else(|| parent.workdir());
        let name = spec.agent.clone().unwrap_or_default();
        // The child's mode: the parent's, narrowed (never widened) by the definition's
        // `permission`.
        let mut mode = parent.mode();
        if !name.is_empty() {
            super::definitions::check_name("params.name", &name)?;
            let skills = self.skills.clone();
            let (n, wd) = (name.clone(), workdir.clone());
            let d = snowpea_session_skills::blocking(move || {
                super::definitions::find(&skills, Some(&wd), "params.name", &n)
            })
            .await?;
            mode = d.mode_under(mode);
        }
        if let Some(m) = spec.model.as_deref().filter(|m| !m.trim().is_empty()) {
            self.check_model_ref("params.model", &workdir, m)?;
        }
        let depth = self.check_spawn(&parent, &name, &spec.task, spec.team_id.is_none())?;
        // A team's worker is its own slot; other children share the parent's slots.
        let slots = spec.team_id.is_none().then(|| self.slots(&parent));
        let permit = slots.as_ref().map(|s| s.clone().try_acquire_owned().ok());
        // Every child is announced `queued`; `subagent.update{status:"running"}` follows
        // when it starts, at once when a slot is free (issue 32 item 7).
        let status = "queued";
        let agent_id = format!("a-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let (done, done_rx) = watch::channel(None);
        let run = Arc::new(ChildRun {
            agent_id: agent_id.clone(),
            parent_session_id: parent.id.clone(),
            name: name.clone(),
            task: spec.task.clone(),
            title: spec.title.clone(),
            depth,
            model: spec.model.clone().filter(|m| !m.trim().is_empty()),
            cancel: CancellationToken::new(),
            created_at: now_iso(),
            inner: Mutex::new(RunState {
                status: "queued".into(),
                ..Default::default()
            }),
            done,
        });
        self.lock().runs.insert(agent_id.clone(), run.clone());
        let row = run.row();
        self.log
            .write_later(move |c| crate::store::agents::save_subagent(c, &row));
        self.event(
            &parent,
            &pb::SubagentSpawnEvent {
                agent_id: agent_id.clone(),
                name: name.clone(),
                session_id: None,
                status: status.into(),
                task: spec.task.clone(),
                title: spec.title.clone(),
                ..Default::default()
            },
        );
        tracing::info!(agent_id = %agent_id, parent = %parent.id, agent = %name, status, "subagent spawned");
        let handle = ChildHandle {
            agent_id,
            cancel: run.cancel.clone(),
            done: done_rx,
        };
        let me = self.clone();
        tokio::spawn(async move {
            // `Some(None)`: a team's worker, which takes no slot.
            let permit = match (permit, slots) {
                (None, _) => Some(None),
                (Some(Some(p)), _) => Some(Some(p)),
                (Some(None), Some(slots)) => tokio::select! {
                    p = slots.acquire_owned() => p.ok().map(Some),
                    _ = run.cancel.cancelled() => None,
                },
                (Some(None), None) => None,
            };
            let result = match permit {
                None => ChildResult {
                    status: "interrupted".into(),
                    reason: "interrupted".into(),
                    result: "interrupted before it started".into(),
                    ..Default::default()
                },
                Some(_permit) => me.run_child(&parent, &run, &spec, workdir, mode).await,
            };
            me.finish(&parent, &run, result).await;
        });
        Ok(handle)
    }

    /// Checks a model reference against the settings of `workdir`.
    pub(crate) fn check_model_ref(
        &self,
        field: &str,
        workdir: &std::path::Path,
        r: &str,
    ) -> Result<()> {
        let settings = self.settings_of(workdir);
        snowpea_session_llm::routing::parse_ref(&settings, r, &|v| {
            self.providers.is_configured(&settings, v)
        })
        .map(|_| ())
        .map_err(|e| Error::invalid(field, e))
    }

    /// Creates the child's session, runs the task as its one turn and reports how it ended.
    async fn run_child(
        self: &Arc<Self>,
        parent: &Arc<Session>,
        run: &Arc<ChildRun>,
        spec: &ChildSpec,
        workdir: PathBuf,
        mode: crate::permissions::Mode,
    ) -> ChildResult {
        let failed = |why: String| ChildResult {
            status: "error".into(),
            reason: "error".into(),
            result: why.clone(),
            summary: why,
            ..Default::default()
        };
        let prow = parent.row();
        let ctx = CallContext {
            connection_id: parent.origin(),
            client_id: prow.origin_client_id.clone(),
            client_kind: prow.origin_client_kind.clone(),
            ..Default::default()
        };
        let created = self
            .sessions
            .create_with(
                &ctx,
                pb::SessionCreateParams {
                    workdir: workdir.to_string_lossy().into_owned(),
                    mode: Some(mode.as_str().to_owned()),
                    provider: prow.provider.clone(),
                    model: prow.model.clone(),
                    host_tools_from: prow.host_tools_from.clone(),
                    origin_surface: prow.origin_surface.clone(),
                    deny_exec: Some(prow.deny_exec),
                    locale: prow.locale.clone(),
                    ..Default::default()
                },
                SessionSetup {
                    kind: KIND_SUBAGENT,
                    agent: Some(run.name.clone()).filter(|n| !n.is_empty()),
                    parent_session_id: Some(parent.id.clone()),
                    ..Default::default()
                },
            )
            .await;
        let child_id = match created {
            Ok(c) => c.session_id,
            Err(e) => return failed(format!("could not open the child session: {e}")),
        };
        {
            let mut st = self.lock();
            st.by_child.insert(child_id.clone(), run.agent_id.clone());
        }
        {
            let mut s = run.st();
            s.status = "running".into();
            s.session_id = Some(child_id.clone());
        }
        let row = run.row();
        self.log
            .write_later(move |c| crate::store::agents::save_subagent(c, &row));
        self.update(parent, run, "started");
        let child = match self.sessions.get(&child_id) {
            Ok(c) => c,
            Err(e) => return failed(format!("the child session vanished: {e}")),
        };
        // A parent interrupted between the spawn and now takes the child with it.
        if run.cancel.is_cancelled() {
            return ChildResult {
                status: "interrupted".into(),
                reason: "interrupted".into(),
                result: "interrupted before it started".into(),
                session_id: Some(child_id),
                ..Default::default()
            };
        }
        let turn_id = match self
            .turns
            .prompt(
                &CallContext::default(),
                pb::SessionPromptParams {
                    session_id: child_id.clone(),
                    text: spec.task.clone(),
                    ..Default::default()
                },
            )
            .await
        {
            Ok(t) => t,
            Err(e) => return failed(format!("could not start the child's turn: {e}")),
        };
        let limit = spec.timeout.unwrap_or_else(|| {
            snowpea_common::settings::get(&self.settings_of(&workdir), "agents.timeoutSec")
                .and_then(Value::as_u64)
                .filter(|s| *s > 0)
                .map_or(DEFAULT_TIMEOUT, Duration::from_secs)
        });
        let mut idle = child.idle.subscribe();
        let mut interrupted = false;
        let mut timed_out = false;
        tokio::select! {
            r = tokio::time::timeout(limit, idle.wait_for(|i| *i)) => timed_out = r.is_err(),
            _ = run.cancel.cancelled() => interrupted = true,
        }
        if interrupted || timed_out {
            let _ = self.turns.interrupt(&child_id);
            let _ = tokio::time::timeout(Duration::from_secs(10), idle.wait_for(|i| *i)).await;
        }
        let _ = self.log.flush().await;
        let events: Vec<(String, Value)> = self
            .log
            .after(&child_id, 0)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.kind, e.payload))
            .collect();
        let outcome = crate::runs::outcome(&events, &turn_id);
        let reason = events
            .iter()
            .rev()
            .find(|(k, p)| k == "turn.done" && p["turnId"].as_str() == Some(turn_id.as_str()))
            .and_then(|(_, p)| p["reason"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "error".into());
        let (usage, rounds) = {
            let s = run.st();
            (s.usage, s.rounds)
        };
        let (status, reason) = if timed_out {
            ("error", "timeout".to_owned())
        } else if interrupted || reason == "interrupted" {
            ("interrupted", "interrupted".to_owned())
        } else if outcome.status == "finished" {
            ("done", "complete".to_owned())
        } else if matches!(reason.as_str(), "stalled" | "empty_response") {
            // Not among `subagent.done.reason`'s values: an error, its cause in `result`.
            ("error", "error".to_owned())
        } else {
            ("error", reason)
        };
        let result = if status == "done" {
            outcome.text.clone()
        } else if timed_out {
            format!(
                "the subagent ran longer than {} s and was interrupted",
                limit.as_secs()
            )
        } else if !outcome.error.is_empty() {
            outcome.error.clone()
        } else {
            format!("the subagent ended: {reason}")
        };
        ChildResult {
            ok: status == "done",
            status: status.into(),
            reason,
            summary: summarize(if status == "done" {
                &outcome.text
            } else {
                &result
            }),
            result,
            usage,
            rounds,
            session_id: Some(child_id),
        }
    }

    /// Records the end of `run`, tells the parent (`subagent.done`), closes the child's
    /// session and wakes the handle.
    async fn finish(&self, parent: &Arc<Session>, run: &Arc<ChildRun>, result: ChildResult) {
        run.st().status = result.status.clone();
        let _ = run.done.send(Some(result.clone()));
        let row = run.row();
        self.log
            .write_later(move |c| crate::store::agents::save_subagent(c, &row));
        self.event(
            parent,
            &pb::SubagentDoneEvent {
                agent_id: run.agent_id.clone(),
                name: run.name.clone(),
                ok: result.ok,
                reason: result.reason.clone(),
                result: result.result.clone(),
                summary: result.summary.clone(),
                rounds: result.rounds,
                session_id: result.session_id.clone(),
                status: result.status.clone(),
                title: run.title.clone(),
                usage: Some(pb::TokenUsage {
                    input_tokens: result.usage.0,
                    output_tokens: result.usage.1,
                }),
                ..Default::default()
            },
        );
        if let Err(e) = self.log.flush().await {
            tracing::warn!(error = %format!("{e:#}"), "subagent.done not flushed");
        }
        if let Some(child) = &result.session_id {
            if let Err(e) = self.sessions.close(child).await {
                tracing::warn!(session_id = %child, error = %e, "could not close a finished subagent session");
            }
        }
        tracing::info!(agent_id = %run.agent_id, status = %result.status, reason = %result.reason, "subagent done");
    }

    /// `subagent.update` on the parent with the run's state now.
    fn update(&self, parent: &Session, run: &ChildRun, text: &str) {
        let s = run.st();
        self.event(
            parent,
            &pb::SubagentUpdateEvent {
                agent_id: run.agent_id.clone(),
                last_text: s.last_text.clone(),
                name: run.name.clone(),
                session_id: s.session_id.clone(),
                status: s.status.clone(),
                text: text.to_owned(),
                title: run.title.clone(),
                usage: Some(pb::TokenUsage {
                    input_tokens: s.usage.0,
                    output_tokens: s.usage.1,
                }),
                ..Default::default()
            },
        );
    }

    /// Hook of the turn loop: progress of a turn of `session`; a child's reaches its parent
    /// as `subagent.update` (usage only accumulates).
    pub fn child_progress(&self, session: &Session, p: Progress) {
        let Some(run) = self.run_of_child(&session.id) else {
            return;
        };
        let Ok(parent) = self.sessions.get(&run.parent_session_id) else {
            return;
        };
        let text = match p {
            Progress::Usage { input, output } => {
                let mut s = run.st();
                s.usage.0 += input;
                s.usage.1 += output;
                return;
            }
            Progress::Message { text, tool_calls } => {
                let mut s = run.st();
                if tool_calls {
                    s.rounds += 1;
                }
                if text.trim().is_empty() {
                    return;
                }
                s.last_text = text.clone();
                text
            }
            Progress::Tool { name } => format!("calling {name}"),
        };
        self.update(&parent, &run, &text);
    }

    /// Hook of `session.interrupt`: interrupts every queued or running child of
    /// `session_id` (which interrupts theirs in turn).
    pub fn interrupt_children(&self, session_id: &str) {
        let children: Vec<_> = self
            .lock()
            .runs
            .values()
            .filter(|r| {
                r.parent_session_id == session_id
                    && matches!(r.status().as_str(), "queued" | "running")
            })
            .cloned()
            .collect();
        for c in children {
            tracing::info!(agent_id = %c.agent_id, parent = %session_id, "interrupting subagent with its parent");
            c.cancel.cancel();
        }
    }

    /// `agent.spawn{sessionId, name, task, model}`: a child running definition `name` under
    /// `sessionId`, or a general-purpose child (no definition: the parent's tools and
    /// prompt) when `name` is `""`, as the reference implementation's clients spawn one
    /// (issue 32 item 7); `{agentId}` at once.
    pub async fn spawn(self: &Arc<Self>, p: pb::AgentSpawnParams) -> Result<pb::AgentSpawnResult> {
        let Some(parent) = p.session_id.filter(|s| !s.trim().is_empty()) else {
            return Err(Error::invalid(
                "params.sessionId",
                "is required: the session the subagent reports to",
            ));
        };
        let agent = if p.name.is_empty() {
            None
        } else {
            super::definitions::check_name("params.name", &p.name)?;
            Some(p.name)
        };
        let h = self
            .spawn_child(ChildSpec {
                parent_session_id: parent,
                agent,
                task: p.task,
                model: p.model,
                ..Default::default()
            })
            .await?;
        Ok(pb::AgentSpawnResult {
            agent_id: h.agent_id,
        })
    }

    /// The delegations of this process now queued or running, oldest first (`agent.list`).
    pub(crate) fn running(&self) -> Vec<Arc<ChildRun>> {
        let mut v: Vec<_> = self
            .lock()
            .runs
            .values()
            .filter(|r| matches!(r.status().as_str(), "queued" | "running"))
            .cloned()
            .collect();
        v.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        v
    }
}

#[cfg(test)]
#[path = "spawn_tests.rs"]
mod tests;

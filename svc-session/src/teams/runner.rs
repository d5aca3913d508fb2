//! How a team worker runs one task: the [`TaskRunner`] trait, and [`SubagentTaskRunner`],
//! its adapter over [`Agents::spawn_child`] — every task runs as a real subagent of the
//! team's lead session (kind `subagent`, `parentSessionId` = the lead, workdir = the
//! worker's worktree, mode/provider/model/host/origin inherited from the lead, `subagent.*`
//! events on the lead, its approvals reaching the lead's people, interrupted with the lead).
//! The team's own worker count is its concurrency limit ([`ChildSpec::team_id`]).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::agents::{Agents, ChildSpec};

/// One task handed to a runner.
#[derive(Debug, Clone)]
pub struct TaskSpec {
    /// The team's lead session (the child's parent).
    pub parent_session_id: String,
    /// Team the task belongs to.
    pub team_id: String,
    /// The task's one-line title (`subagent.*` `title`).
    pub title: String,
    /// Where the child works (the worker's worktree).
    pub workdir: PathBuf,
    /// The child's prompt.
    pub prompt: String,
    /// Longest the child may run before it is interrupted.
    pub timeout: Duration,
    /// Cancelled when the team is interrupted: the child is interrupted too.
    pub cancel: CancellationToken,
}

/// How a task run ended (the shape of `subagent.done`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskResult {
    /// The child finished its turn normally.
    pub ok: bool,
    /// Its final answer, or why it failed.
    pub result: String,
    /// One line of it.
    pub summary: String,
    /// The child session, when one was created.
    pub session_id: Option<String>,
}

/// A boxed future of a task run.
pub type TaskRun<'a> = Pin<Box<dyn Future<Output = TaskResult> + Send + 'a>>;

/// Runs one team task to completion (or timeout, or cancellation); never panics, never
/// hangs past `spec.timeout` plus a bounded grace.
pub trait TaskRunner: Send + Sync {
    /// Runs `spec`.
    fn run(&self, spec: TaskSpec) -> TaskRun<'_>;
}

/// The [`TaskRunner`] over the agents component's child runner.
#[derive(Debug)]
pub struct SubagentTaskRunner {
    agents: Arc<Agents>,
}

/// How long past its own timeout a child may take to report (its interrupt included).
const STOP_GRACE: Duration = Duration::from_secs(30);

/// The first line of `text`, at most 200 characters.
pub fn summary_of(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    match line.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_owned(),
    }
}

fn failed(session_id: Option<String>, why: String) -> TaskResult {
    TaskResult {
        ok: false,
        summary: summary_of(&why),
        result: why,
        session_id,
    }
}

impl SubagentTaskRunner {
    /// The runner over `agents`.
    pub fn new(agents: Arc<Agents>) -> Self {
        SubagentTaskRunner { agents }
    }

    async fn run_one(&self, spec: TaskSpec) -> TaskResult {
        let child = self
            .agents
            .spawn_child(ChildSpec {
                parent_session_id: spec.parent_session_id.clone(),
                agent: None,
                task: spec.prompt.clone(),
                title: spec.title.clone(),
                model: None,
                workdir: Some(spec.workdir.clone()),
                timeout: Some(spec.timeout),
                team_id: Some(spec.team_id.clone()),
            })
            .await;
        let mut handle = match child {
            Ok(h) => h,
            Err(e) => return failed(None, format!("the worker's subagent did not start: {e}")),
        };
        let limit = spec.timeout + STOP_GRACE;
        let waited = tokio::select! {
            r = handle.wait(limit) => r,
            _ = spec.cancel.cancelled() => {
                handle.cancel();
                handle.wait(STOP_GRACE).await
            }
        };
        match waited {
            Some(r) if r.ok => TaskResult {
                ok: true,
                summary: summary_of(&r.result),
                result: r.result,
                session_id: r.session_id,
            },
            Some(r) if spec.cancel.is_cancelled() => {
                failed(r.session_id, "the team was interrupted".into())
            }
            Some(r) => failed(r.session_id, r.result),
            None => {
                handle.cancel();
                failed(
                    None,
                    format!(
                        "the worker's subagent {} did not report within {} s",
                        handle.agent_id,
                        limit.as_secs()
                    ),
                )
            }
        }
    }
}

impl TaskRunner for SubagentTaskRunner {
    fn run(&self, spec: TaskSpec) -> TaskRun<'_> {
        Box::pin(self.run_one(spec))
    }
}

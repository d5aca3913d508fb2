//! How a team worker runs one task: the [`TaskRunner`] trait, and [`SessionTaskRunner`],
//! which runs it as a child session of the team's lead session (kind `subagent`, workdir =
//! the worker's worktree, mode/provider/model/host inherited from the lead) with one turn
//! of [`Turns`] run to completion under a timeout. The subagents of `agent.spawn` are
//! another part of issue 19; this trait is the seam where a team's task is handed to them.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;
use tokio_util::sync::CancellationToken;

use crate::events::EventLog;
use crate::session::{SessionSetup, Sessions};
use crate::turn::Turns;

/// Session kind of a child a team worker runs (spec `session.list` `kind`).
pub const KIND_SUBAGENT: &str = "subagent";

/// One task handed to a runner.
#[derive(Debug, Clone)]
pub struct TaskSpec {
    /// The team's lead session (the child's parent).
    pub parent_session_id: String,
    /// Team the task belongs to.
    pub team_id: String,
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

/// The [`TaskRunner`] over this process's sessions and turns.
#[derive(Debug)]
pub struct SessionTaskRunner {
    sessions: Arc<Sessions>,
    turns: Arc<Turns>,
    log: EventLog,
}

/// Longest an interrupted child may take to stop.
const STOP_GRACE: Duration = Duration::from_secs(10);

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

impl SessionTaskRunner {
    /// The runner over `sessions` and `turns`; outcomes are read from `log`.
    pub fn new(sessions: Arc<Sessions>, turns: Arc<Turns>, log: EventLog) -> Self {
        SessionTaskRunner {
            sessions,
            turns,
            log,
        }
    }

    async fn run_one(&self, spec: TaskSpec) -> TaskResult {
        let parent = match self.sessions.get(&spec.parent_session_id) {
            Ok(p) => p.row(),
            Err(e) => return failed(None, format!("the team's session is gone: {e}")),
        };
        let ctx = CallContext::default();
        let created = self
            .sessions
            .create_with(
                &ctx,
                pb::SessionCreateParams {
                    workdir: spec.workdir.to_string_lossy().into_owned(),
                    mode: Some(parent.mode.clone()),
                    provider: parent.provider.clone(),
                    model: parent.model.clone(),
                    host_tools_from: parent.host_tools_from.clone(),
                    origin_surface: Some(format!("team:{}", spec.team_id)),
                    ..Default::default()
                },
                SessionSetup {
                    kind: KIND_SUBAGENT,
                    ..Default::default()
                },
            )
            .await;
        let sid = match created {
            Ok(c) => c.session_id,
            Err(e) => return failed(None, format!("could not open the worker's session: {e}")),
        };
        let result = self.drive(&sid, &spec).await;
        if let Err(e) = self.sessions.close(&sid).await {
            tracing::warn!(session_id = %sid, error = %e, "could not close a team worker's session");
        }
        result
    }

    async fn drive(&self, sid: &str, spec: &TaskSpec) -> TaskResult {
        let Ok(session) = self.sessions.get(sid) else {
            return failed(Some(sid.into()), "the worker's session is gone".into());
        };
        let ctx = CallContext::default();
        let turn_id = match self
            .turns
            .prompt(
                &ctx,
                pb::SessionPromptParams {
                    session_id: sid.to_owned(),
                    text: spec.prompt.clone(),
                    ..Default::default()
                },
            )
            .await
        {
            Ok(t) => t,
            Err(e) => {
                return failed(
                    Some(sid.into()),
                    format!("the worker's turn did not start: {e}"),
                )
            }
        };
        let mut idle = session.idle.subscribe();
        let stopped = tokio::select! {
            r = tokio::time::timeout(spec.timeout, idle.wait_for(|i| *i)) => match r {
                Ok(_) => None,
                Err(_) => Some(format!("the task took longer than {} s and was interrupted", spec.timeout.as_secs())),
            },
            _ = spec.cancel.cancelled() => Some("the team was interrupted".to_owned()),
        };
        if stopped.is_some() {
            let _ = self.turns.interrupt(sid);
            let _ = tokio::time::timeout(STOP_GRACE, idle.wait_for(|i| *i)).await;
        }
        let _ = self.log.flush().await;
        let events: Vec<(String, serde_json::Value)> = self
            .log
            .after(sid, 0)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.kind, e.payload))
            .collect();
        let o = crate::runs::outcome(&events, &turn_id);
        if let Some(why) = stopped {
            return failed(Some(sid.into()), why);
        }
        if o.status == "finished" {
            TaskResult {
                ok: true,
                summary: summary_of(&o.text),
                result: o.text,
                session_id: Some(sid.into()),
            }
        } else {
            failed(Some(sid.into()), format!("{}: {}", o.status, o.error))
        }
    }
}

impl TaskRunner for SessionTaskRunner {
    fn run(&self, spec: TaskSpec) -> TaskRun<'_> {
        Box::pin(self.run_one(spec))
    }
}

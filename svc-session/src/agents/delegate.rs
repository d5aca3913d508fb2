//! The model's delegation tool `delegate_task{task, agent?, title?}` (the reference
//! implementation's name, which clients and prompts expect), permission tag `delegate`, so it
//! is offered in every mode whose matrix allows that tag. It spawns a child
//! ([`Agents::spawn_child`]) and waits for it: the child's result is the tool's result. The
//! turn's interrupt interrupts the child; a refusal (`duplicate_task`, `max_depth`, an unknown
//! agent) is a failed tool result naming the code, so the model can adjust.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::spawn::ChildSpec;
use super::Agents;
use crate::session::Session;
use crate::tools::{Permission, Tool, ToolContext, ToolOutput, ToolPlan};
use snowpea_session_error::Error;
use snowpea_session_llm::provider::ToolSpec;

/// The tool's name.
pub const NAME: &str = "delegate_task";
/// Most agent definitions named in the tool's description.
const MAX_LISTED: usize = 50;
/// Slack over the child's own timeout before the tool gives up waiting.
const WAIT_SLACK: Duration = Duration::from_secs(30);

/// `delegate_task` of one turn.
pub struct DelegateTask {
    agents: Arc<Agents>,
    listed: Vec<(String, String)>,
}

impl DelegateTask {
    /// The tool for a turn of `session` (its description lists the definitions it sees).
    pub fn new(agents: Arc<Agents>, session: &Session) -> Self {
        let listed = super::definitions::all(&agents.skills, Some(&session.workdir()))
            .into_iter()
            .flatten()
            .take(MAX_LISTED)
            .map(|d| (d.name, d.description))
            .collect();
        DelegateTask { agents, listed }
    }
}

/// The stable code of a spawn refusal, for the tool result.
fn code_of(e: &Error) -> &'static str {
    match e {
        Error::Refused { reason, .. } => reason,
        Error::NotFound(_) => "not_found",
        Error::InvalidParams { .. } => "invalid_params",
        _ => "error",
    }
}

impl Tool for DelegateTask {
    fn name(&self) -> &'static str {
        NAME
    }
    fn spec(&self) -> ToolSpec {
        let mut agents = String::new();
        for (n, d) in &self.listed {
            agents.push_str(&format!("\n- {n}: {d}"));
        }
        if agents.is_empty() {
            agents.push_str("\n(none defined; omit `agent` for a general-purpose helper)");
        }
        ToolSpec {
            name: NAME.into(),
            description: format!(
                "Delegate a self-contained task to a subagent that works in its own session with \
                 the same workdir and reports back; its final answer is this tool's result. Give \
                 it everything it needs in `task`. Agents:{agents}"
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "The complete task for the subagent."},
                    "agent": {"type": "string", "description": "Agent definition to run as; omit for a general-purpose helper."},
                    "title": {"type": "string", "description": "One-line label for the delegation, in the user's language."}
                },
                "required": ["task"],
                "additionalProperties": false
            }),
        }
    }
    fn permission(&self) -> Permission {
        Permission::Delegate
    }
    fn category(&self) -> &'static str {
        "builtin"
    }
    fn plan(&self, args: &Value, _workdir: &Path) -> Result<ToolPlan, String> {
        crate::tools::args::object(args)?;
        let task = crate::tools::args::required_str(args, "task")?;
        if task.trim().is_empty() {
            return Err("argument `task` must not be empty".into());
        }
        let agent = crate::tools::args::optional_str(args, "agent")?;
        if let Some(a) = agent {
            if !super::definitions::is_slug(a) {
                return Err(format!("argument `agent`: {a:?} is not an agent name"));
            }
        }
        crate::tools::args::optional_str(args, "title")?;
        Ok(ToolPlan {
            permission: self.permission(),
            outside_workdir: vec![],
            summary: format!(
                "delegate to {}: {}",
                agent.unwrap_or("a subagent"),
                crate::tools::args::one_line(task, 80)
            ),
        })
    }
    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let agents = self.agents.clone();
        Box::pin(async move {
            let s = |k: &str| {
                args.get(k)
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned)
            };
            let spec = ChildSpec {
                parent_session_id: ctx.session_id.clone(),
                agent: s("agent"),
                task: s("task").unwrap_or_default(),
                title: s("title").unwrap_or_default(),
                ..Default::default()
            };
            let mut handle = match agents.spawn_child(spec).await {
                Ok(h) => h,
                Err(e) => {
                    return ToolOutput {
                        ok: false,
                        content: format!("{}: {e}", code_of(&e)),
                        meta: json!({"code": code_of(&e)}),
                        diff: None,
                    }
                }
            };
            let limit = agents
                .sessions
                .get(&ctx.session_id)
                .ok()
                .map(|s| agents.settings_of(&s.workdir()))
                .and_then(|v| {
                    snowpea_common::settings::get(&v, "agents.timeoutSec").and_then(Value::as_u64)
                })
                .filter(|n| *n > 0)
                .map_or(super::spawn::DEFAULT_TIMEOUT, Duration::from_secs)
                + WAIT_SLACK;
            let result = tokio::select! {
                r = handle.wait(limit) => r,
                _ = ctx.cancel.cancelled() => {
                    handle.cancel();
                    handle.wait(Duration::from_secs(15)).await
                }
            };
            match result {
                Some(r) => ToolOutput {
                    ok: r.ok,
                    content: if r.ok {
                        r.result.clone()
                    } else {
                        format!(
                            "subagent {} ended {} ({}): {}",
                            handle.agent_id, r.status, r.reason, r.result
                        )
                    },
                    meta: json!({
                        "agentId": handle.agent_id,
                        "sessionId": r.session_id,
                        "status": r.status,
                        "reason": r.reason,
                        "usage": {"inputTokens": r.usage.0, "outputTokens": r.usage.1},
                    }),
                    diff: None,
                },
                None => {
                    handle.cancel();
                    ToolOutput::error(format!(
                        "subagent {} did not report back in time and was interrupted",
                        handle.agent_id
                    ))
                }
            }
        })
    }
}

//! `/delegate <agent> <task>`: hands `task` to a subagent running definition `agent` (`-`
//! for a general-purpose one) under this session — the same as `agent.spawn`
//! ([`crate::agents::Agents::spawn_child`]). Answers at once with the `agentId`; the child
//! reports with `subagent.*` events on this session.

use serde_json::json;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};
use crate::agents::ChildSpec;

/// `/delegate`.
pub struct Delegate;

impl Builtin for Delegate {
    fn name(&self) -> &'static str {
        "delegate"
    }
    fn summary(&self) -> &'static str {
        "Hand a task to a subagent"
    }
    fn usage(&self) -> &'static str {
        "/delegate <agent|-> <task>"
    }
    fn risk(&self) -> Risk {
        Risk::LowWrite
    }
    fn bare_is_read(&self) -> bool {
        false
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            let agents = cx.agents()?;
            let (Some(agent), task) = (call.args.sub(), call.args.rest()) else {
                return Err(Failure::args("usage: /delegate <agent|-> <task>"));
            };
            if task.trim().is_empty() {
                return Err(Failure::args(
                    "usage: /delegate <agent|-> <task> (the task is missing)",
                ));
            }
            let agent = (agent != "-").then(|| agent.to_owned());
            let h = agents
                .spawn_child(ChildSpec {
                    parent_session_id: call.session.id.clone(),
                    agent: agent.clone(),
                    task: task.clone(),
                    ..Default::default()
                })
                .await
                .map_err(Failure::from_error)?;
            Ok(Reply::done(
                format!(
                    "Delegated to {} as {}; it reports back here when done.",
                    agent.as_deref().unwrap_or("a subagent"),
                    h.agent_id
                ),
                json!({"agentId": h.agent_id, "agent": agent, "task": task}),
            ))
        })
    }
}

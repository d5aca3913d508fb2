//! `/agent [list|off|<name>]`: bare or `list` shows the agent definitions visible from the
//! session's workdir and the one in force (read); a name runs the session as that definition
//! from the next model call, `off` (or `none`) clears it (medium_write) — the same as
//! `session.setAgent` ([`crate::agents::Agents::set_agent`]).

use serde_json::json;
use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;

use super::{Builtin, Call, Commands, Failure, Reply, Risk, Run};

/// `/agent`.
pub struct Agent;

impl Builtin for Agent {
    fn name(&self) -> &'static str {
        "agent"
    }
    fn summary(&self) -> &'static str {
        "Switch the session's agent definition"
    }
    fn usage(&self) -> &'static str {
        "/agent [list|off|<name>]"
    }
    fn subcommands(&self) -> &'static [&'static str] {
        &["list", "off"]
    }
    fn risk(&self) -> Risk {
        Risk::MediumWrite
    }
    fn run<'a>(&'a self, cx: &'a Commands, call: &'a Call) -> Run<'a> {
        Box::pin(async move {
            call.args.only_options(&[]).map_err(Failure::args)?;
            let agents = cx.agents()?;
            let current = call.session.row().agent;
            match call.args.sub() {
                None | Some("list") => {
                    let wd = call.session.workdir();
                    let defs: Vec<_> =
                        crate::agents::definitions::all(&cx.skills, Some(&wd))
                            .into_iter()
                            .map(|d| match d {
                                Ok(d) => json!({"name": d.name, "description": d.description, "path": d.path, "source": d.source}),
                                Err((name, path, why)) => json!({"name": name, "path": path, "error": why}),
                            })
                            .collect();
                    let mut text =
                        format!("Agent in force: {}\n", current.as_deref().unwrap_or("none"));
                    for d in &defs {
                        text.push_str(&format!(
                            "- {}: {}\n",
                            d["name"].as_str().unwrap_or_default(),
                            d["description"]
                                .as_str()
                                .or(d["error"].as_str())
                                .unwrap_or_default()
                        ));
                    }
                    if defs.is_empty() {
                        text.push_str("No agent definitions (.snowpea/agents/<name>.md).\n");
                    }
                    Ok(Reply::done(
                        text.trim_end(),
                        json!({"agent": current, "agents": defs}),
                    ))
                }
                Some(word) => {
                    if !call.args.rest().is_empty() {
                        return Err(Failure::args("usage: /agent [list|off|<name>]"));
                    }
                    let agent = (!matches!(word, "off" | "none")).then(|| word.to_owned());
                    let r = agents
                        .set_agent(
                            &CallContext::default(),
                            pb::SessionSetAgentParams {
                                session_id: call.session.id.clone(),
                                agent: agent.clone(),
                                guard_turn: false,
                            },
                        )
                        .await
                        .map_err(Failure::from_error)?;
                    let text = match &r.agent {
                        Some(a) => format!("This session now runs as agent {a}."),
                        None => "This session runs as no agent now.".to_owned(),
                    };
                    Ok(Reply::done(text, json!({"agent": r.agent})))
                }
            }
        })
    }
}

//! `session.setAgent{sessionId, agent, guardTurn}` (spec addendum 17, 1.24.0) and what a
//! turn of a session running as a definition gets ([`TurnProfile`]).
//!
//! * The definition (looked up from the session's workdir) applies from the next model call:
//!   its prompt as the persona layer of the system prompt, its tool allowlist (a tool outside
//!   it is not offered and a call to it fails `tool_inactive`), its model assignment (the
//!   `agent` input of [`snowpea_session_llm::routing::route`]) and its round budget (`max_turns`).
//!   `agent: null` clears all of that. The session row keeps the name (`session.list`
//!   `agent`); `agent.changed` is emitted.
//! * The definition's `permission` narrows the session's mode (never widens it: a
//!   definition asking for `auto` in an `accept` session leaves `accept`); a narrowed mode
//!   is set like `session.setMode` (`mode.changed`) and stays when the agent is cleared
//!   (the person widens it again with `session.setMode`).
//! * Callers: [`crate::session::callers::may_drive`] (the session's origin, a browser
//!   session's host, a non-browser surface); others get `unauthorized`.
//! * `guardTurn: true` while a turn runs guards it: from then on every call that is not a
//!   read, and every `mcp__` call, is asked of a person whatever the mode, allowlist or
//!   remembered answers say (plan still denies); approvals say `guard: "agent-switch"` and
//!   their answers are never remembered. The guard covers sessions delegated from this one
//!   and ends when the person's own next prompt starts a turn. No turn running: no effect
//!   (`guarded: false`).

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;

use super::definitions::{self, Definition};
use super::Agents;
use crate::session::Session;
use crate::tools::Tool;
use snowpea_session_error::{Error, Result};

/// The `approval.request` `guard` of a guarded turn.
pub const GUARD_AGENT_SWITCH: &str = "agent-switch";

/// What a turn of a session gets from its agent definition and the delegation machinery.
#[derive(Default)]
pub struct TurnProfile {
    /// The definition in force, if any.
    pub definition: Option<Definition>,
    /// The definition's model reference (the routing's `agent` input).
    pub agent_model: Option<String>,
    /// A per-spawn model override (the routing's `explicit` input).
    pub explicit_model: Option<String>,
    /// Extra tools of the turn (`delegate_task` when delegation is possible).
    pub tools: Vec<Arc<dyn Tool>>,
    /// The memory namespace agent of a named agent's session (recall reads `agent:<name>`).
    pub memory_agent: Option<String>,
}

impl TurnProfile {
    /// The persona layer for the system prompt, if a definition is in force.
    pub fn persona(&self) -> Option<String> {
        self.definition.as_ref().map(|d| {
            format!(
                "\n\n# Agent: {}\nYou are running as the agent `{}`{}. Follow its instructions:\n\n{}",
                d.name,
                d.name,
                if d.description.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", d.description)
                },
                d.prompt
            )
        })
    }

    /// The definition's tool allowlist (`None`: every tool).
    pub fn allowed_tools(&self) -> Option<Vec<String>> {
        self.definition.as_ref().and_then(|d| d.tools.clone())
    }

    /// The definition's round budget.
    pub fn max_rounds(&self) -> Option<usize> {
        self.definition.as_ref().and_then(|d| d.max_turns)
    }
}

impl Agents {
    /// The profile of the next turn of `session` (module doc). A definition that vanished or
    /// broke since it was set is skipped with a warning (the turn runs as none).
    pub async fn turn_profile(self: &Arc<Self>, session: &Session) -> TurnProfile {
        let row = session.row();
        let mut profile = TurnProfile::default();
        if let Some(name) = row.agent.clone().filter(|a| !a.is_empty()) {
            let skills = self.skills.clone();
            let wd = session.workdir();
            let found = snowpea_session_skills::blocking(move || {
                definitions::find(&skills, Some(&wd), "agent", &name)
            })
            .await;
            match found {
                Ok(d) => {
                    profile.agent_model = d.model.clone();
                    profile.definition = Some(d);
                }
                Err(e) => {
                    tracing::warn!(session_id = %session.id, error = %e, "agent definition not applied")
                }
            }
            profile.memory_agent = super::named::named_agent_of(&row);
        }
        if let Some(run) = self.run_of_child(&session.id) {
            profile.explicit_model = run.model.clone();
        }
        let settings = self.settings_of(&session.workdir());
        if self.depth_of(session) < super::guards::max_depth(&settings) {
            profile
                .tools
                .push(Arc::new(super::delegate::DelegateTask::new(
                    self.clone(),
                    session,
                )));
        }
        profile
    }

    /// `session.setAgent` (module doc).
    pub async fn set_agent(
        &self,
        ctx: &CallContext,
        p: pb::SessionSetAgentParams,
    ) -> Result<pb::SessionSetAgentResult> {
        let session = self.sessions.get(&p.session_id)?;
        crate::session::callers::may_drive(ctx, &session, "session.setAgent")?;
        let agent = p
            .agent
            .map(|a| a.trim().to_owned())
            .filter(|a| !a.is_empty() && a != "null");
        let mut narrowed = None;
        if let Some(name) = &agent {
            definitions::check_name("params.agent", name)?;
            let skills = self.skills.clone();
            let (n, wd) = (name.clone(), session.workdir());
            let d = snowpea_session_skills::blocking(move || {
                definitions::find(&skills, Some(&wd), "params.agent", &n)
            })
            .await
            .map_err(|e| match e {
                Error::NotFound(m) => Error::invalid("params.agent", m),
                other => other,
            })?;
            if let Some(m) = &d.model {
                // An assignment naming nothing configured would fail every later call.
                self.check_model_ref("params.agent", &session.workdir(), m)
                    .map_err(|e| {
                        Error::invalid(
                            "params.agent",
                            format!("definition {} has model {m:?}: {e}", d.path.display()),
                        )
                    })?;
            }
            let (now, then) = (session.mode(), d.mode_under(session.mode()));
            narrowed = (then != now).then_some(then);
        }
        session.update(|r| r.agent = agent.clone());
        self.sessions.save(&session);
        self.log
            .event_to_committed(
                &session,
                &pb::AgentChangedEvent {
                    agent: agent.clone(),
                    ..Default::default()
                },
            )
            .await?;
        self.sessions.changed(&session, "agent");
        if let Some(m) = narrowed {
            // `mode.changed` + `sessions.changed`, exactly as `session.setMode`.
            self.sessions.set_mode(&session.id, m.as_str()).await?;
        }
        let guarded = p.guard_turn && session.turns().running.is_some();
        if guarded {
            self.guards.guard(&session.id);
        }
        tracing::info!(session_id = %session.id, agent = ?agent, guarded, "session agent set");
        Ok(pb::SessionSetAgentResult {
            agent,
            guarded,
            session_id: session.id.clone(),
        })
    }

    /// True when a guard covers `session` ([`crate::session::turn_guards::TurnGuards::is_guarded`]).
    pub fn is_guarded(&self, session: &Session) -> bool {
        self.guards.is_guarded(session)
    }

    /// Hook of `session.prompt` ([`crate::session::turn_guards::TurnGuards::person_prompted`]).
    pub fn person_prompted(&self, session_id: &str, turn_id: &str) {
        self.guards.person_prompted(session_id, turn_id);
    }

    /// Hook of the turn driver ([`crate::session::turn_guards::TurnGuards::turn_starting`]).
    pub fn turn_starting(&self, session_id: &str, turn_id: &str) {
        self.guards.turn_starting(session_id, turn_id);
    }
}

impl Agents {
    /// `session.create{agent}` ("named agent whose persona to load"): the definition must be
    /// visible from the new session's workdir — an unknown or malformed one is
    /// `invalid_params` on `params.agent` and nothing is created; the session then runs as
    /// that definition exactly as after `session.setAgent` (the row keeps the name). Without
    /// `agent` (or with an empty one) this is a plain [`crate::session::Sessions::create`].
    pub async fn create_session(
        self: &Arc<Self>,
        ctx: &CallContext,
        p: pb::SessionCreateParams,
    ) -> snowpea_session_error::Result<pb::SessionCreateResult> {
        let Some(name) = p
            .agent
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
        else {
            return self.sessions.create(ctx, p).await;
        };
        let skills = self.skills.clone();
        let workdir = Some(std::path::PathBuf::from(&p.workdir)).filter(|w| w.is_absolute());
        let wanted = name.clone();
        let d = snowpea_session_skills::blocking(move || {
            super::definitions::find(&skills, workdir.as_deref(), "params.agent", &wanted)
        })
        .await
        .map_err(|e| match e {
            snowpea_session_error::Error::NotFound(why) => {
                snowpea_session_error::Error::invalid("params.agent", why)
            }
            other => other,
        })?;
        self.sessions
            .create_with(
                ctx,
                p,
                crate::session::SessionSetup {
                    agent: Some(name),
                    definition_mode: d.mode(),
                    ..Default::default()
                },
            )
            .await
    }
}

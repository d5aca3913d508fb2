//! `ChannelInternalService.ResolveChannel` (issue 22 with issue 19; svc-chat asks it, never
//! the gateway): the session a chat channel bound to a named agent with `agent.bindChannel`
//! talks to — the agent's own session ([`Agents::named_session`], re-opened under its id
//! when it was closed), so every conversation on the channel keeps one session. A channel
//! no agent is bound to answers an empty `sessionId` (svc-chat then uses its own binding's
//! session). A channel with no such binding, resolved for a `gateway.bind{target:{agent}}`
//! binding (`agent` in the request), goes to that named agent's session the same way.

use snowpea_proto::session::v1 as pb;

use super::named::PLATFORMS;
use super::Agents;
use snowpea_session_error::{Error, Result};

impl Agents {
    /// Resolves `platform`:`channel` (module doc). Errors: an unknown platform or an empty
    /// channel (`invalid_params` on `params.platform` / `params.channel`); a binding whose
    /// agent was deleted since answers empty.
    pub async fn resolve_channel(
        &self,
        p: pb::ResolveChannelRequest,
    ) -> Result<pb::ResolveChannelReply> {
        let platform = p.platform.trim();
        if !PLATFORMS.contains(&platform) {
            return Err(Error::invalid(
                "params.platform",
                format!(
                    "unknown platform {platform:?}; one of {}",
                    PLATFORMS.join(", ")
                ),
            ));
        }
        let channel = p.channel.trim();
        if channel.is_empty() {
            return Err(Error::invalid("params.channel", "must not be empty"));
        }
        let key = format!("{platform}:{channel}");
        let bound = self
            .bindings()
            .await?
            .into_iter()
            .find(|b| b.channel == key)
            .map(|b| b.name);
        // Else the agent a `gateway.bind{target:{agent}}` binding names, when it is a named
        // agent (a plain definition has no session of its own: svc-chat creates one with it).
        let asked = Some(p.agent.trim().to_owned()).filter(|a| !a.is_empty());
        let Some(name) = bound.or(asked) else {
            return Ok(pb::ResolveChannelReply::default());
        };
        match self.named_session(&name).await {
            Ok(session) => {
                tracing::info!(channel = %key, agent = %name, session_id = %session.id, "chat channel routed to its named agent");
                Ok(pb::ResolveChannelReply {
                    session_id: session.id.clone(),
                    agent: name,
                })
            }
            Err(Error::NotFound(why)) => {
                tracing::debug!(channel = %key, agent = %name, %why, "no named agent for the channel");
                Ok(pb::ResolveChannelReply::default())
            }
            Err(e) => Err(e),
        }
    }
}

impl Agents {
    /// `ChannelInternalService.CheckTarget` (module doc). Errors: neither or both of
    /// `session_id` / `agent` (`invalid_params` on `params.target`); a store failure.
    pub async fn check_target(&self, p: pb::CheckTargetRequest) -> Result<pb::CheckTargetReply> {
        let session = p.session_id.trim();
        let agent = p.agent.trim();
        let found = match (session.is_empty(), agent.is_empty()) {
            (false, true) => self.sessions.registry().row(session).await?.is_some(),
            (true, false) => {
                if self.named(agent).await?.is_some() {
                    true
                } else {
                    let skills = self.skills.clone();
                    let workdir = Some(std::path::PathBuf::from(p.workdir.trim()))
                        .filter(|w| w.is_absolute());
                    let name = agent.to_owned();
                    match snowpea_session_skills::blocking(move || {
                        super::definitions::find(&skills, workdir.as_deref(), "agent", &name)
                    })
                    .await
                    {
                        Ok(_) => true,
                        Err(Error::NotFound(_) | Error::InvalidParams { .. }) => false,
                        Err(e) => return Err(e),
                    }
                }
            }
            _ => {
                return Err(Error::invalid(
                    "params.target",
                    "give exactly one of sessionId or agent",
                ))
            }
        };
        Ok(pb::CheckTargetReply { found })
    }
}

//! What a surface sets on a session besides its mode: `session.setActive` (the session the
//! user is looking at) and `session.setBrowserProvider` (addendum 9). Both are stored on the
//! session row and announced with `sessions.changed`.

use snowpea_common::context::CallContext;
use snowpea_common::time::now_iso;
use snowpea_proto::session::v1 as pb;

use super::{callers, Session, Sessions};
use crate::store::sessions::KIND_CHAT;
use snowpea_session_error::{Error, Result};

impl Sessions {
    /// `session.setActive`: marks the session as the one the user is looking at
    /// (`sessions.changed{reason:"active"}`). The caller rule of `session.setAgent`
    /// ([`callers::may_drive`]); scheduled and subagent sessions are `invalid_params`.
    pub async fn set_active(
        &self,
        ctx: &CallContext,
        p: pb::SessionSetActiveParams,
    ) -> Result<snowpea_proto::rpc::v1::OkResult> {
        let session = self.get(&p.session_id)?;
        let kind = session.row().kind().to_owned();
        if kind != KIND_CHAT {
            return Err(Error::invalid(
                "params.sessionId",
                format!("a {kind} session cannot be the active session"),
            ));
        }
        callers::may_drive(ctx, &session, "session.setActive")?;
        session.update(|r| r.active_at = Some(now_iso()));
        self.save(&session);
        self.changed(&session, "active");
        self.log.flush().await?;
        Ok(snowpea_proto::rpc::v1::OkResult { ok: true })
    }

    /// A client's `session.prompt` / `session.steer` marks a chat session active too (spec
    /// `session.setActive`); saved with the prompt's own row write, no notification of its own.
    pub(crate) fn mark_active_by_client(&self, session: &Session, ctx: &CallContext) {
        if ctx.connection_id.is_none() || ctx.client_kind.as_deref() == Some(callers::GATEWAY) {
            return;
        }
        if session.row().kind() == KIND_CHAT {
            session.update(|r| r.active_at = Some(now_iso()));
            self.save(session);
        }
    }

    /// `session.setBrowserProvider`: `host` (the Snowpea browser only, stored as none) or
    /// `local` (core's own browser, for this session only);
    /// `sessions.changed{reason:"browserProvider"}`. The caller rule of `session.setAgent`.
    pub async fn set_browser_provider(
        &self,
        ctx: &CallContext,
        p: pb::SessionSetBrowserProviderParams,
    ) -> Result<pb::SessionSetBrowserProviderResult> {
        let provider = match p.provider.trim() {
            "host" => None,
            "local" => Some("local".to_owned()),
            other => {
                return Err(Error::invalid(
                    "params.provider",
                    format!("must be host or local, not {other:?}"),
                ))
            }
        };
        let session = self.get(&p.session_id)?;
        callers::may_drive(ctx, &session, "session.setBrowserProvider")?;
        session.update(|r| r.browser_provider = provider);
        self.save(&session);
        self.changed(&session, "browserProvider");
        self.log.flush().await?;
        Ok(pb::SessionSetBrowserProviderResult {
            browser_provider: browser_provider_of(&session),
            session_id: session.id.clone(),
        })
    }
}

/// The session's browser provider as the protocol spells it (`host` or `local`).
pub fn browser_provider_of(session: &Session) -> String {
    session
        .row()
        .browser_provider
        .unwrap_or_else(|| "host".to_owned())
}

/// `browserProvider` as `session.list` / `sessions.changed` report it: the opt-in when one
/// was made, `host` for a session a browser created, else none (not a browser session).
pub fn listed_browser_provider(row: &crate::store::sessions::SessionRow) -> Option<String> {
    row.browser_provider.clone().or_else(|| {
        (row.origin_client_kind.as_deref() == Some(callers::BROWSER)).then(|| "host".to_owned())
    })
}

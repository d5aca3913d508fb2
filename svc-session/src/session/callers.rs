//! Who may drive a session on the system's or the user's behalf: the caller rule the spec
//! gives `session.setAgent` and shares with `session.continue` and `session.setActive`.
//!
//! * a chat-gateway connection (`clientKind: "gateway"`) never may;
//! * the session's origin connection may;
//! * a browser session (created by a `browser` client): its host (`hostToolsFrom`) or a
//!   connection of the client that created it;
//! * any other session: every surface except a `browser` connection that did not create it.
//!
//! A call without a connection (a service-internal one) may.
//!
//! [`may_answer`] is the one rule of `approval.respond` and `question.respond` (issue 32
//! item 10), taken from the spec: `approval.pending` / `question.pending` put every request
//! in "the shared queue", `approval.resolved.by` / `question.resolved.by` name the "surface
//! or user that answered", `session.setActive` has a messenger answer the active session's
//! approvals and questions from the owner's chat, and addendum 8 (`hostToolsFrom`) says "a
//! browser profile shows only its own cards and those with null". So, for a request of a
//! session:
//! * the origin connection of the session, or of a session it was delegated from, may;
//! * a browser-owned session (created by a `browser` client, or an unattended run with a
//!   host, e.g. a browser job's scheduled run) is answered only by its host
//!   (`clientId` = `hostToolsFrom`) or the client that created it;
//! * any other session is answered by every connected surface (the shared queue), except a
//!   browser profile, which answers only its own cards (`hostToolsFrom` its `clientId`, or
//!   the client that created it) and those without a host;
//! * a call without a connection may not (only a person answers).

use snowpea_common::context::CallContext;

use std::sync::Arc;

use crate::session::{Registry, Session};
use snowpea_session_error::{Error, Result};

/// `clientKind` of a browser surface.
pub const BROWSER: &str = "browser";
/// `clientKind` of the chat gateway (messengers).
pub const GATEWAY: &str = "gateway";

/// Checks the caller rule for `session` (module doc); `unauthorized` naming the rule otherwise.
pub fn may_drive(ctx: &CallContext, session: &Session, method: &str) -> Result<()> {
    let Some(conn) = ctx.connection_id.as_deref() else {
        return Ok(());
    };
    let kind = ctx.client_kind.as_deref();
    if kind == Some(GATEWAY) {
        return Err(Error::Unauthorized(format!(
            "{method}: a chat gateway connection may not drive a session"
        )));
    }
    if session.origin().as_deref() == Some(conn) {
        return Ok(());
    }
    let row = session.row();
    let client = ctx.client_id.as_deref();
    let created_by_caller = client.is_some() && client == row.origin_client_id.as_deref();
    let allowed = if row.origin_client_kind.as_deref() == Some(BROWSER) {
        created_by_caller || (client.is_some() && client == row.host_tools_from.as_deref())
    } else {
        kind != Some(BROWSER) || created_by_caller
    };
    if allowed {
        Ok(())
    } else {
        Err(Error::Unauthorized(format!(
            "{method}: only the session's origin, its host or the surface that created it may \
             call this for session {}",
            session.id
        )))
    }
}

/// The sessions a request of `session_id` belongs to: the session, then the sessions it was
/// delegated from (open ones only, at most 64).
pub fn lineage(registry: &Registry, session_id: &str) -> Vec<Arc<Session>> {
    let mut out = Vec::new();
    let mut next = Some(session_id.to_owned());
    while let Some(sid) = next.take() {
        let Ok(s) = registry.get(&sid) else {
            break;
        };
        next = s.row().parent_session_id.filter(|_| out.len() < 64);
        out.push(s);
    }
    out
}

/// Checks that the caller may answer a pending request (`what`: `approval.respond` or
/// `question.respond`) of session `session_id` (module doc: one rule for both);
/// `unauthorized` naming the rule otherwise.
pub fn may_answer(
    ctx: &CallContext,
    registry: &Registry,
    session_id: &str,
    what: &str,
) -> Result<()> {
    let Some(caller) = ctx.connection_id.as_deref() else {
        return Err(Error::Unauthorized(format!(
            "{what}: only a client connection may answer"
        )));
    };
    let lineage = lineage(registry, session_id);
    if lineage
        .iter()
        .any(|s| s.origin().as_deref() == Some(caller))
    {
        return Ok(());
    }
    // A batch restored for a session that is not open: nobody owns it more than anyone.
    let Some(session) = lineage.first() else {
        return Ok(());
    };
    let row = session.row();
    let client = ctx.client_id.as_deref();
    let own = client.is_some()
        && (client == row.host_tools_from.as_deref() || client == row.origin_client_id.as_deref());
    let browser_owned = row.origin_client_kind.as_deref() == Some(BROWSER)
        || (session.is_unattended() && row.host_tools_from.is_some());
    let allowed = if browser_owned {
        own
    } else if ctx.client_kind.as_deref() == Some(BROWSER) {
        own || row.host_tools_from.is_none()
    } else {
        true
    };
    if allowed {
        Ok(())
    } else {
        Err(Error::Unauthorized(format!(
            "{what}: session {session_id} belongs to {}; only its origin connection or that \
             client may answer its requests",
            row.host_tools_from
                .as_deref()
                .or(row.origin_client_id.as_deref())
                .map(|h| format!("the client {h:?}"))
                .unwrap_or_else(|| "another client".into())
        )))
    }
}

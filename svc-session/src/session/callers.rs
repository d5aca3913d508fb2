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

use snowpea_common::context::CallContext;

use crate::error::{Error, Result};
use crate::session::Session;

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

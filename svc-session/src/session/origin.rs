//! The origin connection of a session (spec `session.attach`: "Make this connection the
//! origin of a session (approvals, host tools)").
//!
//! The origin is the connection that created the session or last attached it. When it
//! closes, the session keeps its clientId; a new connection announcing the same clientId
//! (or the same connection re-announced by a restarted gateway) becomes the origin again.
//! Pending approvals are re-sent to the new origin (see `approval`).

use std::sync::{Arc, Weak};

use snowpea_common::bus::ConnectionEvent;
use snowpea_proto::rpc::v1::ConnectionInfo;
use tokio::sync::broadcast::error::RecvError;

use super::{Session, Sessions};

impl Sessions {
    /// Makes `connection_id` the origin of `session` and persists it.
    pub(crate) fn bind_origin(
        &self,
        session: &Session,
        connection_id: String,
        client_id: Option<String>,
    ) {
        session.update(|r| {
            r.origin_connection_id = Some(connection_id.clone());
            if client_id.is_some() {
                r.origin_client_id = client_id;
            }
        });
        self.save(session);
        session.origin.send_replace(Some(connection_id));
    }

    /// Re-binds sessions to a connection that just opened: the same connection id
    /// (re-announced) or, when the origin is gone, the same clientId.
    pub(crate) fn on_connection_opened(&self, info: &ConnectionInfo) {
        for session in self.registry.all() {
            let row = session.row();
            if row.origin_connection_id.as_deref() == Some(info.connection_id.as_str()) {
                // Re-announced after a gateway or service restart: wake approval waiters.
                session
                    .origin
                    .send_replace(Some(info.connection_id.clone()));
                continue;
            }
            let origin_live = row
                .origin_connection_id
                .as_deref()
                .is_some_and(|c| self.hub.is_live(c));
            if !origin_live && info.client_id.is_some() && row.origin_client_id == info.client_id {
                tracing::info!(session_id = %session.id, connection_id = %info.connection_id, "origin re-bound by clientId");
                self.bind_origin(&session, info.connection_id.clone(), info.client_id.clone());
            }
        }
    }

    /// Re-checks every session against the live connections (after missed events).
    pub(crate) fn rebind_all(&self) {
        for info in self.hub.connections() {
            self.on_connection_opened(&info);
        }
    }

    /// Re-binds the origin to a prompting connection with the origin's clientId when the
    /// origin connection is gone.
    pub(crate) fn rebind_on_prompt(
        &self,
        session: &Session,
        connection_id: Option<&str>,
        client_id: Option<&str>,
    ) {
        let (Some(conn), Some(client)) = (connection_id, client_id) else {
            return;
        };
        let row = session.row();
        let origin_live = row
            .origin_connection_id
            .as_deref()
            .is_some_and(|c| self.hub.is_live(c));
        if row.origin_connection_id.is_none()
            || (!origin_live && row.origin_client_id.as_deref() == Some(client))
        {
            self.bind_origin(session, conn.to_owned(), Some(client.to_owned()));
        }
    }
}

/// Watches the hub's connection table for the lifetime of `sessions`.
pub(crate) fn spawn_watcher(sessions: &Arc<Sessions>) {
    let mut events = sessions.hub.connection_events();
    let weak: Weak<Sessions> = Arc::downgrade(sessions);
    tokio::spawn(async move {
        loop {
            let event = events.recv().await;
            let Some(app) = weak.upgrade() else { break };
            match event {
                Ok(ConnectionEvent::Opened(info)) => app.on_connection_opened(&info),
                Ok(ConnectionEvent::Closed(_)) => {}
                Err(RecvError::Lagged(_)) => app.rebind_all(),
                Err(RecvError::Closed) => break,
            }
        }
    });
}

//! The client of svc-chat (QA of issues 19 and 22): its internal `ChatInternalService` over
//! `run/chat.sock`, told when a session (`session.deleteSaved`) or a named agent
//! (`agent.delete`) that chat bindings may target is gone, so svc-chat removes those
//! bindings and stops routing to them. Best effort with a deadline: a svc-chat that is down
//! re-checks its bindings with `ChannelInternalService.CheckTarget` when it starts.

use std::time::Duration;

use snowpea_common::home::Home;
use snowpea_proto::chat::v1::chat_internal_service_client::ChatInternalServiceClient;
use snowpea_proto::chat::v1::TargetRemovedRequest;

/// Longest wait for svc-chat.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// What was deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removed {
    /// A session, by id.
    Session(String),
    /// A named agent, by name.
    Agent(String),
}

/// Tells svc-chat of `removed` in the background (never fails the caller; a failure is
/// logged at debug level — svc-chat not running is the normal case without bindings).
pub fn target_removed(home: &Home, removed: Removed) {
    let socket = home.socket("chat");
    tokio::spawn(async move {
        if !socket.exists() {
            return;
        }
        let mut client =
            ChatInternalServiceClient::new(snowpea_common::client::unix_channel(socket));
        let req = match &removed {
            Removed::Session(id) => TargetRemovedRequest {
                session_id: id.clone(),
                agent: String::new(),
            },
            Removed::Agent(name) => TargetRemovedRequest {
                session_id: String::new(),
                agent: name.clone(),
            },
        };
        let mut req = tonic::Request::new(req);
        req.set_timeout(CALL_TIMEOUT);
        match tokio::time::timeout(CALL_TIMEOUT, client.target_removed(req)).await {
            Ok(Ok(r)) => {
                let ids = r.into_inner().binding_ids;
                if !ids.is_empty() {
                    tracing::info!(?removed, bindings = ?ids, "chat bindings of a deleted target removed");
                }
            }
            Ok(Err(s)) => {
                tracing::debug!(?removed, error = %s.message(), "svc-chat not told of a deleted target")
            }
            Err(_) => tracing::debug!(?removed, "svc-chat did not answer about a deleted target"),
        }
    });
}

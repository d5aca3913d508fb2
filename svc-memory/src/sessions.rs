//! Resolving a session to its project root and agent for `memory.list{sessionId}`: svc-memory
//! asks svc-session (`session.list`) over its socket, with a deadline. svc-session down is
//! `unavailable`; an unknown session is `not_found`.

use std::path::PathBuf;
use std::time::Duration;

use snowpea_proto::session::v1::session_service_client::SessionServiceClient;
use snowpea_proto::session::v1::SessionListParams;
use tonic::transport::Channel;

use crate::error::{Error, Result};

/// Deadline of one lookup.
const TIMEOUT: Duration = Duration::from_secs(2);

/// What `memory.list` needs to know about a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionScope {
    /// The session's project root (its workdir).
    pub project: String,
    /// The agent it runs as, if any.
    pub agent: Option<String>,
}

/// A lazily connecting client of svc-session.
#[derive(Debug, Clone)]
pub struct SessionLookup {
    channel: Channel,
}

impl SessionLookup {
    /// A lookup through the svc-session socket (connects on first use, reconnects after a
    /// restart).
    pub fn new(socket: PathBuf) -> Self {
        SessionLookup {
            channel: snowpea_common::client::unix_channel(socket),
        }
    }

    /// The project root and agent of `session_id`.
    pub async fn scope(&self, session_id: &str) -> Result<SessionScope> {
        let mut client = SessionServiceClient::new(self.channel.clone());
        let req = SessionListParams {
            include_closed: true,
            include_unhosted: true,
            ..Default::default()
        };
        let reply = tokio::time::timeout(TIMEOUT, client.list(req))
            .await
            .map_err(|_| {
                Error::Unavailable(
                    "svc-session did not answer in time to resolve the session".into(),
                )
            })?
            .map_err(|s| {
                Error::Unavailable(format!(
                    "svc-session is unavailable to resolve the session: {}",
                    s.message()
                ))
            })?;
        reply
            .into_inner()
            .sessions
            .into_iter()
            .find(|s| s.session_id == session_id)
            .map(|s| SessionScope {
                project: s.workdir,
                agent: s.agent.filter(|a| !a.is_empty()),
            })
            .ok_or_else(|| Error::NotFound(format!("no session {session_id}")))
    }
}

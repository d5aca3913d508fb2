//! Asking svc-session about one session (its workdir, agent, …): `session.list` over the
//! svc-session socket, with a deadline. svc-session down or too slow is
//! [`LookupError::Unavailable`]; an unknown session is [`LookupError::NotFound`]. Each
//! caller maps these into its own error type (its one mapping of that boundary).

use std::path::PathBuf;
use std::time::Duration;

use snowpea_proto::session::v1::session_list_result::Session;
use snowpea_proto::session::v1::session_service_client::SessionServiceClient;
use snowpea_proto::session::v1::SessionListParams;
use tonic::transport::Channel;

/// Deadline of one lookup.
const TIMEOUT: Duration = Duration::from_secs(2);

/// Why a session could not be looked up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// svc-session is down or did not answer in time: `unavailable`.
    #[error("{0}")]
    Unavailable(String),
    /// svc-session does not know the session: `not_found`.
    #[error("{0}")]
    NotFound(String),
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
            channel: crate::client::unix_channel(socket),
        }
    }

    /// The row of `session_id` (closed and unhosted sessions included).
    pub async fn session(&self, session_id: &str) -> Result<Session, LookupError> {
        let mut client = SessionServiceClient::new(self.channel.clone())
            .max_decoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_REQUEST);
        let req = SessionListParams {
            include_closed: true,
            include_unhosted: true,
            ..Default::default()
        };
        let reply = tokio::time::timeout(TIMEOUT, client.list(req))
            .await
            .map_err(|_| {
                LookupError::Unavailable(
                    "svc-session did not answer in time to resolve the session".into(),
                )
            })?
            .map_err(|s| {
                LookupError::Unavailable(format!(
                    "svc-session is unavailable to resolve the session: {}",
                    s.message()
                ))
            })?;
        reply
            .into_inner()
            .sessions
            .into_iter()
            .find(|s| s.session_id == session_id)
            .ok_or_else(|| LookupError::NotFound(format!("no session {session_id}")))
    }
}

//! Resolving the workdir of an `mcp.*` call (spec: "defaults to the session's, then the
//! daemon's"): an explicit `workdir`, else the `sessionId`'s workdir asked from svc-session
//! (`session.list`, with a deadline; down = `unavailable`, unknown = `not_found`), else the
//! daemon's working directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use snowpea_proto::session::v1::session_service_client::SessionServiceClient;
use snowpea_proto::session::v1::SessionListParams;
use tonic::transport::Channel;

use crate::error::{Error, Result};

/// Deadline of one lookup.
const TIMEOUT: Duration = Duration::from_secs(2);

/// A lazily connecting client of svc-session.
#[derive(Debug, Clone)]
pub struct SessionLookup {
    channel: Channel,
}

impl SessionLookup {
    /// A lookup through the svc-session socket.
    pub fn new(socket: PathBuf) -> Self {
        SessionLookup {
            channel: snowpea_common::client::unix_channel(socket),
        }
    }

    /// The workdir of `session_id`.
    pub async fn workdir(&self, session_id: &str) -> Result<PathBuf> {
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
            .map(|s| PathBuf::from(s.workdir))
            .ok_or_else(|| Error::EntityNotFound(format!("no session {session_id}")))
    }

    /// The workdir of a call: `workdir`, else the session's, else `daemon_dir`. A relative
    /// workdir is `invalid_params`; an existing one is canonicalised.
    pub async fn resolve(
        &self,
        workdir: Option<&str>,
        session_id: Option<&str>,
        daemon_dir: &Path,
    ) -> Result<PathBuf> {
        let dir = match (
            workdir.filter(|w| !w.is_empty()),
            session_id.filter(|s| !s.is_empty()),
        ) {
            (Some(w), _) => {
                let p = PathBuf::from(w);
                if !p.is_absolute() {
                    return Err(Error::invalid_params(
                        "params.workdir",
                        "must be an absolute path",
                    ));
                }
                p
            }
            (None, Some(s)) => self.workdir(s).await?,
            (None, None) => daemon_dir.to_path_buf(),
        };
        Ok(canonical(&dir))
    }
}

/// `dir` canonicalised when it exists (so `/a/../b` and symlinks name one project).
pub fn canonical(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

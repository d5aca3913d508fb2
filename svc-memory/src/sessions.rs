//! Resolving a session to its project root and agent for `memory.list{sessionId}`: svc-memory
//! asks svc-session (`session.list`) over its socket, with a deadline. svc-session down is
//! `unavailable`; an unknown session is `not_found`.

use std::path::PathBuf;

use snowpea_common::session_lookup::{self, LookupError};

use crate::error::{Error, Result};

/// What `memory.list` needs to know about a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionScope {
    /// The session's project root (its workdir).
    pub project: String,
    /// The agent it runs as, if any.
    pub agent: Option<String>,
}

impl From<LookupError> for Error {
    fn from(e: LookupError) -> Self {
        match e {
            LookupError::Unavailable(m) => Error::Unavailable(m),
            LookupError::NotFound(m) => Error::NotFound(m),
        }
    }
}

/// A lazily connecting client of svc-session.
#[derive(Debug, Clone)]
pub struct SessionLookup {
    inner: session_lookup::SessionLookup,
}

impl SessionLookup {
    /// A lookup through the svc-session socket (connects on first use, reconnects after a
    /// restart).
    pub fn new(socket: PathBuf) -> Self {
        SessionLookup {
            inner: session_lookup::SessionLookup::new(socket),
        }
    }

    /// The project root and agent of `session_id`.
    pub async fn scope(&self, session_id: &str) -> Result<SessionScope> {
        let s = self.inner.session(session_id).await?;
        Ok(SessionScope {
            project: s.workdir,
            agent: s.agent.filter(|a| !a.is_empty()),
        })
    }
}

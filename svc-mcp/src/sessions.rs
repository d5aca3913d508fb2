//! Resolving the workdir of an `mcp.*` call (spec: "defaults to the session's, then the
//! daemon's"): an explicit `workdir`, else the `sessionId`'s workdir asked from svc-session
//! (`session.list`, with a deadline; down = `unavailable`, unknown = `not_found`), else the
//! daemon's working directory.

use std::path::{Path, PathBuf};

use snowpea_common::session_lookup::{self, LookupError};

use crate::error::{Error, Result};

/// A lazily connecting client of svc-session.
#[derive(Debug, Clone)]
pub struct SessionLookup {
    inner: session_lookup::SessionLookup,
}

impl From<LookupError> for Error {
    fn from(e: LookupError) -> Self {
        match e {
            LookupError::Unavailable(m) => Error::Unavailable(m),
            LookupError::NotFound(m) => Error::EntityNotFound(m),
        }
    }
}

impl SessionLookup {
    /// A lookup through the svc-session socket.
    pub fn new(socket: PathBuf) -> Self {
        SessionLookup {
            inner: session_lookup::SessionLookup::new(socket),
        }
    }

    /// The workdir of `session_id`.
    pub async fn workdir(&self, session_id: &str) -> Result<PathBuf> {
        let session = self.inner.session(session_id).await?;
        Ok(PathBuf::from(session.workdir))
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

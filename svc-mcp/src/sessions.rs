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

    /// The workdir of a call: `workdir` (checked by [`check_workdir`]: `invalid_params`
    /// naming `params.workdir` unless it is an absolute path of at most
    /// [`MAX_WORKDIR_BYTES`] naming an existing directory), else the session's, else
    /// `daemon_dir`; canonicalised when it exists.
    pub async fn resolve(
        &self,
        workdir: Option<&str>,
        session_id: Option<&str>,
        daemon_dir: &Path,
    ) -> Result<PathBuf> {
        match (
            workdir.filter(|w| !w.is_empty()),
            session_id.filter(|s| !s.is_empty()),
        ) {
            (Some(w), _) => check_workdir(w, "params.workdir"),
            (None, Some(s)) => Ok(canonical(&self.workdir(s).await?)),
            (None, None) => Ok(canonical(daemon_dir)),
        }
    }
}

/// Longest accepted workdir, in bytes (Linux `PATH_MAX`).
pub const MAX_WORKDIR_BYTES: usize = 4096;

/// A client-given workdir, checked: an absolute path of at most [`MAX_WORKDIR_BYTES`] naming
/// an existing directory; returned canonicalised. Anything else is `invalid_params` naming
/// `field` (quoting at most 200 characters of it).
pub fn check_workdir(raw: &str, field: &str) -> Result<PathBuf> {
    check_workdir_shape(raw, field)?;
    let p = Path::new(raw);
    let shown = crate::clip::clip(raw);
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => Ok(canonical(p)),
        Ok(_) => Err(Error::invalid_params(
            field,
            format!("{shown} is not a directory"),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::invalid_params(
            field,
            format!("{shown} does not exist"),
        )),
        Err(e) => Err(Error::invalid_params(
            field,
            format!("{shown} cannot be read: {e}"),
        )),
    }
}

/// The checks of [`check_workdir`] that do not look at the disk: absolute, at most
/// [`MAX_WORKDIR_BYTES`], no NUL.
pub fn check_workdir_shape(raw: &str, field: &str) -> Result<()> {
    if raw.len() > MAX_WORKDIR_BYTES {
        return Err(Error::invalid_params(
            field,
            format!(
                "is {} bytes long; a workdir has at most {MAX_WORKDIR_BYTES}",
                raw.len()
            ),
        ));
    }
    if raw.contains('\0') {
        return Err(Error::invalid_params(field, "must not contain NUL"));
    }
    if !Path::new(raw).is_absolute() {
        return Err(Error::invalid_params(field, "must be an absolute path"));
    }
    Ok(())
}

/// `dir` canonicalised when it exists (so `/a/../b` and symlinks name one project).
pub fn canonical(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(e: Error) -> (String, String) {
        match e {
            Error::InvalidParams { field, message } => (field, message),
            other => panic!("expected invalid_params, got {other:?}"),
        }
    }

    #[test]
    fn a_workdir_is_an_absolute_existing_directory_of_bounded_length() {
        let t = tempfile::tempdir().unwrap();
        let ok = check_workdir(&t.path().display().to_string(), "params.workdir").unwrap();
        assert_eq!(ok, std::fs::canonicalize(t.path()).unwrap());

        let huge = format!("/{}", "q".repeat(1_000_000));
        let (field, message) = field_of(check_workdir(&huge, "params.workdir").unwrap_err());
        assert_eq!(field, "params.workdir");
        assert!(message.len() < 200, "{message}");
        let file = t.path().join("f");
        std::fs::write(&file, "x").unwrap();
        for (bad, says) in [
            ("relative/dir", "absolute"),
            ("/no/such/dir/anywhere", "does not exist"),
            (file.to_str().unwrap(), "not a directory"),
            ("/tmp/a\0b", "NUL"),
        ] {
            let (field, message) = field_of(check_workdir(bad, "params.workdir").unwrap_err());
            assert_eq!(field, "params.workdir");
            assert!(message.contains(says), "{bad}: {message}");
        }
        let long_missing = format!("/{}", "d".repeat(4000));
        let (_, message) = field_of(check_workdir(&long_missing, "params.workdir").unwrap_err());
        assert!(message.len() < 300, "quoted at most 200 chars: {message}");
    }
}

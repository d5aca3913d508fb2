//! The environment of a session (issue 34 "core"): what a working folder must be.

use std::path::{Path, PathBuf};

use snowpea_session_error::{Error, Result};

/// Validates `session.create{workdir}`: absolute, existing directory; returns it canonical.
pub fn check_workdir(workdir: &str) -> Result<PathBuf> {
    let field = "params.workdir";
    if workdir.trim().is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    let path = Path::new(workdir);
    if !path.is_absolute() {
        return Err(Error::invalid(
            field,
            format!("must be an absolute path, got {workdir:?}"),
        ));
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Error::invalid(
                field,
                format!("{workdir} is not a directory"),
            ))
        }
        Err(e) => return Err(Error::invalid(field, format!("{workdir}: {e}"))),
    }
    std::fs::canonicalize(path).map_err(|e| Error::invalid(field, format!("{workdir}: {e}")))
}

//! Paths and ids of checkpoints: the excluded directories, safe ids, the `paths` a client
//! names, and the one way a restore reaches a file ([`target`]), which refuses anything that
//! would leave the workdir — `..`, absolute paths, and symlinks on the way that point out.

use std::path::{Component, Path, PathBuf};

use snowpea_session_error::{Error, Result};

/// Directory names whose contents are never captured (`excluded`).
pub const EXCLUDED_DIRS: &[&str] = &[
    ".git",
    "node_modules",
    ".snowpea",
    "__pycache__",
    "dist",
    "out",
];

/// Longest checkpoint or session id accepted.
const MAX_ID_LEN: usize = 128;

/// True when a component of the workdir-relative `rel` is an excluded directory.
pub fn is_excluded(rel: &str) -> bool {
    let mut parts: Vec<&str> = rel.split('/').collect();
    parts.pop();
    parts.iter().any(|p| EXCLUDED_DIRS.contains(p))
}

/// Checks that `id` is a safe slug (letters, digits, `_`, `-`; at most 128), or
/// `invalid_params` naming `field`.
pub fn check_id(field: &str, id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            "must be 1-128 letters, digits, `_` or `-`",
        ))
    }
}

/// `abs` relative to `workdir` as a `/`-separated string, `None` when it is not inside it.
pub fn relative(workdir: &Path, abs: &Path) -> Option<String> {
    let rel = abs.strip_prefix(workdir).ok()?;
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_str()?.to_owned()),
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Normalises the client's `paths` filter (`field` is e.g. `params.paths`): each entry must
/// be a path relative to the workdir that stays inside it; an absolute path, `..` that
/// leaves it, a
/// directory on the way that is a symlink pointing out (see [`target`]), NUL bytes and empty
/// strings are `invalid_params` naming `params.paths[i]`.
pub fn filter(field: &str, workdir: &Path, paths: &[String]) -> Result<Option<Vec<String>>> {
    if paths.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(paths.len());
    for (i, p) in paths.iter().enumerate() {
        let name = format!("{field}[{i}]");
        if p.is_empty() {
            return Err(Error::invalid(&name, "must be a non-empty path"));
        }
        if p.contains('\0') {
            return Err(Error::invalid(&name, "must not contain NUL bytes"));
        }
        let rel = Path::new(p);
        // The spec documents `paths` as "relative paths": an absolute one, even inside the
        // workdir, is refused rather than guessed at (issue 32 item 10).
        if rel.is_absolute() {
            return Err(Error::invalid(
                &name,
                "must be relative to the session's workdir (e.g. src/main.rs), not absolute",
            ));
        }
        let mut parts: Vec<String> = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(s) => parts.push(
                    s.to_str()
                        .ok_or_else(|| Error::invalid(&name, "must be UTF-8"))?
                        .to_owned(),
                ),
                Component::CurDir => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        return Err(Error::invalid(&name, "is outside the session's workdir"));
                    }
                }
                _ => return Err(Error::invalid(&name, "is outside the session's workdir")),
            }
        }
        if parts.is_empty() {
            return Err(Error::invalid(
                &name,
                "names the workdir itself, not a file",
            ));
        }
        let rel = parts.join("/");
        if target(workdir, &rel).is_none() {
            return Err(Error::invalid(
                &name,
                "goes through a symlink or file that leaves the session's workdir",
            ));
        }
        out.push(rel);
    }
    Ok(Some(out))
}

/// The absolute path a restore may write for the stored relative `rel`, or `None` when it
/// would leave `workdir` (canonical): a stored path that is absolute or has `..`, or an
/// existing ancestor that is a symlink resolving outside, or one that is not a directory.
/// The last component may be a symlink: a restore replaces or removes the link itself.
pub fn target(workdir: &Path, rel: &str) -> Option<PathBuf> {
    let rel_path = Path::new(rel);
    let parts: Vec<&std::ffi::OsStr> = rel_path
        .components()
        .map(|c| match c {
            Component::Normal(p) => Some(p),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let (last, dirs) = parts.split_last()?;
    let mut at = workdir.to_path_buf();
    for d in dirs {
        let next = at.join(d);
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() => {
                let real = std::fs::canonicalize(&next).ok()?;
                if !real.starts_with(workdir) || !real.is_dir() {
                    return None;
                }
                at = real;
            }
            Ok(m) if m.is_dir() => at = next,
            Ok(_) => return None,
            // Missing from here on: the restore creates the directories inside `at`.
            Err(_) => at = next,
        }
    }
    Some(at.join(last))
}

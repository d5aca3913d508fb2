//! Resolving the paths a tool is given against the session workdir.
//!
//! A relative path joins the workdir, an absolute one stays as it is, and `~`/`~/…` expand
//! to `$HOME`. The result is normalised lexically (`.` dropped, `..` pops a component) and
//! then made real: the deepest ancestor that exists is canonicalised, so a symlink anywhere
//! on the way (also a dangling one as the last component) is followed before the
//! "outside the workdir" check is made. Tools operate on the resolved path, never on the
//! string the model sent, so what was checked is what is touched.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// How many symlinks may be followed while resolving one path (as `MAXSYMLINKS`).
const MAX_SYMLINK_HOPS: u32 = 40;

/// A tool path resolved against the workdir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    /// Absolute path with symlinks of the existing part resolved.
    pub path: PathBuf,
    /// True when [`ResolvedPath::path`] lies outside the (canonical) workdir.
    pub outside_workdir: bool,
    /// The path for people and the model: relative to the workdir (`.` for the workdir
    /// itself) when inside it, absolute otherwise.
    pub display: String,
}

/// The canonical form of `workdir` (itself when it cannot be canonicalised).
pub fn canonical_workdir(workdir: &Path) -> PathBuf {
    std::fs::canonicalize(workdir).unwrap_or_else(|_| normalize_lexically(workdir))
}

/// Resolves `input` (as the model wrote it) inside `workdir`.
///
/// Errors only on input that is not a path at all (empty, or containing a NUL byte);
/// a path outside the workdir is not an error but flagged in
/// [`ResolvedPath::outside_workdir`].
pub fn resolve(workdir: &Path, input: &str) -> Result<ResolvedPath, String> {
    if input.is_empty() {
        return Err("path must not be empty".to_string());
    }
    if input.contains('\0') {
        return Err("path must not contain a NUL byte".to_string());
    }
    let workdir = canonical_workdir(workdir);
    let expanded = expand_home(input);
    let joined = if expanded.is_absolute() {
        expanded
    } else {
        workdir.join(expanded)
    };
    let path = resolve_real(&normalize_lexically(&joined), 0);
    let outside_workdir = !path.starts_with(&workdir);
    let display = display_path(&workdir, &path);
    Ok(ResolvedPath {
        path,
        outside_workdir,
        display,
    })
}

/// `path` relative to `workdir` when inside it (`.` for the workdir itself), else absolute.
pub fn display_path(workdir: &Path, path: &Path) -> String {
    match path.strip_prefix(workdir) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => path.to_string_lossy().into_owned(),
    }
}

/// Normalises a path without touching the file system: drops `.`, lets `..` remove the
/// previous normal component (never climbing above the root of an absolute path).
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                let last_is_normal =
                    matches!(out.components().next_back(), Some(Component::Normal(_)));
                if last_is_normal {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            Component::Normal(name) => out.push(name),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Expands a leading `~` (alone or followed by `/`) to `$HOME`.
fn expand_home(input: &str) -> PathBuf {
    let rest = if input == "~" {
        Some("")
    } else {
        input.strip_prefix("~/")
    };
    match (rest, std::env::var_os("HOME")) {
        (Some(rest), Some(home)) if !home.is_empty() => PathBuf::from(home).join(rest),
        _ => PathBuf::from(input),
    }
}

/// Resolves the symlinks of an absolute, lexically normalised path: the deepest ancestor
/// that exists (as a directory entry — a dangling symlink counts) is canonicalised and the
/// rest appended. A dangling symlink is followed by hand.
fn resolve_real(path: &Path, hops: u32) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<OsString> = Vec::new();
    while existing.symlink_metadata().is_err() {
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            // Reached the root (or a bare prefix) without finding anything.
            _ => return path.to_path_buf(),
        }
    }
    let base = match std::fs::canonicalize(&existing) {
        Ok(real) => real,
        Err(_) => {
            // Exists as an entry but cannot be canonicalised: a dangling symlink (or a loop,
            // or no permission). Follow one hop by hand so a write through it is judged by
            // where it would really land.
            let is_link = existing
                .symlink_metadata()
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(false);
            match (is_link, std::fs::read_link(&existing), existing.parent()) {
                (true, Ok(target), Some(parent)) if hops < MAX_SYMLINK_HOPS => {
                    let parent =
                        std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
                    let next = normalize_lexically(&parent.join(target));
                    resolve_real(&next, hops + 1)
                }
                _ => existing,
            }
        }
    };
    let mut out = base;
    for name in rest.into_iter().rev() {
        out.push(name);
    }
    out
}

#[cfg(test)]
#[path = "paths_tests.rs"]
mod tests;

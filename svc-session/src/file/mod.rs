//! The `Files` component: `file.complete` (spec "file.complete", issue 15) — completes file
//! and directory paths under a session's workdir (or a given `workdir`).
//!
//! The candidates of a workdir ([`list`]: `git ls-files` inside a repository, an
//! ignore-aware walk outside one) are kept as a prepared [`index::Index`] in a per-workdir
//! [`cache`], checked in the background for changes ([`stamp`]) and re-read only when the
//! tree changed, so typing a path costs one listing and then a scan of the prepared index
//! per keystroke ([`rank`]); see docs/PERFORMANCE.md "file.complete". Directories are
//! answered with a trailing `/`; files with their size in bytes.

use std::path::{Component, Path, PathBuf};

use snowpea_proto::session::v1 as pb;

use crate::session::Registry;
use snowpea_session_core::workdir::check_workdir;
use snowpea_session_error::{Error, Result};

pub mod cache;
pub mod index;
pub mod list;
pub mod rank;
pub mod stamp;

/// `limit` when none is given.
pub const DEFAULT_LIMIT: usize = 30;
/// Largest `limit`.
pub const MAX_LIMIT: usize = 200;

/// `file.complete` with its per-workdir listing cache.
#[derive(Debug)]
pub struct Files {
    registry: Registry,
    cache: cache::Cache,
}

impl Files {
    /// The component, resolving sessions through `registry`.
    pub fn new(registry: Registry) -> Self {
        Self::with_timing(registry, cache::Timing::default())
    }

    /// The component with its own cache `timing` (tests).
    pub fn with_timing(registry: Registry, timing: cache::Timing) -> Self {
        Files {
            registry,
            cache: cache::Cache::new(timing),
        }
    }

    /// `file.complete{query, sessionId | workdir, limit}`. The workdir is the session's
    /// (live or saved), else `workdir` (absolute, existing); `limit` defaults to 30 and is
    /// clamped to 1–200. Errors: `not_found` for an unknown session; `invalid_params` naming
    /// `params.sessionId` (neither given), `params.workdir` (not an absolute directory) or
    /// `params.query` (a query that climbs out of the workdir, or an absolute one outside it);
    /// `unavailable` when listing the tree takes too long.
    pub async fn complete(&self, p: pb::FileCompleteParams) -> Result<pb::FileCompleteResult> {
        let workdir = self.workdir(&p).await?;
        let query = relative_query(&workdir, &p.query)?;
        let limit = p
            .limit
            .map(|l| l.clamp(1, MAX_LIMIT as i64) as usize)
            .unwrap_or(DEFAULT_LIMIT);
        let listing = self.cache.get(&workdir).await?;
        let root = workdir.clone();
        let (entries, truncated) = tokio::task::spawn_blocking(move || {
            let index = &listing.index;
            let (picked, more) = rank::rank(index, &query, limit);
            let entries = picked
                .into_iter()
                .filter_map(|i| entry(&root, index.get(i)))
                .collect::<Vec<_>>();
            (entries, more)
        })
        .await
        .map_err(|e| Error::Internal(anyhow::anyhow!("file.complete: {e}")))?;
        Ok(pb::FileCompleteResult { entries, truncated })
    }

    async fn workdir(&self, p: &pb::FileCompleteParams) -> Result<PathBuf> {
        if let Some(id) = p.session_id.as_deref().filter(|s| !s.trim().is_empty()) {
            if let Ok(s) = self.registry.get(id) {
                return Ok(s.workdir());
            }
            return match self.registry.row(id).await? {
                Some(row) => Ok(PathBuf::from(row.workdir)),
                None => Err(Error::NotFound(format!("no session {id:?}"))),
            };
        }
        match p.workdir.as_deref().filter(|s| !s.trim().is_empty()) {
            Some(w) => check_workdir(w),
            None => Err(Error::invalid(
                "params.sessionId",
                "give sessionId or workdir to complete in",
            )),
        }
    }
}

/// The query relative to the workdir, `/`-separated: the directory part with `.` and inner
/// `..` resolved (climbing out is refused), the last segment kept as typed (a last `..`
/// means that directory's parent). A query that named a directory (it had a `/`) keeps one,
/// so `./ma` lists the top level by prefix rather than matching fuzzily.
fn relative_query(workdir: &Path, query: &str) -> Result<String> {
    let field = "params.query";
    if query.contains('\0') {
        return Err(Error::invalid(field, "must not contain NUL"));
    }
    let rel = if Path::new(query).is_absolute() {
        let p = Path::new(query);
        let inside = p.strip_prefix(workdir).map_err(|_| {
            Error::invalid(
                field,
                format!("{query:?} is outside the workdir {}", workdir.display()),
            )
        })?;
        let mut r = inside.to_string_lossy().into_owned();
        if query.ends_with('/') && !r.is_empty() {
            r.push('/');
        }
        r
    } else {
        query.to_owned()
    };
    let (dir, mut last) = match rel.rfind('/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => ("", rel.as_str()),
    };
    let mut dir = dir.to_owned();
    if last == ".." {
        dir = if dir.is_empty() {
            "..".into()
        } else {
            format!("{dir}/..")
        };
        last = "";
    }
    let mut parts: Vec<&str> = vec![];
    for c in Path::new(&dir).components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str().unwrap_or_default()),
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(Error::invalid(
                        field,
                        format!("{query:?} climbs out of the workdir"),
                    ));
                }
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    let named_dir = rel.contains('/') || query.ends_with("..");
    Ok(match (parts.is_empty(), named_dir) {
        (true, false) => last.to_owned(),
        (true, true) if last.is_empty() => String::new(),
        (true, true) => format!("/{last}"),
        (false, _) => format!("{}/{last}", parts.join("/")),
    })
}

/// The answer entry of a candidate (`None` for a file that vanished since the listing).
fn entry(root: &Path, c: index::Candidate<'_>) -> Option<pb::file_complete_result::Entry> {
    if c.is_dir() {
        return Some(pb::file_complete_result::Entry {
            kind: "dir".into(),
            path: format!("{}/", c.path()),
            size: None,
        });
    }
    let meta = std::fs::symlink_metadata(root.join(c.path())).ok()?;
    Some(pb::file_complete_result::Entry {
        kind: "file".into(),
        path: c.path().to_owned(),
        size: Some(meta.len() as i64),
    })
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;

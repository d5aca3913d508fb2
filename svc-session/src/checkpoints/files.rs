//! Where a checkpoint's files are read and written (issue 32 item 9): the daemon host's
//! file system for a local session — the original code paths, unchanged — or a remote
//! session's [`Backend`] (ssh, docker), whose own file operations capture the
//! before-bytes and restore them.
//!
//! What a remote backend cannot give: permission bits (its [`Backend::metadata`] has none,
//! so entries carry no `mode` and a restore keeps what the backend's write keeps — a
//! replaced file's mode, the default for a re-created one), fsync, and shell snapshots (see
//! the module doc of [`super`]). A restore target is refused (`not_restorable`) when any
//! directory on its way inside the workdir is a symbolic link.

use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::capture::{Current, MAX_FILE_BYTES};
use super::paths;
use super::restore::{self, PathPlan, Write1};
use crate::backend::{read_all, Backend};

/// The file operations checkpoints use.
#[derive(Debug, Clone)]
pub enum Files {
    /// The daemon host (`std::fs`, atomic writes with modes, fsync).
    Local,
    /// A remote session's backend.
    Remote(Arc<dyn Backend>),
}

impl Files {
    /// True for [`Files::Local`].
    pub fn is_local(&self) -> bool {
        matches!(self, Files::Local)
    }

    /// What is at `path` now (a final symlink is not followed). A remote file's mode is
    /// reported as 0 (unknown).
    pub fn current(&self, path: &Path) -> Current {
        let backend = match self {
            Files::Local => return Current::of(path),
            Files::Remote(b) => b,
        };
        let meta = match backend.symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Current::Absent,
            Err(_) => return Current::Other,
        };
        if !meta.is_file || meta.is_symlink {
            return Current::Other;
        }
        if meta.len > MAX_FILE_BYTES {
            return Current::TooLarge {
                size: meta.len,
                mode: 0,
            };
        }
        match read_all(backend.as_ref(), path) {
            Ok(bytes) if bytes.len() as u64 <= MAX_FILE_BYTES => Current::File { bytes, mode: 0 },
            Ok(bytes) => Current::TooLarge {
                size: bytes.len() as u64,
                mode: 0,
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => Current::Absent,
            Err(_) => Current::Other,
        }
    }

    /// The absolute path of the workdir-relative `rel`, `None` when it would leave the
    /// workdir (see [`paths::target`] for the local rules; remotely `..`, absolute paths
    /// and a symbolic link on the way are refused).
    pub fn target(&self, workdir: &Path, rel: &str) -> Option<PathBuf> {
        let backend = match self {
            Files::Local => return paths::target(workdir, rel),
            Files::Remote(b) => b,
        };
        let rel = Path::new(rel);
        if rel.as_os_str().is_empty()
            || !rel.components().all(|c| matches!(c, Component::Normal(_)))
        {
            return None;
        }
        let target = workdir.join(rel);
        let mut dir = workdir.to_path_buf();
        let mut parts: Vec<Component> = rel.components().collect();
        parts.pop();
        for part in parts {
            dir.push(part);
            match backend.symlink_metadata(&dir) {
                Ok(m) if m.is_symlink => return None,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(_) => return None,
            }
        }
        Some(target)
    }

    /// The mode a restore gives the file (locally [`restore::mode_for`]; remotely unused,
    /// 0).
    pub fn mode_for(&self, p: &PathPlan, target: &Path) -> u32 {
        match self {
            Files::Local => restore::mode_for(p, target),
            Files::Remote(_) => 0,
        }
    }

    /// Carries out one write of a restore (locally [`restore::apply`]); remotely the
    /// bytes go through [`Backend::write_atomic`] (parents created first) and a delete
    /// through [`Backend::remove_file`].
    pub fn apply(&self, workdir: &Path, w: &Write1) -> io::Result<()> {
        let backend = match self {
            Files::Local => return restore::apply(workdir, w),
            Files::Remote(b) => b,
        };
        // Checked again right before the write: a symlink may have appeared since the plan.
        if self.target(workdir, &w.path).as_deref() != Some(w.target.as_path()) {
            return Err(io::Error::other("the path now leads outside the workdir"));
        }
        match &w.bytes {
            None => match backend.symlink_metadata(&w.target) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
                Ok(m) if m.is_dir => Err(io::Error::other("a directory is in the way")),
                Ok(_) => backend.remove_file(&w.target),
            },
            Some(bytes) => {
                if let Some(parent) = w.target.parent() {
                    backend.create_dir_all(parent)?;
                }
                backend.write_atomic(&w.target, bytes)
            }
        }
    }

    /// fsyncs the directories of a batch of writes (locally; a backend has no fsync).
    pub fn sync_parents(&self, writes: &[Write1]) {
        if self.is_local() {
            restore::sync_parents(writes);
        }
    }

    /// Runs `f` over `items` (locally in parallel, [`restore::in_parallel`]; remotely one
    /// at a time, as the backend's transport serialises them anyway).
    pub fn each<T: Sync, R: Send>(&self, items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
        match self {
            Files::Local => restore::in_parallel(items, f),
            Files::Remote(_) => items.iter().map(f).collect(),
        }
    }
}

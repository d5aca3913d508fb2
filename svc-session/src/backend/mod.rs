//! Execution backends (`backend.set`, protocol 1.25.0; issue 23): where a session's built-in
//! file and command tools run.
//!
//! Every built-in tool that touches files or runs commands (`read_file`, `write_file`,
//! `edit_file`, `list_dir`, `glob`, `grep`, `shell`, and git through `shell`) goes through
//! the session's [`Backend`] in [`crate::tools::ToolContext::backend`]; none calls `std::fs`
//! or spawns a process itself. Kinds: [`local`] (the daemon host, the default), [`ssh`]
//! (the system `ssh` binary with a control master, files over SFTP) and [`docker`] (the
//! Docker Engine API).
//!
//! The file operations are blocking (tools run them on the blocking pool through
//! `run_blocking`); a remote backend bridges them onto its async transport. A backend
//! never writes its credentials into errors, events or logs.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::tools::{ToolContext, ToolOutput};

pub mod component;
pub mod config;
pub mod docker;
pub mod local;
pub mod ssh;

pub use component::Backends;

/// The protocol's backend kinds (`backend.set{kind}`, `backend.changed{backend}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// The daemon host.
    Local,
    /// A container of the Docker Engine.
    Docker,
    /// A remote machine over SSH.
    Ssh,
}

impl BackendKind {
    /// The protocol's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Local => "local",
            BackendKind::Docker => "docker",
            BackendKind::Ssh => "ssh",
        }
    }
}

/// What a file-system entry is (the facts the tools use from `std::fs::Metadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// A directory.
    pub is_dir: bool,
    /// A regular file.
    pub is_file: bool,
    /// A symbolic link (only from [`Backend::symlink_metadata`]).
    pub is_symlink: bool,
    /// Size in bytes.
    pub len: u64,
}

/// One entry of [`Backend::read_dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// File name.
    pub name: String,
    /// Absolute path.
    pub path: PathBuf,
    /// The entry itself is a symbolic link.
    pub is_symlink: bool,
}

/// One command for [`Backend::exec`] (the `shell` tool).
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// The command line, run by `sh -c` where the backend runs commands.
    pub command: String,
    /// Absolute directory to run it in (on the backend's machine).
    pub cwd: PathBuf,
    /// Longest run; then the command is killed and the call reports exit code 124.
    pub timeout: Duration,
    /// svc-session's orphan mark for processes started on the daemon host.
    pub mark: Option<String>,
}

/// Where tools run. Implementations: [`local::Local`], [`ssh::Ssh`], [`docker::Docker`].
///
/// File operations block (call them on the blocking pool); `io::Error` messages never
/// contain credentials.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// The protocol kind.
    fn kind(&self) -> BackendKind;
    /// The working directory tools use instead of the session's (`config.workdir` of
    /// local, `config.cwd` of ssh); `None` keeps the session's.
    fn workdir(&self) -> Option<PathBuf>;
    /// Facts about `path`, following symbolic links.
    fn metadata(&self, path: &Path) -> io::Result<Meta>;
    /// Facts about `path` itself (a link is reported as a link).
    fn symlink_metadata(&self, path: &Path) -> io::Result<Meta>;
    /// A reader of the file at `path`.
    fn open(&self, path: &Path) -> io::Result<Box<dyn Read + Send>>;
    /// The target of the symbolic link `path`.
    fn read_link(&self, path: &Path) -> io::Result<PathBuf>;
    /// The entries of the directory `path` (any order).
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>>;
    /// Creates `path` and its missing parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Replaces the file at `path` with `bytes` as atomically as the backend can (a temp
    /// file renamed over it), keeping a replaced file's permissions where it can.
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// Removes the file (or symbolic link) at `path`; a directory is refused. Used by
    /// `checkpoint.restore` to delete a file a turn created. The default refuses
    /// (`Unsupported`); every built-in backend implements it.
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let _ = path;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this backend cannot remove files",
        ))
    }
    /// Walks the files under `root` (hidden entries skipped, `.gitignore` respected, sorted
    /// by name), calling `visit(absolute, relative)` until it returns false or `cancel`
    /// fires. Returns false when cancelled. The default walks with [`Backend::read_dir`].
    fn walk_files(
        &self,
        root: &Path,
        cancel: &CancellationToken,
        visit: &mut dyn FnMut(&Path, &Path) -> bool,
    ) -> bool {
        walk::remote(self, root, cancel, visit)
    }
    /// Runs one command (the `shell` tool), streaming output to `ctx.progress`, stopping it
    /// on `ctx.cancel` or at `req.timeout` (exit code 124).
    fn exec(&self, req: ExecRequest, ctx: ToolContext) -> BoxFuture<'static, ToolOutput>;
    /// Releases what the backend holds (connection, container). Idempotent.
    fn close(&self) -> BoxFuture<'static, ()>;
}

/// The daemon host, with the session's workdir.
pub fn local() -> Arc<dyn Backend> {
    Arc::new(local::Local::new(None))
}

/// Reads the whole file at `path` through `backend`.
pub fn read_all<B: Backend + ?Sized>(backend: &B, path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    backend.open(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

pub(crate) mod walk {
    //! The generic walk of a remote tree over [`Backend::read_dir`].

    use std::path::Path;

    use ignore::gitignore::{Gitignore, GitignoreBuilder};
    use tokio_util::sync::CancellationToken;

    use super::Backend;

    /// Most entries looked at in one walk (a bound on a huge remote tree).
    const MAX_ENTRIES: usize = 200_000;

    /// Depth-first, name-sorted walk; hidden entries skipped; each directory's
    /// `.gitignore` (read through the backend) applies below it.
    pub(crate) fn remote<B: Backend + ?Sized>(
        backend: &B,
        root: &Path,
        cancel: &CancellationToken,
        visit: &mut dyn FnMut(&Path, &Path) -> bool,
    ) -> bool {
        let mut seen = 0usize;
        let mut stack: Vec<(std::path::PathBuf, Vec<Gitignore>)> =
            vec![(root.to_path_buf(), Vec::new())];
        // Pending directories with the ignore rules above them; pushed in reverse so they
        // pop in name order.
        while let Some((dir, mut rules)) = stack.pop() {
            if cancel.is_cancelled() {
                return false;
            }
            let Ok(mut entries) = backend.read_dir(&dir) else {
                continue;
            };
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            if entries.iter().any(|e| e.name == ".gitignore") {
                let gi = dir.join(".gitignore");
                if let Ok(bytes) = super::read_all(backend, &gi) {
                    let mut builder = GitignoreBuilder::new(&dir);
                    for line in String::from_utf8_lossy(&bytes).lines() {
                        let _ = builder.add_line(None, line);
                    }
                    if let Ok(g) = builder.build() {
                        rules.push(g);
                    }
                }
            }
            let ignored = |path: &Path, is_dir: bool| {
                rules
                    .iter()
                    .rev()
                    .map(|g| g.matched(path, is_dir))
                    .find(|m| !m.is_none())
                    .is_some_and(|m| m.is_ignore())
            };
            let mut subdirs = Vec::new();
            for e in entries {
                seen += 1;
                if seen > MAX_ENTRIES || cancel.is_cancelled() {
                    return !cancel.is_cancelled();
                }
                if e.name.starts_with('.') {
                    continue;
                }
                let Ok(meta) = backend.metadata(&e.path) else {
                    continue;
                };
                if meta.is_dir {
                    if !e.is_symlink && !ignored(&e.path, true) {
                        subdirs.push(e.path);
                    }
                    continue;
                }
                if !meta.is_file || ignored(&e.path, false) {
                    continue;
                }
                let Ok(rel) = e.path.strip_prefix(root) else {
                    continue;
                };
                if !visit(&e.path, rel) {
                    return true;
                }
            }
            // A directory's own files come first, then its subdirectories in name order.
            for d in subdirs.into_iter().rev() {
                stack.push((d, rules.clone()));
            }
        }
        true
    }
}

#[cfg(test)]
#[path = "backend_tests.rs"]
mod tests;

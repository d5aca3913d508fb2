//! The `local` backend: the daemon host (today's behaviour). `config.workdir` overrides the
//! session's working directory; a command that times out reports exit code 124.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use futures::future::BoxFuture;
use ignore::WalkBuilder;
use snowpea_common::orphans;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::{Backend, BackendKind, DirEntry, ExecRequest, Meta};
use crate::tools::{ToolContext, ToolOutput};

/// The daemon host.
#[derive(Debug, Clone, Default)]
pub struct Local {
    workdir: Option<PathBuf>,
}

impl Local {
    /// The host, with `workdir` (absolute) replacing the session's when given.
    pub fn new(workdir: Option<PathBuf>) -> Self {
        Local { workdir }
    }
}

fn meta(m: &fs::Metadata) -> Meta {
    Meta {
        is_dir: m.is_dir(),
        is_file: m.is_file(),
        is_symlink: m.file_type().is_symlink(),
        len: m.len(),
    }
}

impl Backend for Local {
    fn kind(&self) -> BackendKind {
        BackendKind::Local
    }

    fn workdir(&self) -> Option<PathBuf> {
        self.workdir.clone()
    }

    fn metadata(&self, path: &Path) -> io::Result<Meta> {
        fs::metadata(path).map(|m| meta(&m))
    }

    fn symlink_metadata(&self, path: &Path) -> io::Result<Meta> {
        fs::symlink_metadata(path).map(|m| meta(&m))
    }

    fn open(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(fs::File::open(path)?))
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        fs::read_link(path)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            out.push(DirEntry {
                name: entry.file_name().to_string_lossy().into_owned(),
                path: entry.path(),
                is_symlink: entry.file_type().map(|t| t.is_symlink()).unwrap_or(false),
            });
        }
        Ok(out)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path)
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        crate::tools::fs::atomic_write(path, bytes)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    /// The `ignore` walker: `.gitignore`/`.ignore`/global excludes, also outside a repository.
    fn walk_files(
        &self,
        root: &Path,
        cancel: &CancellationToken,
        visit: &mut dyn FnMut(&Path, &Path) -> bool,
    ) -> bool {
        let walker = WalkBuilder::new(root)
            .hidden(true)
            .git_ignore(true)
            .git_global(true)
            .git_exclude(true)
            .ignore(true)
            .parents(true)
            .require_git(false)
            .follow_links(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .build();
        for entry in walker {
            if cancel.is_cancelled() {
                return false;
            }
            let Ok(entry) = entry else { continue };
            let is_file = match entry.file_type() {
                Some(t) if t.is_file() => true,
                Some(t) if t.is_symlink() => entry.path().is_file(),
                _ => false,
            };
            if !is_file {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(root) else {
                continue;
            };
            if !visit(entry.path(), rel) {
                break;
            }
        }
        true
    }

    fn exec(&self, req: ExecRequest, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        Box::pin(async move {
            match std::fs::metadata(&req.cwd) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return ToolOutput::error(format!(
                        "cwd `{}` is not a directory",
                        req.cwd.display()
                    ))
                }
                Err(_) => {
                    return ToolOutput::error(format!("cwd `{}` does not exist", req.cwd.display()))
                }
            }
            let mut command = Command::new("sh");
            command
                .arg("-c")
                .arg(&req.command)
                .current_dir(&req.cwd)
                .stdin(Stdio::null())
                .env("PAGER", "cat")
                .env("GIT_PAGER", "cat")
                .env("GIT_TERMINAL_PROMPT", "0");
            if let Some(mark) = &req.mark {
                command.env(orphans::MARK_ENV, mark);
            }
            crate::tools::shell::run_process(command, req.timeout, None, ctx).await
        })
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

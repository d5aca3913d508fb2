//! The candidate paths of `file.complete`: every file and directory under a workdir, from
//! `git ls-files` (tracked plus untracked, honouring `.gitignore` and the other git excludes)
//! inside a repository, else from a walk with the `ignore` crate (which honours `.gitignore`
//! and `.ignore` files even outside a repository). `.git`, `node_modules`, `.venv` and
//! `__pycache__` are always left out. Directories are derived from the files' parents (git)
//! or seen in the walk.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use super::index::Index;

/// Directory names never listed, wherever they are.
pub const SKIPPED: &[&str] = &[".git", "node_modules", ".venv", "__pycache__"];

/// Most candidates kept for one workdir (a bigger tree is cut, and `file.complete` still
/// answers from what was listed). About 40 MB of index for paths of 60 bytes (issue 40: at
/// 1,000,000, `file.complete{workdir:"/"}` from a few clients at once took 640 MB).
pub const MAX_CANDIDATES: usize = 250_000;

/// Most bytes of `git ls-files` output read for one listing (room for
/// [`MAX_CANDIDATES`] paths of 128 bytes); past it git is stopped and the listing is cut.
pub const GIT_OUTPUT_BYTES: u64 = 32 << 20;

/// Longest a listing (git or walk) may take.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(20);

fn skipped(path: &str) -> bool {
    path.split('/').any(|c| SKIPPED.contains(&c))
}

/// How a listing was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `git ls-files` inside a work tree.
    Git,
    /// The ignore-aware walk.
    Walk,
}

/// Every candidate under `workdir` (canonical) as a prepared [`Index`], and how it was
/// listed. Blocking: runs `git` or walks the tree.
pub fn list(workdir: &Path) -> (Index, Source) {
    let (entries, source) = match git_files(workdir) {
        Some(files) => (with_parents(files), Source::Git),
        None => (walk(workdir), Source::Walk),
    };
    (Index::new(entries, MAX_CANDIDATES), source)
}

/// `git ls-files` of the workdir, or `None` when it is not inside a work tree (or git is
/// missing). The argv is fixed; nothing from the client reaches it.
fn git_files(workdir: &Path) -> Option<Vec<String>> {
    let mut child = std::process::Command::new("git")
        .arg("-C")
        .arg(workdir)
        .args([
            "-c",
            "core.quotepath=off",
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    // Read on this thread; a watchdog kills a git that hangs (a stuck network file system).
    let pid = child.id();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(LIST_TIMEOUT).is_err() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    });
    let mut bytes = Vec::new();
    let read = std::io::Read::read_to_end(
        &mut std::io::Read::take(&mut stdout, GIT_OUTPUT_BYTES),
        &mut bytes,
    );
    let cut = bytes.len() as u64 >= GIT_OUTPUT_BYTES;
    if cut {
        // More than a listing keeps: stop git instead of reading the rest.
        let _ = child.kill();
        // The last path may be partial.
        let end = bytes.iter().rposition(|b| *b == 0).unwrap_or(0);
        bytes.truncate(end);
    }
    drop(stdout);
    let status = child.wait();
    let _ = done_tx.send(());
    let _ = watchdog.join();
    if read.is_err() || !(cut || status.ok()?.success()) {
        return None;
    }
    Some(
        bytes
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .filter_map(|p| std::str::from_utf8(p).ok())
            .filter(|p| !skipped(p))
            .take(MAX_CANDIDATES)
            .map(str::to_owned)
            .collect(),
    )
}

/// Files plus every directory above them.
fn with_parents(files: Vec<String>) -> Vec<(String, bool)> {
    let mut dirs: HashSet<&str> = HashSet::new();
    for f in &files {
        let mut p = f.as_str();
        while let Some(i) = p.rfind('/') {
            p = &p[..i];
            if !dirs.insert(p) {
                break;
            }
        }
    }
    let mut out: Vec<(String, bool)> = dirs.iter().map(|d| (d.to_string(), true)).collect();
    drop(dirs);
    out.extend(files.into_iter().map(|f| (f, false)));
    out
}

/// A walk honouring ignore files, outside a git work tree.
fn walk(workdir: &Path) -> Vec<(String, bool)> {
    let deadline = std::time::Instant::now() + LIST_TIMEOUT;
    let walker = ignore::WalkBuilder::new(workdir)
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name().to_str().is_none_or(|n| !SKIPPED.contains(&n)))
        .build();
    let mut out = vec![];
    for entry in walker {
        if out.len() >= MAX_CANDIDATES || std::time::Instant::now() > deadline {
            break;
        }
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(workdir) else {
            continue;
        };
        let Some(rel) = rel.to_str() else { continue };
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        out.push((rel.to_owned(), is_dir));
    }
    out
}

//! Running `git` for shell-change detection: argv only (never a shell string), no prompts,
//! no optional locks (so a status never blocks the user's own git), a deadline after which
//! the child is killed.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a git command may run.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Most bytes read from one git command's output.
const MAX_OUTPUT: u64 = 64 << 20;

/// Runs `git -C dir args…`; its stdout when it exits 0 within [`GIT_TIMEOUT`].
pub fn run(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stdout).take(MAX_OUTPUT).read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + GIT_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                tracing::warn!(dir = %dir.display(), ?args, "git did not finish in time; killed");
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let out = reader.join().ok()?;
    status.filter(|s| s.success()).map(|_| out)
}

/// The top level of the repository `dir` is in, `None` outside one (or without git).
pub fn toplevel(dir: &Path) -> Option<std::path::PathBuf> {
    let out = run(dir, &["rev-parse", "--show-toplevel"])?;
    let s = String::from_utf8(out).ok()?;
    let top = std::path::PathBuf::from(s.trim_end_matches('\n'));
    std::fs::canonicalize(top).ok()
}

/// The commit `HEAD` names, `None` in a repository without commits.
pub fn head(dir: &Path) -> Option<String> {
    let out = run(dir, &["rev-parse", "-q", "--verify", "HEAD^{commit}"])?;
    Some(String::from_utf8(out).ok()?.trim().to_owned())
}

/// `git status --porcelain -z` of the worktree (untracked files listed one by one, no
/// rename detection): `(XY, path relative to the top level)` per entry.
pub fn status(dir: &Path) -> Option<Vec<(String, String)>> {
    let out = run(
        dir,
        &[
            "status",
            "--porcelain",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=all",
        ],
    )?;
    Some(parse_porcelain_z(&out))
}

/// Parses `git status --porcelain -z` output (with `--no-renames`).
pub fn parse_porcelain_z(out: &[u8]) -> Vec<(String, String)> {
    out.split(|b| *b == 0)
        .filter(|e| e.len() > 3)
        .filter_map(|e| {
            let code = std::str::from_utf8(&e[..2]).ok()?.to_owned();
            let path = std::str::from_utf8(&e[3..]).ok()?.to_owned();
            Some((code, path))
        })
        .collect()
}

/// The bytes and mode of `path` (relative to the top level) in `commit`, `None` when the
/// commit has no such file (or it is not a regular file).
pub fn show(top: &Path, commit: &str, path: &str) -> Option<(Vec<u8>, u32)> {
    let tree = run(top, &["ls-tree", "-z", commit, "--", path])?;
    // `<mode> SP <type> SP <object> TAB <path>`
    let line = tree.split(|b| *b == 0).next()?;
    let text = std::str::from_utf8(line).ok()?;
    let mut fields = text.split_whitespace();
    let mode = fields.next()?;
    if fields.next()? != "blob" {
        return None;
    }
    let object = fields.next()?;
    let perm = match mode {
        "100755" => 0o755,
        "100644" => 0o644,
        _ => return None,
    };
    let bytes = run(top, &["cat-file", "blob", object])?;
    Some((bytes, perm))
}

//! Git for teams: the `git` binary, run by argv through `tokio::process` (never a shell
//! string; names that reach argv are the daemon's own `tm…` ids and planner ids checked by
//! [`super::planner`]), with no prompts, `LC_ALL=C`, a deadline after which the child is
//! killed, and bounded output. One worktree per worker at
//! `<top>/.snowpea/worktrees/<teamId>-<k>` on the branch `snowpea/team-<teamId>-<k>`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

/// Longest one git command may run.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// Most bytes kept of a git command's stdout or stderr.
const MAX_OUTPUT: usize = 4 << 20;

/// Identity used for the team's commits when the repository has none configured.
const FALLBACK_NAME: &str = "Snowpea team";
const FALLBACK_EMAIL: &str = "snowpea-team@localhost";

/// What one git command did.
#[derive(Debug, Clone, Default)]
pub struct GitOut {
    /// Exit status 0.
    pub ok: bool,
    /// The exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    /// Standard output (lossy UTF-8, bounded).
    pub stdout: String,
    /// Standard error (lossy UTF-8, bounded).
    pub stderr: String,
}

impl GitOut {
    /// The first line of stderr (else stdout), for a note.
    pub fn why(&self) -> String {
        let s = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        s.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("git failed")
            .to_owned()
    }
}

/// Runs `git -C dir args…` (with `-c` identity options first when `identity` is set).
/// `Err` when git cannot be started or does not finish within [`GIT_TIMEOUT`] (it is
/// killed).
pub async fn git(dir: &Path, args: &[&str]) -> Result<GitOut, String> {
    run(dir, &[], args).await
}

/// [`git`], supplying a fallback committer identity when the repository has none.
pub async fn git_as(dir: &Path, args: &[&str], identity: bool) -> Result<GitOut, String> {
    if identity && !has_identity(dir).await {
        let name = format!("user.name={FALLBACK_NAME}");
        let email = format!("user.email={FALLBACK_EMAIL}");
        return run(dir, &["-c", &name, "-c", &email], args).await;
    }
    run(dir, &[], args).await
}

async fn run(dir: &Path, pre: &[&str], args: &[&str]) -> Result<GitOut, String> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("-C").arg(dir).args(pre);
    cmd.args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_EDITOR", "true")
        .env("GIT_MERGE_AUTOEDIT", "no")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| format!("cannot run git: {e}"))?;
    let out = child.stdout.take().ok_or("git: no stdout")?;
    let err = child.stderr.take().ok_or("git: no stderr")?;
    let run = async {
        let mut o = Vec::new();
        let mut e = Vec::new();
        let mut out = out.take(MAX_OUTPUT as u64);
        let mut err = err.take(MAX_OUTPUT as u64);
        let _ = tokio::join!(out.read_to_end(&mut o), err.read_to_end(&mut e));
        let status = child.wait().await;
        (status, o, e)
    };
    match tokio::time::timeout(GIT_TIMEOUT, run).await {
        Ok((Ok(status), o, e)) => Ok(GitOut {
            ok: status.success(),
            code: status.code(),
            stdout: String::from_utf8_lossy(&o).into_owned(),
            stderr: String::from_utf8_lossy(&e).into_owned(),
        }),
        Ok((Err(e), _, _)) => Err(format!("git: {e}")),
        Err(_) => {
            tracing::warn!(dir = %dir.display(), ?args, "git did not finish in time; killed");
            Err(format!(
                "git {} did not finish within {} s",
                args.first().unwrap_or(&""),
                GIT_TIMEOUT.as_secs()
            ))
        }
    }
}

/// Whether the repository of `dir` has a committer identity, asked once per folder (a team
/// commits and merges many times in the same few folders).
async fn has_identity(dir: &Path) -> bool {
    static KNOWN: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<PathBuf, bool>>> =
        std::sync::OnceLock::new();
    let known = KNOWN.get_or_init(Default::default);
    if let Some(v) = known.lock().unwrap_or_else(|p| p.into_inner()).get(dir) {
        return *v;
    }
    let v = ask_identity(dir).await;
    known
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(dir.to_path_buf(), v);
    v
}

async fn ask_identity(dir: &Path) -> bool {
    let mut ok = true;
    for key in ["user.name", "user.email"] {
        ok &= git(dir, &["config", "--get", key])
            .await
            .is_ok_and(|o| o.ok && !o.stdout.trim().is_empty());
    }
    ok
}

/// The top level of the repository `dir` is in, with a commit at `HEAD`; `Err(why)`
/// otherwise (not a repository, no commit yet, git missing).
pub async fn repository(dir: &Path) -> Result<PathBuf, String> {
    let top = git(dir, &["rev-parse", "--show-toplevel"]).await?;
    if !top.ok {
        return Err(format!("{} is not in a git repository", dir.display()));
    }
    let top = PathBuf::from(top.stdout.trim_end_matches('\n'));
    let top = std::fs::canonicalize(&top).unwrap_or(top);
    head(&top)
        .await
        .ok_or_else(|| format!("the git repository {} has no commit yet", top.display()))?;
    Ok(top)
}

/// The commit `HEAD` names in `dir`.
pub async fn head(dir: &Path) -> Option<String> {
    let o = git(dir, &["rev-parse", "-q", "--verify", "HEAD^{commit}"])
        .await
        .ok()?;
    o.ok.then(|| o.stdout.trim().to_owned())
}

/// Folder of the team's worktrees: `<top>/.snowpea/worktrees`.
pub fn root(top: &Path) -> PathBuf {
    top.join(".snowpea").join("worktrees")
}

/// Worktree of worker `k` of `team_id`.
pub fn path(top: &Path, team_id: &str, k: i64) -> PathBuf {
    root(top).join(format!("{team_id}-{k}"))
}

/// Branch of worker `k` of `team_id`.
pub fn branch(team_id: &str, k: i64) -> String {
    format!("snowpea/team-{team_id}-{k}")
}

/// Keeps the worktrees folder out of the user's `git status` (`info/exclude` of the
/// repository, appended once).
pub async fn exclude(top: &Path) {
    let Ok(o) = git(top, &["rev-parse", "--git-path", "info/exclude"]).await else {
        return;
    };
    if !o.ok {
        return;
    }
    let mut file = PathBuf::from(o.stdout.trim());
    if file.is_relative() {
        file = top.join(file);
    }
    let line = "/.snowpea/worktrees/";
    let old = std::fs::read_to_string(&file).unwrap_or_default();
    if old.lines().any(|l| l.trim() == line) {
        return;
    }
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let sep = if old.is_empty() || old.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    if let Err(e) = std::fs::write(&file, format!("{old}{sep}{line}\n")) {
        tracing::warn!(file = %file.display(), error = %e, "could not exclude the team worktrees");
    }
}

/// Creates worker `k`'s worktree on a new branch at `base`; a leftover of the same name
/// (branch or folder) is removed first.
pub async fn add(top: &Path, team_id: &str, k: i64, base: &str) -> Result<PathBuf, String> {
    let dir = path(top, team_id, k);
    let br = branch(team_id, k);
    if dir.exists() {
        remove(top, &dir).await;
    }
    let _ = git(top, &["branch", "-D", &br]).await;
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(root(top))
        .map_err(|e| format!("create {}: {e}", root(top).display()))?;
    let dir_s = dir.to_string_lossy().into_owned();
    let o = git(top, &["worktree", "add", "-q", "-b", &br, &dir_s, base]).await?;
    if !o.ok {
        return Err(format!("git worktree add: {}", o.why()));
    }
    Ok(dir)
}

/// Removes the worktree at `dir` (forced: its changes are the team's, already merged or
/// given up), falling back to deleting the folder and pruning.
pub async fn remove(top: &Path, dir: &Path) {
    let d = dir.to_string_lossy().into_owned();
    let removed = git(top, &["worktree", "remove", "--force", "--force", &d])
        .await
        .is_ok_and(|o| o.ok);
    if !removed && tokio::fs::try_exists(dir).await.unwrap_or(false) {
        let _ = tokio::fs::remove_dir_all(dir).await;
    }
    let _ = git(top, &["worktree", "prune"]).await;
}

/// Worktrees of `team_id` that exist right now (absolute paths), per `git worktree list`.
pub async fn list(top: &Path, team_id: &str) -> Vec<String> {
    let prefix = root(top).join(format!("{team_id}-"));
    let prefix = prefix.to_string_lossy().into_owned();
    let Ok(o) = git(top, &["worktree", "list", "--porcelain"]).await else {
        return Vec::new();
    };
    o.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .filter(|p| p.starts_with(&prefix))
        .map(str::to_owned)
        .collect()
}

/// Removes every worktree and branch of `team_id` (the end of a team, an interrupt, or a
/// dead team's leftovers at start-up). Idempotent.
pub async fn cleanup(top: &Path, team_id: &str) {
    for wt in list(top, team_id).await {
        remove(top, Path::new(&wt)).await;
    }
    // Folders git no longer knows (a kill between `mkdir` and registration).
    // On the blocking pool: a worktree is a whole checkout.
    let (folder, prefix) = (root(top), format!("{team_id}-"));
    let _ = tokio::task::spawn_blocking(move || {
        if let Ok(entries) = std::fs::read_dir(folder) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
    })
    .await;
    let _ = git(top, &["worktree", "prune"]).await;
    let pattern = format!("refs/heads/snowpea/team-{team_id}-*");
    if let Ok(o) = git(
        top,
        &["for-each-ref", "--format=%(refname:short)", &pattern],
    )
    .await
    {
        for br in o.stdout.lines().map(str::trim).filter(|b| !b.is_empty()) {
            let _ = git(top, &["branch", "-D", br]).await;
        }
    }
    // The folder itself goes when no team uses it any more.
    let _ = std::fs::remove_dir(root(top));
}

/// Commits everything in the worktree `wt` (`git add -A`, then `git commit`); `Ok(false)`
/// when there was nothing to commit.
pub async fn commit_all(wt: &Path, message: &str) -> Result<bool, String> {
    let o = git(wt, &["add", "-A"]).await?;
    if !o.ok {
        return Err(format!("git add: {}", o.why()));
    }
    let staged = git(wt, &["diff", "--cached", "--quiet"]).await?;
    if staged.ok {
        return Ok(false);
    }
    let o = git_as(wt, &["commit", "-q", "--no-verify", "-m", message], true).await?;
    if !o.ok {
        return Err(format!("git commit: {}", o.why()));
    }
    Ok(true)
}

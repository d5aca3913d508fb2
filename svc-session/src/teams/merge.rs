//! Merging a team's work (issue 19 part B): the lead merges a finished task's branch into
//! the checked-out branch of the repository with `git merge --no-ff`, after computing the
//! merge off to the side (`git merge-tree --write-tree`): a conflict is captured from that
//! tree (the conflicted paths and their hunks with markers, bounded) without the lead's
//! working tree ever being touched. A re-queued task first merges the lead's `HEAD` into its own branch, so
//! its worker resolves the same conflict in its worktree ([`merge_lead_into`],
//! [`markers_left`]).

use std::path::Path;

use super::worktrees::{git, git_as};

/// Most characters of conflict hunks kept on a task.
pub const MAX_HUNKS: usize = 16_000;

/// How a merge went.
#[derive(Debug, Clone, PartialEq)]
pub enum Merge {
    /// Merged (or nothing to merge).
    Clean,
    /// Conflicting paths and their hunks; the merge was aborted (or, in a worker's
    /// worktree, left in progress for the worker to resolve).
    Conflict {
        /// Paths with conflicts, relative to the top level.
        files: Vec<String>,
        /// The conflicting hunks (with markers), at most [`MAX_HUNKS`] characters.
        hunks: String,
    },
    /// The merge could not run (a dirty lead tree, git failing): why.
    Failed(String),
}

/// Paths git reports unmerged in `dir`.
async fn unmerged(dir: &Path) -> Vec<String> {
    match git(dir, &["diff", "--name-only", "--diff-filter=U"]).await {
        Ok(o) if o.ok => o
            .stdout
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

async fn hunks(dir: &Path, files: &[String]) -> String {
    let mut args = vec!["diff", "--no-color", "--"];
    args.extend(files.iter().map(String::as_str));
    let text = git(dir, &args).await.map(|o| o.stdout).unwrap_or_default();
    truncate(&text, MAX_HUNKS)
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… (truncated)", &s[..end])
}

/// Runs a merge of `rev` in `dir`; on conflict captures it and, with `abort`, aborts.
async fn merge(dir: &Path, rev: &str, message: &str, abort: bool) -> Merge {
    let o = match git_as(
        dir,
        &["merge", "--no-ff", "--no-verify", "-m", message, rev],
        true,
    )
    .await
    {
        Ok(o) => o,
        Err(e) => return Merge::Failed(e),
    };
    if o.ok {
        return Merge::Clean;
    }
    let files = unmerged(dir).await;
    if files.is_empty() {
        // Refused before merging (untracked/dirty files in the way): nothing to abort.
        let _ = git(dir, &["merge", "--abort"]).await;
        return Merge::Failed(format!("git merge: {}", o.why()));
    }
    let hunks = hunks(dir, &files).await;
    if abort {
        let _ = git(dir, &["merge", "--abort"]).await;
    }
    Merge::Conflict { files, hunks }
}

/// The lead's merge of `branch` into the repository at `top` (`git merge --no-ff`). The
/// merge is first computed without touching the lead's working tree (`git merge-tree
/// --write-tree`): a conflict is reported from that tree, so the person's own uncommitted
/// changes are never put through a `merge --abort`. Only a clean merge runs for real (and
/// git still refuses it, changing nothing, when uncommitted changes are in its way).
pub async fn merge_into_lead(top: &Path, branch: &str, message: &str) -> Merge {
    let probe = git(
        top,
        &[
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            "HEAD",
            branch,
        ],
    )
    .await;
    if let Ok(o) = probe {
        if o.code == Some(1) {
            let mut lines = o.stdout.lines();
            let tree = lines.next().unwrap_or("").trim().to_owned();
            let mut files: Vec<String> = lines
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect();
            files.dedup();
            let mut args = vec!["diff", "--no-color", "HEAD", tree.as_str(), "--"];
            args.extend(files.iter().map(String::as_str));
            let text = git(top, &args).await.map(|o| o.stdout).unwrap_or_default();
            return Merge::Conflict {
                files,
                hunks: truncate(&text, MAX_HUNKS),
            };
        }
        // 0: clean; anything else (an old git without --write-tree): let the merge decide.
    }
    merge(top, branch, message, true).await
}

/// Merges the lead's commit `lead` into the worktree `wt` before a re-queued task runs
/// again; a conflict is left in progress (markers in the files) for the worker.
pub async fn merge_lead_into(wt: &Path, lead: &str, message: &str) -> Merge {
    merge(wt, lead, message, false).await
}

/// Aborts a merge in progress in `dir` (no-op without one).
pub async fn abort(dir: &Path) {
    let _ = git(dir, &["merge", "--abort"]).await;
}

/// Which of `files` (relative to `wt`) still hold conflict markers.
pub fn markers_left(wt: &Path, files: &[String]) -> Vec<String> {
    files
        .iter()
        .filter(|f| std::fs::read_to_string(wt.join(f)).is_ok_and(|text| has_markers(&text)))
        .cloned()
        .collect()
}

/// True when `text` has a line of git's conflict markers (`<<<<<<< `, `>>>>>>> `).
pub fn has_markers(text: &str) -> bool {
    text.lines()
        .any(|l| l.starts_with("<<<<<<< ") || l.starts_with(">>>>>>> "))
}

/// One line naming the conflicting files, for `conflictSummary`.
pub fn summary(files: &[String]) -> String {
    let shown: Vec<&str> = files.iter().take(10).map(String::as_str).collect();
    let more = files.len().saturating_sub(shown.len());
    let mut s = format!("merge conflict in {}", shown.join(", "));
    if more > 0 {
        s.push_str(&format!(" and {more} more"));
    }
    s
}

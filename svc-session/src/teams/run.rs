//! One team's run in the background: plan, worktrees, workers claiming and running tasks,
//! the lead's merges, conflict retries, the end and the cleanup (module doc of
//! [`super`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use snowpea_proto::session::v1 as pb;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::merge::{self, Merge};
use super::planner::{self, Planned};
use super::runner::TaskSpec;
use super::{worktrees, Knobs, Teams};
use crate::store::teams::{self as table, TaskRow, TeamRow};

/// Longest a worker waits for a state change before it looks at the board again.
const POLL: Duration = Duration::from_secs(2);

/// A running team.
pub(super) struct Team {
    teams: Arc<Teams>,
    row: TeamRow,
    top: PathBuf,
    knobs: Knobs,
    cancel: CancellationToken,
    wake: Notify,
}

/// Builds the board rows of a plan.
pub(super) fn board(team_id: &str, plan: &[Planned]) -> Vec<TaskRow> {
    plan.iter()
        .enumerate()
        .map(|(i, p)| TaskRow {
            team_id: team_id.to_owned(),
            task_id: p.id.clone(),
            ord: i as i64,
            title: p.title.clone(),
            detail: p.detail.clone(),
            depends_on: p.depends_on.clone(),
            status: if p.depends_on.is_empty() {
                "queued".into()
            } else {
                "pending".into()
            },
            ..Default::default()
        })
        .collect()
}

/// The prompt of a task for its worker.
/// Longest part of the team's goal and of a conflict's file list repeated in a worker's
/// prompt, characters: a worker's prompt is a subagent task and stays under
/// [`crate::agents::spawn::MAX_TASK_CHARS`] (title ≤ 200, detail ≤ 4000, hunks ≤ 16000).
const MAX_CONTEXT_CHARS: usize = 8_000;

/// `s` cut to [`MAX_CONTEXT_CHARS`], marked when cut.
fn clip(s: &str) -> String {
    match s.char_indices().nth(MAX_CONTEXT_CHARS) {
        Some((i, _)) => format!("{}… (cut)", &s[..i]),
        None => s.to_owned(),
    }
}

fn task_prompt(team_task: &str, t: &TaskRow) -> String {
    let team_task = clip(team_task);
    let mut s = format!(
        "You are one worker of a team, working in your own git worktree (your current \
         directory). Do exactly this task and nothing else, editing files here; the lead \
         commits and merges your work when you finish.\n\nTask: {}",
        t.title
    );
    if !t.detail.is_empty() {
        s.push_str(&format!("\n\n{}", t.detail));
    }
    s.push_str(&format!(
        "\n\nThe team's overall goal, for context only: {team_task}\n\nEnd with a one-line summary of what you changed."
    ));
    s
}

/// The prompt of a conflict retry.
fn conflict_prompt(t: &TaskRow, files: &[String], hunks: &str) -> String {
    format!(
        "Resolve the merge conflict in your worktree. Your earlier work on the task \"{}\" \
         conflicts with work the team has merged since; the lead's latest commit is now being \
         merged into your branch and these files hold conflict markers: {}. Edit them so \
         both changes are kept correctly and no `<<<<<<<`, `=======` or `>>>>>>>` lines are \
         left; do not change anything else.\n\nThe conflicting hunks:\n{}",
        t.title,
        clip(&files.join(", ")),
        hunks
    )
}

impl Team {
    pub(super) fn new(
        teams: Arc<Teams>,
        row: TeamRow,
        knobs: Knobs,
        cancel: CancellationToken,
    ) -> Self {
        Team {
            top: PathBuf::from(&row.workdir),
            teams,
            row,
            knobs,
            cancel,
            wake: Notify::new(),
        }
    }

    fn save(&self, t: &TaskRow) {
        self.teams.save_task(&self.row, t);
    }

    async fn end(&self, state: &str, note: &str) {
        worktrees::cleanup(&self.top, &self.row.id).await;
        let (id, state_s, note_s) = (self.row.id.clone(), state.to_owned(), note.to_owned());
        if let Err(e) = self
            .teams
            .log
            .write(move |c| table::set_state(c, &id, &state_s, &note_s))
            .await
        {
            tracing::error!(team_id = %self.row.id, error = %e, "could not record the end of a team");
        }
        tracing::info!(team_id = %self.row.id, state, note, "team ended");
    }

    fn error_event(&self, message: String) {
        let host = self
            .teams
            .sessions
            .get(&self.row.session_id)
            .ok()
            .and_then(|s| s.host_tools_from());
        self.teams.log.event(
            &self.row.session_id,
            host,
            &pb::ErrorEvent {
                code: "internal".into(),
                message,
                ..Default::default()
            },
            &[],
        );
    }

    /// Runs the team to its end.
    pub(super) async fn run(self) {
        let me = Arc::new(self);
        let lead = match me.teams.sessions.get(&me.row.session_id) {
            Ok(s) => s,
            Err(_) => return me.end("failed", "the team's session is gone").await,
        };
        // The `default` team's guide (project before global) shapes the plan.
        let guide = me
            .teams
            .find_guide(Some(&lead.workdir()), super::guides::DEFAULT_TEAM)
            .map(|(_, _, g)| g);
        let planned = tokio::select! {
            p = planner::plan(&me.teams.home, &me.teams.providers, &me.teams.log, &lead, &me.row.task, me.row.workers, guide.as_ref()) => p,
            _ = me.cancel.cancelled() => return me.end("interrupted", "interrupted while planning").await,
        };
        let plan = match planned {
            Ok(p) => p,
            Err(why) => {
                me.error_event(format!("team {}: no plan: {why}", me.row.id));
                return me.end("failed", &format!("no plan: {why}")).await;
            }
        };
        let workers = (plan.len() as i64).min(me.row.workers).max(1);
        for t in board(&me.row.id, &plan) {
            me.save(&t);
        }
        worktrees::exclude(&me.top).await;
        let Some(base) = worktrees::head(&me.top).await else {
            me.fail_board("the repository has no commit").await;
            return me.end("failed", "the repository has no commit").await;
        };
        // One after another: concurrent `git worktree add`s contend for the repository's locks.
        let mut dirs = Vec::new();
        for k in 1..=workers {
            match worktrees::add(&me.top, &me.row.id, k, &base).await {
                Ok(d) => dirs.push(d),
                Err(why) => {
                    me.error_event(format!("team {}: {why}", me.row.id));
                    me.fail_board(&why).await;
                    me.end("failed", &why).await;
                    return;
                }
            }
        }
        let mut handles = Vec::new();
        for (i, dir) in dirs.into_iter().enumerate() {
            let me = me.clone();
            handles.push(tokio::spawn(async move {
                me.worker(i as i64 + 1, dir).await;
            }));
        }
        for h in handles {
            let _ = h.await;
        }
        let interrupted = me.cancel.is_cancelled();
        let failed = me
            .fail_board(if interrupted {
                "the team was interrupted"
            } else {
                "never became runnable"
            })
            .await;
        let (state, note) = match (interrupted, failed) {
            (true, _) => ("interrupted", "interrupted".to_owned()),
            (false, true) => ("failed", me.failure_reason().await),
            (false, false) => ("done", String::new()),
        };
        me.end(state, &note).await;
    }

    /// Why the team failed: the first failed task that did not fail only because of a
    /// dependency, with its error (`task t2 (Title) failed: …`).
    async fn failure_reason(&self) -> String {
        let board = self.board().await;
        let failed: Vec<&TaskRow> = board.iter().filter(|t| t.status == "failed").collect();
        let root = failed
            .iter()
            .find(|t| !t.note.starts_with("depends on failed task"))
            .or(failed.first());
        match root {
            Some(t) => format!("task {} ({}) failed: {}", t.task_id, t.title, t.note),
            None => "some tasks failed".into(),
        }
    }

    /// Marks every unfinished task `failed` with `note`; true when any task failed.
    async fn fail_board(&self, note: &str) -> bool {
        let mut failed = false;
        for mut t in self.board().await {
            if !table::is_terminal(&t.status) {
                t.status = "failed".into();
                t.note = note.to_owned();
                self.save(&t);
            }
            failed |= t.status == "failed";
        }
        failed
    }

    async fn board(&self) -> Vec<TaskRow> {
        let _ = self.teams.log.flush().await;
        let id = self.row.id.clone();
        self.teams
            .store
            .read("team.board", move |c| table::tasks(c, &id))
            .await
            .unwrap_or_default()
    }

    /// Claims the next task for worker `k` (one transaction of the writer).
    async fn claim(&self, k: i64) -> Option<TaskRow> {
        let slot: Arc<Mutex<Option<TaskRow>>> = Arc::default();
        let out = slot.clone();
        let id = self.row.id.clone();
        let wrote = self
            .teams
            .log
            .write(move |c| {
                let t = table::claim(c, &id, k)?;
                *out.lock().unwrap_or_else(|p| p.into_inner()) = t;
                Ok(())
            })
            .await;
        if let Err(e) = wrote {
            tracing::warn!(team_id = %self.row.id, error = %e, "claim failed");
            return None;
        }
        let t = slot.lock().unwrap_or_else(|p| p.into_inner()).take()?;
        self.teams.emit(&self.row, &t);
        Some(t)
    }

    async fn worker(self: Arc<Self>, k: i64, dir: PathBuf) {
        loop {
            if self.cancel.is_cancelled() {
                return;
            }
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if let Some(t) = self.claim(k).await {
                self.run_task(k, &dir, t).await;
                self.wake.notify_waiters();
                continue;
            }
            if self
                .board()
                .await
                .iter()
                .all(|t| table::is_terminal(&t.status))
            {
                self.wake.notify_waiters();
                return;
            }
            tokio::select! {
                _ = &mut woken => {}
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(POLL) => {}
            }
        }
    }

    async fn run_task(&self, k: i64, wt: &Path, mut t: TaskRow) {
        t.branch = worktrees::branch(&self.row.id, k);
        let retry = t.retries > 0;
        let Some(lead) = worktrees::head(&self.top).await else {
            return self.fail(t, "cannot read the lead's HEAD".into()).await;
        };
        let mut conflict_files = Vec::new();
        let prompt = if retry {
            let msg = format!(
                "team {}: merge the lead into {} for {}",
                self.row.id, t.branch, t.task_id
            );
            match merge::merge_lead_into(wt, &lead, &msg).await {
                Merge::Clean => None,
                Merge::Conflict { files, hunks } => {
                    let p = conflict_prompt(&t, &files, &hunks);
                    conflict_files = files;
                    Some(p)
                }
                Merge::Failed(why) => return self.fail(t, why).await,
            }
        } else {
            // A fresh task starts from everything merged so far.
            for args in [
                vec!["reset", "-q", "--hard", lead.as_str()],
                vec!["clean", "-fdq"],
            ] {
                match worktrees::git(wt, &args).await {
                    Ok(o) if o.ok => {}
                    Ok(o) => return self.fail(t, format!("git {}: {}", args[0], o.why())).await,
                    Err(why) => return self.fail(t, why).await,
                }
            }
            Some(task_prompt(&self.row.task, &t))
        };
        if let Some(prompt) = prompt {
            t.status = "running".into();
            self.save(&t);
            let result = self
                .teams
                .runner
                .run(TaskSpec {
                    parent_session_id: self.row.session_id.clone(),
                    team_id: self.row.id.clone(),
                    title: t.title.clone(),
                    workdir: wt.to_path_buf(),
                    prompt,
                    timeout: self.knobs.task_timeout,
                    cancel: self.cancel.clone(),
                })
                .await;
            t.child_session_id = result.session_id.clone();
            if self.cancel.is_cancelled() {
                merge::abort(wt).await;
                t.note = "the team was interrupted".into();
                return self.fail(t, "the team was interrupted".into()).await;
            }
            if !result.ok {
                merge::abort(wt).await;
                return self.fail(t, result.result).await;
            }
            t.note = result.summary;
            if !conflict_files.is_empty() {
                let left = merge::markers_left(wt, &conflict_files);
                if !left.is_empty() {
                    let summary = merge::summary(&left);
                    merge::abort(wt).await;
                    // The hunks stay those of the lead's merge: the markers are unresolved.
                    let hunks = t.conflict_hunks.clone();
                    return self.conflict(k, t, hunks, summary).await;
                }
            }
        }
        let message = format!("team {} {}: {}", self.row.id, t.task_id, t.title);
        if let Err(why) = worktrees::commit_all(wt, &message).await {
            merge::abort(wt).await;
            return self.fail(t, why).await;
        }
        t.status = "done".into();
        self.save(&t);
        let outcome = {
            let _lead = self.teams.merging.lock().await;
            merge::merge_into_lead(&self.top, &t.branch, &format!("Merge {message}")).await
        };
        match outcome {
            Merge::Clean => {
                t.status = "merged".into();
                t.conflict_hunks.clear();
                t.conflict_summary.clear();
                self.save(&t);
                self.promote().await;
            }
            Merge::Conflict { files, hunks } => {
                let summary = merge::summary(&files);
                self.conflict(k, t, hunks, summary).await
            }
            Merge::Failed(why) => self.fail(t, why).await,
        }
    }

    /// A merge conflict on `t`: re-queued to worker `k` (`conflict`, then `queued`) until
    /// it has been retried `maxConflictRetries` times, then `failed` with its dependants.
    async fn conflict(&self, k: i64, mut t: TaskRow, hunks: String, summary: String) {
        t.conflict_hunks = hunks;
        t.conflict_summary = summary.clone();
        if t.retries >= self.knobs.max_conflict_retries {
            let why = format!("{summary}; still conflicting after {} retries", t.retries);
            return self.fail(t, why).await;
        }
        t.retries += 1;
        t.status = "conflict".into();
        t.note = summary;
        self.save(&t);
        t.status = "queued".into();
        t.agent_n = Some(k);
        self.save(&t);
    }

    /// Marks `t` failed with `why`, and every task that (transitively) depends on it.
    async fn fail(&self, mut t: TaskRow, why: String) {
        tracing::info!(team_id = %self.row.id, task_id = %t.task_id, why = %why, "team task failed");
        t.status = "failed".into();
        t.note = why;
        self.save(&t);
        let board = self.board().await;
        let mut failed: Vec<String> = vec![t.task_id.clone()];
        let mut changed = true;
        let mut by: HashMap<String, TaskRow> =
            board.into_iter().map(|x| (x.task_id.clone(), x)).collect();
        while changed {
            changed = false;
            let ids: Vec<String> = by.keys().cloned().collect();
            for id in ids {
                let x = &by[&id];
                if table::is_terminal(&x.status) || x.task_id == t.task_id {
                    continue;
                }
                if let Some(dep) = x.depends_on.iter().find(|d| failed.contains(d)) {
                    // Only tasks that have not started: a running dependant cannot exist
                    // (it needs its dependencies merged).
                    let mut x = x.clone();
                    x.status = "failed".into();
                    x.note = format!("depends on failed task {dep}");
                    self.save(&x);
                    failed.push(x.task_id.clone());
                    by.insert(id, x);
                    changed = true;
                }
            }
        }
    }

    /// Moves `pending` tasks whose dependencies are all merged to `queued`.
    async fn promote(&self) {
        let board = self.board().await;
        let by: HashMap<&str, &TaskRow> = board.iter().map(|t| (t.task_id.as_str(), t)).collect();
        for t in board.iter().filter(|t| t.status == "pending") {
            if table::ready(t, &by) {
                let mut t = t.clone();
                t.status = "queued".into();
                self.save(&t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workers_prompt_stays_a_valid_subagent_task() {
        let t = TaskRow {
            title: "t".repeat(200),
            detail: "d".repeat(4000),
            ..Default::default()
        };
        let long_goal = "g".repeat(100_000);
        let p = task_prompt(&long_goal, &t);
        assert!(
            p.chars().count() < crate::agents::spawn::MAX_TASK_CHARS,
            "{}",
            p.len()
        );
        assert!(p.contains("… (cut)"));
        let files: Vec<String> = (0..5000).map(|i| format!("src/file{i}.rs")).collect();
        let c = conflict_prompt(&t, &files, &"h".repeat(merge::MAX_HUNKS));
        assert!(
            c.chars().count() < crate::agents::spawn::MAX_TASK_CHARS,
            "{}",
            c.len()
        );
        assert_eq!(task_prompt("short goal", &t).matches("(cut)").count(), 0);
    }
}

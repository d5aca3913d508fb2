//! Per-turn checkpoints of the workdir (issue 20): `checkpoint.list`, `checkpoint.diff`,
//! `checkpoint.restore`, `checkpoint.delete` and the `checkpoint.updated` /
//! `checkpoint.restored` events. Owns the `checkpoints` and `checkpoint_files` tables and the
//! blob store `$SNOWPEA_HOME/checkpoints/<sessionId>/objects/`.
//!
//! **Capture.** Before a tool call that writes files ([`crate::tools::Writes`]) runs,
//! [`Checkpoints::before_call`] stores the before-bytes of each file the turn touches for the
//! first time (blob fsynced) and commits its manifest entry (marked pending) through the
//! event writer — so after a kill -9 mid-call the checkpoint still restores the file. For a
//! shell command it snapshots the working tree instead ([`detect`]). After the call,
//! [`Checkpoints::after_call`] records the after-states (and the files the command changed),
//! queued in order with the turn's events, and emits `checkpoint.updated` with the whole
//! manifest. A manifest exists only for turns that changed at least one file; its id is the
//! turn id. Settings `checkpoints.enabled`, `maxTurns`, `maxBytes` ([`config`]); the oldest
//! checkpoints are pruned first when a new one starts.
//!
//! **Restore.** See [`restore`]: `session_busy` while a turn runs, skips (`excluded`,
//! `not_restorable`, `missing_blob`, `changed_since` unless `force`), an undo checkpoint
//! (`kind: "restore"`, id `r-<12 hex>`) committed before any file is written, `dryRun`
//! writing and emitting nothing.
//!
//! **Remote backends** (ssh, docker; issue 32 item 9). The files a call declares are
//! captured, diffed and restored through the session's [`Backend`] ([`files::Files`]): the
//! before-bytes are read with its file operations (a missing file recorded as absent,
//! `created`), and a restore writes them back with [`Backend::write_atomic`] and deletes
//! created files with [`Backend::remove_file`], in the backend's workdir (the checkpoint's
//! `workdir`). Limits there: a `shell` command is not captured (there is no tree snapshot —
//! no git status or scan runs on the remote side), permission bits are neither recorded nor
//! restored (a backend reports none; its write keeps a replaced file's mode), nothing is
//! fsynced remotely, and a path with a symbolic link on its way is not restored
//! (`not_restorable`). Diff and restore use the session's backend at the time of the call;
//! after a `backend.set` to another kind they act on the new backend's files. Settings still
//! come from the session's host workdir.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use snowpea_common::home::Home;
use snowpea_common::time::now_iso;
use snowpea_proto::rpc::v1::OkResult;
use snowpea_proto::session::v1 as pb;

use crate::backend::{Backend, BackendKind};
use crate::events::EventLog;
use crate::session::{Registry, Session};
use crate::store::checkpoints::{self as sql, CheckpointRow, FileRow};
use crate::store::Store;
use crate::tools::Writes;
use snowpea_session_error::{Error, Result};

pub mod blobs;
pub mod capture;
pub mod config;
pub mod detect;
pub mod diff;
pub mod files;
pub mod git;
pub mod paths;
pub mod restore;
pub mod wire;

use blobs::Blobs;
use config::Limits;
use files::Files;
use restore::{PathPlan, Write1};
use wire::Skipped;

/// `kind` of a turn's checkpoint.
pub const KIND_TURN: &str = "turn";
/// `kind` of the undo checkpoint a restore writes first.
pub const KIND_RESTORE: &str = "restore";

/// A tool call being captured (from [`Checkpoints::before_call`] to
/// [`Checkpoints::after_call`]).
#[derive(Debug)]
pub struct Capture {
    session_id: String,
    workdir: PathBuf,
    /// The session's host workdir, whose settings apply (the same as `workdir` locally).
    settings: PathBuf,
    files: Files,
    what: Watch,
}

#[derive(Debug)]
enum Watch {
    /// Workdir-relative paths the call declared.
    Files(Vec<String>),
    /// The working tree before a shell command.
    Tree(detect::Snapshot),
}

/// The checkpoint component (see the module doc).
pub struct Checkpoints {
    home: Home,
    log: EventLog,
    store: Store,
    registry: Registry,
    /// The manifest of each session's latest capturing turn (the one a running turn adds to).
    current: Mutex<HashMap<String, CheckpointRow>>,
}

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoints").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs blocking file work on the blocking pool (a panic becomes `internal`).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(anyhow::anyhow!("checkpoint work failed: {e}")))
}

impl Checkpoints {
    /// The component over the event writer, the read store and the session registry.
    pub fn new(home: Home, log: EventLog, store: Store, registry: Registry) -> Self {
        Checkpoints {
            home,
            log,
            store,
            registry,
            current: Mutex::new(HashMap::new()),
        }
    }

    fn session_dir(&self, session_id: &str) -> PathBuf {
        self.home.root().join("checkpoints").join(session_id)
    }

    fn blobs(&self, session_id: &str) -> Blobs {
        Blobs::new(&self.session_dir(session_id))
    }

    // ---- capture ----------------------------------------------------------------------

    /// Before a tool call of turn `turn_id` (prompt `prompt`) that `writes`: stores the
    /// before-bytes of files the turn touches for the first time and commits their entries,
    /// or snapshots the tree for a shell command. `None` when nothing is to be captured
    /// (checkpoints disabled, a call that writes nothing, an id unusable as a directory).
    pub async fn before_call(
        &self,
        session: &Session,
        turn_id: &str,
        prompt: &str,
        writes: Writes,
    ) -> Option<Capture> {
        self.before_call_in(session, turn_id, prompt, writes, Files::Local)
            .await
    }

    /// [`Checkpoints::before_call`] for a call that `backend` runs: a local backend is
    /// captured on the host as before; a remote one (ssh, docker) through its own file
    /// operations, in its workdir, for the files the call declares. A shell command on a
    /// remote backend is not captured (no tree snapshot there; see the module doc).
    pub async fn before_call_on(
        &self,
        session: &Session,
        turn_id: &str,
        prompt: &str,
        writes: Writes,
        backend: Arc<dyn Backend>,
    ) -> Option<Capture> {
        let files = if backend.kind() == BackendKind::Local {
            Files::Local
        } else {
            Files::Remote(backend)
        };
        self.before_call_in(session, turn_id, prompt, writes, files)
            .await
    }

    async fn before_call_in(
        &self,
        session: &Session,
        turn_id: &str,
        prompt: &str,
        writes: Writes,
        files: Files,
    ) -> Option<Capture> {
        if matches!(writes, Writes::Nothing) || paths::check_id("", &session.id).is_err() {
            return None;
        }
        let settings = crate::tools::paths::canonical_workdir(&session.workdir());
        let workdir = match &files {
            Files::Local => settings.clone(),
            Files::Remote(b) => b.workdir().unwrap_or_else(|| session.workdir()),
        };
        let home = self.home.clone();
        let wd = settings.clone();
        let limits = blocking(move || Limits::load(&home, &wd)).await.ok()?;
        if !limits.enabled {
            return None;
        }
        let what = match writes {
            Writes::Nothing => return None,
            Writes::Files(abs) => Watch::Files(
                abs.iter()
                    .filter_map(|p| paths::relative(&workdir, p))
                    .collect(),
            ),
            // A remote backend has no tree snapshot: its shell commands are not captured.
            Writes::Workdir if !files.is_local() => return None,
            Writes::Workdir => {
                let wd = workdir.clone();
                Watch::Tree(blocking(move || detect::snapshot(&wd)).await.ok()?)
            }
        };
        let capture = Capture {
            session_id: session.id.clone(),
            workdir: workdir.clone(),
            settings,
            files: files.clone(),
            what,
        };
        let mut manifest = self.manifest_of(session, turn_id, prompt, &workdir);
        let is_new = manifest.files.is_empty();
        if let Watch::Files(rels) = &capture.what {
            let fresh: Vec<String> = rels
                .iter()
                .filter(|r| !manifest.files.iter().any(|f| &f.path == *r))
                .cloned()
                .collect();
            if fresh.is_empty() {
                return Some(capture);
            }
            let blobs = self.blobs(&session.id);
            let wd = workdir.clone();
            let files = files.clone();
            let entries = blocking(move || {
                fresh
                    .iter()
                    .map(|rel| capture::before_tool_in(&files, &blobs, &wd, rel))
                    .collect::<Vec<_>>()
            })
            .await
            .ok()?;
            let first_pos = manifest.files.len();
            manifest.files.extend(entries.iter().cloned());
            let header = manifest.clone();
            // Committed before the tool runs: a crash mid-call still finds the before-bytes.
            let written = self
                .log
                .write(move |c| {
                    sql::put_checkpoint(c, &header)?;
                    for (i, e) in entries.iter().enumerate() {
                        sql::put_file(c, &header.session_id, &header.id, first_pos + i, e)?;
                    }
                    Ok(())
                })
                .await;
            if let Err(e) = written {
                tracing::error!(error = %format!("{e:#}"), "checkpoint entry not written");
                return None;
            }
            self.store_manifest(manifest.clone());
            if is_new {
                self.prune(&session.id, &limits, &manifest.id).await;
            }
        }
        Some(capture)
    }

    /// After the call of `capture`: records the after-states (and for a shell command the
    /// files it changed), queued with the turn's events, and emits `checkpoint.updated`.
    pub async fn after_call(
        &self,
        session: &Session,
        turn_id: &str,
        prompt: &str,
        capture: Capture,
    ) {
        let Capture {
            session_id,
            workdir,
            settings,
            files,
            what,
        } = capture;
        let manifest = self.manifest_of(session, turn_id, prompt, &workdir);
        let was_empty = manifest.files.is_empty();
        let blobs = self.blobs(&session_id);
        let before = manifest.clone();
        let wd = workdir.clone();
        let settled = blocking(move || {
            let mut m = manifest;
            let touched: Vec<String> = match what {
                Watch::Files(rels) => rels,
                Watch::Tree(snapshot) => {
                    let changes = detect::changes(&snapshot, &wd);
                    let mut touched = Vec::with_capacity(changes.len());
                    for change in changes {
                        if !m.files.iter().any(|f| f.path == change.path) {
                            m.files.push(capture::from_shell(&blobs, &change));
                        }
                        touched.push(change.path);
                    }
                    touched
                }
            };
            let mut dropped = Vec::new();
            m.files.retain_mut(|f| {
                if !touched.contains(&f.path) {
                    return true;
                }
                let keep = capture::settle_in(&files, f, &wd);
                if !keep {
                    dropped.push(f.path.clone());
                }
                keep
            });
            (m, dropped)
        })
        .await;
        let Ok((manifest, dropped)) = settled else {
            return;
        };
        if manifest == before && dropped.is_empty() {
            return;
        }
        // Only the entries this call changed are written (a turn touching many files would
        // otherwise rewrite its whole manifest after every call).
        let changed: Vec<(usize, FileRow)> = manifest
            .files
            .iter()
            .enumerate()
            .filter(|(_, f)| !before.files.contains(f))
            .map(|(i, f)| (i, f.clone()))
            .collect();
        let mut header = manifest.clone();
        header.files.clear();
        let nonempty = !manifest.files.is_empty();
        self.log.write_later(move |c| {
            if nonempty {
                sql::put_checkpoint(c, &header)?;
            }
            for path in &dropped {
                sql::remove_file(c, &header.session_id, &header.id, path)?;
            }
            for (i, f) in &changed {
                sql::put_file(c, &header.session_id, &header.id, *i, f)?;
            }
            Ok(())
        });
        if !manifest.files.is_empty() || !was_empty {
            self.log.event_to(session, &wire::updated_event(&manifest));
        }
        let new = was_empty && !manifest.files.is_empty();
        let id = manifest.id.clone();
        self.store_manifest(manifest);
        if new {
            // A shell command started this checkpoint.
            if let Err(e) = self.log.flush().await {
                tracing::error!(error = %format!("{e:#}"), "checkpoint flush failed");
            }
            let home = self.home.clone();
            if let Ok(limits) = blocking(move || Limits::load(&home, &settings)).await {
                self.prune(&session_id, &limits, &id).await;
            }
        }
    }

    /// The in-memory manifest of `turn_id` (a fresh empty one when the session's latest
    /// manifest is of another turn).
    fn manifest_of(
        &self,
        session: &Session,
        turn_id: &str,
        prompt: &str,
        workdir: &Path,
    ) -> CheckpointRow {
        let cur = lock(&self.current);
        match cur.get(&session.id) {
            Some(m) if m.id == turn_id => m.clone(),
            _ => CheckpointRow {
                session_id: session.id.clone(),
                id: turn_id.to_owned(),
                turn_id: Some(turn_id.to_owned()),
                workdir: workdir.to_string_lossy().into_owned(),
                created_at: now_iso(),
                prompt: prompt.to_owned(),
                kind: KIND_TURN.into(),
                files: Vec::new(),
            },
        }
    }

    fn store_manifest(&self, m: CheckpointRow) {
        lock(&self.current).insert(m.session_id.clone(), m);
    }

    /// Deletes the oldest checkpoints of a session (never `keep`) beyond `maxTurns`, then
    /// while its blobs exceed `maxBytes`, and the blobs nothing refers to any more.
    async fn prune(&self, session_id: &str, limits: &Limits, keep: &str) {
        let sid = session_id.to_owned();
        let Ok(rows) = self
            .store
            .read("checkpoints.prune", move |c| sql::list(c, &sid))
            .await
        else {
            return;
        };
        let mut ids: Vec<String> = rows
            .into_iter()
            .map(|r| r.id)
            .filter(|id| id != keep)
            .collect();
        let mut doomed = Vec::new();
        while ids.len() + 1 > limits.max_turns as usize {
            doomed.push(ids.remove(0));
        }
        if !doomed.is_empty() {
            tracing::info!(
                session_id,
                count = doomed.len(),
                "pruning checkpoints beyond maxTurns"
            );
            self.delete_rows(session_id, doomed).await;
        }
        let blobs = self.blobs(session_id);
        loop {
            let b = blobs.clone();
            let total = blocking(move || b.total_bytes()).await.unwrap_or(0);
            if total <= limits.max_bytes || ids.is_empty() {
                break;
            }
            let oldest = ids.remove(0);
            tracing::info!(session_id, checkpoint = %oldest, total, "pruning checkpoints beyond maxBytes");
            self.delete_rows(session_id, vec![oldest]).await;
        }
    }

    /// Deletes the checkpoints `ids` of a session and the blobs left unreferenced.
    async fn delete_rows(&self, session_id: &str, ids: Vec<String>) {
        let sid = session_id.to_owned();
        let written = self
            .log
            .write(move |c| {
                for id in &ids {
                    sql::delete(c, &sid, id)?;
                }
                Ok(())
            })
            .await;
        if let Err(e) = written {
            tracing::error!(error = %format!("{e:#}"), "checkpoints not deleted");
            return;
        }
        self.collect_garbage(session_id).await;
    }

    /// Removes the blobs of a session no entry refers to.
    async fn collect_garbage(&self, session_id: &str) {
        let sid = session_id.to_owned();
        let Ok(keep) = self
            .store
            .read("checkpoints.blobs", move |c| sql::referenced_blobs(c, &sid))
            .await
        else {
            return;
        };
        let blobs = self.blobs(session_id);
        let _ = blocking(move || blobs.retain(&keep)).await;
    }

    // ---- methods ----------------------------------------------------------------------

    /// The session's checkpoints, oldest first, after checking `sessionId` names a session.
    async fn rows(&self, session_id: &str) -> Result<Vec<CheckpointRow>> {
        paths::check_id("params.sessionId", session_id)?;
        if self.registry.row(session_id).await?.is_none() {
            return Err(Error::NotFound(format!("no session {session_id:?}")));
        }
        let sid = session_id.to_owned();
        self.store
            .read("checkpoints.list", move |c| sql::list(c, &sid))
            .await
    }

    /// Settings of the session's workdir.
    async fn limits_of(&self, workdir: PathBuf) -> Limits {
        let home = self.home.clone();
        blocking(move || Limits::load(&home, &workdir))
            .await
            .unwrap_or_default()
    }

    /// `checkpoint.list`: the session's checkpoints, newest first (empty while
    /// `checkpoints.enabled` is false).
    pub async fn list(&self, p: pb::CheckpointListParams) -> Result<pb::CheckpointListResult> {
        let rows = self.rows(&p.session_id).await?;
        let workdir = self.workdir_of(&p.session_id, &rows).await?;
        if !self.limits_of(workdir).await.enabled {
            return Ok(pb::CheckpointListResult::default());
        }
        Ok(pb::CheckpointListResult {
            checkpoints: rows.iter().rev().map(wire::manifest).collect(),
        })
    }

    /// The canonical workdir of a session (from its row, else its checkpoints).
    async fn workdir_of(&self, session_id: &str, rows: &[CheckpointRow]) -> Result<PathBuf> {
        let wd = match self.registry.row(session_id).await? {
            Some(r) => r.workdir,
            None => rows.first().map(|r| r.workdir.clone()).unwrap_or_default(),
        };
        Ok(crate::tools::paths::canonical_workdir(Path::new(&wd)))
    }

    /// The file operations of a session's checkpoints and the workdir they act in: a live
    /// session's remote backend (its workdir), else the host (`workdir`).
    fn files_of(&self, session_id: &str, workdir: PathBuf) -> (Files, PathBuf) {
        if let Ok(s) = self.registry.get(session_id) {
            let backend = s.backend();
            if backend.kind() != BackendKind::Local {
                let wd = backend.workdir().unwrap_or_else(|| s.workdir());
                return (Files::Remote(backend), wd);
            }
        }
        (Files::Local, workdir)
    }

    /// The plan of checkpoint `id`, for diff and restore.
    async fn planned(
        &self,
        session_id: &str,
        id: &str,
        through: bool,
        paths_filter: &[String],
    ) -> Result<Planned> {
        paths::check_id("params.id", id)?;
        let rows = self.rows(session_id).await?;
        let settings = self.workdir_of(session_id, &rows).await?;
        let (files, workdir) = self.files_of(session_id, settings.clone());
        let filter = paths::filter("params.paths", &workdir, paths_filter)?;
        let plan = restore::plan(&rows, id, through, filter.as_deref()).ok_or_else(|| {
            Error::NotFound(format!("no checkpoint {id:?} in session {session_id:?}"))
        })?;
        Ok(Planned {
            settings,
            files,
            workdir,
            plan,
        })
    }

    /// `checkpoint.diff`: per file, the unified diff from the current file to its
    /// before-state, with `binary`, `changedSince` and `restorable`.
    pub async fn diff(&self, p: pb::CheckpointDiffParams) -> Result<pb::CheckpointDiffResult> {
        let Planned {
            files: fs,
            workdir,
            plan,
            ..
        } = self
            .planned(&p.session_id, &p.id, p.through, &p.paths)
            .await?;
        let blobs = self.blobs(&p.session_id);
        let files = blocking(move || {
            plan.iter()
                .map(|pp| diff::file_diff_in(&fs, &blobs, &workdir, pp))
                .collect()
        })
        .await?;
        Ok(pb::CheckpointDiffResult { files })
    }

    /// `checkpoint.restore` (see the module doc and [`restore`]).
    pub async fn restore(
        &self,
        p: pb::CheckpointRestoreParams,
    ) -> Result<pb::CheckpointRestoreResult> {
        self.restore_in(p, None).await
    }

    /// [`Checkpoints::restore`] run by the session's own turn `turn_id` (the `/undo`
    /// command turn), which does not count as busy; any other running turn does.
    pub async fn restore_in(
        &self,
        p: pb::CheckpointRestoreParams,
        own_turn: Option<&str>,
    ) -> Result<pb::CheckpointRestoreResult> {
        let Planned {
            settings,
            files,
            workdir,
            plan,
        } = self
            .planned(&p.session_id, &p.id, p.through, &p.paths)
            .await?;
        let live = self.registry.get(&p.session_id).ok();
        if let Some(s) = &live {
            let busy = s
                .turns()
                .running
                .as_ref()
                .is_some_and(|r| Some(r.turn_id.as_str()) != own_turn);
            if busy {
                return Err(Error::SessionBusy(format!(
                    "session {:?} is running a turn; restore when it is idle",
                    p.session_id
                )));
            }
        }
        let blobs = self.blobs(&p.session_id);
        let force = p.force;
        let wd = workdir.clone();
        let b = blobs.clone();
        let fs = files.clone();
        let (writes, mut skipped) = blocking(move || decide(&fs, &b, &wd, &plan, force)).await?;
        let mut restored: Vec<String> = writes.iter().map(|w| w.path.clone()).collect();
        if p.dry_run || writes.is_empty() {
            return Ok(wire::restore_result(None, restored, &skipped));
        }
        // The undo checkpoint is committed before any file changes.
        let b = blobs.clone();
        let ws = writes.clone();
        let fs = files.clone();
        let undo_files = blocking(move || {
            let files: Vec<FileRow> = fs.each(&ws, |w| restore::undo_entry_in(&fs, &b, w));
            let shas: Vec<String> = files.iter().filter_map(|f| f.before_sha.clone()).collect();
            b.sync_dirs_of(&shas);
            files
        })
        .await?;
        let undo = CheckpointRow {
            session_id: p.session_id.clone(),
            id: format!("r-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
            turn_id: None,
            workdir: workdir.to_string_lossy().into_owned(),
            created_at: now_iso(),
            prompt: String::new(),
            kind: KIND_RESTORE.into(),
            files: undo_files,
        };
        let row = undo.clone();
        self.log
            .write(move |c| {
                sql::put_checkpoint(c, &row)?;
                for (i, f) in row.files.iter().enumerate() {
                    sql::put_file(c, &row.session_id, &row.id, i, f)?;
                }
                Ok(())
            })
            .await?;
        let wd = workdir.clone();
        let failed = blocking(move || {
            let failed: Vec<String> = files
                .each(&writes, |w| match files.apply(&wd, w) {
                    Ok(()) => None,
                    Err(e) => {
                        tracing::warn!(path = %w.path, error = %e, "restore write failed");
                        Some(w.path.clone())
                    }
                })
                .into_iter()
                .flatten()
                .collect();
            files.sync_parents(&writes);
            failed
        })
        .await?;
        restored.retain(|r| !failed.contains(r));
        skipped.extend(failed.into_iter().map(|path| Skipped {
            path,
            reason: "not_restorable",
        }));
        let result = wire::restore_result(Some(undo.id.clone()), restored, &skipped);
        match &live {
            Some(s) => {
                self.log.event_to(s, &wire::updated_event(&undo));
                self.log.event_to(s, &wire::restored_event(&result));
            }
            None => {
                self.log
                    .event(&p.session_id, None, &wire::updated_event(&undo), &[]);
                self.log
                    .event(&p.session_id, None, &wire::restored_event(&result), &[]);
            }
        }
        self.log.flush().await?;
        let limits = self.limits_of(settings).await;
        self.prune(&p.session_id, &limits, &undo.id).await;
        Ok(result)
    }

    /// `checkpoint.delete`: one checkpoint (`id`; an unknown one is `not_found`) or all of
    /// the session's (`ok` also when it has none).
    pub async fn delete(&self, p: pb::CheckpointDeleteParams) -> Result<OkResult> {
        paths::check_id("params.sessionId", &p.session_id)?;
        match p.id.as_deref() {
            Some(id) => {
                paths::check_id("params.id", id)?;
                // The running turn's manifest may still be queued in the event writer.
                let current = lock(&self.current)
                    .get(&p.session_id)
                    .is_some_and(|m| m.id == id);
                let (sid, cid) = (p.session_id.clone(), id.to_owned());
                let known = current
                    || self
                        .store
                        .read("checkpoints.exists", move |c| sql::exists(c, &sid, &cid))
                        .await?;
                if !known {
                    return Err(Error::NotFound(format!(
                        "no checkpoint {id:?} in session {:?}",
                        p.session_id
                    )));
                }
                {
                    let mut cur = lock(&self.current);
                    if cur.get(&p.session_id).is_some_and(|m| m.id == id) {
                        cur.remove(&p.session_id);
                    }
                }
                self.delete_rows(&p.session_id, vec![id.to_owned()]).await;
            }
            None => self.delete_session(&p.session_id).await?,
        }
        Ok(OkResult { ok: true })
    }

    /// Removes every checkpoint of a session and its store directory (`checkpoint.delete`
    /// without an id, `session.deleteSaved`).
    pub async fn delete_session(&self, session_id: &str) -> Result<()> {
        if paths::check_id("", session_id).is_err() {
            return Ok(());
        }
        lock(&self.current).remove(session_id);
        let sid = session_id.to_owned();
        self.log
            .write(move |c| sql::delete_session(c, &sid))
            .await?;
        let dir = self.session_dir(session_id);
        blocking(move || match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                tracing::warn!(dir = %dir.display(), error = %e, "checkpoint store not removed")
            }
            _ => {}
        })
        .await?;
        Ok(())
    }
}

/// What [`Checkpoints::planned`] found.
struct Planned {
    /// The session's host workdir (whose settings apply).
    settings: PathBuf,
    /// The file operations a diff or restore uses.
    files: Files,
    /// The workdir they act in (`settings` locally, the backend's remotely).
    workdir: PathBuf,
    /// The per-path plan.
    plan: Vec<PathPlan>,
}

/// Splits a plan into the writes a restore makes and the paths it skips.
fn decide(
    files: &Files,
    blobs: &Blobs,
    workdir: &Path,
    plan: &[PathPlan],
    force: bool,
) -> (Vec<Write1>, Vec<Skipped>) {
    let mut writes = Vec::new();
    let mut skipped = Vec::new();
    for pp in plan {
        let skip = |reason| Skipped {
            path: pp.path.clone(),
            reason,
        };
        if let Some(reason) = pp.refused() {
            skipped.push(skip(reason));
            continue;
        }
        let Some(target) = files.target(workdir, &pp.path) else {
            skipped.push(skip("not_restorable"));
            continue;
        };
        let Ok(bytes) = restore::wanted(blobs, pp) else {
            skipped.push(skip("missing_blob"));
            continue;
        };
        if !force && pp.changed_since(&files.current(&target)) {
            skipped.push(skip("changed_since"));
            continue;
        }
        let mode = files.mode_for(pp, &target);
        writes.push(Write1 {
            path: pp.path.clone(),
            target,
            bytes,
            mode,
        });
    }
    (writes, skipped)
}

#[cfg(test)]
#[path = "checkpoints_tests.rs"]
mod tests;

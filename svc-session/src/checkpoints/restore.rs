//! What a restore (or its diff) would do, and doing it: for each path of the chosen
//! checkpoint (with `through`, of it and every later one) the before-state comes from the
//! earliest entry and the state the turns left from the latest; a path whose file no longer
//! matches that state `changed_since` (the user edited it after the turn). Writes are atomic
//! (temp file in the same directory, fsync, rename) with the file's mode, deletes remove
//! files the turns created, and nothing is touched outside the workdir
//! ([`super::paths::target`]).

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::blobs::{sync_dir, Blobs};
use super::capture::{Current, CREATED, DELETED, MODIFIED};
use super::paths;
use crate::store::checkpoints::{CheckpointRow, FileRow};

/// Mode of a restored file whose before-mode is unknown.
const DEFAULT_MODE: u32 = 0o644;

/// The plan for one path.
#[derive(Debug, Clone)]
pub struct PathPlan {
    /// Workdir-relative path.
    pub path: String,
    /// The earliest entry (its before-state is what a restore puts back).
    pub first: FileRow,
    /// The latest entry (its after-state is what the file should be now).
    pub last: FileRow,
}

impl PathPlan {
    /// `excluded` or `not_restorable` when the before-state cannot be put back at all.
    pub fn refused(&self) -> Option<&'static str> {
        match self.first.skipped.as_deref() {
            Some("excluded") => Some("excluded"),
            Some(_) => Some("not_restorable"),
            None if !self.first.restorable => Some("not_restorable"),
            None => None,
        }
    }

    /// True when the restore deletes the file (the turns created it).
    pub fn deletes(&self) -> bool {
        self.first.status == CREATED
    }

    /// True when what is at the path now is not what the turns left there. A call that
    /// never finished (a crash mid-call) left an unknown state, which is not held against
    /// the file.
    pub fn changed_since(&self, now: &Current) -> bool {
        if self.last.pending {
            return false;
        }
        if self.last.status == DELETED {
            return *now != Current::Absent;
        }
        now.sha() != self.last.after_sha
    }
}

/// The per-path plan of checkpoint `id` among `rows` (oldest first), in the order the paths
/// were first touched, limited to `filter` when given; `None` when `id` is not there.
pub fn plan(
    rows: &[CheckpointRow],
    id: &str,
    through: bool,
    filter: Option<&[String]>,
) -> Option<Vec<PathPlan>> {
    let at = rows.iter().position(|r| r.id == id)?;
    let chosen = if through { &rows[at..] } else { &rows[at..=at] };
    let mut order: Vec<String> = Vec::new();
    let mut by_path: HashMap<String, PathPlan> = HashMap::new();
    for row in chosen {
        for f in &row.files {
            if filter.is_some_and(|keep| !keep.iter().any(|k| k == &f.path)) {
                continue;
            }
            match by_path.get_mut(&f.path) {
                Some(p) => p.last = f.clone(),
                None => {
                    order.push(f.path.clone());
                    by_path.insert(
                        f.path.clone(),
                        PathPlan {
                            path: f.path.clone(),
                            first: f.clone(),
                            last: f.clone(),
                        },
                    );
                }
            }
        }
    }
    Some(
        order
            .into_iter()
            .filter_map(|p| by_path.remove(&p))
            .collect(),
    )
}

/// The before-bytes of a path are not in the blob store (`missing_blob`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissingBlob;

/// The bytes a restore writes for `p` (`Ok(None)`: it deletes the file).
pub fn wanted(blobs: &Blobs, p: &PathPlan) -> Result<Option<Vec<u8>>, MissingBlob> {
    if p.deletes() {
        return Ok(None);
    }
    match p.first.before_sha.as_deref() {
        Some(sha) => blobs.get(sha).map(Some).ok_or(MissingBlob),
        None => Err(MissingBlob),
    }
}

/// One write of a restore.
#[derive(Debug, Clone)]
pub struct Write1 {
    /// Workdir-relative path.
    pub path: String,
    /// The absolute target inside the workdir.
    pub target: PathBuf,
    /// The bytes to put there (`None`: delete the file).
    pub bytes: Option<Vec<u8>>,
    /// The mode to give it.
    pub mode: u32,
}

/// The entry of the undo (`kind: "restore"`) checkpoint for `w`: the file's current bytes
/// stored first, so restoring that checkpoint puts them back (the blob directories are
/// fsynced by the caller, once for the batch).
pub fn undo_entry(blobs: &Blobs, w: &Write1) -> FileRow {
    undo_entry_of(blobs, w, Current::of(&w.target))
}

/// [`undo_entry`] through `files` (a remote backend's entries carry no mode).
pub fn undo_entry_in(files: &super::files::Files, blobs: &Blobs, w: &Write1) -> FileRow {
    if files.is_local() {
        return undo_entry(blobs, w);
    }
    let mut e = undo_entry_of(blobs, w, files.current(&w.target));
    e.mode = None;
    e
}

/// [`undo_entry`] given what is at the path now.
fn undo_entry_of(blobs: &Blobs, w: &Write1, now: Current) -> FileRow {
    let status = match (&now, &w.bytes) {
        (Current::Absent, _) => CREATED,
        (_, None) => DELETED,
        _ => MODIFIED,
    };
    let mut e = FileRow {
        path: w.path.clone(),
        status: status.into(),
        before_sha: None,
        after_sha: w.bytes.as_deref().map(super::blobs::sha256_hex),
        size: 0,
        source: "tool".into(),
        restorable: false,
        skipped: None,
        mode: None,
        pending: false,
    };
    match now {
        Current::Absent => e.restorable = true,
        Current::File { bytes, mode } => {
            e.size = bytes.len() as i64;
            e.mode = Some(mode);
            match blobs.put_deferred(&bytes) {
                Ok(sha) => {
                    e.before_sha = Some(sha);
                    e.restorable = true;
                }
                Err(_) => e.skipped = Some("unreadable".into()),
            }
        }
        Current::TooLarge { size, mode } => {
            e.size = size as i64;
            e.mode = Some(mode);
            e.skipped = Some("too_large".into());
        }
        Current::Other => e.skipped = Some("unreadable".into()),
    }
    e
}

/// The mode a restore gives the file: its before-mode, else the current file's, else 0644.
pub fn mode_for(p: &PathPlan, target: &Path) -> u32 {
    p.first.mode.unwrap_or_else(|| {
        std::fs::metadata(target)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(DEFAULT_MODE)
    })
}

/// Carries out one write; an error leaves the file as it was. The directory is not fsynced
/// here: the caller syncs each directory of a batch once ([`sync_parents`]).
pub fn apply(workdir: &Path, w: &Write1) -> std::io::Result<()> {
    // Checked again right before the write: a symlink may have appeared since the plan.
    if paths::target(workdir, &w.path).as_deref() != Some(w.target.as_path()) {
        return Err(std::io::Error::other(
            "the path now leads outside the workdir",
        ));
    }
    match &w.bytes {
        None => match std::fs::symlink_metadata(&w.target) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
            Ok(m) if m.is_dir() => Err(std::io::Error::other("a directory is in the way")),
            Ok(_) => std::fs::remove_file(&w.target),
        },
        Some(bytes) => write_atomic(&w.target, bytes, w.mode),
    }
}

/// Writes `bytes` to `path` with `mode`: temp file beside it, fsync, rename over. Missing
/// parent directories are created.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let parent = path
        .parent()
        .ok_or_else(|| std::io::Error::other("no parent directory"))?;
    std::fs::create_dir_all(parent)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".snowpea-restore-")
        .tempfile_in(parent)?;
    tmp.write_all(bytes)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// fsyncs the directory of each write once, so the renames and removals are durable.
pub fn sync_parents(writes: &[Write1]) {
    let dirs: std::collections::BTreeSet<&Path> =
        writes.iter().filter_map(|w| w.target.parent()).collect();
    for d in dirs {
        sync_dir(d);
    }
}

/// Threads a large restore spreads its file work over (the time goes to waiting for fsyncs,
/// not to the CPU).
const IO_THREADS: usize = 8;

/// `f` of every item, in order, run on up to [`IO_THREADS`] scoped threads when there are
/// many items.
pub fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if items.len() < 2 * IO_THREADS {
        return items.iter().map(&f).collect();
    }
    let chunk = items.len().div_ceil(IO_THREADS);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(|| part.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

//! Capture of a turn's changes into its manifest (blocking file work, run off the async
//! threads): the before-state of a file when a tool first touches it (its bytes stored in
//! the blob store before the tool runs), and the after-state once the call is over.

use std::path::Path;

use super::blobs::{sha256_hex, Blobs};
use super::detect::{Before, Change};
use super::files::Files;
use super::paths::is_excluded;
use crate::store::checkpoints::FileRow;

/// Files bigger than this are not stored (`too_large`).
pub const MAX_FILE_BYTES: u64 = 5 << 20;

/// `status` values of a file entry.
pub const MODIFIED: &str = "modified";
/// The file did not exist before.
pub const CREATED: &str = "created";
/// The file was removed.
pub const DELETED: &str = "deleted";

/// What is at a path now.
#[derive(Debug, Clone, PartialEq)]
pub enum Current {
    /// Nothing.
    Absent,
    /// A regular file at most [`MAX_FILE_BYTES`] long.
    File {
        /// Its bytes.
        bytes: Vec<u8>,
        /// Its permission bits.
        mode: u32,
    },
    /// A regular file over [`MAX_FILE_BYTES`].
    TooLarge {
        /// Its size in bytes.
        size: u64,
        /// Its permission bits.
        mode: u32,
    },
    /// A directory, symlink or other non-file, or a file that cannot be read.
    Other,
}

impl Current {
    /// What is at `path` (a final symlink is not followed).
    pub fn of(path: &Path) -> Current {
        use std::os::unix::fs::PermissionsExt;
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Current::Absent,
            Err(_) => return Current::Other,
        };
        if !meta.file_type().is_file() {
            return Current::Other;
        }
        let mode = meta.permissions().mode() & 0o7777;
        if meta.len() > MAX_FILE_BYTES {
            return Current::TooLarge {
                size: meta.len(),
                mode,
            };
        }
        match std::fs::read(path) {
            Ok(bytes) if bytes.len() as u64 <= MAX_FILE_BYTES => Current::File { bytes, mode },
            Ok(bytes) => Current::TooLarge {
                size: bytes.len() as u64,
                mode,
            },
            Err(_) => Current::Other,
        }
    }

    /// The sha of the file's bytes (`None` when absent or not a readable small file).
    pub fn sha(&self) -> Option<String> {
        match self {
            Current::File { bytes, .. } => Some(sha256_hex(bytes)),
            _ => None,
        }
    }
}

fn entry(path: &str, status: &str, source: &str) -> FileRow {
    FileRow {
        path: path.to_owned(),
        status: status.to_owned(),
        before_sha: None,
        after_sha: None,
        size: 0,
        source: source.to_owned(),
        restorable: false,
        skipped: None,
        mode: None,
        pending: true,
    }
}

/// The entry for `rel`, first touched by a tool now (before it changes anything): its
/// before-bytes are stored durably in `blobs` first.
pub fn before_tool(blobs: &Blobs, workdir: &Path, rel: &str) -> FileRow {
    before_tool_of(blobs, rel, Current::of(&workdir.join(rel)))
}

/// [`before_tool`] through `files` (a remote backend's entries carry no mode).
pub fn before_tool_in(files: &Files, blobs: &Blobs, workdir: &Path, rel: &str) -> FileRow {
    if files.is_local() {
        return before_tool(blobs, workdir, rel);
    }
    let mut e = before_tool_of(blobs, rel, files.current(&workdir.join(rel)));
    e.mode = None;
    e
}

/// [`before_tool`] given what is at the path now.
fn before_tool_of(blobs: &Blobs, rel: &str, current: Current) -> FileRow {
    let status = if current == Current::Absent {
        CREATED
    } else {
        MODIFIED
    };
    let mut e = entry(rel, status, "tool");
    if is_excluded(rel) {
        e.skipped = Some("excluded".into());
        return e;
    }
    match current {
        Current::Absent => e.restorable = true,
        Current::File { bytes, mode } => match blobs.put(&bytes) {
            Ok(sha) => {
                e.before_sha = Some(sha);
                e.size = bytes.len() as i64;
                e.mode = Some(mode);
                e.restorable = true;
            }
            Err(err) => {
                tracing::warn!(path = rel, error = %err, "cannot store the before-bytes");
                e.size = bytes.len() as i64;
                e.skipped = Some("unreadable".into());
            }
        },
        Current::TooLarge { size, mode } => {
            e.size = size as i64;
            e.mode = Some(mode);
            e.skipped = Some("too_large".into());
        }
        Current::Other => e.skipped = Some("unreadable".into()),
    }
    e
}

/// The entry for a file a shell command changed, from what it was before (the after-state
/// is set by [`settle`]).
pub fn from_shell(blobs: &Blobs, change: &Change) -> FileRow {
    match &change.before {
        Before::Absent => {
            let mut e = entry(&change.path, CREATED, "shell");
            e.restorable = true;
            e
        }
        Before::Unknown => entry(&change.path, MODIFIED, "shell"),
        Before::Head(bytes, mode) => {
            let mut e = entry(&change.path, MODIFIED, "shell");
            e.size = bytes.len() as i64;
            e.mode = Some(*mode);
            if bytes.len() as u64 > MAX_FILE_BYTES {
                e.skipped = Some("too_large".into());
                return e;
            }
            match blobs.put(bytes) {
                Ok(sha) => {
                    e.before_sha = Some(sha);
                    e.restorable = true;
                }
                Err(err) => {
                    tracing::warn!(path = %change.path, error = %err, "cannot store the HEAD bytes");
                    e.skipped = Some("unreadable".into());
                }
            }
            e
        }
    }
}

/// Records what the file at `workdir/e.path` is now as the entry's after-state. Returns
/// false when the entry changes nothing any more (the file is back to its before-state, or a
/// file that did not exist still does not) and should be dropped.
pub fn settle(e: &mut FileRow, workdir: &Path) -> bool {
    settle_to(e, Current::of(&workdir.join(&e.path)))
}

/// [`settle`] through `files`.
pub fn settle_in(files: &Files, e: &mut FileRow, workdir: &Path) -> bool {
    if files.is_local() {
        return settle(e, workdir);
    }
    let now = files.current(&workdir.join(&e.path));
    settle_to(e, now)
}

/// [`settle`] given what is at the path now.
fn settle_to(e: &mut FileRow, current: Current) -> bool {
    let existed = e.status != CREATED;
    e.pending = false;
    e.after_sha = current.sha();
    match (existed, &current) {
        (false, Current::Absent) => false,
        (false, _) => true,
        (true, Current::Absent) => {
            e.status = DELETED.into();
            true
        }
        (true, _) => {
            e.status = MODIFIED.into();
            !(e.before_sha.is_some() && e.after_sha == e.before_sha)
        }
    }
}

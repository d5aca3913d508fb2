//! Which files a shell command changed: the working tree is compared before and after the
//! command. In a git repository through `git status --porcelain -z` (a file clean before is
//! restorable from `HEAD`; one already dirty is recorded as not restorable); outside one by a
//! bounded scan of the workdir comparing each file's size, mtime, ctime and inode (changed
//! and deleted files are not restorable, created ones are: restoring deletes them).

use std::collections::{BTreeSet, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::git;
use super::paths::{is_excluded, relative, EXCLUDED_DIRS};

/// Most files the scan outside git looks at.
pub const MAX_SCAN_FILES: usize = 20_000;

/// Most changed files recorded for one command.
pub const MAX_CHANGES: usize = 1_000;

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
}

impl Stamp {
    /// The stamp of the file at `path` (not following a final symlink), `None` if absent.
    pub fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(Stamp {
            size: m.size(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
            ino: m.ino(),
        })
    }
}

/// The working tree before a command.
#[derive(Debug, Clone)]
pub enum Snapshot {
    /// Inside a git repository.
    Git {
        /// Its top level (canonical).
        top: PathBuf,
        /// `HEAD` before the command (`None` without commits).
        head: Option<String>,
        /// Workdir-relative paths git reported as not clean, with their stamps.
        dirty: HashMap<String, Option<Stamp>>,
    },
    /// Outside git: the stamps of the workdir's files.
    Scan {
        /// Workdir-relative path → stamp.
        files: HashMap<String, Stamp>,
        /// False when the scan stopped at [`MAX_SCAN_FILES`].
        complete: bool,
    },
}

/// What a file was before the command.
#[derive(Debug, Clone, PartialEq)]
pub enum Before {
    /// It did not exist (restoring deletes it).
    Absent,
    /// Its bytes and mode at `HEAD` (it was clean).
    Head(Vec<u8>, u32),
    /// Not known (it was dirty, or outside git): recorded as not restorable.
    Unknown,
}

/// One file a command changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Workdir-relative path.
    pub path: String,
    /// Its state before the command.
    pub before: Before,
}

/// Takes the snapshot of `workdir` (canonical) before a command.
pub fn snapshot(workdir: &Path) -> Snapshot {
    if let Some(top) = git::toplevel(workdir) {
        if let Some(entries) = git::status(workdir) {
            let mut dirty = HashMap::new();
            for (_, p) in entries {
                let abs = top.join(&p);
                if let Some(rel) = relative(workdir, &abs) {
                    dirty.insert(rel, Stamp::of(&abs));
                }
            }
            return Snapshot::Git {
                head: git::head(workdir),
                top,
                dirty,
            };
        }
    }
    let (files, complete) = scan(workdir);
    Snapshot::Scan { files, complete }
}

/// The files changed since `before` (excluded directories left out), at most
/// [`MAX_CHANGES`], in path order.
pub fn changes(before: &Snapshot, workdir: &Path) -> Vec<Change> {
    let mut out = Vec::new();
    match before {
        Snapshot::Git { top, head, dirty } => {
            let Some(after) = git::status(workdir) else {
                return out;
            };
            let mut paths: BTreeSet<String> = dirty.keys().cloned().collect();
            for (_, p) in after {
                if let Some(rel) = relative(workdir, &top.join(&p)) {
                    paths.insert(rel);
                }
            }
            for rel in paths {
                if out.len() >= MAX_CHANGES {
                    tracing::warn!(workdir = %workdir.display(), "more than {MAX_CHANGES} files changed; the rest is not recorded");
                    break;
                }
                if is_excluded(&rel) {
                    continue;
                }
                let abs = workdir.join(&rel);
                let now = Stamp::of(&abs);
                let before = match dirty.get(&rel) {
                    Some(stamp) if *stamp == now => continue,
                    Some(None) => Before::Absent,
                    Some(Some(_)) => Before::Unknown,
                    None => {
                        let top_rel = relative(top, &abs).unwrap_or_else(|| rel.clone());
                        match head.as_deref().and_then(|h| git::show(top, h, &top_rel)) {
                            Some((bytes, mode)) => {
                                // Only the index changed (e.g. `git rm --cached`): the file is as it was.
                                if std::fs::read(&abs).ok().as_deref() == Some(&bytes[..]) {
                                    continue;
                                }
                                Before::Head(bytes, mode)
                            }
                            None if now.is_some() => Before::Absent,
                            None => continue,
                        }
                    }
                };
                out.push(Change { path: rel, before });
            }
        }
        Snapshot::Scan { files, complete } => {
            let (after, _) = scan(workdir);
            let mut paths: BTreeSet<&String> = files.keys().collect();
            paths.extend(after.keys());
            for rel in paths {
                if out.len() >= MAX_CHANGES {
                    tracing::warn!(workdir = %workdir.display(), "more than {MAX_CHANGES} files changed; the rest is not recorded");
                    break;
                }
                let before = match (files.get(rel), after.get(rel)) {
                    (Some(a), Some(b)) if a == b => continue,
                    (None, Some(_)) if *complete => Before::Absent,
                    _ => Before::Unknown,
                };
                out.push(Change {
                    path: rel.clone(),
                    before,
                });
            }
        }
    }
    out
}

/// Stamps of the regular files and symlinks under `workdir` (excluded directories skipped,
/// symlinks not followed), at most [`MAX_SCAN_FILES`]; the flag is false when the scan
/// stopped early.
fn scan(workdir: &Path) -> (HashMap<String, Stamp>, bool) {
    let mut files = HashMap::new();
    let walker = ignore::WalkBuilder::new(workdir)
        .standard_filters(false)
        .follow_links(false)
        .filter_entry(|e| {
            !(e.file_type().is_some_and(|t| t.is_dir())
                && EXCLUDED_DIRS.contains(&e.file_name().to_string_lossy().as_ref()))
        })
        .build();
    for entry in walker.flatten() {
        if entry.file_type().is_some_and(|t| t.is_dir()) {
            continue;
        }
        if files.len() >= MAX_SCAN_FILES {
            return (files, false);
        }
        let Some(rel) = relative(workdir, entry.path()) else {
            continue;
        };
        if let Some(stamp) = Stamp::of(entry.path()) {
            files.insert(rel, stamp);
        }
    }
    (files, true)
}

//! Has a workdir changed since it was listed? (`file.complete`, docs/PERFORMANCE.md
//! "file.complete".) A [`Stamp`] records the modification time of the workdir, of every
//! listed directory (a file created, removed or renamed in a directory changes that
//! directory's time), of every listed `.gitignore`/`.ignore` file and, inside a repository,
//! of git's `index` and `info/exclude`. Checking it costs one `stat` per directory instead of
//! a re-listing. Like git's "racy" index entries, a time too close to the start of the
//! listing (a change may have landed in the same clock tick) marks the stamp as stale, so
//! the next check re-lists once the tree is quiet.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::index::Index;
use super::list::Source;

/// Times within this margin of the listing's start are not trusted (coarse file-system
/// clocks: FAT's 2 s).
const RACY_MARGIN: Duration = Duration::from_secs(2);

/// The recorded modification times of one listing.
#[derive(Debug)]
pub struct Stamp {
    /// Candidate indices (directories and ignore files) with their time.
    listed: Vec<(usize, Option<SystemTime>)>,
    /// Absolute paths outside the candidates (the workdir, git's files) with their time.
    extra: Vec<(PathBuf, Option<SystemTime>)>,
    /// A recorded time was too close to the listing's start to be trusted.
    racy: bool,
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(p).and_then(|m| m.modified()).ok()
}

fn watched(name: &str) -> bool {
    name == ".gitignore" || name == ".ignore"
}

impl Stamp {
    /// The stamp of `index`, listed from `workdir` by `source` starting at `started`.
    /// Blocking: one `stat` per directory.
    pub fn take(workdir: &Path, index: &Index, source: Source, started: SystemTime) -> Stamp {
        let mut extra = vec![workdir.to_path_buf()];
        if source == Source::Git {
            if let Some(git) = git_dir(workdir) {
                extra.push(git.join("index"));
                extra.push(git.join("info").join("exclude"));
            }
        }
        let extra: Vec<_> = extra
            .into_iter()
            .map(|p| {
                let t = mtime(&p);
                (p, t)
            })
            .collect();
        let listed: Vec<_> = index
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_dir() || watched(c.basename()))
            .map(|(i, c)| (i, mtime(&workdir.join(c.path()))))
            .collect();
        let trusted_before = started.checked_sub(RACY_MARGIN).unwrap_or(started);
        let racy = listed
            .iter()
            .map(|(_, t)| t)
            .chain(extra.iter().map(|(_, t)| t))
            .flatten()
            .any(|t| *t >= trusted_before);
        Stamp {
            listed,
            extra,
            racy,
        }
    }

    /// True when nothing recorded changed since (and the stamp is not racy). Blocking: one
    /// `stat` per recorded path.
    pub fn unchanged(&self, workdir: &Path, index: &Index) -> bool {
        !self.racy
            && self.extra.iter().all(|(p, t)| mtime(p) == *t)
            && self
                .listed
                .iter()
                .all(|(i, t)| mtime(&workdir.join(index.get(*i).path())) == *t)
    }
}

/// The git directory of the work tree containing `workdir`: the nearest `.git` directory
/// above it, or the one a `.git` file (`gitdir: …`, worktrees and submodules) points to.
fn git_dir(workdir: &Path) -> Option<PathBuf> {
    for dir in workdir.ancestors() {
        let dot = dir.join(".git");
        let Ok(meta) = std::fs::metadata(&dot) else {
            continue;
        };
        if meta.is_dir() {
            return Some(dot);
        }
        let text = std::fs::read_to_string(&dot).ok()?;
        let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        return Some(dir.join(target));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets the modification time of `paths` (under `w`) an hour back, so a later change
    /// differs whatever the file system's clock granularity.
    fn backdate(w: &Path, paths: &[&str]) {
        let old = SystemTime::now() - Duration::from_secs(3600);
        for p in paths {
            std::fs::File::open(w.join(p))
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
    }

    #[test]
    fn changes_in_listed_directories_and_ignore_files_are_seen() {
        let t = tempfile::tempdir().unwrap();
        let w = t.path();
        std::fs::create_dir_all(w.join("a/b")).unwrap();
        std::fs::write(w.join("a/b/f.rs"), "x").unwrap();
        std::fs::write(w.join(".gitignore"), "x\n").unwrap();
        let all = ["", "a", "a/b", ".gitignore"];
        let (index, source) = super::super::list::list(w);
        assert_eq!(source, Source::Walk);
        let stamp = Stamp::take(w, &index, source, SystemTime::now());
        assert!(
            !stamp.unchanged(w, &index),
            "racy: written just before the listing"
        );
        backdate(w, &all);
        let stamp = Stamp::take(w, &index, source, SystemTime::now());
        assert!(stamp.unchanged(w, &index), "nothing touched since");
        std::fs::write(w.join("a/b/g.rs"), "x").unwrap();
        assert!(
            !stamp.unchanged(w, &index),
            "a new file in a listed directory"
        );
        let (index, source) = super::super::list::list(w);
        backdate(w, &all);
        let stamp = Stamp::take(w, &index, source, SystemTime::now());
        assert!(stamp.unchanged(w, &index));
        std::fs::OpenOptions::new()
            .append(true)
            .open(w.join(".gitignore"))
            .unwrap()
            .set_modified(SystemTime::now())
            .unwrap();
        assert!(
            !stamp.unchanged(w, &index),
            "an ignore file edited in place"
        );
    }

    #[test]
    fn git_dir_is_found_from_a_subdirectory_and_through_a_gitdir_file() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("repo/.git")).unwrap();
        std::fs::create_dir_all(t.path().join("repo/src/deep")).unwrap();
        assert_eq!(
            git_dir(&t.path().join("repo/src/deep")),
            Some(t.path().join("repo/.git"))
        );
        std::fs::create_dir_all(t.path().join("wt")).unwrap();
        std::fs::write(t.path().join("wt/.git"), "gitdir: /x/y/worktrees/wt\n").unwrap();
        assert_eq!(
            git_dir(&t.path().join("wt")),
            Some(PathBuf::from("/x/y/worktrees/wt"))
        );
    }
}

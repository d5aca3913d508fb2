//! The content-addressed blob store of one session's checkpoints:
//! `$SNOWPEA_HOME/checkpoints/<sessionId>/objects/<sha[:2]>/<sha-256 hex>`. A blob is written
//! once (deduplicated across turns) to a temp file in its directory, fsynced, renamed into
//! place and its directory fsynced, so it is on disk before the file it saves is changed.

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// sha-256 of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// True when `s` looks like a sha-256 hex digest (so it is safe in a path).
fn is_sha(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// The blob store of one session.
#[derive(Debug, Clone)]
pub struct Blobs {
    objects: PathBuf,
}

impl Blobs {
    /// The store under `session_dir` (`$SNOWPEA_HOME/checkpoints/<sessionId>`).
    pub fn new(session_dir: &Path) -> Self {
        Blobs {
            objects: session_dir.join("objects"),
        }
    }

    fn path_of(&self, sha: &str) -> PathBuf {
        self.objects.join(&sha[..2]).join(sha)
    }

    /// Stores `bytes` (durably: file and directory fsynced) and returns their sha. Already
    /// stored bytes are not written again.
    pub fn put(&self, bytes: &[u8]) -> std::io::Result<String> {
        let sha = self.put_deferred(bytes)?;
        self.sync_dirs_of(std::slice::from_ref(&sha));
        Ok(sha)
    }

    /// [`Blobs::put`] without the directory fsync: the caller syncs the directories of a
    /// batch once with [`Blobs::sync_dirs_of`] before relying on the blobs.
    pub fn put_deferred(&self, bytes: &[u8]) -> std::io::Result<String> {
        let sha = sha256_hex(bytes);
        let path = self.path_of(&sha);
        if path.is_file() {
            return Ok(sha);
        }
        let dir = path.parent().unwrap_or(&self.objects).to_path_buf();
        fs::create_dir_all(&dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
        tmp.write_all(bytes)?;
        tmp.as_file().sync_all()?;
        match tmp.persist_noclobber(&path) {
            Ok(_) => {}
            // Stored meanwhile by someone else: same bytes.
            Err(e) if path.is_file() => drop(e),
            Err(e) => return Err(e.error),
        }
        Ok(sha)
    }

    /// fsyncs the directories holding the blobs `shas` (each once) and the objects directory.
    pub fn sync_dirs_of(&self, shas: &[String]) {
        let dirs: std::collections::BTreeSet<&str> =
            shas.iter().filter(|s| is_sha(s)).map(|s| &s[..2]).collect();
        for d in dirs {
            sync_dir(&self.objects.join(d));
        }
        sync_dir(&self.objects);
    }

    /// The bytes of blob `sha`, `None` when it is missing or does not match its name.
    pub fn get(&self, sha: &str) -> Option<Vec<u8>> {
        if !is_sha(sha) {
            return None;
        }
        let bytes = fs::read(self.path_of(sha)).ok()?;
        (sha256_hex(&bytes) == sha).then_some(bytes)
    }

    /// True when blob `sha` is stored.
    pub fn has(&self, sha: &str) -> bool {
        is_sha(sha) && self.path_of(sha).is_file()
    }

    /// Removes every blob not in `keep`; returns the bytes freed.
    pub fn retain(&self, keep: &HashSet<String>) -> u64 {
        let mut freed = 0;
        let Ok(dirs) = fs::read_dir(&self.objects) else {
            return 0;
        };
        for dir in dirs.flatten() {
            let Ok(files) = fs::read_dir(dir.path()) else {
                continue;
            };
            let mut left = 0usize;
            for f in files.flatten() {
                let name = f.file_name().to_string_lossy().into_owned();
                if keep.contains(&name) {
                    left += 1;
                    continue;
                }
                let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                if fs::remove_file(f.path()).is_ok() {
                    freed += size;
                } else {
                    left += 1;
                }
            }
            if left == 0 {
                let _ = fs::remove_dir(dir.path());
            }
        }
        freed
    }

    /// Total bytes of the stored blobs.
    pub fn total_bytes(&self) -> u64 {
        let Ok(dirs) = fs::read_dir(&self.objects) else {
            return 0;
        };
        dirs.flatten()
            .filter_map(|d| fs::read_dir(d.path()).ok())
            .flat_map(|files| files.flatten())
            .filter_map(|f| f.metadata().ok())
            .map(|m| m.len())
            .sum()
    }
}

/// fsyncs a directory so a rename into it is durable (best effort).
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

//! Reading and atomically rewriting `.mcp.json` and `settings.json` (issue 6: temp file +
//! rename; entries and keys the daemon does not know about survive, in their order).

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::config::{Json, ServerEntry};
use crate::error::{Error, Result};

/// Reads a JSON object document; a missing or blank file is `{}`, anything else that is not
/// a JSON object is `mcp_invalid` naming the file.
pub fn load_json(path: &Path) -> Result<Json> {
    match std::fs::read(path) {
        Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Ok(Json::object()),
        Ok(bytes) => {
            let v: Json = serde_json::from_slice(&bytes)
                .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
            if v.as_object().is_none() {
                return Err(Error::Invalid(format!(
                    "{}: must be a JSON object",
                    path.display()
                )));
            }
            Ok(v)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Json::object()),
        Err(e) => Err(Error::Internal(format!("read {}: {e}", path.display()))),
    }
}

/// Writes `doc` to `path` atomically: a temp file in the same directory (mode 0600, or the
/// existing file's mode), fsync, rename. The directory must exist: a missing folder is never
/// made up (a project `.mcp.json` goes into an existing project only).
pub fn write_json_atomic(path: &Path, doc: &Json) -> Result<()> {
    let mode = std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0o600);
    write_with_mode(path, doc, mode)
}

/// [`write_json_atomic`] for owner-only state: always mode 0600, whatever the old file had.
pub fn write_json_private(path: &Path, doc: &Json) -> Result<()> {
    write_with_mode(path, doc, 0o600)
}

fn write_with_mode(path: &Path, doc: &Json, mode: u32) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::Internal(format!("{} has no parent", path.display())))?;
    let mut bytes = serde_json::to_vec_pretty(doc).expect("JSON serializes");
    bytes.push(b'\n');
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id(),
        snowpea_common::ids::random_hex(4)
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::Internal(format!("write {}: {e}", path.display()))
    })
}

/// A `.mcp.json` document held for a read-modify-write.
#[derive(Debug, Clone)]
pub struct McpFile {
    /// Where it lives.
    pub path: PathBuf,
    /// The whole document, unknown keys included.
    pub doc: Json,
}

impl McpFile {
    /// Reads the file (missing = `{}`).
    pub fn load(path: &Path) -> Result<McpFile> {
        Ok(McpFile {
            path: path.to_path_buf(),
            doc: load_json(path)?,
        })
    }

    /// The entry named `name`, if present.
    pub fn entry(&self, name: &str) -> Option<&Json> {
        self.doc.get("mcpServers").and_then(|s| s.get(name))
    }

    /// Puts `entry` under `mcpServers.<name>`: an existing entry keeps its unknown keys and its
    /// position; a new one is appended.
    pub fn upsert(&mut self, name: &str, entry: &ServerEntry) {
        let servers = self.doc.object_at("mcpServers");
        let slot = servers.entry(name.to_owned()).or_insert_with(Json::object);
        if slot.as_object().is_none() {
            *slot = Json::object();
        }
        entry.merge_into(slot.as_object_mut().expect("an object"));
    }

    /// Replaces what `mcpServers.<name>` says with `entry` (a forced overwrite by `mcp.add`):
    /// every known key is `entry`'s or gone; keys the daemon does not know about (`x-note`)
    /// stay, like in any rewrite.
    pub fn replace(&mut self, name: &str, entry: &ServerEntry) {
        // `merge_into` sets or removes every known key, so this is exactly an upsert.
        self.upsert(name, entry);
    }

    /// Removes `mcpServers.<name>`; false when it was not there.
    pub fn remove(&mut self, name: &str) -> bool {
        self.doc
            .as_object_mut()
            .and_then(|m| m.get_mut("mcpServers"))
            .and_then(Json::as_object_mut)
            .is_some_and(|s| s.shift_remove(name).is_some())
    }

    /// Writes the document back atomically.
    pub fn save(&self) -> Result<()> {
        write_json_atomic(&self.path, &self.doc)
    }
}

/// Sets `mcp.permissions.<server>` in the settings file at `path` (atomic, order-preserving).
pub fn write_permission(path: &Path, server: &str, permission: &str) -> Result<()> {
    let mut doc = load_json(path)?;
    let perms = doc.object_at("mcp");
    let perms = match perms
        .entry("permissions".to_owned())
        .or_insert_with(Json::object)
    {
        Json::Object(m) => m,
        other => {
            *other = Json::object();
            other.as_object_mut().expect("an object")
        }
    };
    Json::set_or_remove(perms, server, Some(Json::String(permission.to_owned())));
    write_json_atomic(path, &doc)
}

/// Removes `mcp.permissions.<server>` from the settings file at `path` (atomic,
/// order-preserving), so the server's tools are back to the default tag; false (and nothing
/// written) when it was not set.
pub fn remove_permission(path: &Path, server: &str) -> Result<bool> {
    let mut doc = load_json(path)?;
    let removed = doc
        .as_object_mut()
        .and_then(|m| m.get_mut("mcp"))
        .and_then(Json::as_object_mut)
        .and_then(|m| m.get_mut("permissions"))
        .and_then(Json::as_object_mut)
        .is_some_and(|p| p.shift_remove(server).is_some());
    if removed {
        write_json_atomic(path, &doc)?;
    }
    Ok(removed)
}

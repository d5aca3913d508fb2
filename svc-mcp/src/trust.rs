//! The trust step for project `.mcp.json` entries (issue 6, security): a cloned repository
//! must not get code execution by being listed. An entry of `<workdir>/.mcp.json` starts
//! only when it is trusted:
//!
//! * **written through the API**: `mcp.add` / `mcp.update` of the entry record its
//!   fingerprint (sha256 of the entry's canonical JSON: keys sorted, compact) with the
//!   project path and the name in [`store_path`] (`$SNOWPEA_HOME/state/mcp-trust.json`,
//!   mode 0600, written atomically). An entry edited on disk afterwards no longer matches its
//!   fingerprint and is untrusted again; `mcp.remove` forgets the record;
//! * **or trusted by the user's settings**: the project directory is listed in the GLOBAL
//!   `settings.json` `mcp.trustedProjects` (absolute paths; never read from a project's
//!   `.snowpea/settings.json`, which the repository itself could carry).
//!
//! Security findings ([`crate::validate`], the `mcp_unsafe` checks) apply to every project
//! entry that is loaded: one with findings starts only when it was written through
//! `mcp.add{force}` (the record says so), even in a trusted project.
//!
//! An entry that may not start is hosted in the `error` state with [`Verdict`]'s text, which
//! says why and how to trust it; its tools are not offered. The global
//! `$SNOWPEA_HOME/.mcp.json` (the user's own file), settings and plugin servers are trusted
//! as they are.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use snowpea_common::home::Home;

use crate::config::{file, Json};
use crate::error::{Error, Result};

/// The text of an untrusted project entry.
pub const UNTRUSTED: &str = "not started: project .mcp.json entries run only after mcp.add/mcp.update of this entry, or with the project in settings mcp.trustedProjects";
/// The text of a project entry that changed on disk after it was trusted.
pub const CHANGED: &str = "not started: this project .mcp.json entry changed on disk after it was written through mcp.add/mcp.update; project .mcp.json entries run only after mcp.add/mcp.update of this entry, or with the project in settings mcp.trustedProjects";

/// Settings key (global `settings.json` only) listing trusted project directories.
pub const TRUSTED_PROJECTS_KEY: &str = "mcp.trustedProjects";

/// `$SNOWPEA_HOME/state/mcp-trust.json`.
pub fn store_path(home: &Home) -> PathBuf {
    home.state_dir().join("mcp-trust.json")
}

/// sha256 (hex) of an entry object's canonical JSON (keys sorted at every level, compact).
pub fn fingerprint(entry: &Json) -> String {
    // Keys sorted at every level: `serde_json` keeps insertion order in this workspace
    // (`preserve_order`), and the fingerprint must not depend on how the entry was written.
    let canonical = serde_json::to_vec(&sorted(entry.to_value())).expect("JSON serializes");
    sha256_hex(&canonical)
}

/// `v` with the keys of every object in sorted order.
fn sorted(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let mut fields: Vec<(String, serde_json::Value)> = m.into_iter().collect();
            fields.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(fields.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        serde_json::Value::Array(a) => {
            serde_json::Value::Array(a.into_iter().map(sorted).collect())
        }
        other => other,
    }
}

/// sha256 of `bytes` as lowercase hex (ring's implementation, through rustls, which this
/// crate already links for the HTTP transports).
pub fn sha256_hex(bytes: &[u8]) -> String {
    let suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .expect("a TLS 1.3 suite");
    let hash = suite.common.hash_provider;
    debug_assert_eq!(
        hash.algorithm(),
        rustls::crypto::hash::HashAlgorithm::SHA256
    );
    hash.hash(bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One entry written through the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The project directory (canonical).
    pub project: String,
    /// The server name.
    pub name: String,
    /// [`fingerprint`] of the entry as written.
    pub sha256: String,
    /// True when its security findings were accepted (written with `force`).
    #[serde(default)]
    pub force: bool,
}

/// The records of [`store_path`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Store {
    /// Every record, one per (project, name).
    #[serde(default)]
    pub entries: Vec<Record>,
}

impl Store {
    /// Reads the store; a missing file is empty. An unreadable or malformed one is empty too
    /// (nothing is trusted by it), with a warning.
    pub fn load(home: &Home) -> Store {
        let path = store_path(home);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e, "MCP trust store unreadable; no project entry is trusted by it");
                Store::default()
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Store::default(),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "MCP trust store unreadable; no project entry is trusted by it");
                Store::default()
            }
        }
    }

    /// The record of `name` in `project`.
    pub fn get(&self, project: &Path, name: &str) -> Option<&Record> {
        let project = project.to_string_lossy();
        self.entries
            .iter()
            .find(|r| r.project == project && r.name == name)
    }

    /// Sets the record of (`project`, `name`).
    pub fn set(&mut self, project: &Path, name: &str, sha256: String, force: bool) {
        self.remove(project, name);
        self.entries.push(Record {
            project: project.to_string_lossy().into_owned(),
            name: name.to_owned(),
            sha256,
            force,
        });
    }

    /// Drops the record of (`project`, `name`); false when there was none.
    pub fn remove(&mut self, project: &Path, name: &str) -> bool {
        let before = self.entries.len();
        let project = project.to_string_lossy();
        self.entries
            .retain(|r| !(r.project == project && r.name == name));
        self.entries.len() != before
    }

    /// Writes the store atomically, owner-only (directory 0700, file 0600).
    pub fn save(&self, home: &Home) -> Result<()> {
        let path = store_path(home);
        let dir = home.state_dir();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::Internal(format!("create {}: {e}", dir.display())))?;
        let doc = Json::from_value(&serde_json::to_value(self).expect("store serializes"));
        file::write_json_private(&path, &doc)
    }
}

/// Project directories listed in the GLOBAL `settings.json` `mcp.trustedProjects` (absolute
/// paths, canonicalised when they exist; anything else is ignored).
pub fn trusted_projects(home: &Home) -> Vec<PathBuf> {
    let Ok(doc) = file::load_json(&home.settings_path()) else {
        return Vec::new();
    };
    let Some(Json::Array(items)) = doc.get("mcp").and_then(|m| m.get("trustedProjects")) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|v| match v {
            Json::String(s) if Path::new(s).is_absolute() => {
                Some(crate::sessions::canonical(Path::new(s)))
            }
            _ => None,
        })
        .collect()
}

/// What the trust step says of one project entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// May start.
    Trusted,
    /// Not started; the text says why and how to trust it.
    Blocked(String),
}

/// Everything the trust step reads, loaded once per discovery.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    store: Store,
    projects: Vec<PathBuf>,
}

impl Trust {
    /// The store and the global settings of `home`.
    pub fn load(home: &Home) -> Trust {
        Trust {
            store: Store::load(home),
            projects: trusted_projects(home),
        }
    }

    /// True when `project` is listed in `mcp.trustedProjects`.
    pub fn project_trusted(&self, project: &Path) -> bool {
        self.projects.iter().any(|p| p == project)
    }

    /// The record of (`project`, `name`) when it matches `sha256` (the entry as it is now).
    pub fn written(&self, project: &Path, name: &str, sha256: &str) -> Option<&Record> {
        self.store.get(project, name).filter(|r| r.sha256 == sha256)
    }

    /// The verdict on entry `name` of `project` whose current fingerprint is `sha256` and
    /// whose security findings are `findings`.
    pub fn verdict(
        &self,
        project: &Path,
        name: &str,
        sha256: &str,
        findings: &[String],
    ) -> Verdict {
        let written = self.written(project, name, sha256);
        if written.is_none() && !self.project_trusted(project) {
            let text = if self.store.get(project, name).is_some() {
                CHANGED
            } else {
                UNTRUSTED
            };
            return Verdict::Blocked(text.to_owned());
        }
        if !findings.is_empty() && !written.is_some_and(|r| r.force) {
            return Verdict::Blocked(format!(
                "not started: security findings: {}; a project .mcp.json entry with findings runs only after mcp.add of this entry with force",
                findings.join("; ")
            ));
        }
        Verdict::Trusted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(v: serde_json::Value) -> Json {
        Json::from_value(&v)
    }

    #[test]
    fn sha256_matches_the_standard_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn the_fingerprint_ignores_key_order_but_not_content() {
        let a: Json = serde_json::from_str(r#"{"command":"node","args":["s.js"]}"#).unwrap();
        let b: Json = serde_json::from_str(r#"{"args":["s.js"],"command":"node"}"#).unwrap();
        let c: Json = serde_json::from_str(r#"{"args":["t.js"],"command":"node"}"#).unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&c));
    }

    #[test]
    fn verdicts() {
        let t = tempfile::tempdir().unwrap();
        let home = Home::new(t.path().join("home"));
        std::fs::create_dir_all(home.root()).unwrap();
        let project = t.path().join("p");
        std::fs::create_dir_all(&project).unwrap();
        let project = crate::sessions::canonical(&project);
        let entry = json(serde_json::json!({"command": "node", "args": ["s.js"]}));
        let sha = fingerprint(&entry);

        // Never written: untrusted.
        let trust = Trust::load(&home);
        assert_eq!(
            trust.verdict(&project, "a", &sha, &[]),
            Verdict::Blocked(UNTRUSTED.into())
        );

        // Written through the API: trusted; the store is owner-only.
        let mut store = Store::load(&home);
        store.set(&project, "a", sha.clone(), false);
        store.save(&home).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(store_path(&home))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let trust = Trust::load(&home);
        assert_eq!(trust.verdict(&project, "a", &sha, &[]), Verdict::Trusted);
        // Another name in the same project is not.
        assert!(matches!(
            trust.verdict(&project, "b", &sha, &[]),
            Verdict::Blocked(_)
        ));
        // Edited on disk: untrusted again, saying so.
        let edited = fingerprint(&json(serde_json::json!({"command": "bash"})));
        assert_eq!(
            trust.verdict(&project, "a", &edited, &[]),
            Verdict::Blocked(CHANGED.into())
        );
        // Findings need force.
        let findings = vec!["command is a shell interpreter (bash)".to_string()];
        match trust.verdict(&project, "a", &sha, &findings) {
            Verdict::Blocked(why) => assert!(why.contains("shell interpreter"), "{why}"),
            other => panic!("{other:?}"),
        }
        let mut store = Store::load(&home);
        store.set(&project, "a", sha.clone(), true);
        store.save(&home).unwrap();
        assert_eq!(
            Trust::load(&home).verdict(&project, "a", &sha, &findings),
            Verdict::Trusted
        );

        // Trusted by the global settings: any entry, but findings still need force.
        let other = t.path().join("q");
        std::fs::create_dir_all(&other).unwrap();
        let other = crate::sessions::canonical(&other);
        std::fs::write(
            home.settings_path(),
            serde_json::to_vec(&serde_json::json!({"mcp": {"trustedProjects": [other.display().to_string(), "relative/ignored"]}})).unwrap(),
        )
        .unwrap();
        let trust = Trust::load(&home);
        assert_eq!(trust.verdict(&other, "x", &edited, &[]), Verdict::Trusted);
        assert!(matches!(
            trust.verdict(&other, "x", &edited, &findings),
            Verdict::Blocked(_)
        ));
        assert_eq!(trust.projects.len(), 1, "relative paths are ignored");
    }
}

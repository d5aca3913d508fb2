//! The `$SNOWPEA_HOME` layout (DESIGN.md §5): owner-only directories, the token, the
//! run directory with every unix socket, logs, per-service state databases and
//! `daemon.json`.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// Resolved paths under one Snowpea home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

/// `daemon.json`: how clients find the running suite (spec "Transport").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonJson {
    /// Gateway TCP port on 127.0.0.1.
    pub port: u16,
    /// Supervisor pid (killing it stops the suite).
    pub pid: u32,
    /// The connection token (same as the `token` file).
    pub token: String,
    /// UTC ISO-8601 start time of the suite.
    pub started_at: String,
    /// Protocol version spoken.
    pub protocol_version: String,
}

impl Home {
    /// A home at an explicit directory (made absolute against the current directory).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let root = if root.is_absolute() {
            root
        } else {
            std::env::current_dir()
                .map(|c| c.join(&root))
                .unwrap_or(root)
        };
        Home { root }
    }

    /// The home from `--home`, else `SNOWPEA_HOME`, else `~/.snowpea`.
    pub fn resolve(explicit: Option<&Path>) -> anyhow::Result<Self> {
        if let Some(p) = explicit {
            return Ok(Home::new(p));
        }
        if let Some(p) = std::env::var_os("SNOWPEA_HOME").filter(|p| !p.is_empty()) {
            return Ok(Home::new(PathBuf::from(p)));
        }
        let home =
            std::env::var_os("HOME").context("neither --home, SNOWPEA_HOME nor HOME is set")?;
        Ok(Home::new(PathBuf::from(home).join(".snowpea")))
    }

    /// Home root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// `token`: 256 random bits, hex, mode 0600.
    pub fn token_path(&self) -> PathBuf {
        self.root.join("token")
    }
    /// `daemon.json`.
    pub fn daemon_json_path(&self) -> PathBuf {
        self.root.join("daemon.json")
    }
    /// `run/`: sockets and pid files, mode 0700.
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }
    /// `logs/`: one log file per process.
    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }
    /// `state/`: one SQLite database per service.
    pub fn state_dir(&self) -> PathBuf {
        self.root.join("state")
    }
    /// `settings.json` (global settings).
    pub fn settings_path(&self) -> PathBuf {
        self.root.join("settings.json")
    }
    /// Unix socket of a service, e.g. `run/session.sock`.
    pub fn socket(&self, service: &str) -> PathBuf {
        self.run_dir().join(format!("{service}.sock"))
    }
    /// The supervisor's control socket.
    pub fn supervisor_socket(&self) -> PathBuf {
        self.socket("supervisor")
    }
    /// Log file of a process, e.g. `logs/session.log`.
    pub fn log_file(&self, process: &str) -> PathBuf {
        self.logs_dir().join(format!("{process}.log"))
    }
    /// State database of a service, e.g. `state/session.db`.
    pub fn database(&self, service: &str) -> PathBuf {
        self.state_dir().join(format!("{service}.db"))
    }
    /// Per-session workspaces (`sessions/<date>_<id>`).
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// Creates the home, `run/`, `logs/`, `state/` with mode 0700 (tightening existing ones).
    pub fn ensure_dirs(&self) -> anyhow::Result<()> {
        for dir in [
            self.root.clone(),
            self.run_dir(),
            self.logs_dir(),
            self.state_dir(),
            self.sessions_dir(),
        ] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .with_context(|| format!("create {}", dir.display()))?;
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
                .with_context(|| format!("chmod 0700 {}", dir.display()))?;
        }
        Ok(())
    }

    /// Reads the token, creating it (256 random bits, hex, mode 0600) when missing.
    pub fn ensure_token(&self) -> anyhow::Result<String> {
        if let Ok(t) = self.read_token() {
            fs::set_permissions(self.token_path(), fs::Permissions::from_mode(0o600))?;
            return Ok(t);
        }
        let token = crate::ids::random_hex(32);
        write_private(&self.token_path(), token.as_bytes())?;
        Ok(token)
    }

    /// Reads the token file.
    pub fn read_token(&self) -> anyhow::Result<String> {
        let t = fs::read_to_string(self.token_path())
            .with_context(|| format!("read {}", self.token_path().display()))?;
        let t = t.trim().to_owned();
        anyhow::ensure!(!t.is_empty(), "token file is empty");
        Ok(t)
    }

    /// Reads `daemon.json`.
    pub fn read_daemon_json(&self) -> anyhow::Result<DaemonJson> {
        let p = self.daemon_json_path();
        let bytes = fs::read(&p).with_context(|| format!("read {}", p.display()))?;
        serde_json::from_slice(&bytes).with_context(|| format!("parse {}", p.display()))
    }

    /// Writes `daemon.json` atomically (temp file + rename), mode 0600 (it holds the token).
    pub fn write_daemon_json(&self, d: &DaemonJson) -> anyhow::Result<()> {
        let bytes = serde_json::to_vec_pretty(d)?;
        write_private(&self.daemon_json_path(), &bytes)
    }
}

/// Writes `bytes` to `path` atomically with mode 0600: a temp file in the same directory,
/// fsync, rename.
pub fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().context("path has a parent")?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("create {}", tmp.display()))?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path).with_context(|| format!("rename to {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirs_and_token_are_owner_only() {
        let t = tempfile::tempdir().unwrap();
        let home = Home::new(t.path().join("h"));
        home.ensure_dirs().unwrap();
        let tok = home.ensure_token().unwrap();
        assert_eq!(tok.len(), 64);
        assert_eq!(home.ensure_token().unwrap(), tok, "token is stable");
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(home.root()), 0o700);
        assert_eq!(mode(&home.run_dir()), 0o700);
        assert_eq!(mode(&home.token_path()), 0o600);
    }

    #[test]
    fn daemon_json_round_trips_with_camel_case() {
        let t = tempfile::tempdir().unwrap();
        let home = Home::new(t.path());
        let d = DaemonJson {
            port: 5,
            pid: 6,
            token: "x".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            protocol_version: "1.25.0".into(),
        };
        home.write_daemon_json(&d).unwrap();
        let raw: serde_json::Value =
            serde_json::from_slice(&fs::read(home.daemon_json_path()).unwrap()).unwrap();
        assert!(raw.get("startedAt").is_some());
        assert_eq!(home.read_daemon_json().unwrap(), d);
    }
}

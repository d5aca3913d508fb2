//! `backend.set{kind, config}` checked: every refusal names its field
//! (`params.kind`, `params.config.port`, …). Secrets (`password`) are kept out of `Debug`.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::BackendKind;
use snowpea_session_error::{Error, Result};

/// Image of a docker backend when `config.image` is absent (the reference's default).
pub const DEFAULT_DOCKER_IMAGE: &str = "python:3.11-slim";

/// A checked backend choice.
#[derive(Debug, Clone)]
pub enum BackendConfig {
    /// The daemon host; `workdir` (absolute, an existing directory) replaces the session's.
    Local {
        /// `config.workdir`.
        workdir: Option<PathBuf>,
    },
    /// A remote machine over SSH.
    Ssh(SshConfig),
    /// A container.
    Docker(DockerConfig),
}

impl BackendConfig {
    /// The kind chosen.
    pub fn kind(&self) -> BackendKind {
        match self {
            BackendConfig::Local { .. } => BackendKind::Local,
            BackendConfig::Ssh(_) => BackendKind::Ssh,
            BackendConfig::Docker(_) => BackendKind::Docker,
        }
    }
}

/// Which known-hosts file verifies the server's host key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KnownHosts {
    /// `config.knownHosts`: this file.
    File(PathBuf),
    /// Absent: `~/.ssh/known_hosts` of the daemon's user.
    Default,
    /// `config.knownHosts: null`, set explicitly: host keys are not checked.
    Disabled,
}

/// `ssh` config: `host, port, user, key, password, cwd, knownHosts`.
#[derive(Clone)]
pub struct SshConfig {
    /// Host name or address.
    pub host: String,
    /// TCP port (default 22).
    pub port: u16,
    /// Login name (default: ssh's, the daemon user's).
    pub user: Option<String>,
    /// Private key file.
    pub key: Option<PathBuf>,
    /// Password (never logged or shown).
    pub password: Option<String>,
    /// Remote working directory (absolute); default the remote login directory.
    pub cwd: Option<PathBuf>,
    /// Host-key verification.
    pub known_hosts: KnownHosts,
}

impl std::fmt::Debug for SshConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("key", &self.key)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("cwd", &self.cwd)
            .field("known_hosts", &self.known_hosts)
            .finish()
    }
}

/// `docker` config: `image`, `container`, `workdir`.
#[derive(Debug, Clone)]
pub struct DockerConfig {
    /// Image the session's own container runs (default [`DEFAULT_DOCKER_IMAGE`]); unused
    /// when attaching to `container`.
    pub image: String,
    /// `config.container`: an existing, running container (name or id) to attach to
    /// instead of creating one (issue 32 item 9). It is never created, stopped or removed
    /// by the daemon.
    pub container: Option<String>,
    /// Working directory: for the session's own container a host directory bind-mounted at
    /// the same path; for an attached container a directory inside it (default the
    /// session's workdir, which the container should then have mounted at the same path).
    pub workdir: Option<PathBuf>,
    /// The engine address (`DOCKER_HOST` of the service; `None`: bollard's defaults). Not
    /// a client setting: [`super::component::Backends`] sets it.
    pub engine: Option<String>,
}

/// Longest container name or id accepted.
const MAX_CONTAINER_CHARS: usize = 128;

fn field_name(key: &str) -> String {
    format!("params.config.{key}")
}

fn string(map: &Map<String, Value>, key: &str) -> Result<Option<String>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => {
            Err(Error::invalid(&field_name(key), "must not be empty"))
        }
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::invalid(&field_name(key), "must be a string")),
    }
}

fn absolute(map: &Map<String, Value>, key: &str) -> Result<Option<PathBuf>> {
    match string(map, key)? {
        None => Ok(None),
        Some(s) if Path::new(&s).is_absolute() => Ok(Some(PathBuf::from(s))),
        Some(_) => Err(Error::invalid(&field_name(key), "must be an absolute path")),
    }
}

fn existing_file(map: &Map<String, Value>, key: &str) -> Result<Option<PathBuf>> {
    let Some(path) = absolute(map, key)? else {
        return Ok(None);
    };
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => Ok(Some(path)),
        Ok(_) => Err(Error::invalid(&field_name(key), "is not a file")),
        Err(_) => Err(Error::invalid(&field_name(key), "does not exist")),
    }
}

fn only(map: &Map<String, Value>, allowed: &[&str], kind: &str) -> Result<()> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(Error::invalid(
            &field_name(k),
            format!(
                "is not a setting of the {kind} backend (known: {})",
                allowed.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

/// A host name, user name: no leading `-` (never taken for an ssh option), no spaces or
/// control characters.
fn plain_word(map: &Map<String, Value>, key: &str) -> Result<Option<String>> {
    let Some(s) = string(map, key)? else {
        return Ok(None);
    };
    if s.starts_with('-')
        || s.chars().any(|c| c.is_whitespace() || c.is_control())
        || s.contains('@')
    {
        return Err(Error::invalid(
            &field_name(key),
            "must be a plain name (no leading '-', spaces or '@')",
        ));
    }
    Ok(Some(s))
}

/// Checks `backend.set{kind, config}` (`config` absent is `{}`); `home` is the daemon
/// user's home directory (for `~/.ssh/known_hosts`).
pub fn parse(kind: &str, config: &Value) -> Result<BackendConfig> {
    let empty = Map::new();
    let map = match config {
        Value::Null => &empty,
        Value::Object(m) => m,
        _ => return Err(Error::invalid("params.config", "must be an object")),
    };
    match kind {
        "local" => {
            only(map, &["workdir"], "local")?;
            let workdir = absolute(map, "workdir")?;
            if let Some(w) = &workdir {
                if !w.is_dir() {
                    return Err(Error::invalid(
                        "params.config.workdir",
                        "is not an existing directory",
                    ));
                }
            }
            Ok(BackendConfig::Local { workdir })
        }
        "ssh" => {
            only(
                map,
                &[
                    "host",
                    "port",
                    "user",
                    "key",
                    "password",
                    "cwd",
                    "knownHosts",
                ],
                "ssh",
            )?;
            let host = plain_word(map, "host")?
                .ok_or_else(|| Error::invalid("params.config.host", "is required"))?;
            let port = match map.get("port") {
                None | Some(Value::Null) => 22,
                Some(v) => match v.as_u64() {
                    Some(p) if (1..=65535).contains(&p) => p as u16,
                    _ => {
                        return Err(Error::invalid(
                            "params.config.port",
                            "must be an integer from 1 to 65535",
                        ))
                    }
                },
            };
            let user = plain_word(map, "user")?;
            let key = existing_file(map, "key")?;
            let password = match map.get("password") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
                Some(_) => {
                    return Err(Error::invalid(
                        "params.config.password",
                        "must be a non-empty string",
                    ))
                }
            };
            let cwd = absolute(map, "cwd")?;
            let known_hosts = match map.get("knownHosts") {
                None => KnownHosts::Default,
                Some(Value::Null) => KnownHosts::Disabled,
                Some(_) => KnownHosts::File(
                    existing_file(map, "knownHosts")?
                        .ok_or_else(|| Error::invalid("params.config.knownHosts", "is empty"))?,
                ),
            };
            Ok(BackendConfig::Ssh(SshConfig {
                host,
                port,
                user,
                key,
                password,
                cwd,
                known_hosts,
            }))
        }
        "docker" => {
            only(map, &["image", "container", "workdir"], "docker")?;
            let container = string(map, "container")?;
            if let Some(c) = &container {
                // Docker's own rule for names ([a-zA-Z0-9][a-zA-Z0-9_.-]*); ids fit it too.
                let ok = c.len() <= MAX_CONTAINER_CHARS
                    && c.starts_with(|ch: char| ch.is_ascii_alphanumeric())
                    && c.chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || "_.-".contains(ch));
                if !ok {
                    return Err(Error::invalid(
                        "params.config.container",
                        format!(
                            "must be a container name or id (letters, digits, '_', '.', '-'; \
                             at most {MAX_CONTAINER_CHARS})"
                        ),
                    ));
                }
                if map.get("image").is_some_and(|v| !v.is_null()) {
                    return Err(Error::invalid(
                        "params.config.image",
                        "give image (a container of the session's own) or container (attach \
                         to an existing one), not both",
                    ));
                }
            }
            let image = string(map, "image")?.unwrap_or_else(|| DEFAULT_DOCKER_IMAGE.into());
            if image.starts_with('-') || image.chars().any(char::is_whitespace) {
                return Err(Error::invalid(
                    "params.config.image",
                    "is not an image reference",
                ));
            }
            let workdir = absolute(map, "workdir")?;
            Ok(BackendConfig::Docker(DockerConfig {
                image,
                container,
                workdir,
                engine: None,
            }))
        }
        other => Err(Error::invalid(
            "params.kind",
            format!("{other:?} is not a backend kind (local, docker, ssh)"),
        )),
    }
}

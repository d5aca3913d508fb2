//! The `ssh` backend: the system OpenSSH client driven by argv (never a local shell), one
//! control master per backend (`ControlMaster=yes -N`, a child of svc-session, its socket in a private
//! 0700 directory), commands as `ssh -T host -- <remote command>` over the master, and
//! files over SFTP (`ssh -s host sftp` spoken by `russh-sftp`).
//!
//! Host keys are verified (`StrictHostKeyChecking=yes`) against `config.knownHosts` or
//! `~/.ssh/known_hosts`; only an explicit `knownHosts: null` turns the check off. A password
//! reaches ssh through an askpass helper reading it from the helper's environment: never on
//! a command line, in a reply, an event or a log. The remote command is
//! `cd <cwd> && exec timeout -k 2 <secs> sh -c <command>` with the directory and the
//! tool's one command quoted as single words. When the connection drops mid-command the call
//! fails with a message saying so and the next call connects again. `backend.set` probes the
//! connection ([`Ssh::probe`]) before it switches, so an unreachable host or a refused login
//! is its error, not the first tool's.

use std::ffi::OsString;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use russh_sftp::client::SftpSession;
use russh_sftp::protocol::StatusCode;
use snowpea_common::orphans;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::runtime::Handle;

use super::config::{KnownHosts, SshConfig};
use super::{Backend, BackendKind, DirEntry, ExecRequest, Meta};
use crate::tools::{ToolContext, ToolOutput};

/// Longest wait for the master connection (TCP, key exchange, authentication) a tool call
/// makes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// ssh's own `ConnectTimeout` (TCP connect and banner exchange), seconds.
const SSH_CONNECT_TIMEOUT_SECS: u64 = 5;
/// Longest `backend.set` waits for its probe ([`Ssh::probe`]): reaching the host,
/// verifying its key and authenticating.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for one SFTP operation.
const SFTP_TIMEOUT: Duration = Duration::from_secs(30);
/// Extra time the local side waits past the remote `timeout` before killing ssh itself.
const REMOTE_GRACE: Duration = Duration::from_secs(5);
/// Exit status with which ssh reports its own failure (connection lost, refused, …).
const SSH_FAILED: i32 = 255;

/// A connection to one SSH server (cheap to clone: one shared connection).
#[derive(Clone)]
pub struct Ssh {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: SshConfig,
    /// Private directory (0700): the control socket and the askpass helper.
    dir: tempfile::TempDir,
    mark: Option<String>,
    rt: Handle,
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    master: Option<Child>,
    sftp: Option<(Child, Arc<SftpSession>)>,
    /// The remote login directory (the default `cwd`), once asked.
    home: Option<PathBuf>,
}

impl std::fmt::Debug for Ssh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ssh")
            .field("cfg", &self.inner.cfg)
            .finish_non_exhaustive()
    }
}

/// Quotes `s` as one POSIX shell word (for the remote side, which always runs a shell).
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl Ssh {
    /// A backend for `cfg`; nothing connects until the first call. Processes it starts
    /// carry the orphan `mark`. Must be called inside the tokio runtime.
    pub fn new(cfg: SshConfig, mark: Option<String>) -> io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("snowpea-ssh-").tempdir()?;
        if cfg.password.is_some() {
            use std::os::unix::fs::PermissionsExt;
            let helper = dir.path().join("askpass");
            std::fs::write(
                &helper,
                "#!/bin/sh\nprintf '%s\\n' \"$SNOWPEA_SSH_PASSWORD\"\n",
            )?;
            std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(Ssh {
            inner: Arc::new(Inner {
                cfg,
                dir,
                mark,
                rt: Handle::current(),
                state: tokio::sync::Mutex::new(State::default()),
            }),
        })
    }

    /// Connects now, within [`PROBE_TIMEOUT`] (`backend.set` probes before it switches):
    /// the host is reached, its key verified and the login accepted — the master connection
    /// then stays up for the tools. The error says why (unreachable, refused key, host key
    /// not known, timeout); it never carries the password.
    pub async fn probe(&self) -> Result<(), String> {
        let mut state = self.inner.state.lock().await;
        self.inner.connect_within(&mut state, PROBE_TIMEOUT).await
    }
}

impl Inner {
    /// `host:port`, for messages.
    fn target(&self) -> String {
        format!("{}:{}", self.cfg.host, self.cfg.port)
    }

    fn control_path(&self) -> PathBuf {
        self.dir.path().join("cm")
    }

    /// An `ssh` command with the connection options (no host yet).
    fn ssh(&self, control: &str) -> Command {
        let mut args: Vec<OsString> = vec![
            "-F".into(),
            "/dev/null".into(),
            "-p".into(),
            self.cfg.port.to_string().into(),
            "-o".into(),
            format!("ControlPath={}", self.control_path().display()).into(),
            "-o".into(),
            format!("ControlMaster={control}").into(),
            "-o".into(),
            format!("ConnectTimeout={SSH_CONNECT_TIMEOUT_SECS}").into(),
            "-o".into(),
            "ServerAliveInterval=5".into(),
            "-o".into(),
            "ServerAliveCountMax=3".into(),
            "-o".into(),
            "LogLevel=ERROR".into(),
            "-o".into(),
            "GlobalKnownHostsFile=/dev/null".into(),
        ];
        let mut opt = |o: String| {
            args.push("-o".into());
            args.push(o.into());
        };
        match &self.cfg.known_hosts {
            KnownHosts::File(p) => {
                opt("StrictHostKeyChecking=yes".into());
                opt(format!("UserKnownHostsFile={}", p.display()));
            }
            KnownHosts::Default => {
                opt("StrictHostKeyChecking=yes".into());
                let home = std::env::var_os("HOME").unwrap_or_default();
                opt(format!(
                    "UserKnownHostsFile={}",
                    Path::new(&home).join(".ssh/known_hosts").display()
                ));
            }
            KnownHosts::Disabled => {
                opt("StrictHostKeyChecking=no".into());
                opt("UserKnownHostsFile=/dev/null".into());
            }
        }
        if let Some(key) = &self.cfg.key {
            opt(format!("IdentityFile={}", key.display()));
            opt("IdentitiesOnly=yes".into());
        }
        if self.cfg.password.is_some() {
            opt("BatchMode=no".into());
            opt("NumberOfPasswordPrompts=1".into());
        } else {
            opt("BatchMode=yes".into());
        }
        if let Some(user) = &self.cfg.user {
            opt(format!("User={user}"));
        }
        let mut cmd = Command::new("ssh");
        cmd.args(args)
            .env_remove("SSH_AUTH_SOCK")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        if let Some(password) = &self.cfg.password {
            cmd.env("SSH_ASKPASS", self.dir.path().join("askpass"))
                .env("SSH_ASKPASS_REQUIRE", "force")
                .env("DISPLAY", "snowpea:0")
                .env("SNOWPEA_SSH_PASSWORD", password);
        }
        if let Some(mark) = &self.mark {
            cmd.env(orphans::MARK_ENV, mark);
        }
        cmd
    }

    /// Starts the master connection unless a live one exists.
    async fn connect(&self, state: &mut State) -> Result<(), String> {
        self.connect_within(state, CONNECT_TIMEOUT).await
    }

    /// [`Inner::connect`] waiting at most `limit`.
    async fn connect_within(&self, state: &mut State, limit: Duration) -> Result<(), String> {
        if let Some(master) = &mut state.master {
            if matches!(master.try_wait(), Ok(None)) && self.control_path().exists() {
                return Ok(());
            }
            state.master = None;
            state.sftp = None;
        }
        let _ = std::fs::remove_file(self.control_path());
        let mut cmd = self.ssh("yes");
        // Not `-M`: with `ControlMaster=yes` already given, ssh's `-M` toggles it to `ask`,
        // which (no askpass in batch mode) refuses every mux client's session ("Master
        // refused session request: Permission denied"); each command then silently made a
        // connection and a login of its own (issue 32 item 9: the shell tool's lingering).
        cmd.args(["-N", "--"])
            .arg(&self.cfg.host)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut master = cmd.spawn().map_err(|e| format!("cannot start ssh: {e}"))?;
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if self.control_path().exists() {
                break;
            }
            if let Ok(Some(status)) = master.try_wait() {
                let mut err = String::new();
                if let Some(mut stderr) = master.stderr.take() {
                    let _ = tokio::time::timeout(
                        Duration::from_secs(2),
                        stderr.read_to_string(&mut err),
                    )
                    .await;
                }
                let why = err.trim();
                let why = if why.is_empty() {
                    format!("ssh exited with {status}")
                } else {
                    why.replace('\n', "; ")
                };
                let hint = if why.contains("Host key verification failed")
                    || why.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
                {
                    " (the server's host key is not in knownHosts: add it, or set knownHosts to null to skip the check)"
                } else {
                    ""
                };
                return Err(format!(
                    "ssh connection to {} failed: {why}{hint}",
                    self.target()
                ));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "ssh connection to {} did not come up within {} s (host unreachable, or the login hangs)",
                    self.target(),
                    limit.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        state.master = Some(master);
        Ok(())
    }

    /// Drops the master and the SFTP session (the next call connects again).
    async fn reset(&self) {
        let mut state = self.state.lock().await;
        state.sftp = None;
        if let Some(mut m) = state.master.take() {
            let _ = m.start_kill();
            let _ = m.wait().await;
        }
        let _ = std::fs::remove_file(self.control_path());
    }

    /// The SFTP session, connecting first when needed.
    async fn sftp(&self) -> io::Result<Arc<SftpSession>> {
        let mut state = self.state.lock().await;
        self.connect(&mut state).await.map_err(io::Error::other)?;
        if let Some((child, session)) = &mut state.sftp {
            if matches!(child.try_wait(), Ok(None)) {
                return Ok(session.clone());
            }
        }
        state.sftp = None;
        let mut cmd = self.ssh("no");
        cmd.args(["-s", "--"])
            .arg(&self.cfg.host)
            .arg("sftp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn()?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(io::Error::other("ssh gave no pipes for sftp"));
        };
        let session = tokio::time::timeout(
            SFTP_TIMEOUT,
            SftpSession::new(tokio::io::join(stdout, stdin)),
        )
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "sftp did not start in time"))?
        .map_err(|e| io::Error::other(format!("sftp on {} failed: {e}", self.target())))?;
        session.set_timeout(SFTP_TIMEOUT.as_secs());
        let session = Arc::new(session);
        state.sftp = Some((child, session.clone()));
        Ok(session)
    }

    /// Runs one SFTP operation (blocking the calling blocking-pool thread); a transport
    /// failure drops the session so the next call reconnects.
    fn block<T>(
        &self,
        op: impl AsyncFnOnce(Arc<SftpSession>) -> Result<T, russh_sftp::client::error::Error>,
    ) -> io::Result<T> {
        self.rt.block_on(async {
            let session = self.sftp().await?;
            match tokio::time::timeout(SFTP_TIMEOUT, op(session)).await {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(e)) => Err(self.sftp_error(e).await),
                Err(_) => {
                    self.reset().await;
                    Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("sftp on {} did not answer in time", self.target()),
                    ))
                }
            }
        })
    }

    async fn sftp_error(&self, e: russh_sftp::client::error::Error) -> io::Error {
        use russh_sftp::client::error::Error as E;
        match e {
            E::Status(s) => {
                let kind = match s.status_code {
                    StatusCode::NoSuchFile => io::ErrorKind::NotFound,
                    StatusCode::PermissionDenied => io::ErrorKind::PermissionDenied,
                    _ => io::ErrorKind::Other,
                };
                io::Error::new(kind, format!("{}: {}", s.status_code, s.error_message))
            }
            other => {
                let mut state = self.state.lock().await;
                state.sftp = None;
                drop(state);
                io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    format!("ssh connection to {} lost: {other}", self.target()),
                )
            }
        }
    }

    /// The remote working directory: `config.cwd`, else the login directory.
    async fn remote_cwd(&self) -> io::Result<PathBuf> {
        if let Some(cwd) = &self.cfg.cwd {
            return Ok(cwd.clone());
        }
        if let Some(home) = self.state.lock().await.home.clone() {
            return Ok(home);
        }
        let session = self.sftp().await?;
        let home = session
            .canonicalize(".")
            .await
            .map(PathBuf::from)
            .map_err(|e| io::Error::other(format!("cannot find the remote home: {e}")))?;
        self.state.lock().await.home = Some(home.clone());
        Ok(home)
    }
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn meta_of(m: &russh_sftp::client::fs::Metadata) -> Meta {
    Meta {
        is_dir: m.is_dir(),
        is_file: m.is_regular(),
        is_symlink: m.is_symlink(),
        len: m.len(),
    }
}

impl Backend for Ssh {
    fn kind(&self) -> BackendKind {
        BackendKind::Ssh
    }

    fn workdir(&self) -> Option<PathBuf> {
        // Without `cwd`, the login directory once known; the session's path otherwise
        // would name a directory of the daemon host.
        self.inner
            .cfg
            .cwd
            .clone()
            .or_else(|| {
                self.inner
                    .state
                    .try_lock()
                    .ok()
                    .and_then(|s| s.home.clone())
            })
            .or_else(|| Some(PathBuf::from("/")))
    }

    fn metadata(&self, path: &Path) -> io::Result<Meta> {
        let p = path_str(path);
        self.inner
            .block(async move |s| s.metadata(p).await.map(|m| meta_of(&m)))
    }

    fn symlink_metadata(&self, path: &Path) -> io::Result<Meta> {
        let p = path_str(path);
        self.inner
            .block(async move |s| s.symlink_metadata(p).await.map(|m| meta_of(&m)))
    }

    fn open(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        let p = path_str(path);
        let bytes = self.inner.block(async move |s| s.read(p).await)?;
        Ok(Box::new(io::Cursor::new(bytes)))
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        let p = path_str(path);
        self.inner
            .block(async move |s| s.read_link(p).await.map(PathBuf::from))
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let p = path_str(path);
        let base = path.to_path_buf();
        self.inner.block(async move |s| {
            let entries = s.read_dir(p).await?;
            Ok(entries
                .filter(|e| e.file_name() != "." && e.file_name() != "..")
                .map(|e| DirEntry {
                    path: base.join(e.file_name()),
                    is_symlink: e.file_type().is_symlink(),
                    name: e.file_name(),
                })
                .collect())
        })
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut missing = Vec::new();
        let mut cur = Some(path);
        while let Some(p) = cur {
            match self.metadata(p) {
                Ok(m) if m.is_dir => break,
                Ok(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("{} is not a directory", p.display()),
                    ))
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(p.to_path_buf()),
                Err(e) => return Err(e),
            }
            cur = p.parent();
        }
        for dir in missing.into_iter().rev() {
            let d = path_str(&dir);
            self.inner.block(async move |s| s.create_dir(d).await)?;
        }
        Ok(())
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".into());
        let tmp = path.with_file_name(format!(
            ".{name}.snowpea-{}-{}.tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let (target, tmp) = (path_str(path), path_str(&tmp));
        let data = bytes.to_vec();
        self.inner.block(async move |s| {
            let old = s.metadata(target.clone()).await.ok();
            let result = async {
                let mut file = s.create(tmp.clone()).await?;
                file.write_all(&data).await?;
                file.shutdown().await?;
                if let Some(old) = old.as_ref().and_then(|m| m.permissions) {
                    let attrs = russh_sftp::protocol::FileAttributes {
                        permissions: Some(old),
                        ..russh_sftp::protocol::FileAttributes::empty()
                    };
                    let _ = s.set_metadata(tmp.clone(), attrs).await;
                }
                // SFTP v3 rename refuses an existing target: remove it first.
                if old.is_some() {
                    s.remove_file(target.clone()).await?;
                }
                s.rename(tmp.clone(), target.clone()).await
            }
            .await;
            if result.is_err() {
                let _ = s.remove_file(tmp).await;
            }
            result
        })
    }

    /// SFTP `remove` (a directory is refused by the server).
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let p = path_str(path);
        self.inner.block(async move |s| s.remove_file(p).await)
    }

    fn exec(&self, req: ExecRequest, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let this = self.inner.clone();
        Box::pin(async move {
            {
                let mut state = this.state.lock().await;
                if let Err(e) = this.connect(&mut state).await {
                    return ToolOutput::error(e);
                }
            }
            let cwd = if req.cwd.is_absolute() {
                req.cwd.clone()
            } else {
                match this.remote_cwd().await {
                    Ok(c) => c.join(&req.cwd),
                    Err(e) => return ToolOutput::error(e.to_string()),
                }
            };
            let secs = req.timeout.as_secs_f64().max(0.1);
            let remote = format!(
                "cd {} && exec timeout -k 2 {secs:.1} sh -c {}",
                quote(&cwd.to_string_lossy()),
                quote(&req.command)
            );
            let mut cmd = this.ssh("no");
            cmd.args(["-T", "--"]).arg(&this.cfg.host).arg(remote);
            let target = this.target();
            let lost = move |code: i32| {
                (code == SSH_FAILED).then(|| {
                    format!(
                        "ssh connection to {target} was lost during the command (ssh exit 255); the next call reconnects"
                    )
                })
            };
            let out =
                crate::tools::shell::run_process(cmd, req.timeout + REMOTE_GRACE, Some(&lost), ctx)
                    .await;
            if out.meta.get("exitCode").and_then(|c| c.as_i64()) == Some(SSH_FAILED as i64) {
                this.reset().await;
            }
            out
        })
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        let inner = self.inner.clone();
        Box::pin(async move { inner.reset().await })
    }
}

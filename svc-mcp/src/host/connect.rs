//! Opening one MCP connection (stdio child behind the guard, streamable HTTP, legacy SSE)
//! with `rmcp`, used by the hosted servers ([`super::server`]) and by throwaway probes
//! ([`crate::probe`]).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::Tool;
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::ServiceExt;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::sync::watch;

use crate::config::{ServerEntry, Transport};
use crate::host::guard;
use crate::host::server::Liveness;

/// Lines of a server's stderr kept for error messages.
const STDERR_TAIL_LINES: usize = 20;
/// Longest stderr line kept (a flood of one huge line stays bounded).
const STDERR_LINE_MAX: usize = 2_000;
/// Longest wait for a dead server's last stderr lines (its group is gone, so EOF is near;
/// only a process that left the group can hold the pipe open this long).
const STDERR_DRAIN: Duration = Duration::from_secs(2);

/// Where to spawn stdio servers from and what to mark them with.
#[derive(Debug, Clone)]
pub struct SpawnContext {
    /// The `snowpea-svc-mcp` executable (re-run in guard mode).
    pub guard_exe: PathBuf,
    /// Value of [`guard::OWNER_ENV`] on every child.
    pub owner: String,
    /// Directory a relative `cwd` (or no `cwd`) resolves against: the project root for
    /// project servers, else the daemon's working directory.
    pub base_dir: PathBuf,
    /// How a hosted connection is checked for hangs (probes do not use it).
    pub liveness: Liveness,
}

/// The last lines a server wrote to stderr, and whether its stderr pipe reached EOF (every
/// process of the group that could write it is gone).
#[derive(Debug, Clone)]
pub struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    closed: Arc<watch::Sender<bool>>,
}

impl Default for StderrTail {
    fn default() -> Self {
        StderrTail {
            lines: Arc::default(),
            closed: Arc::new(watch::channel(false).0),
        }
    }
}

impl StderrTail {
    fn push(&self, line: String) {
        let mut q = self.lines.lock().expect("stderr tail lock");
        if q.len() == STDERR_TAIL_LINES {
            q.pop_front();
        }
        q.push_back(line);
    }

    /// Marks the pipe as read to its end.
    fn close(&self) {
        self.closed.send_replace(true);
    }

    /// Waits until the reader has taken in everything the processes wrote (EOF), at most
    /// `max` (a process that left the group may keep the pipe open).
    pub async fn drained(&self, max: Duration) {
        let mut rx = self.closed.subscribe();
        let _ = tokio::time::timeout(max, rx.wait_for(|c| *c)).await;
    }

    /// The kept lines, oldest first, joined with newlines.
    pub fn text(&self) -> String {
        let q = self.lines.lock().expect("stderr tail lock");
        q.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// The guard's exit report, if it wrote one.
    pub fn exit_line(&self) -> Option<String> {
        let q = self.lines.lock().expect("stderr tail lock");
        q.iter()
            .rev()
            .find_map(|l| l.strip_prefix(guard::EXIT_LINE_PREFIX).map(str::to_owned))
    }

    /// The server's own stderr (without the guard's lines).
    pub fn server_text(&self) -> String {
        let q = self.lines.lock().expect("stderr tail lock");
        q.iter()
            .filter(|l| !l.starts_with(guard::EXIT_LINE_PREFIX))
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A live connection.
pub struct Connection {
    /// Sends requests (clonable; calls in flight fail when the connection ends).
    pub peer: Peer<RoleClient>,
    /// The tools the server listed at start.
    pub tools: Vec<Tool>,
    /// The rmcp service; its end means the connection is gone.
    service: Option<RunningService<RoleClient, ()>>,
    /// The guard process of a stdio server.
    child: Option<Child>,
    /// Stderr of a stdio server.
    pub stderr: StderrTail,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("tools", &self.tools.len())
            .field("pid", &self.child.as_ref().and_then(Child::id))
            .finish()
    }
}

/// A connection attempt that failed: the error text, verbatim from the server where there is
/// one (its stderr or the protocol error).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ConnectError(pub String);

impl Connection {
    /// The guard's pid (stdio servers).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// Resolves when the connection ends by itself (child exit, transport closed), with why
    /// (a sentence about the server, e.g. `server exited with code 9: <its stderr>`).
    /// Cancel-safe: used in `select!` next to the stop command.
    pub async fn wait_end(&mut self) -> String {
        match (self.service.as_mut(), self.child.as_mut()) {
            (Some(s), Some(c)) => {
                tokio::select! {
                    status = c.wait() => exit_reason(status.ok(), &self.stderr).await,
                    _ = wait_closed(s) => {
                        match tokio::time::timeout(Duration::from_secs(3), c.wait()).await {
                            Ok(st) => exit_reason(st.ok(), &self.stderr).await,
                            Err(_) => "server closed its stdout (connection lost)".into(),
                        }
                    }
                }
            }
            (Some(s), None) => {
                wait_closed(s).await;
                "server connection closed".into()
            }
            _ => std::future::pending().await,
        }
    }
}

async fn wait_closed(s: &mut RunningService<RoleClient, ()>) {
    // `waiting` consumes; poll the token instead, cheaply.
    while !s.is_closed() && !s.peer().is_transport_closed() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Why a stdio server ended: the guard's report of the server's own exit status (e.g.
/// `server exited with code 3`), then the server's stderr verbatim after `: `. Waits (at
/// most [`STDERR_DRAIN`]) until stderr is read to its end, so neither the report nor the
/// server's last words are lost to a race with the exit. `status` is the guard's own status,
/// used only when the guard wrote no report.
pub async fn exit_reason(status: Option<std::process::ExitStatus>, stderr: &StderrTail) -> String {
    stderr.drained(STDERR_DRAIN).await;
    let head = stderr.exit_line().unwrap_or_else(|| match status {
        Some(s) => format!("server's process guard {}", guard::describe(s)),
        None => "server exited".into(),
    });
    let tail = stderr.server_text();
    if tail.trim().is_empty() {
        head
    } else {
        format!("{head}: {tail}")
    }
}

/// Sends SIGKILL to the guard's whole process group.
fn kill_group(c: &Child) {
    if let Some(pid) = c.id() {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Stops a connection: SIGTERM to the guard (which stops the server's group), close the
/// transport, wait for the guard with a deadline, then SIGKILL the group.
pub async fn shutdown(mut conn: Connection) {
    if let Some(mut s) = conn.service.take() {
        let _ = s.close_with_timeout(Duration::from_millis(500)).await;
    }
    if let Some(c) = conn.child.take() {
        stop_child(c).await;
    }
}

/// Kills a connection whose server stopped answering: SIGKILL to the guard's whole process
/// group at once (a hung server gets no grace period), the guard reaped (bounded wait), then
/// the transport closed, which fails every request still pending on it.
pub async fn kill(mut conn: Connection) {
    if let Some(mut c) = conn.child.take() {
        kill_group(&c);
        if tokio::time::timeout(Duration::from_secs(5), c.wait())
            .await
            .is_err()
        {
            tracing::warn!(pid = ?c.id(), "MCP guard not reaped 5s after SIGKILL");
        }
    }
    if let Some(mut s) = conn.service.take() {
        let _ = s.close_with_timeout(Duration::from_millis(500)).await;
    }
}

/// Stops a guard process and its group.
pub async fn stop_child(mut c: Child) {
    if let Some(pid) = c.id() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    if tokio::time::timeout(guard::GRACE + Duration::from_secs(1), c.wait())
        .await
        .is_err()
    {
        kill_group(&c);
        let _ = tokio::time::timeout(Duration::from_secs(2), c.wait()).await;
    }
}

/// Connects to the server of `entry` and lists its tools, within `entry`'s start timeout.
pub async fn connect(entry: &ServerEntry, ctx: &SpawnContext) -> Result<Connection, ConnectError> {
    let timeout = entry.start_timeout();
    match entry.transport() {
        Transport::Stdio => connect_stdio(entry, ctx, timeout).await,
        Transport::Http => {
            let url = entry.url.clone().unwrap_or_default();
            let transport = http_transport(&url, entry.headers.as_ref())?;
            let tail = StderrTail::default();
            finish(().serve(transport), timeout, None, tail, Some(&url)).await
        }
        Transport::Sse => {
            let url = entry.url.clone().unwrap_or_default();
            let transport = crate::host::sse::connect(&url, entry.headers.as_ref(), timeout)
                .await
                .map_err(|e| ConnectError(describe_remote_error(&url, e.as_ref())))?;
            let tail = StderrTail::default();
            finish(().serve(transport), timeout, None, tail, Some(&url)).await
        }
    }
}

/// Rust paths in an error text (`rmcp::transport::worker::WorkerTransport<…>`): such a text
/// is skipped in favour of its cause.
static TYPE_NAME: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"\b(rmcp|reqwest|hyper|hyper_util|tokio|std|core|alloc|h2|rustls)::|Transport \[",
    )
    .expect("a valid regex")
});

/// The causes of `err`, outermost first (rmcp's `ClientInitializeError::TransportError` and
/// `StreamableHttpError::Client` name no source: their inner errors are followed too).
fn chain<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Vec<&'a (dyn std::error::Error + 'static)> {
    let mut out: Vec<&'a (dyn std::error::Error + 'static)> = Vec::new();
    let mut cur = Some(err);
    while let Some(e) = cur {
        if out.len() >= 32 {
            break;
        }
        out.push(e);
        use rmcp::transport::streamable_http_client::StreamableHttpError;
        cur = if let Some(rmcp::service::ClientInitializeError::TransportError { error, .. }) =
            e.downcast_ref::<rmcp::service::ClientInitializeError>()
        {
            Some(error as &(dyn std::error::Error + 'static))
        } else if let Some(StreamableHttpError::Client(inner)) =
            e.downcast_ref::<StreamableHttpError<rmcp_reqwest::Error>>()
        {
            Some(inner as &(dyn std::error::Error + 'static))
        } else {
            e.source()
        };
    }
    out
}

fn io_reason(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => "connection refused".into(),
        K::ConnectionReset => "connection reset".into(),
        K::ConnectionAborted => "connection aborted".into(),
        K::TimedOut => "timed out".into(),
        K::HostUnreachable => "host unreachable".into(),
        K::NetworkUnreachable => "network unreachable".into(),
        K::AddrNotAvailable => "address not available".into(),
        _ => {
            let text = e.to_string();
            match text.rfind(" (os error") {
                Some(i) => text[..i].to_owned(),
                None => text,
            }
        }
    }
}

/// Why `err` happened, for people: the innermost cause that reads as a sentence (an OS error
/// as `connection refused`, an HTTP status as `HTTP 404 Not Found`), never a Rust type name.
/// Also says whether the server could not be reached at all.
pub fn error_reason(err: &(dyn std::error::Error + 'static)) -> (bool, String) {
    let chain = chain(err);
    let reqwest = || {
        chain
            .iter()
            .filter_map(|e| e.downcast_ref::<rmcp_reqwest::Error>())
    };
    let io = chain
        .iter()
        .rev()
        .find_map(|e| e.downcast_ref::<std::io::Error>());
    let unreachable = io.is_some() || reqwest().any(|r| r.is_connect() || r.is_timeout());
    let reason = if let Some(io) = io {
        io_reason(io)
    } else if let Some(status) = reqwest().find_map(|r| r.status()) {
        format!("HTTP {status}")
    } else if reqwest().any(|r| r.is_timeout()) {
        "timed out".into()
    } else {
        chain
            .iter()
            .rev()
            .map(|e| e.to_string())
            .find(|m| !m.trim().is_empty() && !TYPE_NAME.is_match(m))
            .unwrap_or_else(|| "the connection failed".into())
    };
    (unreachable, reason)
}

/// A failure talking to the remote server at `url`, for people: `cannot reach URL:
/// connection refused` when it could not be reached, else `URL: <why>`.
/// The URL is shown redacted, and so is any secret of it the cause repeats (issue 6).
pub fn describe_remote_error(url: &str, err: &(dyn std::error::Error + 'static)) -> String {
    let text = match error_reason(err) {
        (true, why) => format!("cannot reach {}: {why}", crate::redact::url(url)),
        (false, why) => format!("{}: {why}", crate::redact::url(url)),
    };
    crate::redact::scrub(&text, url)
}

fn http_transport(
    url: &str,
    headers: Option<&indexmap::IndexMap<String, String>>,
) -> Result<rmcp::transport::StreamableHttpClientTransport<rmcp_reqwest::Client>, ConnectError> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    crate::install_crypto_provider();
    let mut custom = HashMap::new();
    for (k, v) in headers.into_iter().flatten() {
        let name = http_name(k)?;
        let value = rmcp_reqwest::header::HeaderValue::from_str(v)
            .map_err(|_| ConnectError(format!("header {k}: value is not valid header text")))?;
        custom.insert(name, value);
    }
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(custom);
    let client = rmcp_reqwest::Client::builder()
        .build()
        .map_err(|e| ConnectError(format!("http client: {e}")))?;
    Ok(rmcp::transport::StreamableHttpClientTransport::with_client(
        client, config,
    ))
}

fn http_name(k: &str) -> Result<rmcp_reqwest::header::HeaderName, ConnectError> {
    rmcp_reqwest::header::HeaderName::from_bytes(k.as_bytes())
        .map_err(|_| ConnectError(format!("header {k:?}: not a valid header name")))
}

async fn connect_stdio(
    entry: &ServerEntry,
    ctx: &SpawnContext,
    timeout: Duration,
) -> Result<Connection, ConnectError> {
    let command = entry.command.clone().unwrap_or_default();
    let cwd = match entry.cwd.as_deref() {
        Some(c) if Path::new(c).is_absolute() => PathBuf::from(c),
        Some(c) => ctx.base_dir.join(c),
        None => ctx.base_dir.clone(),
    };
    // Said plainly: a missing cwd would otherwise read "cannot start X: No such file…".
    if !cwd.is_dir() {
        let what = if cwd.exists() {
            "is not a directory"
        } else {
            "does not exist"
        };
        let relative = match entry.cwd.as_deref() {
            Some(c) if !Path::new(c).is_absolute() => format!(
                " (cwd {c:?} is resolved against {})",
                ctx.base_dir.display()
            ),
            _ => String::new(),
        };
        return Err(ConnectError(format!(
            "cannot start {command}: its working directory {} {what}{relative}",
            cwd.display()
        )));
    }
    let mut cmd = tokio::process::Command::new(&ctx.guard_exe);
    cmd.arg(guard::GUARD_ARG)
        .arg(&command)
        .args(entry.args.iter().flatten())
        .envs(entry.env.iter().flatten())
        .env(guard::OWNER_ENV, &ctx.owner)
        .env(guard::PARENT_ENV, std::process::id().to_string())
        .current_dir(&cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0))
                .map_err(std::io::Error::from)?;
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                .map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| ConnectError(format!("cannot start {command}: {e}")))?;
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr_pipe = child.stderr.take().expect("piped stderr");
    let tail = StderrTail::default();
    {
        let tail = tail.clone();
        let command = command.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr_pipe);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match lines.read_until(b'\n', &mut buf).await {
                    Ok(0) | Err(_) => {
                        tail.close();
                        break;
                    }
                    Ok(_) => {
                        let mut line = String::from_utf8_lossy(&buf).trim_end().to_owned();
                        if line.len() > STDERR_LINE_MAX {
                            let cut = (0..=STDERR_LINE_MAX)
                                .rev()
                                .find(|i| line.is_char_boundary(*i))
                                .unwrap_or(0);
                            line.truncate(cut);
                            line.push('…');
                        }
                        // Server stderr may echo its env; debug level only.
                        tracing::debug!(server_command = %command, "{line}");
                        tail.push(line);
                    }
                }
            }
        });
    }
    let serve = ().serve((stdout, stdin));
    let mut child = Some(child);
    let out = finish(serve, timeout, child.as_mut(), tail.clone(), None).await;
    match out {
        Ok(mut conn) => {
            conn.child = child;
            conn.stderr = tail;
            Ok(conn)
        }
        Err(e) => {
            if let Some(c) = child.take() {
                stop_child(c).await;
            }
            Err(e)
        }
    }
}

/// Initialises the connection and lists the tools. Errors are told for people: for a remote
/// server (`url`), [`describe_remote_error`]; else the cause ([`error_reason`]).
async fn finish<F, E>(
    serve: F,
    timeout: Duration,
    child: Option<&mut Child>,
    tail: StderrTail,
    url: Option<&str>,
) -> Result<Connection, ConnectError>
where
    F: std::future::Future<Output = Result<RunningService<RoleClient, ()>, E>>,
    E: std::error::Error + 'static,
{
    let describe = |e: &(dyn std::error::Error + 'static)| match url {
        Some(u) => describe_remote_error(u, e),
        None => error_reason(e).1,
    };
    let work = async {
        let service = serve.await.map_err(|e| describe(&e))?;
        let tools = service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| describe(&e))?;
        Ok::<_, String>((service, tools))
    };
    let mut child = child;
    let result = match child.as_deref_mut() {
        Some(c) => {
            tokio::pin!(work);
            tokio::select! {
                r = tokio::time::timeout(timeout, &mut work) => r,
                status = c.wait() => {
                    return Err(ConnectError(exit_reason(status.ok(), &tail).await));
                }
            }
        }
        None => tokio::time::timeout(timeout, work).await,
    };
    if let (Ok(Err(_)), Some(c)) = (&result, child) {
        // The protocol failed because the process is going away: its exit and stderr say
        // more than "connection closed".
        if let Ok(status) = tokio::time::timeout(Duration::from_secs(1), c.wait()).await {
            return Err(ConnectError(exit_reason(status.ok(), &tail).await));
        }
    }
    match result {
        Ok(Ok((service, tools))) => Ok(Connection {
            peer: service.peer().clone(),
            tools,
            service: Some(service),
            child: None,
            stderr: tail,
        }),
        Ok(Err(e)) => {
            let stderr = tail.server_text();
            Err(ConnectError(if stderr.trim().is_empty() {
                e
            } else {
                format!("{e}: {stderr}")
            }))
        }
        Err(_) => {
            let stderr = tail.server_text();
            let head = format!(
                "no answer to initialize/tools/list within {}s (timeoutSec)",
                timeout.as_secs()
            );
            Err(ConnectError(if stderr.trim().is_empty() {
                head
            } else {
                format!("{head}: {stderr}")
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[tokio::test]
    async fn exit_reason_waits_for_the_last_stderr_lines() {
        // The guard ends by SIGKILL (its own group kill); its report and the server's words
        // reach the reader only after that status is known.
        let tail = StderrTail::default();
        let late = tail.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            late.push("faulty: cannot open database /nonexistent/db.sqlite".into());
            late.push(format!(
                "{}server exited with code 3",
                guard::EXIT_LINE_PREFIX
            ));
            late.close();
        });
        let why = tokio::time::timeout(
            Duration::from_secs(10),
            exit_reason(Some(std::process::ExitStatus::from_raw(9)), &tail),
        )
        .await
        .expect("bounded");
        assert_eq!(
            why,
            "server exited with code 3: faulty: cannot open database /nonexistent/db.sqlite"
        );
    }

    #[tokio::test]
    async fn without_a_guard_report_the_guard_status_is_named_as_such() {
        let tail = StderrTail::default();
        tail.push("some words".into());
        tail.close();
        let why = exit_reason(Some(std::process::ExitStatus::from_raw(9)), &tail).await;
        assert_eq!(why, "server's process guard killed by signal 9: some words");
    }
}

#[cfg(test)]
mod error_texts {
    use super::*;

    fn ctx(base: &Path) -> SpawnContext {
        SpawnContext {
            // Never run: these connections fail before any process starts.
            guard_exe: PathBuf::from("/nonexistent/guard"),
            owner: "test".into(),
            base_dir: base.to_path_buf(),
            liveness: Liveness::default(),
        }
    }

    fn entry(v: serde_json::Value) -> ServerEntry {
        serde_json::from_value(v).unwrap()
    }

    #[tokio::test]
    async fn an_unreachable_server_is_told_for_people() {
        crate::install_crypto_provider();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        for url in [
            format!("http://127.0.0.1:{port}/mcp"),
            format!("http://127.0.0.1:{port}/sse"),
        ] {
            let e = entry(serde_json::json!({"url": url, "timeoutSec": 10}));
            let err = tokio::time::timeout(Duration::from_secs(30), connect(&e, &ctx(dir.path())))
                .await
                .expect("bounded")
                .expect_err("nothing listens");
            assert_eq!(err.0, format!("cannot reach {url}: connection refused"));
        }
    }

    #[tokio::test]
    async fn a_missing_cwd_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = entry(serde_json::json!({"command": "python3", "cwd": "nope"}));
        let err = connect(&e, &ctx(dir.path()))
            .await
            .expect_err("no such cwd");
        assert_eq!(
            err.0,
            format!(
                "cannot start python3: its working directory {} does not exist (cwd \"nope\" is resolved against {})",
                dir.path().join("nope").display(),
                dir.path().display()
            )
        );
    }
}

//! The `shell` tool: runs `sh -c <command>` in the workdir.
//!
//! The command runs in its own process group with stdin on `/dev/null`. Its stdout and
//! stderr are streamed to `ctx.progress` as they arrive and captured together with a cap
//! (head and tail kept). A timeout or a cancelled `ctx.cancel` terminates the whole group:
//! SIGTERM, then SIGKILL after [`KILL_GRACE`]. Whatever of the group is left when the
//! command ends (background jobs) is killed too, so nothing outlives the call — also when
//! the future is dropped. Every command carries svc-session's [`orphans`] mark, so after a
//! kill -9 of svc-session the next start kills what the dead process left behind.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::args;
use super::paths;
use super::{Permission, Tool, ToolContext, ToolOutput, ToolPlan};
use crate::backend::ExecRequest;
use snowpea_session_llm::provider::ToolSpec;

/// Timeout when the call gives none, in seconds.
pub const DEFAULT_TIMEOUT_SECS: f64 = 120.0;
/// Longest timeout a call may ask for, in seconds (larger values are clamped).
pub const MAX_TIMEOUT_SECS: f64 = 600.0;
/// Time between SIGTERM and SIGKILL when the group is terminated.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long output may keep arriving after the shell itself exited (from background jobs
/// holding the pipes) before the rest of the group is killed.
const LINGER: Duration = Duration::from_millis(500);
/// Read size for the pipes.
const CHUNK: usize = 8192;

/// `shell{command, cwd?, timeout?}`: runs a shell command.
#[derive(Debug, Clone, Default)]
pub struct Shell {
    /// [`orphans::mark`] set on every command, so a later svc-session can find the
    /// commands a killed one left running; `None` sets nothing.
    mark: Option<String>,
}

impl Shell {
    /// The tool of a svc-session whose children carry `mark` ([`orphans::mark`]).
    pub fn marked(mark: String) -> Shell {
        Shell { mark: Some(mark) }
    }
}

/// Checked arguments of a call.
struct ShellArgs {
    command: String,
    cwd: paths::ResolvedPath,
    timeout: Duration,
}

impl Shell {
    fn parse(args: &Value, workdir: &Path) -> Result<ShellArgs, String> {
        let command = args::required_str(args, "command")?;
        if command.trim().is_empty() {
            return Err("argument `command` must not be empty".into());
        }
        let cwd = args::optional_str(args, "cwd")?.unwrap_or(".");
        let cwd = paths::resolve(workdir, cwd).map_err(|e| format!("argument `cwd`: {e}"))?;
        let secs = args::optional_positive_f64(args, "timeout")?
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
            .min(MAX_TIMEOUT_SECS);
        Ok(ShellArgs {
            command: command.to_string(),
            cwd,
            timeout: Duration::from_secs_f64(secs),
        })
    }
}

impl Tool for Shell {
    fn name(&self) -> &'static str {
        "shell"
    }

    fn permission(&self) -> Permission {
        Permission::Exec
    }

    fn category(&self) -> &'static str {
        "shell"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: format!(
                "Run a shell command with `sh -c` in the working directory (or `cwd`, relative to it). \
                 stdin is empty; stdout and stderr are returned together, long output keeps its \
                 beginning and end. The command is killed after `timeout` seconds (default {}, at \
                 most {}), together with every process it started; background processes do not \
                 survive the call. Succeeds when the exit code is 0.",
                DEFAULT_TIMEOUT_SECS, MAX_TIMEOUT_SECS
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": { "type": "string", "description": "The command line, run by `sh -c`." },
                    "cwd": { "type": "string", "description": "Directory to run in, relative to the working directory (default `.`)." },
                    "timeout": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "maximum": MAX_TIMEOUT_SECS,
                        "description": format!("Timeout in seconds (default {DEFAULT_TIMEOUT_SECS}, max {MAX_TIMEOUT_SECS}).")
                    }
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        }
    }

    fn plan(&self, args: &Value, workdir: &Path) -> Result<ToolPlan, String> {
        let parsed = Self::parse(args, workdir)?;
        let mut summary = format!("shell: {}", args::one_line(&parsed.command, 200));
        if parsed.cwd.display != "." {
            summary.push_str(&format!(
                " (in {})",
                args::one_line(&parsed.cwd.display, 100)
            ));
        }
        Ok(ToolPlan {
            permission: self.permission(),
            outside_workdir: if parsed.cwd.outside_workdir {
                vec![parsed.cwd.path.clone()]
            } else {
                vec![]
            },
            summary,
        })
    }

    fn writes(&self, _args: &Value, _workdir: &Path) -> super::Writes {
        super::Writes::Workdir
    }

    fn run(&self, args: Value, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let mark = self.mark.clone();
        Box::pin(async move {
            match Self::parse(&args, &ctx.workdir) {
                Ok(parsed) => {
                    if ctx.cancel.is_cancelled() {
                        return finish_output(
                            String::new(),
                            false,
                            None,
                            false,
                            true,
                            Instant::now(),
                        );
                    }
                    let req = ExecRequest {
                        command: parsed.command,
                        cwd: parsed.cwd.path,
                        timeout: parsed.timeout,
                        mark,
                    };
                    let backend = ctx.backend.clone();
                    backend.exec(req, ctx).await
                }
                Err(e) => ToolOutput::error(e),
            }
        })
    }
}

/// Kills the process group with SIGKILL when dropped (also when the call's future is).
struct GroupGuard {
    pgid: Pid,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let _ = killpg(self.pgid, Signal::SIGKILL);
    }
}

/// True when no process of the group is left (zombies not yet reaped count as left).
fn group_gone(pgid: Pid) -> bool {
    matches!(killpg(pgid, None), Err(Errno::ESRCH))
}

/// Captured output: everything up to `cap`, then the first and the last `cap / 2` bytes.
pub(crate) struct Capture {
    cap: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: u64,
}

impl Capture {
    pub(crate) fn new(cap: usize) -> Self {
        Capture {
            cap: cap.max(2),
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let head_cap = self.cap / 2;
        let mut rest = bytes;
        if self.head.len() < head_cap {
            let take = (head_cap - self.head.len()).min(rest.len());
            self.head.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
        }
        let tail_cap = self.cap - head_cap;
        if rest.len() >= tail_cap {
            self.tail.clear();
            self.tail.extend(&rest[rest.len() - tail_cap..]);
        } else {
            let overflow = (self.tail.len() + rest.len()).saturating_sub(tail_cap);
            self.tail.drain(..overflow);
            self.tail.extend(rest);
        }
    }

    pub(crate) fn truncated(&self) -> bool {
        self.total > (self.head.len() + self.tail.len()) as u64
    }

    /// The captured text, with a marker where bytes were left out.
    pub(crate) fn text(&self) -> String {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if !self.truncated() {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        // Cut on character boundaries: drop a split character at the end of the head and
        // continuation bytes at the start of the tail.
        let head_end = match std::str::from_utf8(&self.head) {
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            _ => self.head.len(),
        };
        let tail_start = tail
            .iter()
            .take(3)
            .take_while(|b| (**b & 0b1100_0000) == 0b1000_0000)
            .count();
        let omitted = self.total - (head_end + tail.len() - tail_start) as u64;
        let mut text = String::from_utf8_lossy(&self.head[..head_end]).into_owned();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[... truncated: {omitted} bytes omitted ...]\n"));
        text.push_str(&String::from_utf8_lossy(&tail[tail_start..]));
        text
    }
}

/// Turns byte chunks into text without splitting UTF-8 characters across chunks.
#[derive(Default)]
pub(crate) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub(crate) fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        // Invalid bytes: one replacement character, then go on.
                        Some(len) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[len..];
                        }
                        // An incomplete character at the end: hold it back for the next chunk.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        self.pending.drain(..self.pending.len() - keep);
        out
    }

    pub(crate) fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        String::from_utf8_lossy(&rest).into_owned()
    }
}

/// Reads a pipe to its end, sending chunks in order.
async fn pump(mut pipe: impl AsyncRead + Unpin, tx: mpsc::Sender<Vec<u8>>) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if tx.send(buf[..n].to_vec()).await.is_err() {
                    break;
                }
            }
        }
    }
}

/// How the command ended.
enum End {
    Exited(ExitStatus),
    TimedOut,
    Interrupted,
}

/// SIGTERM to the group, SIGKILL after [`KILL_GRACE`] unless all of it is gone by then;
/// reaps the shell. Output arriving meanwhile is still captured.
async fn terminate_group(
    pgid: Pid,
    child: &mut Child,
    on_chunk: &mut impl FnMut(Vec<u8>),
    rx: &mut mpsc::Receiver<Vec<u8>>,
) {
    let _ = killpg(pgid, Signal::SIGTERM);
    let deadline = tokio::time::Instant::now() + KILL_GRACE;
    let mut reaped = false;
    loop {
        if !reaped {
            reaped = matches!(child.try_wait(), Ok(Some(_)) | Err(_));
        }
        if reaped && group_gone(pgid) {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let _ = killpg(pgid, Signal::SIGKILL);
            break;
        }
        tokio::select! {
            chunk = rx.recv() => if let Some(chunk) = chunk { on_chunk(chunk) },
            _ = tokio::time::sleep(Duration::from_millis(25)) => {}
        }
    }
    let _ = child.wait().await;
}

/// Exit code a command reports when its timeout ended it (as coreutils' `timeout`).
pub const TIMEOUT_EXIT_CODE: i32 = 124;

/// Runs `command` (its program and arguments set; stdin, env and cwd as the caller
/// wants) in its own process group with stdout and stderr piped and streamed to
/// `ctx.progress`, until it exits, `timeout` passes (the group is terminated; exit code
/// 124) or `ctx.cancel` fires. `lost` turns an exit code into a failure message (a remote
/// backend's transport failing, e.g. ssh's 255); the backends' one process runner.
pub(crate) async fn run_process(
    mut command: Command,
    timeout: Duration,
    lost: Option<&(dyn Fn(i32) -> Option<String> + Send + Sync)>,
    ctx: ToolContext,
) -> ToolOutput {
    let started = Instant::now();
    if ctx.cancel.is_cancelled() {
        return finish_output(String::new(), false, None, false, true, started);
    }
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let program = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(format!("cannot start `{program}`: {e}")),
    };
    let Some(pid) = child.id() else {
        return ToolOutput::error("the shell exited before it could be watched");
    };
    let pgid = Pid::from_raw(pid as i32);
    let _guard = GroupGuard { pgid };

    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(tokio::spawn(pump(out, tx.clone())));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(tokio::spawn(pump(err, tx.clone())));
    }
    drop(tx);

    let mut capture = Capture::new(ctx.output_cap);
    let mut decoder = Utf8Stream::default();
    let progress = ctx.progress.clone();
    let mut on_chunk = |chunk: Vec<u8>| {
        capture.push(&chunk);
        let text = decoder.push(&chunk);
        if !text.is_empty() {
            let _ = progress.send(text);
        }
    };

    let timeout_at = tokio::time::sleep(timeout);
    tokio::pin!(timeout_at);
    let mut status: Option<ExitStatus> = None;
    let mut pipes_open = true;
    let mut linger: Option<tokio::time::Instant> = None;
    let mut lingered_kill = false;
    let end = loop {
        if let (Some(st), false) = (status, pipes_open) {
            break End::Exited(st);
        }
        let linger_at =
            linger.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => break End::Interrupted,
            _ = &mut timeout_at => break End::TimedOut,
            chunk = rx.recv(), if pipes_open => match chunk {
                Some(chunk) => on_chunk(chunk),
                None => pipes_open = false,
            },
            st = child.wait(), if status.is_none() => match st {
                Ok(st) => {
                    status = Some(st);
                    linger = Some(tokio::time::Instant::now() + LINGER);
                }
                Err(e) => return ToolOutput::error(format!("waiting for the shell failed: {e}")),
            },
            _ = tokio::time::sleep_until(linger_at), if linger.is_some() => {
                if lingered_kill {
                    // Something outside the group holds the pipes; stop reading.
                    pipes_open = false;
                } else {
                    // The shell is gone but background jobs keep the pipes open: end them.
                    let _ = killpg(pgid, Signal::SIGKILL);
                    lingered_kill = true;
                    linger = Some(tokio::time::Instant::now() + KILL_GRACE);
                }
            }
        }
    };

    let (exit, timed_out, interrupted) = match end {
        End::Exited(st) => (Some(st), false, false),
        End::TimedOut | End::Interrupted => {
            terminate_group(pgid, &mut child, &mut on_chunk, &mut rx).await;
            // Collect what is still buffered in the pipes, briefly.
            let drain_until = tokio::time::Instant::now() + Duration::from_millis(500);
            while let Ok(Some(chunk)) = tokio::time::timeout_at(drain_until, rx.recv()).await {
                on_chunk(chunk);
            }
            (
                None,
                matches!(end, End::TimedOut),
                matches!(end, End::Interrupted),
            )
        }
    };
    for reader in readers {
        reader.abort();
    }
    let rest = decoder.finish();
    if !rest.is_empty() {
        let _ = ctx.progress.send(rest);
    }
    let _ = killpg(pgid, Signal::SIGKILL);
    let truncated = capture.truncated();
    let mut out = finish_output(
        capture.text(),
        truncated,
        exit,
        timed_out,
        interrupted,
        started,
    );
    let code = exit.and_then(|s| s.code());
    if let (Some(code), Some(lost)) = (code, lost) {
        if let Some(message) = lost(code) {
            out.ok = false;
            out.content = format!("{message}\n{}", out.content);
            return out;
        }
    }
    if timed_out || code == Some(TIMEOUT_EXIT_CODE) {
        out.ok = false;
        if let Value::Object(m) = &mut out.meta {
            m.insert("exitCode".into(), json!(TIMEOUT_EXIT_CODE));
            m.insert("timedOut".into(), json!(true));
        }
        out.content.push_str(&format!(
            "\n[timed out after {} s; the process group was killed]",
            timeout.as_secs_f64()
        ));
    }
    out
}

/// Builds the result from the captured text and how the command ended.
pub(crate) fn finish_output(
    text: String,
    truncated: bool,
    exit: Option<ExitStatus>,
    timed_out: bool,
    interrupted: bool,
    started: Instant,
) -> ToolOutput {
    use std::os::unix::process::ExitStatusExt;
    let exit_code = exit.and_then(|s| s.code());
    let signal = exit.and_then(|s| s.signal());
    let ok = exit_code == Some(0) && !timed_out && !interrupted;
    let mut content = text;
    if content.is_empty() && exit.is_some() {
        content.push_str("(no output)");
    }
    let mut note = |line: String| {
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&line);
    };
    if interrupted {
        note("[interrupted]".into());
    } else if let Some(code) = exit_code.filter(|c| *c != 0) {
        note(format!("[exit code: {code}]"));
    } else if let Some(sig) = signal {
        note(format!("[killed by signal {sig}]"));
    }
    ToolOutput {
        ok,
        content,
        meta: json!({
            "exitCode": exit_code,
            "signal": signal,
            "timedOut": timed_out,
            "interrupted": interrupted,
            "truncated": truncated,
            "durationMs": started.elapsed().as_millis() as u64,
        }),
        diff: None,
    }
}

#[cfg(test)]
#[path = "shell_tests.rs"]
mod tests;

//! Engine child processes (issue 7 "runs every speech engine as a child process it
//! watches"): argv only, never a shell; each child runs in its own process group with
//! `PR_SET_PDEATHSIG = SIGKILL` (so it dies with svc-audio, even after a `kill -9`), has a
//! deadline after which the whole group is killed, and a crash or non-zero exit becomes a
//! clear [`ChildError`] carrying the stderr tail. A caller that goes away (its future is
//! dropped) kills the group too.
//!
//! PDEATHSIG reaches only the direct child. What an engine itself started (a script's
//! `sleep`, a wrapper's real engine) survives a `kill -9` of svc-audio in the engine's
//! process group, so every child carries svc-audio's [`orphans`] mark and the next
//! svc-audio start kills the marked groups ([`reap_and_mark`], DESIGN.md §6 "Crash
//! recovery").
//!
//! PDEATHSIG fires when the *thread* that forked the child exits. Children are spawned
//! from tokio worker threads, which live as long as the runtime — never from
//! `spawn_blocking` threads, which exit when idle.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use snowpea_common::orphans;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Bytes of stderr kept for error messages.
const STDERR_TAIL: usize = 2048;
/// Most stdout kept (transcripts are small; TTS `command` engines may write wav to stdout).
const STDOUT_MAX: usize = 64 * 1024 * 1024;

/// One child to run.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// Engine or tool id used in errors and logs, e.g. `espeak-ng`.
    pub label: String,
    /// Program: a name looked up on PATH, or a path.
    pub program: PathBuf,
    /// Arguments, passed as they are (no shell, no splitting).
    pub args: Vec<OsString>,
    /// Extra environment.
    pub env: Vec<(OsString, OsString)>,
    /// Bytes written to stdin (then closed); `None` = stdin is /dev/null.
    pub stdin: Option<Vec<u8>>,
    /// Deadline: after it the process group is killed.
    pub timeout: Duration,
}

impl ChildSpec {
    /// A spec with no stdin, no extra env and `timeout`.
    pub fn new(
        label: &str,
        program: impl Into<PathBuf>,
        args: Vec<OsString>,
        timeout: Duration,
    ) -> Self {
        ChildSpec {
            label: label.to_owned(),
            program: program.into(),
            args,
            env: Vec::new(),
            stdin: None,
            timeout,
        }
    }
}

/// What a successful child produced.
#[derive(Debug, Clone)]
pub struct ChildOutput {
    /// Its pid (gone by now).
    pub pid: u32,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// The tail of its stderr.
    pub stderr: String,
}

/// Why a child produced no result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChildError {
    /// The program could not be started (not found, not executable).
    #[error("{label}: cannot start {program}: {reason}")]
    Spawn {
        /// Engine id.
        label: String,
        /// Program that failed to start.
        program: String,
        /// The OS error.
        reason: String,
    },
    /// It ran past its deadline; its process group was killed.
    #[error("{label}: no result within {after:?}; the engine was killed")]
    Timeout {
        /// Engine id.
        label: String,
        /// The deadline.
        after: Duration,
        /// Its pid.
        pid: u32,
        /// Tail of its stderr.
        stderr: String,
    },
    /// It was killed by a signal (crashed).
    #[error("{label}: the engine crashed (signal {signal}){}", tail_suffix(stderr))]
    Crashed {
        /// Engine id.
        label: String,
        /// The signal number.
        signal: i32,
        /// Its pid.
        pid: u32,
        /// Tail of its stderr.
        stderr: String,
    },
    /// It exited with a non-zero status.
    #[error(
        "{label}: the engine failed (exit status {code}){}",
        tail_suffix(stderr)
    )]
    Failed {
        /// Engine id.
        label: String,
        /// Exit status.
        code: i32,
        /// Its pid.
        pid: u32,
        /// Tail of its stderr.
        stderr: String,
    },
}

fn tail_suffix(stderr: &str) -> String {
    let last = stderr.trim().lines().last().unwrap_or("").trim();
    if last.is_empty() {
        String::new()
    } else {
        format!(": {last}")
    }
}

impl ChildError {
    /// The pid of the child, when it ran.
    pub fn pid(&self) -> Option<u32> {
        match self {
            ChildError::Spawn { .. } => None,
            ChildError::Timeout { pid, .. }
            | ChildError::Crashed { pid, .. }
            | ChildError::Failed { pid, .. } => Some(*pid),
        }
    }

    /// Short machine-readable reason: `spawn`, `timeout`, `crashed`, `failed`.
    pub fn reason(&self) -> &'static str {
        match self {
            ChildError::Spawn { .. } => "spawn",
            ChildError::Timeout { .. } => "timeout",
            ChildError::Crashed { .. } => "crashed",
            ChildError::Failed { .. } => "failed",
        }
    }

    /// The stderr tail, when it ran.
    pub fn stderr(&self) -> &str {
        match self {
            ChildError::Spawn { .. } => "",
            ChildError::Timeout { stderr, .. }
            | ChildError::Crashed { stderr, .. }
            | ChildError::Failed { stderr, .. } => stderr,
        }
    }
}

impl From<ChildError> for crate::error::Error {
    fn from(e: ChildError) -> Self {
        let engine = match &e {
            ChildError::Spawn { label, .. }
            | ChildError::Timeout { label, .. }
            | ChildError::Crashed { label, .. }
            | ChildError::Failed { label, .. } => label.clone(),
        };
        crate::error::Error::Engine {
            engine,
            reason: e.reason(),
            message: e.to_string(),
            pid: e.pid(),
            stderr: e.stderr().to_owned(),
        }
    }
}

/// The mark every engine child carries (set once at start-up by [`reap_and_mark`]).
static MARK: OnceLock<String> = OnceLock::new();

/// Kills the engine processes a previous svc-audio of `home` left behind, then marks this
/// process's children as svc-audio's of `home` ([`orphans::mark`]). Returns how many
/// process groups were killed. Call it once at start-up, before any engine runs.
pub fn reap_and_mark(home: &Path) -> usize {
    let mark = orphans::mark("audio", home);
    let killed = orphans::reap(&mark);
    let _ = MARK.set(mark);
    killed
}

/// Kills a process group when dropped, unless disarmed: a caller that stops waiting
/// (cancelled call, timeout) never leaves an engine running.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    /// Guards the group `pgid`.
    pub fn new(pgid: u32) -> Self {
        GroupGuard {
            pgid: Some(pgid as i32),
        }
    }
    /// Sends `signal` to the group now.
    pub fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            match killpg(Pid::from_raw(pgid), signal) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(e) => tracing::warn!(pgid, %signal, error = %e, "killpg failed"),
            }
        }
    }
    /// The group ended on its own: nothing to kill on drop.
    pub fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
        self.disarm();
    }
}

/// Builds the command: own process group, PDEATHSIG, piped stdio.
pub fn command(spec: &ChildSpec) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&spec.program);
    cmd.args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(mark) = MARK.get() {
        cmd.env(orphans::MARK_ENV, mark);
    }
    let parent = Pid::this();
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (prctl, getppid); it does not allocate.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // svc-audio may have died between fork and prctl: then no signal will ever
            // come, so give up rather than run as an orphan.
            if nix::unistd::getppid() != parent {
                return Err(Errno::ESRCH.into());
            }
            Ok(())
        });
    }
    cmd
}

/// Runs `spec` to completion. `lines`, when given, receives every line of stdout and
/// stderr as it is written (installer progress).
pub async fn run(
    spec: &ChildSpec,
    lines: Option<mpsc::UnboundedSender<String>>,
) -> Result<ChildOutput, ChildError> {
    let mut child = command(spec).spawn().map_err(|e| ChildError::Spawn {
        label: spec.label.clone(),
        program: spec.program.display().to_string(),
        reason: e.to_string(),
    })?;
    let pid = child.id().unwrap_or(0);
    let mut guard = GroupGuard::new(pid);
    tracing::debug!(engine = %spec.label, pid, "engine started");

    if let (Some(bytes), Some(mut stdin)) = (spec.stdin.clone(), child.stdin.take()) {
        tokio::spawn(async move {
            // A child that exits without reading its stdin is not an error here.
            let _ = stdin.write_all(&bytes).await;
            let _ = stdin.shutdown().await;
        });
    }
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    let out_lines = lines.clone();
    let out_task = tokio::spawn(async move {
        let mut buf = Vec::new();
        match out_lines {
            None => {
                let _ = stdout.take(STDOUT_MAX as u64).read_to_end(&mut buf).await;
            }
            Some(tx) => {
                let mut r = BufReader::new(stdout).lines();
                while let Ok(Some(l)) = r.next_line().await {
                    buf.extend_from_slice(l.as_bytes());
                    buf.push(b'\n');
                    let _ = tx.send(l);
                }
            }
        }
        buf
    });
    let err_task = tokio::spawn(async move {
        let mut tail = String::new();
        let mut r = BufReader::new(stderr);
        let mut line = Vec::new();
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let l = String::from_utf8_lossy(&line);
                    if let Some(tx) = &lines {
                        let _ = tx.send(l.trim_end().to_owned());
                    }
                    tail.push_str(&l);
                    if tail.len() > STDERR_TAIL * 2 {
                        let cut = tail.len() - STDERR_TAIL;
                        let cut = (cut..tail.len())
                            .find(|i| tail.is_char_boundary(*i))
                            .unwrap_or(0);
                        tail.drain(..cut);
                    }
                }
            }
        }
        tail
    });

    let status = match tokio::time::timeout(spec.timeout, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            guard.signal(Signal::SIGKILL);
            let _ = child.wait().await;
            guard.disarm();
            let stderr = collect(err_task).await;
            out_task.abort();
            tracing::warn!(engine = %spec.label, pid, timeout = ?spec.timeout, "engine timed out; killed");
            return Err(ChildError::Timeout {
                label: spec.label.clone(),
                after: spec.timeout,
                pid,
                stderr,
            });
        }
    };
    let status = status.map_err(|e| ChildError::Spawn {
        label: spec.label.clone(),
        program: spec.program.display().to_string(),
        reason: format!("wait failed: {e}"),
    })?;
    // The leader exited; anything it left behind in its group goes too (the pipes would
    // otherwise stay open and the reads below never end).
    guard.signal(Signal::SIGKILL);
    guard.disarm();
    let stdout = collect(out_task).await;
    let stderr = collect(err_task).await;
    if let Some(signal) = status.signal() {
        return Err(ChildError::Crashed {
            label: spec.label.clone(),
            signal,
            pid,
            stderr,
        });
    }
    match status.code() {
        Some(0) => Ok(ChildOutput {
            pid,
            stdout,
            stderr,
        }),
        code => Err(ChildError::Failed {
            label: spec.label.clone(),
            code: code.unwrap_or(-1),
            pid,
            stderr,
        }),
    }
}

async fn collect<T: Default>(task: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default()
}

/// True when `pid` is a live process (zombies count as gone).
pub fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

#[cfg(test)]
#[path = "child_tests.rs"]
mod tests;

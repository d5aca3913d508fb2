//! Running one hook command safely: its argv directly (no shell), in the session's workdir,
//! in its own process group (killed whole on timeout or when the call is dropped), with a
//! clean environment (only [`PASSED_ENV`] plus the plugin and project dirs: the daemon's
//! provider keys never reach a plugin), the event as JSON on stdin, and at most
//! [`MAX_OUTPUT_BYTES`] of stdout and of stderr kept.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::config::HookDef;

/// Bytes of stdout and of stderr kept from one hook (the rest is read and dropped).
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// The daemon's environment variables a hook sees.
pub const PASSED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "TZ",
];

/// How one hook run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ran {
    /// It exited with this code (`None`: killed by a signal).
    Exited {
        /// Exit code.
        code: Option<i32>,
        /// Its stdout (lossy UTF-8, at most [`MAX_OUTPUT_BYTES`]).
        stdout: String,
        /// Its stderr (same).
        stderr: String,
    },
    /// It could not start.
    NotStarted(String),
    /// It ran past its timeout and was killed.
    TimedOut,
}

/// Kills the process group when dropped (timeout, or the turn dropped the call).
struct Group(Option<Pid>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

/// Reads all of `r`, keeping the first `MAX_OUTPUT_BYTES`.
async fn read_bounded(mut r: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = MAX_OUTPUT_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// Runs `hook` with `input` on stdin in `workdir` (see the module doc).
pub async fn run(hook: &HookDef, input: &Value, workdir: &Path, mark: Option<&str>) -> Ran {
    let mut cmd = Command::new(&hook.argv[0]);
    cmd.args(&hook.argv[1..])
        .current_dir(workdir)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for k in PASSED_ENV {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd.env("CLAUDE_PLUGIN_ROOT", &hook.root)
        .env("SNOWPEA_PLUGIN_ROOT", &hook.root)
        .env("CLAUDE_PROJECT_DIR", workdir)
        .env("SNOWPEA_HOOK_EVENT", hook.event.as_str());
    if let Some(mark) = mark {
        cmd.env(snowpea_common::orphans::MARK_ENV, mark);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Ran::NotStarted(format!("{}: {e}", hook.argv[0])),
    };
    let _group = Group(child.id().map(|p| Pid::from_raw(p as i32)));
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let body = input.to_string();
    let all = async {
        let feed = async {
            if let Some(mut s) = stdin {
                // A hook that does not read its input closes the pipe: not an error.
                let _ = s.write_all(body.as_bytes()).await;
                let _ = s.shutdown().await;
            }
        };
        let out = async {
            match stdout {
                Some(s) => read_bounded(s).await,
                None => Vec::new(),
            }
        };
        let err = async {
            match stderr {
                Some(s) => read_bounded(s).await,
                None => Vec::new(),
            }
        };
        let ((), out, err, status) = tokio::join!(feed, out, err, child.wait());
        (out, err, status)
    };
    match tokio::time::timeout(hook.timeout, all).await {
        Err(_) => Ran::TimedOut,
        Ok((out, err, status)) => match status {
            Err(e) => Ran::NotStarted(format!("{}: {e}", hook.argv[0])),
            Ok(s) => Ran::Exited {
                code: s.code(),
                stdout: String::from_utf8_lossy(&out).into_owned(),
                stderr: String::from_utf8_lossy(&err).into_owned(),
            },
        },
    }
}

/// A hook's declared timeout, for messages.
pub fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 10.0).round() / 10.0
}

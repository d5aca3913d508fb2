//! Spawning supervised children and the process-level helpers around them.
//!
//! Every child runs in its own process group (so SIGTERM/SIGKILL reach anything it
//! started), gets `PR_SET_PDEATHSIG = SIGKILL` so that no child outlives even a
//! `kill -9` of the supervisor, appends stdout and stderr to `logs/<name>.log`
//! (mode 0600), inherits the environment plus `SNOWPEA_HOME`, and — for the gateway —
//! receives the supervisor's TCP listener as fd 3.
//!
//! PDEATHSIG fires when the *thread* that forked the child exits, not the process. The
//! supervisor therefore runs on a current-thread tokio runtime and spawns children only
//! from the main thread (see `main.rs` and [`crate::supervise`]); spawning from a
//! `spawn_blocking` or worker thread would kill the child as soon as that thread ends.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{BorrowedFd, IntoRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use snowpea_common::home::Home;

/// The fd number the gateway finds its inherited listener on (`--listen-fd 3`).
pub const LISTEN_FD: RawFd = 3;

/// How to launch one child.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// Process name (log file `logs/<name>.log`).
    pub name: String,
    /// Full path of the binary.
    pub program: PathBuf,
    /// Arguments after the program name.
    pub args: Vec<OsString>,
    /// Raw fd of a listener to hand over as fd [`LISTEN_FD`] (gateway only).
    pub listen_fd: Option<RawFd>,
}

/// Opens (creating with mode 0600) `path` for appending.
pub fn open_log(path: &Path) -> io::Result<std::fs::File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// Spawns `spec` as a supervised child of the calling thread (see the module docs: call
/// this only from the supervisor's main thread).
pub fn spawn(spec: &SpawnSpec, home: &Home) -> anyhow::Result<tokio::process::Child> {
    let log_path = home.log_file(&spec.name);
    let log = open_log(&log_path).with_context(|| format!("open {}", log_path.display()))?;
    let log_err = log.try_clone().context("dup log fd")?;

    let mut cmd = tokio::process::Command::new(&spec.program);
    cmd.args(&spec.args)
        .env("SNOWPEA_HOME", home.root())
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .process_group(0)
        .kill_on_drop(false);

    let parent = Pid::this();
    let listen_fd = spec.listen_fd;
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (prctl, getppid, fcntl, dup2); it does not allocate.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // The supervisor may have died between fork and prctl: then no signal will
            // ever come, so give up now rather than run as an orphan.
            if nix::unistd::getppid() != parent {
                return Err(Errno::ESRCH.into());
            }
            if let Some(fd) = listen_fd {
                if fd == LISTEN_FD {
                    // dup2 onto itself is a no-op that keeps FD_CLOEXEC: clear it.
                    nix::fcntl::fcntl(
                        BorrowedFd::borrow_raw(fd),
                        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
                    )?;
                } else {
                    // dup2 clears FD_CLOEXEC on the new descriptor. Keep fd 3 open:
                    // into_raw_fd stops the OwnedFd from closing it.
                    let _ =
                        nix::unistd::dup2_raw(BorrowedFd::borrow_raw(fd), LISTEN_FD)?.into_raw_fd();
                }
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound && !spec.program.exists() {
            anyhow::anyhow!(
                "cannot start {}: {}",
                spec.name,
                crate::bins::missing_binary(&spec.program)
            )
        } else {
            anyhow::Error::new(e).context(format!("spawn {}", spec.program.display()))
        }
    })
}

/// Sends `signal` to the process group `pgid`; a group that is already gone is fine.
pub fn signal_group(pgid: u32, signal: Signal) {
    match killpg(Pid::from_raw(pgid as i32), signal) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => tracing::warn!(pgid, %signal, error = %e, "killpg failed"),
    }
}

/// "exit status N" or "signal N", as in `ProcessStatus.last_exit`.
pub fn describe_exit(status: &ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        (None, None) => "exited".to_owned(),
    }
}

/// Whether `pid` is a live process. Zombies count as gone (an orphan may never be
/// reaped when pid 1 is not an init).
pub fn pid_alive(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => match stat.rfind(')') {
            Some(i) => !matches!(stat[i + 1..].trim_start().chars().next(), Some('Z' | 'X')),
            None => true,
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(_) => nix::sys::signal::kill(Pid::from_raw(pid as i32), None).is_ok(),
    }
}

/// Whether `pid` looks like a `snowpea` process (guards against signalling an unrelated
/// process that reused the pid of a stale `daemon.json`).
pub fn is_snowpea(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            let arg0 = c.split(|b| *b == 0).next().unwrap_or_default();
            String::from_utf8_lossy(arg0).contains("snowpea")
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_binary_fails_with_its_name_the_directory_and_snowpea_bin_dir() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().join("home"));
        home.ensure_dirs().unwrap();
        let spec = SpawnSpec {
            name: "session".into(),
            program: dir.path().join("bin/snowpea-svc-session"),
            args: vec![],
            listen_fd: None,
        };
        let err = format!("{:#}", spawn(&spec, &home).unwrap_err());
        assert!(err.contains("cannot start session"), "{err}");
        assert!(err.contains("snowpea-svc-session not found in"), "{err}");
        assert!(
            err.contains(&dir.path().join("bin").display().to_string()),
            "{err}"
        );
        assert!(err.contains("SNOWPEA_BIN_DIR"), "{err}");
    }
}

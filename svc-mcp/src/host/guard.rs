//! The process guard between svc-mcp and a stdio MCP server (issue 6: children are always
//! reaped, even when svc-mcp is killed with SIGKILL).
//!
//! svc-mcp runs `snowpea-svc-mcp __mcp-guard <command> <args…>` as the leader of a new
//! process group with `PR_SET_PDEATHSIG = SIGTERM`. The guard starts the real server in the
//! same group (its stdin/stdout/stderr are the pipes svc-mcp reads) and waits:
//! * the server exits → the guard writes one `snowpea-mcp-guard: server exited …` line to
//!   stderr and SIGKILLs the whole group (itself included), so grandchildren (`npx` → `sh`
//!   → `node`) never outlive the server;
//! * SIGTERM/SIGINT/SIGHUP (svc-mcp stopping the server, or svc-mcp dying: PDEATHSIG) → the
//!   guard forwards SIGTERM to the group, waits up to [`GRACE`], then SIGKILLs the group.
//!
//! PDEATHSIG alone only reaches the direct child; the guard is what makes the whole tree go.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::time::Duration;

use nix::sys::signal::{kill, killpg, SigSet, SigmaskHow, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgrp, getppid, Pid};

/// The argv[1] that switches `snowpea-svc-mcp` into guard mode.
pub const GUARD_ARG: &str = "__mcp-guard";
/// Env var holding svc-mcp's pid, so a guard whose parent is already gone exits at once.
pub const PARENT_ENV: &str = "SNOWPEA_MCP_PARENT";
/// Env var set on every guard and MCP server: the Snowpea home owning it (tests count
/// processes by it).
pub const OWNER_ENV: &str = "SNOWPEA_MCP_OWNER";
/// How long the server gets between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);
/// The stderr line prefix the guard reports the server's exit with.
pub const EXIT_LINE_PREFIX: &str = "snowpea-mcp-guard: ";

/// Runs the guard when argv[1] is [`GUARD_ARG`]; returns `None` otherwise (normal start).
pub fn run_if_guard() -> Option<i32> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(GUARD_ARG)) {
        return None;
    }
    let rest: Vec<OsString> = args.collect();
    Some(run(rest))
}

fn run(argv: Vec<OsString>) -> i32 {
    let Some((command, args)) = argv.split_first() else {
        eprintln!("{EXIT_LINE_PREFIX}no command given");
        return 2;
    };
    // The parent may have died before PDEATHSIG was armed (set in its pre_exec).
    if let Some(parent) = std::env::var(PARENT_ENV)
        .ok()
        .and_then(|p| p.parse::<i32>().ok())
    {
        if getppid().as_raw() != parent {
            return 1;
        }
    }
    let mut mask = SigSet::empty();
    for s in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGCHLD,
    ] {
        mask.add(s);
    }
    if mask.thread_block().is_err() {
        eprintln!("{EXIT_LINE_PREFIX}cannot block signals");
        return 1;
    }
    let mut cmd = std::process::Command::new(command);
    cmd.args(args);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            // The server starts with a clean mask; if the guard is SIGKILLed it follows.
            nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
                .map_err(std::io::Error::from)?;
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "{EXIT_LINE_PREFIX}cannot start {}: {e}",
                command.to_string_lossy()
            );
            return 127;
        }
    };
    let child_pid = Pid::from_raw(child.id() as i32);
    // Only the server keeps the pipes: EOF on stdout then means the server is gone.
    if let Ok(null) = std::fs::File::open("/dev/null") {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto the standard fds of this single-threaded process.
        unsafe {
            libc_dup2(null.as_raw_fd(), 0);
            libc_dup2(null.as_raw_fd(), 1);
        }
    }
    let group = getpgrp();
    let mut terminating = false;
    loop {
        let sig = match mask.wait() {
            Ok(s) => s,
            Err(_) => continue,
        };
        match sig {
            Signal::SIGCHLD => match waitpid(child_pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(_, code)) => {
                    finish(group, &format!("server exited with code {code}"));
                    return code;
                }
                Ok(WaitStatus::Signaled(_, s, _)) => {
                    finish(group, &format!("server killed by signal {s}"));
                    return 128 + s as i32;
                }
                _ => {}
            },
            _ if !terminating => {
                terminating = true;
                // Everyone but us (SIGTERM is blocked here) gets SIGTERM, then SIGKILL.
                let _ = killpg(group, Signal::SIGTERM);
                let _ = kill(child_pid, Signal::SIGTERM);
                std::thread::spawn(move || {
                    std::thread::sleep(GRACE);
                    let _ = killpg(group, Signal::SIGKILL);
                });
            }
            _ => {}
        }
    }
}

/// Reports the server's end and SIGKILLs the group (the guard included). The report goes
/// first but never fails the guard: with svc-mcp gone the stderr pipe has no reader, and
/// `eprintln!` would panic on EPIPE before the group is reaped.
fn finish(group: Pid, report: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{EXIT_LINE_PREFIX}{report}");
    let _ = killpg(group, Signal::SIGKILL);
}

extern "C" {
    #[link_name = "dup2"]
    fn libc_dup2(oldfd: i32, newfd: i32) -> i32;
}

/// Describes an exit status the way the guard reports it.
pub fn describe(status: std::process::ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with code {c}"),
        (_, Some(s)) => format!("killed by signal {s}"),
        _ => "exited".into(),
    }
}

//! `snowpea supervisor start [--home DIR] [--port N] [--foreground]`, and
//! [`ensure_started`], which `snowpea run` uses to start the suite on demand.
//!
//! The model settings are checked before anything runs with them (issue 39 item 1): a
//! `SNOWPEA_PROVIDER=fake:<script>` whose script cannot be used refuses the start
//! ([`provider_env`]), and a `start` that finds the suite running with other model settings
//! than the caller's says so with the restart command and exits 1
//! ([`crate::model_check::mismatch`]).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use nix::fcntl::{Flock, FlockArg};
use snowpea_common::home::{DaemonJson, Home};

use super::exit;
use crate::daemonize::{self, Waited};
use crate::supervise::{self, StartError};

/// Lines of the supervisor log printed when a start fails.
const FAIL_TAIL: usize = 40;

/// Arguments of `snowpea supervisor start`.
#[derive(Debug, Clone, Args)]
pub struct StartArgs {
    /// Snowpea home (default: $SNOWPEA_HOME, else ~/.snowpea).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Gateway port on 127.0.0.1 (default: a free port).
    #[arg(long, value_name = "N")]
    pub port: Option<u16>,
    /// Run the supervisor in this process (logs to stderr) until stopped.
    #[arg(long)]
    pub foreground: bool,
}

/// How [`start_suite`] ended.
#[derive(Debug)]
pub enum Started {
    /// A supervisor was already running on this home.
    AlreadyRunning(DaemonJson),
    /// This call started it.
    Started(DaemonJson),
}

/// Starts the suite on `home` unless it runs already; returns its `daemon.json`.
pub async fn ensure_started(home: &Home, port: Option<u16>) -> anyhow::Result<DaemonJson> {
    match start_suite(home, port).await? {
        Started::AlreadyRunning(d) | Started::Started(d) => Ok(d),
    }
}

/// Starts a detached supervisor on `home` (or finds the running one) and waits until
/// it is ready. A failed start's error includes the tail of `logs/supervisor.log`.
pub async fn start_suite(home: &Home, port: Option<u16>) -> anyhow::Result<Started> {
    home.ensure_dirs()?;
    home.ensure_token()?;
    if let Some(d) = running(home).await {
        return Ok(Started::AlreadyRunning(d));
    }
    if lock_held(home) {
        // Another start is in progress: wait for it rather than racing it.
        return wait_for_other(home).await.map(Started::AlreadyRunning);
    }
    let env = provider_env()?;
    let log = home.log_file("supervisor");
    let log_len = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let mut child = daemonize::spawn_detached(home, port, &env)?;
    match daemonize::wait_ready(home, &mut child, daemonize::START_TIMEOUT).await {
        Ok(Waited::Ready(d)) => Ok(Started::Started(d)),
        Ok(Waited::Other) => wait_for_other(home).await.map(Started::AlreadyRunning),
        Err(e) => {
            // Do not leave a half-started supervisor behind.
            crate::spawn::signal_group(child.id(), nix::sys::signal::Signal::SIGTERM);
            let tail = tail_since(&log, log_len, FAIL_TAIL);
            Err(e.context(format!(
                "the suite failed to start; last lines of {}:\n{tail}",
                log.display()
            )))
        }
    }
}

/// The caller's `SNOWPEA_PROVIDER`, checked ([`crate::model_env::check_fake_script`]) and
/// with a `fake:` script's path made absolute, as the environment to start the supervisor
/// with; an error naming the variable, the file and the fix when the script cannot be used.
pub fn provider_env() -> anyhow::Result<Vec<(&'static str, String)>> {
    use crate::model_env::{check_fake_script, PROVIDER_VAR};
    let Some(spec) = std::env::var(PROVIDER_VAR)
        .ok()
        .filter(|s| !s.trim().is_empty())
    else {
        return Ok(Vec::new());
    };
    let cwd = std::env::current_dir().context("read the current directory")?;
    let checked = check_fake_script(&spec, &cwd).map_err(anyhow::Error::msg)?;
    Ok(vec![(PROVIDER_VAR, checked)])
}

/// `daemon.json` of a supervisor that answers on the control socket.
async fn running(home: &Home) -> Option<DaemonJson> {
    let status = crate::control::status(home).await?;
    match home.read_daemon_json() {
        Ok(d) if i64::from(d.pid) == status.pid => Some(d),
        // Still starting: daemon.json comes once the gateway listens.
        _ => wait_for_other(home).await.ok(),
    }
}

/// Whether another process holds the supervisor lock of `home`.
fn lock_held(home: &Home) -> bool {
    let path = home.run_dir().join("supervisor.lock");
    let Ok(file) = std::fs::File::open(&path) else {
        return false;
    };
    Flock::lock(file, FlockArg::LockSharedNonblock).is_err()
}

/// Waits (30 s at most) for the supervisor someone else started to be ready.
async fn wait_for_other(home: &Home) -> anyhow::Result<DaemonJson> {
    let deadline = Instant::now() + daemonize::START_TIMEOUT;
    loop {
        if let (Some(st), Ok(d)) = (crate::control::status(home).await, home.read_daemon_json()) {
            if i64::from(d.pid) == st.pid {
                return Ok(d);
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "another supervisor owns {} but did not become ready",
            home.root().display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The last `n` lines `path` gained after byte `from`.
fn tail_since(path: &std::path::Path, from: u64, n: usize) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let start = usize::try_from(from).unwrap_or(0).min(bytes.len());
    let text = String::from_utf8_lossy(&bytes[start..]);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn already_running(port: u16, pid: u32) {
    println!("snowpea is already running on port {port} (pid {pid})");
}

/// Where the foreground supervisor also writes its log lines: `logs/supervisor.log`, unless
/// stderr already is that file (the detached start points it there, see
/// [`crate::daemonize`]). `None` when the log cannot be opened (stderr still gets them).
pub fn log_tee(home: &Home) -> Option<std::fs::File> {
    use std::os::unix::fs::MetadataExt;
    let path = home.log_file("supervisor");
    let stderr_is_log = match (
        std::fs::metadata("/proc/self/fd/2"),
        std::fs::metadata(&path),
    ) {
        (Ok(fd), Ok(file)) => fd.dev() == file.dev() && fd.ino() == file.ino(),
        _ => false,
    };
    if stderr_is_log {
        return None;
    }
    home.ensure_dirs().ok()?;
    crate::spawn::open_log(&path).ok()
}

/// Runs `snowpea supervisor start`.
pub async fn start(args: StartArgs) -> anyhow::Result<i32> {
    let home = Home::resolve(args.home.as_deref())?;
    if args.foreground {
        return foreground(home, args.port, args.home.as_deref()).await;
    }
    match start_suite(&home, args.port).await? {
        Started::AlreadyRunning(d) => {
            if let Some(message) = crate::model_check::mismatch(&home, args.home.as_deref()) {
                eprintln!(
                    "snowpea is already running on port {} (pid {}), but {message}",
                    d.port, d.pid
                );
                return Ok(exit::FAILURE);
            }
            already_running(d.port, d.pid)
        }
        Started::Started(d) => println!(
            "snowpea started: ws://127.0.0.1:{}{} (home {}, pid {})",
            d.port,
            snowpea_proto::WS_PATH,
            home.root().display(),
            d.pid
        ),
    }
    Ok(exit::OK)
}

async fn foreground(
    home: Home,
    port: Option<u16>,
    home_arg: Option<&std::path::Path>,
) -> anyhow::Result<i32> {
    if let Some(st) = crate::control::status(&home).await {
        let (port, pid) = (u16::try_from(st.port).unwrap_or(0), st.pid as u32);
        if let Some(message) = crate::model_check::mismatch(&home, home_arg) {
            eprintln!("snowpea is already running on port {port} (pid {pid}), but {message}");
            return Ok(exit::FAILURE);
        }
        already_running(port, pid);
        return Ok(exit::OK);
    }
    provider_env()?;
    match supervise::run(supervise::Options::new(home.clone(), port)).await {
        Ok(code) => Ok(code),
        Err(StartError::AlreadyRunning(_)) => {
            let d = wait_for_other(&home)
                .await
                .context("another supervisor holds the lock")?;
            already_running(d.port, d.pid);
            Ok(exit::OK)
        }
        Err(StartError::Setup(e)) => Err(e),
    }
}

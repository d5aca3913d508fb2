//! `snowpea supervisor start` without `--foreground`: re-executes this binary as
//! `snowpea supervisor start --foreground --home DIR [--port N]` in a new session
//! (`setsid`, stdin `/dev/null`, stdout and stderr appended to `logs/supervisor.log`)
//! and waits until that child wrote `daemon.json` with its own pid and the gateway
//! answers `GET /health`.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use snowpea_common::home::{DaemonJson, Home};

/// How long `start` waits for the detached supervisor to be ready.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Spawns the detached foreground supervisor, with `env` set in its environment (e.g.
/// `SNOWPEA_PROVIDER` with the script's path made absolute).
pub fn spawn_detached(
    home: &Home,
    port: Option<u16>,
    env: &[(&str, String)],
) -> anyhow::Result<Child> {
    let exe = std::env::current_exe().context("locate the snowpea executable")?;
    let log_path = home.log_file("supervisor");
    let log = crate::spawn::open_log(&log_path)
        .with_context(|| format!("open {}", log_path.display()))?;
    let log_err = log.try_clone()?;
    let mut cmd = Command::new(exe);
    cmd.args(["supervisor", "start", "--foreground", "--home"])
        .arg(home.root())
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    if let Some(port) = port {
        cmd.args(["--port", &port.to_string()]);
    }
    // SAFETY: setsid is async-signal-safe and the closure does not allocate.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()?;
            Ok(())
        });
    }
    cmd.spawn().context("spawn the supervisor")
}

/// How a wait for the detached supervisor ended.
#[derive(Debug)]
pub enum Waited {
    /// Our child is up: `daemon.json` names it and `/health` answers.
    Ready(DaemonJson),
    /// Our child exited with status 0 because another supervisor owns the home.
    Other,
}

/// Waits (bounded by `timeout`, checking every 20 ms) for `child` to be ready.
pub async fn wait_ready(
    home: &Home,
    child: &mut Child,
    timeout: Duration,
) -> anyhow::Result<Waited> {
    let deadline = Instant::now() + timeout;
    let pid = child.id();
    loop {
        if let Some(status) = child.try_wait()? {
            if status.success() {
                return Ok(Waited::Other);
            }
            anyhow::bail!(
                "the supervisor exited during start ({})",
                crate::spawn::describe_exit(&status)
            );
        }
        if let Ok(d) = home.read_daemon_json() {
            if d.pid == pid && crate::ready::gateway_healthy(d.port).await {
                return Ok(Waited::Ready(d));
            }
        }
        if Instant::now() >= deadline {
            anyhow::bail!("the supervisor did not become ready within {timeout:?}");
        }
        tokio::time::sleep(crate::ready::RETRY_EVERY).await;
    }
}

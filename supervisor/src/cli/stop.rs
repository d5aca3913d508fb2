//! `snowpea supervisor stop [--home DIR]`: asks the supervisor to stop over the control
//! socket and waits until its pid is gone; falls back to SIGTERM on the pid named by a
//! `daemon.json` when the control socket does not answer.

use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use snowpea_proto::supervisor::v1::StopRequest;

use super::{exit, HomeArgs};
use crate::spawn::{is_snowpea, pid_alive};

/// How long `stop` waits for the supervisor to exit.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// Runs `snowpea supervisor stop`.
pub async fn stop(args: HomeArgs) -> anyhow::Result<i32> {
    let home = args.resolve()?;
    let pid = if let Some(status) = crate::control::status(&home).await {
        let mut client = crate::control::client(&home);
        tokio::time::timeout(
            Duration::from_secs(5),
            client.stop(StopRequest {
                reason: "snowpea supervisor stop".into(),
            }),
        )
        .await
        .map_err(|_| anyhow::anyhow!("the supervisor did not answer Stop"))??;
        status.pid as u32
    } else {
        match home.read_daemon_json() {
            Ok(d) if pid_alive(d.pid) && is_snowpea(d.pid) => {
                eprintln!(
                    "control socket not answering; sending SIGTERM to pid {}",
                    d.pid
                );
                kill(Pid::from_raw(d.pid as i32), Signal::SIGTERM)?;
                d.pid
            }
            _ => {
                let _ = std::fs::remove_file(home.daemon_json_path());
                println!("snowpea is not running (home {})", home.root().display());
                return Ok(exit::OK);
            }
        }
    };
    let deadline = Instant::now() + STOP_TIMEOUT;
    while pid_alive(pid) {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the supervisor (pid {pid}) did not exit within {STOP_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("snowpea stopped (pid {pid})");
    Ok(exit::OK)
}

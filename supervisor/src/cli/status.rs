//! `snowpea supervisor status [--home DIR] [--json]`: one row per supervised process, with
//! its restarts, the crashes counted in the restart-intensity window and its current backoff
//! (issue 24 §5).
//! Exit code 3 when the suite is not running, 4 when it runs but a process is `failed`.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;
use snowpea_proto::supervisor::v1::StatusReply;

use super::exit;

/// Arguments of `snowpea supervisor status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Snowpea home (default: $SNOWPEA_HOME, else ~/.snowpea).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `status --json` output (camelCase, like the protocol).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusJson {
    /// Supervisor pid.
    pub pid: i64,
    /// Home directory.
    pub home: String,
    /// When the supervisor started (UTC ISO-8601).
    pub started_at: String,
    /// Gateway port.
    pub port: i64,
    /// Every process in start order.
    pub processes: Vec<ProcessJson>,
}

/// One process in [`StatusJson`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessJson {
    /// Process name.
    pub name: String,
    /// Pid, 0 when not running.
    pub pid: i64,
    /// starting, running, backoff, failed, stopping or stopped.
    pub state: String,
    /// Restarts since the supervisor started.
    pub restarts: i64,
    /// Seconds since the current instance started.
    pub uptime_sec: f64,
    /// Unix socket (services).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub socket: String,
    /// Log file.
    pub log: String,
    /// How the previous instance ended.
    pub last_exit: Option<String>,
    /// While `backoff`: the delay before the restart (ms); else the next crash's delay.
    pub backoff_ms: i64,
    /// Crashes counted in the restart-intensity window (60 s).
    pub restarts_in_window: i64,
    /// Crashes tolerated in the window before the process is marked `failed`.
    pub max_restarts_in_window: i64,
}

impl From<StatusReply> for StatusJson {
    fn from(s: StatusReply) -> Self {
        StatusJson {
            pid: s.pid,
            home: s.home,
            started_at: s.started_at,
            port: s.port,
            processes: s
                .processes
                .into_iter()
                .map(|p| ProcessJson {
                    name: p.name,
                    pid: p.pid,
                    state: p.state,
                    restarts: p.restarts,
                    uptime_sec: p.uptime_sec,
                    socket: p.socket,
                    log: p.log,
                    last_exit: p.last_exit,
                    backoff_ms: p.backoff_ms,
                    restarts_in_window: p.restarts_in_window,
                    max_restarts_in_window: p.max_restarts_in_window,
                })
                .collect(),
        }
    }
}

/// Runs `snowpea supervisor status`.
pub async fn status(args: StatusArgs) -> anyhow::Result<i32> {
    let home = snowpea_common::home::Home::resolve(args.home.as_deref())?;
    let Some(st) = crate::control::status(&home).await else {
        if args.json {
            println!(
                "{}",
                serde_json::json!({ "running": false, "home": home.root() })
            );
        } else {
            eprintln!("snowpea is not running (home {})", home.root().display());
        }
        return Ok(exit::NOT_RUNNING);
    };
    let failed: Vec<String> = st
        .processes
        .iter()
        .filter(|p| p.state == "failed")
        .map(|p| p.name.clone())
        .collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&StatusJson::from(st))?);
    } else {
        print!("{}", table(&st));
    }
    if failed.is_empty() {
        return Ok(exit::OK);
    }
    if !args.json {
        eprintln!(
            "snowpea: {} failed (crashed more than 5 times within 60 s); see `snowpea supervisor logs {}`, then `snowpea supervisor restart {}`",
            failed.join(", "),
            failed[0],
            failed[0]
        );
    }
    Ok(exit::FAILED_PROCESS)
}

/// The human-readable status.
pub fn table(st: &StatusReply) -> String {
    let mut out = format!(
        "snowpea running: pid {}, ws://127.0.0.1:{}{}, home {}, started {}\n",
        st.pid,
        st.port,
        snowpea_proto::WS_PATH,
        st.home,
        st.started_at
    );
    out.push_str(&format!(
        "{:<12} {:>8}  {:<9} {:>8}  {:>9}  {:>8}  {:>10}  {}\n",
        "PROCESS", "PID", "STATE", "RESTARTS", "IN WINDOW", "BACKOFF", "UPTIME", "LAST EXIT"
    ));
    for p in &st.processes {
        let pid = if p.pid == 0 {
            "-".to_owned()
        } else {
            p.pid.to_string()
        };
        out.push_str(&format!(
            "{:<12} {:>8}  {:<9} {:>8}  {:>9}  {:>8}  {:>10}  {}\n",
            p.name,
            pid,
            p.state,
            p.restarts,
            format!("{}/{}", p.restarts_in_window, p.max_restarts_in_window),
            backoff(&p.state, p.backoff_ms),
            uptime(p.uptime_sec),
            p.last_exit.as_deref().unwrap_or("-")
        ));
    }
    out
}

/// The backoff column: the delay before the restart (`100ms`, `3.2s`) while the process is
/// in `backoff`, `-` in every other state (the next delay is not a wait then).
fn backoff(state: &str, ms: i64) -> String {
    if state != "backoff" {
        "-".to_owned()
    } else if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

/// `1h02m`, `3m04s`, `12s`, or `-` when not running.
fn uptime(sec: f64) -> String {
    if sec <= 0.0 {
        return "-".to_owned();
    }
    let s = sec as u64;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn uptime_is_compact() {
        assert_eq!(super::uptime(0.0), "-");
        assert_eq!(super::uptime(12.7), "12s");
        assert_eq!(super::uptime(184.0), "3m04s");
        assert_eq!(super::uptime(3720.0), "1h02m");
    }

    #[test]
    fn backoff_is_compact() {
        assert_eq!(super::backoff("backoff", 100), "100ms");
        assert_eq!(super::backoff("backoff", 3200), "3.2s");
        assert_eq!(super::backoff("running", 100), "-");
        assert_eq!(super::backoff("failed", 3200), "-");
    }
}

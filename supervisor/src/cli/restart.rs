//! `snowpea supervisor restart <process> [--home DIR]`: restarts one process (or `all`)
//! through the control socket and waits until it runs again.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use snowpea_proto::supervisor::v1::RestartRequest;

use super::exit;

/// How long `restart` waits for the restarted processes to run again.
const RESTART_TIMEOUT: Duration = Duration::from_secs(15);

/// Arguments of `snowpea supervisor restart`.
#[derive(Debug, Clone, Args)]
pub struct RestartArgs {
    /// Process name (session, gateway, …) or `all`.
    pub process: String,
    /// Snowpea home (default: $SNOWPEA_HOME, else ~/.snowpea).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
}

/// Runs `snowpea supervisor restart`.
pub async fn restart(args: RestartArgs) -> anyhow::Result<i32> {
    let home = snowpea_common::home::Home::resolve(args.home.as_deref())?;
    let Some(before) = crate::control::status(&home).await else {
        eprintln!("snowpea is not running (home {})", home.root().display());
        return Ok(exit::NOT_RUNNING);
    };
    if args.process != "all" && !before.processes.iter().any(|p| p.name == args.process) {
        let mut names: Vec<&str> = before.processes.iter().map(|p| p.name.as_str()).collect();
        names.push("all");
        eprintln!(
            "snowpea: no process named {:?}; valid names: {}",
            args.process,
            names.join(", ")
        );
        return Ok(exit::FAILURE);
    }
    let old: HashMap<String, (i64, i64)> = before
        .processes
        .iter()
        .map(|p| (p.name.clone(), (p.pid, p.restarts)))
        .collect();
    let mut client = crate::control::client(&home);
    let request = RestartRequest {
        name: args.process.clone(),
    };
    match tokio::time::timeout(Duration::from_secs(5), client.restart(request)).await {
        Err(_) => anyhow::bail!("the supervisor did not answer"),
        Ok(Err(status)) => {
            eprintln!(
                "snowpea: cannot restart {}: {}",
                args.process,
                status.message()
            );
            return Ok(exit::FAILURE);
        }
        Ok(Ok(_)) => {}
    }
    let deadline = Instant::now() + RESTART_TIMEOUT;
    loop {
        if let Some(now) = crate::control::status(&home).await {
            let done = now
                .processes
                .iter()
                .filter(|p| args.process == "all" || p.name == args.process)
                .all(|p| {
                    let (pid, restarts) = old.get(&p.name).copied().unwrap_or_default();
                    p.state == "running" && p.pid != pid && p.restarts > restarts
                });
            if done {
                println!("restarted {}", args.process);
                return Ok(exit::OK);
            }
        }
        if Instant::now() >= deadline {
            eprintln!(
                "snowpea: {} did not run again within {RESTART_TIMEOUT:?}; see `snowpea supervisor status`",
                args.process
            );
            return Ok(exit::FAILURE);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

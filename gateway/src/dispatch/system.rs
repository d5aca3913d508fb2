//! The `system.*` methods the gateway answers itself (DESIGN.md §3: owner `system`):
//! health, info, shutdown and restart (hello is [`super::hello`]). Shutdown and
//! restart answer first and act after the answer went out, through the supervisor's
//! control socket; a standalone gateway (no supervisor answering) stops itself.
//! checkUpdate, reloadSettings and update are `not_implemented` for now.

use std::time::Duration;

use prost_reflect::DynamicMessage;
use serde_json::{json, Value};
use snowpea_common::client::unix_channel;
use snowpea_common::home::Home;
use snowpea_proto::error::{ErrorCode, RpcError};
use snowpea_proto::supervisor::v1::supervisor_client::SupervisorClient;
use snowpea_proto::supervisor::v1::{RestartRequest, StopRequest};
use snowpea_proto::PROTOCOL_VERSION;

use tokio_util::sync::CancellationToken;

use crate::route::table::SystemMethod;
use crate::wire::counters::Counters;

/// What `system.info` reports about the daemon.
#[derive(Debug, Clone)]
pub struct Daemon {
    /// The Snowpea home.
    pub home: Home,
    /// TCP port the gateway listens on.
    pub port: u16,
    /// UTC ISO-8601 time this gateway started.
    pub started_at: String,
}

/// Something to do once the answer reached the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterReply {
    /// Stop the whole suite (system.shutdown).
    StopSuite,
    /// Restart the whole suite (system.restart).
    RestartSuite,
}

/// How long the supervisor gets to acknowledge a stop/restart request.
const SUPERVISOR_TIMEOUT: Duration = Duration::from_secs(3);

impl AfterReply {
    /// Asks the supervisor of `home`; without one, the gateway shuts itself down
    /// (cancels `shutdown`).
    pub async fn run(self, home: &Home, shutdown: &CancellationToken) {
        let mut client = SupervisorClient::new(unix_channel(home.supervisor_socket()));
        let asked = match self {
            AfterReply::StopSuite => {
                let req = StopRequest {
                    reason: "system.shutdown".into(),
                };
                tokio::time::timeout(SUPERVISOR_TIMEOUT, client.stop(req))
                    .await
                    .map(|r| r.map(|_| ()))
            }
            AfterReply::RestartSuite => {
                let req = RestartRequest { name: "all".into() };
                tokio::time::timeout(SUPERVISOR_TIMEOUT, client.restart(req))
                    .await
                    .map(|r| r.map(|_| ()))
            }
        };
        match asked {
            Ok(Ok(())) => tracing::info!(action = ?self, "supervisor asked"),
            Ok(Err(e)) => {
                tracing::info!(action = ?self, error = %e.message(), "no supervisor answered; stopping the gateway");
                shutdown.cancel();
            }
            Err(_) => {
                tracing::warn!(action = ?self, "supervisor did not answer in time; stopping the gateway");
                shutdown.cancel();
            }
        }
    }
}

/// Answers a `system.*` method other than hello.
pub async fn handle(
    daemon: &Daemon,
    counters: &Counters,
    method: SystemMethod,
    name: &str,
    _params: DynamicMessage,
) -> Result<(Value, Option<AfterReply>), RpcError> {
    match method {
        SystemMethod::Hello => Err(RpcError::internal("system.hello is answered by hello")),
        SystemMethod::Health => Ok((json!({"status": "ok"}), None)),
        SystemMethod::Info => Ok((info(daemon, counters), None)),
        SystemMethod::Shutdown => Ok((json!({"ok": true}), Some(AfterReply::StopSuite))),
        SystemMethod::Restart => Ok((json!({"ok": true}), Some(AfterReply::RestartSuite))),
        SystemMethod::NotImplemented => Err(RpcError::new(
            ErrorCode::NotImplemented,
            format!("{name} is not implemented yet"),
        )),
    }
}

/// `system.info`: the daemon's pid and start time are the supervisor's (from
/// `daemon.json`, when it describes this gateway's port), else this process's own.
fn info(daemon: &Daemon, counters: &Counters) -> Value {
    let supervisor = daemon
        .home
        .read_daemon_json()
        .ok()
        .filter(|d| d.port == daemon.port);
    let (pid, started_at) = match supervisor {
        Some(d) => (d.pid, d.started_at),
        None => (std::process::id(), daemon.started_at.clone()),
    };
    json!({
        "version": snowpea_common::VERSION,
        "pid": pid,
        "port": daemon.port,
        "startedAt": started_at,
        "home": daemon.home.root().display().to_string(),
        "protocolVersion": PROTOCOL_VERSION,
        "platform": platform(),
        "counters": counters.to_json(),
    })
}

/// `std::env::consts::OS` in Python's `sys.platform` spelling, as the spec asks.
fn platform() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

//! The `system.*` methods the gateway answers itself (DESIGN.md §3: owner `system`):
//! hello (see [`crate::hello`]), health, info, shutdown and restart. Shutdown and
//! restart answer first and act after the answer went out, through the supervisor's
//! control socket; a standalone gateway (no supervisor answering) stops itself.
//! checkUpdate, reloadSettings and update are `not_implemented` for now.

use std::sync::Arc;
use std::time::Duration;

use prost_reflect::DynamicMessage;
use serde_json::{json, Value};
use snowpea_common::client::unix_channel;
use snowpea_proto::error::{ErrorCode, RpcError};
use snowpea_proto::supervisor::v1::supervisor_client::SupervisorClient;
use snowpea_proto::supervisor::v1::{RestartRequest, StopRequest};
use snowpea_proto::PROTOCOL_VERSION;

use crate::state::Gateway;
use crate::ws::handle::Connection;

/// A `system.*` method answered by the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SystemMethod {
    /// `system.hello`.
    Hello,
    /// `system.health`.
    Health,
    /// `system.info`.
    Info,
    /// `system.shutdown`.
    Shutdown,
    /// `system.restart`.
    Restart,
    /// Declared in the schema, not implemented yet.
    NotImplemented,
}

impl SystemMethod {
    /// Maps a `system.*` JSON-RPC name.
    pub fn from_name(name: &str) -> Self {
        match name {
            "system.hello" => SystemMethod::Hello,
            "system.health" => SystemMethod::Health,
            "system.info" => SystemMethod::Info,
            "system.shutdown" => SystemMethod::Shutdown,
            "system.restart" => SystemMethod::Restart,
            _ => SystemMethod::NotImplemented,
        }
    }
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
    /// Asks the supervisor; without one, the gateway shuts itself down.
    pub async fn run(self, gw: &Gateway) {
        let mut client = SupervisorClient::new(unix_channel(gw.home.supervisor_socket()));
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
                gw.shutdown.cancel();
            }
            Err(_) => {
                tracing::warn!(action = ?self, "supervisor did not answer in time; stopping the gateway");
                gw.shutdown.cancel();
            }
        }
    }
}

/// Answers a `system.*` method.
pub async fn handle(
    gw: &Arc<Gateway>,
    conn: &Arc<Connection>,
    method: SystemMethod,
    name: &str,
    params: DynamicMessage,
) -> Result<(Value, Option<AfterReply>), RpcError> {
    match method {
        SystemMethod::Hello => crate::hello::hello(gw, conn, &params)
            .await
            .map(|v| (v, None)),
        SystemMethod::Health => Ok((json!({"status": "ok"}), None)),
        SystemMethod::Info => Ok((info(gw), None)),
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
fn info(gw: &Gateway) -> Value {
    let daemon = gw
        .home
        .read_daemon_json()
        .ok()
        .filter(|d| d.port == gw.port);
    let (pid, started_at) = match daemon {
        Some(d) => (d.pid, d.started_at),
        None => (std::process::id(), gw.started_at.clone()),
    };
    json!({
        "version": snowpea_common::VERSION,
        "pid": pid,
        "port": gw.port,
        "startedAt": started_at,
        "home": gw.home.root().display().to_string(),
        "protocolVersion": PROTOCOL_VERSION,
        "platform": platform(),
        "counters": gw.counters.to_json(),
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

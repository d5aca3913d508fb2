//! The `system.*` methods the gateway answers itself (DESIGN.md §3: owner `system`):
//! health, info ([`super::info`]), shutdown and restart (hello is [`super::hello`]), each
//! decoding its typed `System*Params` and answering its typed `System*Result`. Shutdown
//! and restart answer first and act after the answer went out, through the supervisor's
//! control socket; a standalone gateway (no supervisor answering) stops itself.
//! `system.reloadSettings` is asked of the settings owner (svc-session's internal
//! `SettingsInternalService.Reload`, [`reload_settings`]); checkUpdate and update are
//! [`super::update`].

use std::time::Duration;

use prost_reflect::DynamicMessage;
use serde_json::Value;
use snowpea_common::client::unix_channel;
use snowpea_common::home::Home;
use snowpea_proto::error::{ErrorCode, RpcError};
use snowpea_proto::rpc::v1::OkResult;
use snowpea_proto::schema::MethodSpec;
use snowpea_proto::supervisor::v1::supervisor_client::SupervisorClient;
use snowpea_proto::supervisor::v1::{RestartRequest, StopRequest};
use snowpea_proto::system::v1::{
    SystemCheckUpdateParams, SystemHealthResult, SystemReloadSettingsResult,
};
use tokio_util::sync::CancellationToken;

use super::info::{info, Daemon};
use super::typed::{decode, encode};
use crate::route::table::SystemMethod;
use crate::upstream::services::Services;
use crate::wire::counters::Counters;

/// Something to do once the answer reached the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterReply {
    /// Stop the whole suite (system.shutdown).
    StopSuite,
    /// Restart the whole suite (system.restart).
    RestartSuite,
}

/// Longest wait for the settings owner to re-read the settings and tell the services.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(10);

/// `system.reloadSettings`: svc-session owns the settings, so the gateway asks it
/// (`SettingsInternalService.Reload`); svc-session down or slow is `unavailable`.
async fn reload_settings(services: &Services) -> Result<SystemReloadSettingsResult, RpcError> {
    use snowpea_proto::session::v1::settings_internal_service_client::SettingsInternalServiceClient;
    let Some(session) = services.get("session") else {
        return Err(RpcError::new(
            ErrorCode::Unavailable,
            "system.reloadSettings: the session service (the settings owner) is not part of this suite",
        ));
    };
    let mut client = SettingsInternalServiceClient::new(session.channel.clone());
    let req = snowpea_proto::session::v1::SettingsReloadRequest {};
    match tokio::time::timeout(RELOAD_TIMEOUT, client.reload(req)).await {
        Ok(Ok(r)) => {
            let r = r.into_inner();
            Ok(SystemReloadSettingsResult {
                changed_keys: r.changed_keys,
                reloaded: r.reloaded,
            })
        }
        Ok(Err(status)) => Err(RpcError::from_status(&status)),
        Err(_) => Err(RpcError::new(
            ErrorCode::Unavailable,
            format!("the session service did not reload the settings within {RELOAD_TIMEOUT:?}"),
        )),
    }
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

/// Answers a `system.*` method other than hello (`spec` is its schema entry).
pub async fn handle(
    daemon: &Daemon,
    counters: &Counters,
    services: &Services,
    method: SystemMethod,
    spec: &MethodSpec,
    params: DynamicMessage,
) -> Result<(Value, Option<AfterReply>), RpcError> {
    let out = spec.output();
    let updates = &daemon.updates;
    match method {
        SystemMethod::Hello => Err(RpcError::internal("system.hello is answered by hello")),
        SystemMethod::Health => {
            decode::<()>(&params)?;
            let result = SystemHealthResult {
                status: "ok".into(),
            };
            Ok((encode(&out, &result)?, None))
        }
        SystemMethod::Info => {
            decode::<()>(&params)?;
            let mut v = encode(&out, &info(daemon, counters, services).await)?;
            // restartRequired becomes true once system.update finished; until then the
            // answer leaves it out, as it always has.
            if let Some(o) = v.as_object_mut() {
                if updates.restart_required() {
                    o.insert("restartRequired".into(), Value::Bool(true));
                } else if o.get("restartRequired") == Some(&Value::Bool(false)) {
                    o.remove("restartRequired");
                }
            }
            Ok((v, None))
        }
        SystemMethod::Shutdown => {
            decode::<()>(&params)?;
            let result = OkResult { ok: true };
            Ok((encode(&out, &result)?, Some(AfterReply::StopSuite)))
        }
        SystemMethod::Restart => {
            decode::<()>(&params)?;
            let result = OkResult { ok: true };
            Ok((encode(&out, &result)?, Some(AfterReply::RestartSuite)))
        }
        SystemMethod::ReloadSettings => {
            decode::<()>(&params)?;
            let result = reload_settings(services).await?;
            Ok((encode(&out, &result)?, None))
        }
        SystemMethod::CheckUpdate => {
            let SystemCheckUpdateParams { force } = decode(&params)?;
            let result =
                super::update::check::check(updates.home(), snowpea_common::VERSION, force).await;
            Ok((encode(&out, &result)?, None))
        }
        SystemMethod::Update => {
            decode::<()>(&params)?;
            Ok((encode(&out, &updates.update().await)?, None))
        }
        SystemMethod::NotImplemented => Err(RpcError::new(
            ErrorCode::NotImplemented,
            format!("{} is not implemented yet", spec.name),
        )),
    }
}

//! The [`Backends`] component: `backend.set` (protocol 1.25.0 "backend.set", issue 23).
//! It owns no table: the choice lives on the live [`crate::session::Session`] and is not
//! persisted (as the reference).

use std::sync::Arc;

use snowpea_proto::rpc::v1::OkResult;
use snowpea_proto::session::v1 as pb;

use super::config::{self, BackendConfig};
use super::{local, ssh, Backend};
use crate::events::EventLog;
use crate::session::Registry;
use snowpea_session_error::{Error, Result};

/// Chooses where each session's tools run.
#[derive(Debug, Clone)]
pub struct Backends {
    sessions: Registry,
    events: EventLog,
    /// svc-session's orphan mark, set on every process a backend starts.
    mark: String,
    /// The Docker Engine address (`DOCKER_HOST` of the service's environment).
    docker_host: Option<String>,
}

impl Backends {
    /// The component over the live `sessions`, emitting through `events`; docker backends
    /// use the engine at `docker_host` (bollard's defaults when `None`).
    pub fn new(
        sessions: Registry,
        events: EventLog,
        mark: String,
        docker_host: Option<String>,
    ) -> Self {
        Backends {
            sessions,
            events,
            mark,
            docker_host,
        }
    }

    /// `backend.set{sessionId, kind, config}`: `not_found` for an unknown session,
    /// `invalid_params` naming the field for a bad kind or config; puts the new backend in
    /// place, closes the old one and emits `backend.changed{backend}`.
    ///
    /// An ssh backend is probed first (connect, host key, login; `ConnectTimeout=5`, at most
    /// [`ssh::PROBE_TIMEOUT`] in all, `BatchMode=yes` without a password): a host that cannot
    /// be reached or logged into is `invalid_params` on `params.config.host` with ssh's
    /// reason, and the session keeps its current backend. The probe's connection is the one
    /// the tools then use. A docker backend is probed too ([`super::docker::probe`]: the
    /// engine answers — else `invalid_params` on `params.kind` —, the container to attach
    /// to runs, or the image is present — else on `params.config.container` /
    /// `params.config.image`); the session's own container is still made by the first tool
    /// call.
    pub async fn set(&self, p: pb::BackendSetParams) -> Result<OkResult> {
        let session = self.sessions.get(&p.session_id)?;
        let cfg = p
            .config
            .as_ref()
            .map(snowpea_proto::wkt::from_struct)
            .unwrap_or(serde_json::Value::Null);
        let parsed = config::parse(&p.kind, &cfg)?;
        let kind = parsed.kind();
        let backend = self.build(parsed, &session).await?;
        let old = session.replace_backend(backend);
        old.close().await;
        self.events
            .event_to_committed(
                &session,
                &pb::BackendChangedEvent {
                    backend: kind.as_str().to_owned(),
                    ..Default::default()
                },
            )
            .await
            .map_err(Error::Internal)?;
        tracing::info!(session_id = %session.id, backend = kind.as_str(), "backend changed");
        Ok(OkResult { ok: true })
    }

    async fn build(
        &self,
        cfg: BackendConfig,
        session: &crate::session::Session,
    ) -> Result<Arc<dyn Backend>> {
        Ok(match cfg {
            BackendConfig::Local { workdir } => Arc::new(local::Local::new(workdir)),
            BackendConfig::Ssh(c) => {
                let ssh = ssh::Ssh::new(c, Some(self.mark.clone()))
                    .map_err(|e| Error::Internal(anyhow::anyhow!("ssh backend: {e}")))?;
                if let Err(why) = ssh.probe().await {
                    ssh.close().await;
                    tracing::info!(session_id = %session.id, error = %why, "ssh backend refused: the probe failed");
                    return Err(Error::invalid("params.config.host", why));
                }
                Arc::new(ssh)
            }
            BackendConfig::Docker(mut c) => {
                c.engine = self.docker_host.clone();
                if let Err((field, why)) = super::docker::probe(&c).await {
                    tracing::info!(session_id = %session.id, error = %why, "docker backend refused: the probe failed");
                    return Err(Error::invalid(field, why));
                }
                super::docker::Docker::create(
                    c,
                    &session.id,
                    session.workdir(),
                    Some(self.mark.clone()),
                )
            }
        })
    }
}

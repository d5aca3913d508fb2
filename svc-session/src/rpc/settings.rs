//! `SettingsService` (`settings.get/set`) and the internal `SettingsInternalService`
//! (`Reload`, behind the gateway's `system.reloadSettings`), delegating to
//! [`Settings`](crate::settings::Settings).

use std::sync::Arc;

use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::settings_internal_service_server::{
    SettingsInternalService, SettingsInternalServiceServer,
};
use snowpea_proto::session::v1::settings_service_server::{SettingsService, SettingsServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.SettingsService` and `SettingsInternalService` servers.
#[derive(Debug, Clone)]
pub struct SettingsRpc {
    app: Arc<App>,
}

impl SettingsRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        SettingsRpc { app }
    }

    /// The tonic server wrapper of `settings.*`.
    pub fn into_server(self) -> SettingsServiceServer<Self> {
        SettingsServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }

    /// The tonic server wrapper of the internal service.
    pub fn into_internal_server(self) -> SettingsInternalServiceServer<Self> {
        SettingsInternalServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl SettingsService for SettingsRpc {
    async fn get(
        &self,
        req: Request<pb::SettingsGetParams>,
    ) -> Result<Response<pb::SettingsGetResult>, Status> {
        Ok(Response::new(
            self.app.settings.get(req.into_inner()).await?,
        ))
    }

    async fn set(
        &self,
        req: Request<pb::SettingsSetParams>,
    ) -> Result<Response<pb::SettingsSetResult>, Status> {
        Ok(Response::new(
            self.app.settings.set(req.into_inner()).await?,
        ))
    }
}

#[tonic::async_trait]
impl SettingsInternalService for SettingsRpc {
    async fn reload(
        &self,
        _req: Request<pb::SettingsReloadRequest>,
    ) -> Result<Response<pb::SettingsReloadReply>, Status> {
        let r = self.app.settings.reload().await?;
        Ok(Response::new(pb::SettingsReloadReply {
            reloaded: r.reloaded,
            changed_keys: r.changed_keys,
        }))
    }
}

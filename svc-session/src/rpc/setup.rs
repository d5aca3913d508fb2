//! `SetupService`: `setup.catalog/status/applyDefaults`, delegating to
//! [`Setup`](crate::setup::Setup).

use std::sync::Arc;

use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::setup_service_server::{SetupService, SetupServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.SetupService` server.
#[derive(Debug, Clone)]
pub struct SetupRpc {
    app: Arc<App>,
}

impl SetupRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        SetupRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> SetupServiceServer<Self> {
        SetupServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl SetupService for SetupRpc {
    async fn apply_defaults(
        &self,
        req: Request<pb::SetupApplyDefaultsParams>,
    ) -> Result<Response<pb::SetupApplyDefaultsResult>, Status> {
        Ok(Response::new(
            self.app.setup.apply_defaults(req.into_inner()).await?,
        ))
    }

    async fn catalog(&self, req: Request<()>) -> Result<Response<pb::SetupCatalogResult>, Status> {
        Ok(Response::new(
            self.app.setup.catalog(req.into_inner()).await?,
        ))
    }

    async fn status(
        &self,
        req: Request<pb::SetupStatusParams>,
    ) -> Result<Response<pb::SetupStatus>, Status> {
        Ok(Response::new(
            self.app.setup.status(req.into_inner()).await?,
        ))
    }
}

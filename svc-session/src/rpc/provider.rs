//! `ProviderService`: `provider.list/configure/remove/models/test/loginWeb`, delegating to
//! [`Providers`](snowpea_session_llm::provider::Providers).

use std::sync::Arc;

use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::provider_service_server::{ProviderService, ProviderServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.ProviderService` server.
#[derive(Debug, Clone)]
pub struct ProviderRpc {
    app: Arc<App>,
}

impl ProviderRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        ProviderRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> ProviderServiceServer<Self> {
        ProviderServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl ProviderService for ProviderRpc {
    async fn configure(
        &self,
        req: Request<pb::ProviderConfigureParams>,
    ) -> Result<Response<snowpea_proto::rpc::v1::OkResult>, Status> {
        Ok(Response::new(
            self.app.providers.configure(req.into_inner()).await?,
        ))
    }

    async fn list(&self, _req: Request<()>) -> Result<Response<pb::ProviderListResult>, Status> {
        Ok(Response::new(self.app.providers.list().await?))
    }

    async fn login_web(
        &self,
        req: Request<pb::ProviderLoginWebParams>,
    ) -> Result<Response<pb::ProviderLoginWebResult>, Status> {
        Ok(Response::new(
            self.app.providers.login_web(req.into_inner()).await?,
        ))
    }

    async fn models(
        &self,
        req: Request<pb::ProviderModelsParams>,
    ) -> Result<Response<pb::ProviderModelsResult>, Status> {
        Ok(Response::new(
            self.app.providers.models(req.into_inner()).await?,
        ))
    }

    async fn remove(
        &self,
        req: Request<pb::ProviderRemoveParams>,
    ) -> Result<Response<snowpea_proto::rpc::v1::OkResult>, Status> {
        Ok(Response::new(
            self.app.providers.remove(req.into_inner()).await?,
        ))
    }

    async fn test(
        &self,
        req: Request<pb::ProviderTestParams>,
    ) -> Result<Response<pb::ProviderTestResult>, Status> {
        Ok(Response::new(
            self.app.providers.test(req.into_inner()).await?,
        ))
    }
}

//! `UsageService`: `usage.summary`, delegating to [`Usage`](crate::usage::Usage).

use std::sync::Arc;

use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::usage_service_server::{UsageService, UsageServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.UsageService` server.
#[derive(Debug, Clone)]
pub struct UsageRpc {
    app: Arc<App>,
}

impl UsageRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        UsageRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> UsageServiceServer<Self> {
        UsageServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl UsageService for UsageRpc {
    async fn summary(
        &self,
        req: Request<pb::UsageSummaryParams>,
    ) -> Result<Response<pb::UsageSummaryResult>, Status> {
        Ok(Response::new(
            self.app.usage.summary(req.into_inner()).await?,
        ))
    }
}

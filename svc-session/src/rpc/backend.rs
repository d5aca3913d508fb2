//! `BackendService`: `backend.set`, delegating to
//! [`Backends`](crate::backend::Backends).

use std::sync::Arc;

use snowpea_proto::rpc::v1::OkResult;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::backend_service_server::{BackendService, BackendServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.BackendService` server.
#[derive(Debug, Clone)]
pub struct BackendRpc {
    app: Arc<App>,
}

impl BackendRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        BackendRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> BackendServiceServer<Self> {
        BackendServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl BackendService for BackendRpc {
    async fn set(&self, req: Request<pb::BackendSetParams>) -> Result<Response<OkResult>, Status> {
        Ok(Response::new(
            self.app.backends.set(req.into_inner()).await?,
        ))
    }
}

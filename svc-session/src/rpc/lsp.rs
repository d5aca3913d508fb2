//! `LspService`: `lsp.catalog` and `lsp.status`, delegating to [`Lsp`](crate::lsp::Lsp).

use std::sync::Arc;

use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::lsp_service_server::{LspService, LspServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.LspService` server.
#[derive(Debug, Clone)]
pub struct LspRpc {
    app: Arc<App>,
}

impl LspRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        LspRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> LspServiceServer<Self> {
        LspServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl LspService for LspRpc {
    async fn catalog(&self, _req: Request<()>) -> Result<Response<pb::LspCatalogResult>, Status> {
        Ok(Response::new(self.app.lsp.catalog()?))
    }

    async fn status(&self, _req: Request<()>) -> Result<Response<pb::LspStatusResult>, Status> {
        Ok(Response::new(self.app.lsp.status()?))
    }
}

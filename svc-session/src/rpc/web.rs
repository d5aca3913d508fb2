//! `WebService`: `web.search`, delegating to [`WebSearch`](crate::web::WebSearch) with the
//! caller's context (browser hosts only).

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::web_service_server::{WebService, WebServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.WebService` server.
#[derive(Debug, Clone)]
pub struct WebRpc {
    app: Arc<App>,
}

impl WebRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        WebRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> WebServiceServer<Self> {
        WebServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl WebService for WebRpc {
    async fn search(
        &self,
        req: Request<pb::WebSearchParams>,
    ) -> Result<Response<pb::WebSearchResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app.web.search(&ctx, req.into_inner()).await?,
        ))
    }
}

//! `LlmService`: `llm.sample`, delegating to [`Sampler`](crate::llm::Sampler) with the
//! caller's context (host-only check).

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::llm_service_server::{LlmService, LlmServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.LlmService` server.
#[derive(Debug, Clone)]
pub struct LlmRpc {
    app: Arc<App>,
}

impl LlmRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        LlmRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> LlmServiceServer<Self> {
        LlmServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl LlmService for LlmRpc {
    async fn sample(
        &self,
        req: Request<pb::LlmSampleParams>,
    ) -> Result<Response<pb::LlmSampleResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app.sampler.sample(&ctx, req.into_inner()).await?,
        ))
    }
}

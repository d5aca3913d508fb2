//! `ToolService`: `tool.list`, delegating to [`Tools`](crate::tools::Tools); `tool.register`,
//! `tool.unregister`, `tool.progress`, delegating to [`HostTools`](crate::host_tools::HostTools).

use std::sync::Arc;

use snowpea_common::context::CallContext;

use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::tool_service_server::{ToolService, ToolServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.ToolService` server.
#[derive(Debug, Clone)]
pub struct ToolRpc {
    app: Arc<App>,
}

impl ToolRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        ToolRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> ToolServiceServer<Self> {
        ToolServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl ToolService for ToolRpc {
    async fn list(
        &self,
        req: Request<pb::ToolListParams>,
    ) -> Result<Response<pb::ToolListResult>, Status> {
        Ok(Response::new(self.app.tools.list(req.into_inner()).await?))
    }

    async fn register(
        &self,
        req: Request<pb::ToolRegisterParams>,
    ) -> Result<Response<pb::ToolRegisterResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app.host_tools.register(&ctx, req.into_inner())?,
        ))
    }

    async fn unregister(
        &self,
        req: Request<pb::ToolUnregisterParams>,
    ) -> Result<Response<pb::ToolUnregisterResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app.host_tools.unregister(&ctx, req.into_inner())?,
        ))
    }

    async fn progress(&self, req: Request<pb::ToolProgressParams>) -> Result<Response<()>, Status> {
        let ctx = CallContext::of(&req);
        self.app.host_tools.progress(&ctx, req.into_inner());
        Ok(Response::new(()))
    }
}

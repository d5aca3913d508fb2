//! `McpService` (`mcp.*`): the generated trait over [`McpApi`]; each call delegates and maps
//! the error (the shared call layer opens the span and counts the call).

use std::sync::Arc;

use snowpea_proto::mcp::v1::mcp_service_server::{McpService, McpServiceServer};
use snowpea_proto::mcp::v1::{
    McpAddParams, McpAddResult, McpCatalogResult, McpListParams, McpListResult, McpReloadParams,
    McpReloadResult, McpRemoveParams, McpTestParams, McpTestResult, McpUpdateParams,
};
use snowpea_proto::rpc::v1::OkResult;
use tonic::{Request, Response, Status};

use crate::api::mcp::McpApi;
use crate::error::Error;
use crate::rpc::App;

/// The `McpService` implementation.
#[derive(Debug, Clone)]
pub struct McpRpc {
    api: McpApi,
}

impl McpRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        McpRpc {
            api: McpApi::new(app),
        }
    }

    /// The tonic server wrapper, decoding requests up to [`snowpea_proto::limits::GRPC_REQUEST`] so that an
    /// oversized field reaches the handler and is refused by name (`mcp_invalid`), not by
    /// the transport as `internal`.
    pub fn into_server(self) -> McpServiceServer<Self> {
        McpServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl McpService for McpRpc {
    async fn add(&self, req: Request<McpAddParams>) -> Result<Response<McpAddResult>, Status> {
        self.api
            .add(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }

    async fn catalog(&self, _req: Request<()>) -> Result<Response<McpCatalogResult>, Status> {
        Ok(Response::new(self.api.catalog()))
    }

    async fn list(&self, req: Request<McpListParams>) -> Result<Response<McpListResult>, Status> {
        self.api
            .list(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }

    async fn reload(
        &self,
        req: Request<McpReloadParams>,
    ) -> Result<Response<McpReloadResult>, Status> {
        self.api
            .reload(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }

    async fn remove(&self, req: Request<McpRemoveParams>) -> Result<Response<OkResult>, Status> {
        self.api
            .remove(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }

    async fn test(&self, req: Request<McpTestParams>) -> Result<Response<McpTestResult>, Status> {
        self.api
            .test(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }

    async fn update(&self, req: Request<McpUpdateParams>) -> Result<Response<OkResult>, Status> {
        let cleared = crate::patch::cleared_fields(req.metadata());
        self.api
            .update(req.into_inner(), &cleared)
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }
}

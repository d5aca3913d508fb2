//! `McpInternalService` (no JSON-RPC names; svc-session's MCP tools): the generated trait
//! over [`ToolsApi`]; each call delegates and maps the error.

use std::sync::Arc;

use snowpea_proto::mcp::v1::mcp_internal_service_server::{
    McpInternalService, McpInternalServiceServer,
};
use snowpea_proto::mcp::v1::{CallToolReply, CallToolRequest, ListToolsReply, ListToolsRequest};
use tonic::{Request, Response, Status};

use crate::api::tools::ToolsApi;
use crate::error::Error;
use crate::rpc::App;

/// The `McpInternalService` implementation.
#[derive(Debug, Clone)]
pub struct InternalRpc {
    api: ToolsApi,
}

impl InternalRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        InternalRpc {
            api: ToolsApi::new(app),
        }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> McpInternalServiceServer<Self> {
        McpInternalServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl McpInternalService for InternalRpc {
    async fn list_tools(
        &self,
        req: Request<ListToolsRequest>,
    ) -> Result<Response<ListToolsReply>, Status> {
        self.api
            .list_tools(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }

    async fn call_tool(
        &self,
        req: Request<CallToolRequest>,
    ) -> Result<Response<CallToolReply>, Status> {
        self.api
            .call_tool(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Error::into_status)
    }
}

//! `snowpea.chat.v1.GatewayService`: `gateway.bind`, `gateway.list`, `gateway.sync`,
//! `gateway.unbind` (protocol 1.25.0). Each method only delegates to [`GatewayApi`] and maps
//! its error (the shared call layer opens the span and counts the call).

use snowpea_proto::chat::v1::chat_internal_service_server::{
    ChatInternalService, ChatInternalServiceServer,
};
use snowpea_proto::chat::v1::gateway_service_server::{GatewayService, GatewayServiceServer};
use snowpea_proto::chat::v1::{
    GatewayBindParams, GatewayBindResult, GatewayListResult, GatewaySyncResult, GatewayUnbindParams,
};
use snowpea_proto::chat::v1::{TargetRemovedReply, TargetRemovedRequest};
use snowpea_proto::rpc::v1::OkResult;
use tonic::{Request, Response, Status};

use crate::api::GatewayApi;
use crate::error::ChatError;
use crate::targets::Target;

/// The tonic service.
#[derive(Debug, Clone)]
pub struct GatewayRpc {
    api: GatewayApi,
}

impl GatewayRpc {
    /// Serves `api`.
    pub fn new(api: GatewayApi) -> Self {
        GatewayRpc { api }
    }

    /// The tonic server wrapper with the protocol's message limits.
    pub fn into_server(self) -> GatewayServiceServer<Self> {
        GatewayServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl GatewayService for GatewayRpc {
    async fn bind(
        &self,
        req: Request<GatewayBindParams>,
    ) -> Result<Response<GatewayBindResult>, Status> {
        reply(self.api.bind(req.into_inner()).await)
    }

    async fn list(&self, _req: Request<()>) -> Result<Response<GatewayListResult>, Status> {
        reply(Ok(self.api.list()))
    }

    async fn sync(&self, _req: Request<()>) -> Result<Response<GatewaySyncResult>, Status> {
        reply(self.api.sync().await)
    }

    async fn unbind(
        &self,
        req: Request<GatewayUnbindParams>,
    ) -> Result<Response<OkResult>, Status> {
        let id = req.into_inner().binding_id;
        reply(self.api.unbind(id).await.map(|()| OkResult { ok: true }))
    }
}

/// `snowpea.chat.v1.ChatInternalService` (internal, asked by svc-session): delegates to
/// [`crate::targets::removed`].
#[derive(Debug, Clone)]
pub struct ChatInternalRpc {
    chat: std::sync::Arc<crate::chat::Chat>,
}

impl ChatInternalRpc {
    /// Serves `chat`.
    pub fn new(chat: std::sync::Arc<crate::chat::Chat>) -> Self {
        ChatInternalRpc { chat }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> ChatInternalServiceServer<Self> {
        ChatInternalServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl ChatInternalService for ChatInternalRpc {
    async fn target_removed(
        &self,
        req: Request<TargetRemovedRequest>,
    ) -> Result<Response<TargetRemovedReply>, Status> {
        let r = req.into_inner();
        let (gone, reason) = match (r.session_id.trim(), r.agent.trim()) {
            (s, "") if !s.is_empty() => (Target::Session(s.to_owned()), "the session was deleted"),
            ("", a) if !a.is_empty() => (Target::Agent(a.to_owned()), "the agent was deleted"),
            _ => {
                return reply(Err(ChatError::invalid(
                    "sessionId",
                    "give exactly one of sessionId or agent",
                )))
            }
        };
        reply(
            crate::targets::removed(&self.chat, gone, reason)
                .await
                .map(|binding_ids| TargetRemovedReply { binding_ids }),
        )
    }
}

/// The one mapping of this boundary.
fn reply<T>(r: Result<T, ChatError>) -> Result<Response<T>, Status> {
    r.map(Response::new).map_err(Into::into)
}

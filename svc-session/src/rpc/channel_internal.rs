//! `snowpea.session.v1.ChannelInternalService` (issues 19 and 22): the channel routing
//! svc-chat asks for, delegating to [`Agents::resolve_channel`](crate::agents::Agents), and
//! `CheckTarget` (whether a `gateway.bind` target exists) to `Agents::check_target`.
//! No JSON-RPC name, so the gateway never exposes it.

use std::sync::Arc;

use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::channel_internal_service_server::{
    ChannelInternalService, ChannelInternalServiceServer,
};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The gRPC service.
#[derive(Debug, Clone)]
pub struct ChannelInternalRpc {
    app: Arc<App>,
}

impl ChannelInternalRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        ChannelInternalRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> ChannelInternalServiceServer<Self> {
        ChannelInternalServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl ChannelInternalService for ChannelInternalRpc {
    async fn resolve_channel(
        &self,
        req: Request<pb::ResolveChannelRequest>,
    ) -> Result<Response<pb::ResolveChannelReply>, Status> {
        Ok(Response::new(
            self.app.agents.resolve_channel(req.into_inner()).await?,
        ))
    }

    async fn check_target(
        &self,
        req: Request<pb::CheckTargetRequest>,
    ) -> Result<Response<pb::CheckTargetReply>, Status> {
        Ok(Response::new(
            self.app.agents.check_target(req.into_inner()).await?,
        ))
    }
}

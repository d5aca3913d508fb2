//! `snowpea.session.v1.SessionInternalService` (issue 5): the internal rpcs svc-scheduler
//! calls, each delegating to [`Runs`](crate::runs::Runs). No JSON-RPC names, so the gateway
//! never exposes them.

use std::sync::Arc;

use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::session_internal_service_server::{
    SessionInternalService, SessionInternalServiceServer,
};
use tonic::{Request, Response, Status};

use crate::app::App;
use crate::runs::RunStream;

/// The gRPC service.
#[derive(Debug, Clone)]
pub struct InternalRpc {
    app: Arc<App>,
}

impl InternalRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        InternalRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> SessionInternalServiceServer<Self> {
        SessionInternalServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl SessionInternalService for InternalRpc {
    async fn run_unattended(
        &self,
        req: Request<pb::RunUnattendedRequest>,
    ) -> Result<Response<RunStream>, Status> {
        Ok(Response::new(
            self.app.runs.run_unattended(req.into_inner()).await?,
        ))
    }

    async fn watch_run(
        &self,
        req: Request<pb::WatchRunRequest>,
    ) -> Result<Response<RunStream>, Status> {
        Ok(Response::new(
            self.app.runs.watch_run(req.into_inner().session_id).await?,
        ))
    }

    async fn delete_sessions(
        &self,
        req: Request<pb::DeleteSessionsRequest>,
    ) -> Result<Response<pb::DeleteSessionsReply>, Status> {
        Ok(Response::new(
            self.app
                .runs
                .delete_sessions(req.into_inner().session_ids)
                .await?,
        ))
    }

    async fn emit_event(
        &self,
        req: Request<pb::EmitEventRequest>,
    ) -> Result<Response<pb::EmitEventReply>, Status> {
        Ok(Response::new(
            self.app.runs.emit_event(req.into_inner()).await?,
        ))
    }
}

#[cfg(test)]
#[path = "internal_tests.rs"]
mod tests;

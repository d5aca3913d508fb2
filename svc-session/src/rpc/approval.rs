//! `ApprovalService`: `approval.list`, `approval.respond`, `approval.ask`.

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::rpc::v1::OkResult;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::approval_service_server::{ApprovalService, ApprovalServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.ApprovalService` server.
#[derive(Debug, Clone)]
pub struct ApprovalRpc {
    app: Arc<App>,
}

impl ApprovalRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        ApprovalRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> ApprovalServiceServer<Self> {
        ApprovalServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl ApprovalService for ApprovalRpc {
    async fn list(
        &self,
        req: Request<pb::ApprovalListParams>,
    ) -> Result<Response<pb::ApprovalListResult>, Status> {
        let session_id = req
            .get_ref()
            .session_id
            .as_deref()
            .filter(|s| !s.is_empty());
        Ok(Response::new(self.app.approvals.list(session_id).await?))
    }

    async fn respond(
        &self,
        req: Request<pb::ApprovalRespondParams>,
    ) -> Result<Response<OkResult>, Status> {
        let ctx = CallContext::of(&req);
        self.app.approvals.respond(&ctx, req.into_inner())?;
        Ok(Response::new(OkResult { ok: true }))
    }

    async fn ask(
        &self,
        req: Request<pb::ApprovalAskParams>,
    ) -> Result<Response<pb::ApprovalAskResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app.approvals.ask(&ctx, req.into_inner()).await?,
        ))
    }
}

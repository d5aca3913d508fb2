//! `QuestionService`: `question.list`, `question.respond` (the component is
//! [`crate::question::Questions`]).

use std::sync::Arc;

use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::question_service_server::{QuestionService, QuestionServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.QuestionService` server.
#[derive(Debug, Clone)]
pub struct QuestionRpc {
    app: Arc<App>,
}

impl QuestionRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        QuestionRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> QuestionServiceServer<Self> {
        QuestionServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl QuestionService for QuestionRpc {
    async fn list(
        &self,
        req: Request<pb::QuestionListParams>,
    ) -> Result<Response<pb::QuestionListResult>, Status> {
        let session_id = req
            .get_ref()
            .session_id
            .as_deref()
            .filter(|s| !s.is_empty());
        Ok(Response::new(self.app.questions.list(session_id).await?))
    }

    async fn respond(
        &self,
        req: Request<pb::QuestionRespondParams>,
    ) -> Result<Response<snowpea_proto::rpc::v1::OkResult>, Status> {
        let ctx = snowpea_common::context::CallContext::of(&req);
        self.app.questions.respond(&ctx, req.into_inner()).await?;
        Ok(Response::new(snowpea_proto::rpc::v1::OkResult { ok: true }))
    }
}

//! `CheckpointService`: `checkpoint.list/diff/restore/delete`, delegating to
//! [`Checkpoints`](crate::checkpoints::Checkpoints).

use std::sync::Arc;

use snowpea_proto::rpc::v1::OkResult;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::checkpoint_service_server::{
    CheckpointService, CheckpointServiceServer,
};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.CheckpointService` server.
#[derive(Debug, Clone)]
pub struct CheckpointRpc {
    app: Arc<App>,
}

impl CheckpointRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        CheckpointRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> CheckpointServiceServer<Self> {
        CheckpointServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl CheckpointService for CheckpointRpc {
    async fn delete(
        &self,
        req: Request<pb::CheckpointDeleteParams>,
    ) -> Result<Response<OkResult>, Status> {
        Ok(Response::new(
            self.app.checkpoints.delete(req.into_inner()).await?,
        ))
    }

    async fn diff(
        &self,
        req: Request<pb::CheckpointDiffParams>,
    ) -> Result<Response<pb::CheckpointDiffResult>, Status> {
        Ok(Response::new(
            self.app.checkpoints.diff(req.into_inner()).await?,
        ))
    }

    async fn list(
        &self,
        req: Request<pb::CheckpointListParams>,
    ) -> Result<Response<pb::CheckpointListResult>, Status> {
        Ok(Response::new(
            self.app.checkpoints.list(req.into_inner()).await?,
        ))
    }

    async fn restore(
        &self,
        req: Request<pb::CheckpointRestoreParams>,
    ) -> Result<Response<pb::CheckpointRestoreResult>, Status> {
        Ok(Response::new(
            self.app.checkpoints.restore(req.into_inner()).await?,
        ))
    }
}

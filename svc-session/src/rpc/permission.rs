//! `PermissionService`: `permission.allowlist.add`, `permission.allowlist.list`,
//! `permission.allowlist.remove` (the component is [`crate::permission::Allowlist`]).

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::permission_service_server::{
    PermissionService, PermissionServiceServer,
};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.PermissionService` server.
#[derive(Debug, Clone)]
pub struct PermissionRpc {
    app: Arc<App>,
}

impl PermissionRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        PermissionRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> PermissionServiceServer<Self> {
        PermissionServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl PermissionService for PermissionRpc {
    async fn allowlist_add(
        &self,
        req: Request<pb::PermissionAllowlistAddParams>,
    ) -> Result<Response<pb::PermissionAllowlistAddResult>, Status> {
        let ctx = CallContext::of(&req);
        let pattern_id = self.app.allowlist.add(&ctx, req.into_inner()).await?;
        Ok(Response::new(pb::PermissionAllowlistAddResult {
            pattern_id,
        }))
    }

    async fn allowlist_list(
        &self,
        req: Request<pb::PermissionAllowlistListParams>,
    ) -> Result<Response<pb::PermissionAllowlistListResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app.allowlist.list(&ctx, req.into_inner()).await?,
        ))
    }

    async fn allowlist_remove(
        &self,
        req: Request<pb::PermissionAllowlistRemoveParams>,
    ) -> Result<Response<snowpea_proto::rpc::v1::OkResult>, Status> {
        let ctx = CallContext::of(&req);
        self.app.allowlist.remove(&ctx, req.into_inner()).await?;
        Ok(Response::new(snowpea_proto::rpc::v1::OkResult { ok: true }))
    }
}

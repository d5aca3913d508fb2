//! `TeamService`: `team.start`, `team.status`, `team.guide.get/set/list/delete`, delegating
//! to [`Teams`](crate::teams::Teams).

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::rpc::v1::OkResult;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::team_service_server::{TeamService, TeamServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.TeamService` server.
#[derive(Debug, Clone)]
pub struct TeamRpc {
    app: Arc<App>,
}

impl TeamRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        TeamRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> TeamServiceServer<Self> {
        TeamServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl TeamService for TeamRpc {
    async fn guide_delete(
        &self,
        req: Request<pb::TeamGuideDeleteParams>,
    ) -> Result<Response<OkResult>, Status> {
        Ok(Response::new(
            self.app.teams.guide_delete(req.into_inner()).await?,
        ))
    }

    async fn guide_get(
        &self,
        req: Request<pb::TeamGuideGetParams>,
    ) -> Result<Response<pb::TeamGuideGetResult>, Status> {
        Ok(Response::new(
            self.app.teams.guide_get(req.into_inner()).await?,
        ))
    }

    async fn guide_list(
        &self,
        req: Request<pb::TeamGuideListParams>,
    ) -> Result<Response<pb::TeamGuideListResult>, Status> {
        Ok(Response::new(
            self.app.teams.guide_list(req.into_inner()).await?,
        ))
    }

    async fn guide_set(
        &self,
        req: Request<pb::TeamGuideSetParams>,
    ) -> Result<Response<pb::TeamGuideSetResult>, Status> {
        Ok(Response::new(
            self.app.teams.guide_set(req.into_inner()).await?,
        ))
    }

    async fn start(
        &self,
        req: Request<pb::TeamStartParams>,
    ) -> Result<Response<pb::TeamStartResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app.teams.start(&ctx, req.into_inner()).await?,
        ))
    }

    async fn status(
        &self,
        req: Request<pb::TeamStatusParams>,
    ) -> Result<Response<pb::TeamStatusResult>, Status> {
        Ok(Response::new(
            self.app.teams.status(req.into_inner()).await?,
        ))
    }
}

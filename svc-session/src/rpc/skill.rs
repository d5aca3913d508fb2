//! `SkillService`: `skill.list/read/write/create/remove/reload/search/install`, delegating to
//! [`Skills`](snowpea_session_skills::Skills); `skill.create` with a `description` (a drafting model
//! turn) to [`Turns::draft_skill`](crate::turn::Turns::draft_skill).

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::skill_service_server::{SkillService, SkillServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.SkillService` server.
#[derive(Debug, Clone)]
pub struct SkillRpc {
    app: Arc<App>,
}

impl SkillRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        SkillRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> SkillServiceServer<Self> {
        SkillServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl SkillService for SkillRpc {
    async fn create(
        &self,
        req: Request<pb::SkillCreateParams>,
    ) -> Result<Response<pb::SkillCreateResult>, Status> {
        let ctx = CallContext::of(&req);
        let p = req.into_inner();
        Ok(Response::new(if p.content.is_some() {
            self.app.skills.create(p).await?
        } else {
            self.app.turns.draft_skill(&ctx, p).await?
        }))
    }

    async fn install(
        &self,
        req: Request<pb::SkillInstallParams>,
    ) -> Result<Response<snowpea_proto::rpc::v1::OkResult>, Status> {
        Ok(Response::new(
            self.app.skills.install(req.into_inner()).await?,
        ))
    }

    async fn list(&self, _req: Request<()>) -> Result<Response<pb::SkillListResult>, Status> {
        Ok(Response::new(self.app.skills.list().await?))
    }

    async fn read(
        &self,
        req: Request<pb::SkillReadParams>,
    ) -> Result<Response<pb::SkillReadResult>, Status> {
        Ok(Response::new(self.app.skills.read(req.into_inner()).await?))
    }

    async fn reload(
        &self,
        _req: Request<()>,
    ) -> Result<Response<snowpea_proto::rpc::v1::OkResult>, Status> {
        Ok(Response::new(self.app.skills.reload().await?))
    }

    async fn remove(
        &self,
        req: Request<pb::SkillRemoveParams>,
    ) -> Result<Response<snowpea_proto::rpc::v1::OkResult>, Status> {
        Ok(Response::new(
            self.app.skills.remove(req.into_inner()).await?,
        ))
    }

    async fn search(
        &self,
        req: Request<pb::SkillSearchParams>,
    ) -> Result<Response<pb::SkillSearchResult>, Status> {
        Ok(Response::new(
            self.app.skills.search(req.into_inner()).await?,
        ))
    }

    async fn write(
        &self,
        req: Request<pb::SkillWriteParams>,
    ) -> Result<Response<snowpea_proto::rpc::v1::OkResult>, Status> {
        Ok(Response::new(
            self.app.skills.write(req.into_inner()).await?,
        ))
    }
}

#[cfg(test)]
#[path = "skill_tests.rs"]
mod tests;

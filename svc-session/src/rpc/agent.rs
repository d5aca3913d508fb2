//! `AgentService`: `agent.bindChannel/create/delete/list/spawn`, delegating to
//! [`Agents`](crate::agents::Agents) (issue 19).

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::agent_service_server::{AgentService, AgentServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.AgentService` server.
#[derive(Debug, Clone)]
pub struct AgentRpc {
    app: Arc<App>,
}

impl AgentRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        AgentRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> AgentServiceServer<Self> {
        AgentServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl AgentService for AgentRpc {
    async fn bind_channel(
        &self,
        req: Request<pb::AgentBindChannelParams>,
    ) -> Result<Response<snowpea_proto::rpc::v1::OkResult>, Status> {
        Ok(Response::new(
            self.app.agents.bind_channel(req.into_inner()).await?,
        ))
    }

    async fn create(
        &self,
        req: Request<pb::AgentCreateParams>,
    ) -> Result<Response<pb::AgentCreateResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app.agents.create(&ctx, req.into_inner()).await?,
        ))
    }

    async fn delete(
        &self,
        req: Request<pb::AgentDeleteParams>,
    ) -> Result<Response<snowpea_proto::rpc::v1::OkResult>, Status> {
        Ok(Response::new(
            self.app.agents.delete(req.into_inner()).await?,
        ))
    }

    async fn list(&self, _req: Request<()>) -> Result<Response<pb::AgentListResult>, Status> {
        // Definitions, named agents and subagents from the agents component; the running
        // teams from the teams component (row kind `team`).
        let mut r = self.app.agents.list().await?;
        r.agents.extend(self.app.teams.agent_rows().await?);
        Ok(Response::new(r))
    }

    async fn spawn(
        &self,
        req: Request<pb::AgentSpawnParams>,
    ) -> Result<Response<pb::AgentSpawnResult>, Status> {
        Ok(Response::new(
            self.app.agents.spawn(req.into_inner()).await?,
        ))
    }
}

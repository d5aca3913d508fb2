//! `CommandService`: `command.list` delegating to [`Commands`](crate::commands::Commands),
//! `command.run` to [`Turns::command`](crate::turn::Turns::command) (a command runs as a
//! turn).

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::command_service_server::{CommandService, CommandServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.CommandService` server.
#[derive(Debug, Clone)]
pub struct CommandRpc {
    app: Arc<App>,
}

impl CommandRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        CommandRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> CommandServiceServer<Self> {
        CommandServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl CommandService for CommandRpc {
    async fn list(
        &self,
        req: Request<pb::CommandListParams>,
    ) -> Result<Response<pb::CommandListResult>, Status> {
        Ok(Response::new(
            self.app.commands.list(req.into_inner()).await?,
        ))
    }

    async fn run(
        &self,
        req: Request<pb::CommandRunParams>,
    ) -> Result<Response<pb::CommandRunResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app.turns.command(&ctx, req.into_inner()).await?,
        ))
    }
}

//! `SessionService`: `session.create`, `list`, `close`, `prompt`, `interrupt`, `resume`,
//! `rename`, `setMode`, `attach`, `steer`, `notice`, `continue`, `setActive`,
//! `setBrowserProvider`, `setModel`, `setEffort`, `compact`, `deleteSaved`, `artifacts`, `attachments`, `toolContent`.

use std::sync::Arc;

use snowpea_common::context::CallContext;
use snowpea_proto::rpc::v1::OkResult;
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::session_service_server::{SessionService, SessionServiceServer};
use tonic::{Request, Response, Status};

use crate::app::App;

/// The `snowpea.session.v1.SessionService` server.
#[derive(Debug, Clone)]
pub struct SessionRpc {
    app: Arc<App>,
}

impl SessionRpc {
    /// Serves `app`.
    pub fn new(app: Arc<App>) -> Self {
        SessionRpc { app }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> SessionServiceServer<Self> {
        SessionServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl SessionService for SessionRpc {
    async fn create(
        &self,
        req: Request<pb::SessionCreateParams>,
    ) -> Result<Response<pb::SessionCreateResult>, Status> {
        let ctx = CallContext::of(&req);
        self.app.settings.reload_if_changed().await;
        Ok(Response::new(
            self.app
                .agents
                .create_session(&ctx, req.into_inner())
                .await?,
        ))
    }

    async fn list(
        &self,
        req: Request<pb::SessionListParams>,
    ) -> Result<Response<pb::SessionListResult>, Status> {
        Ok(Response::new(
            self.app.sessions.list(req.into_inner()).await?,
        ))
    }

    async fn close(
        &self,
        req: Request<pb::SessionCloseParams>,
    ) -> Result<Response<OkResult>, Status> {
        let p = req.into_inner();
        self.app.teams.interrupt_session(&p.session_id);
        self.app.sessions.close(&p.session_id).await?;
        Ok(Response::new(OkResult { ok: true }))
    }

    async fn prompt(
        &self,
        req: Request<pb::SessionPromptParams>,
    ) -> Result<Response<pb::SessionPromptResult>, Status> {
        let ctx = CallContext::of(&req);
        self.app.settings.reload_if_changed().await;
        let turn_id = self.app.turns.prompt(&ctx, req.into_inner()).await?;
        Ok(Response::new(pb::SessionPromptResult { turn_id }))
    }

    async fn interrupt(
        &self,
        req: Request<pb::SessionInterruptParams>,
    ) -> Result<Response<OkResult>, Status> {
        self.app.turns.interrupt(&req.get_ref().session_id)?;
        self.app.teams.interrupt_session(&req.get_ref().session_id);
        Ok(Response::new(OkResult { ok: true }))
    }

    async fn resume(
        &self,
        req: Request<pb::SessionResumeParams>,
    ) -> Result<Response<pb::SessionResumeResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app
                .sessions
                .resume_from(&ctx, req.into_inner())
                .await?,
        ))
    }

    async fn rename(
        &self,
        req: Request<pb::SessionRenameParams>,
    ) -> Result<Response<OkResult>, Status> {
        let p = req.into_inner();
        self.app.sessions.rename(&p.session_id, &p.title).await?;
        Ok(Response::new(OkResult { ok: true }))
    }

    async fn set_mode(
        &self,
        req: Request<pb::SessionSetModeParams>,
    ) -> Result<Response<pb::SessionSetModeResult>, Status> {
        let p = req.into_inner();
        let mode = self.app.sessions.set_mode(&p.session_id, &p.mode).await?;
        Ok(Response::new(pb::SessionSetModeResult {
            mode: mode.as_str().to_owned(),
        }))
    }

    async fn attach(
        &self,
        req: Request<pb::SessionAttachParams>,
    ) -> Result<Response<pb::SessionAttachResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app.sessions.attach(&ctx, req.into_inner()).await?,
        ))
    }

    async fn steer(
        &self,
        req: Request<pb::SessionSteerParams>,
    ) -> Result<Response<pb::SessionSteerResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app.turns.steer(&ctx, req.into_inner()).await?,
        ))
    }

    async fn notice(
        &self,
        req: Request<pb::SessionNoticeParams>,
    ) -> Result<Response<snowpea_proto::rpc::v1::OkResult>, Status> {
        Ok(Response::new(self.app.turns.notice(req.into_inner())?))
    }

    async fn r#continue(
        &self,
        req: Request<pb::SessionContinueParams>,
    ) -> Result<Response<pb::SessionContinueResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app
                .turns
                .continue_session(&ctx, req.into_inner())
                .await?,
        ))
    }

    async fn set_agent(
        &self,
        req: Request<pb::SessionSetAgentParams>,
    ) -> Result<Response<pb::SessionSetAgentResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app.agents.set_agent(&ctx, req.into_inner()).await?,
        ))
    }

    async fn set_active(
        &self,
        req: Request<pb::SessionSetActiveParams>,
    ) -> Result<Response<snowpea_proto::rpc::v1::OkResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app.sessions.set_active(&ctx, req.into_inner()).await?,
        ))
    }

    async fn set_browser_provider(
        &self,
        req: Request<pb::SessionSetBrowserProviderParams>,
    ) -> Result<Response<pb::SessionSetBrowserProviderResult>, Status> {
        let ctx = CallContext::of(&req);
        Ok(Response::new(
            self.app
                .sessions
                .set_browser_provider(&ctx, req.into_inner())
                .await?,
        ))
    }

    async fn set_model(
        &self,
        req: Request<pb::SessionSetModelParams>,
    ) -> Result<Response<pb::SessionSetModelResult>, Status> {
        Ok(Response::new(
            self.app.models.set_model(req.into_inner()).await?,
        ))
    }

    async fn set_effort(
        &self,
        req: Request<pb::SessionSetEffortParams>,
    ) -> Result<Response<pb::SessionSetEffortResult>, Status> {
        Ok(Response::new(
            self.app.models.set_effort(req.into_inner()).await?,
        ))
    }

    async fn compact(
        &self,
        req: Request<pb::SessionCompactParams>,
    ) -> Result<Response<pb::SessionCompactResult>, Status> {
        Ok(Response::new(
            self.app.turns.compact(req.into_inner()).await?,
        ))
    }

    async fn delete_saved(
        &self,
        req: Request<pb::SessionDeleteSavedParams>,
    ) -> Result<Response<pb::SessionDeleteSavedResult>, Status> {
        Ok(Response::new(
            self.app.sessions.delete_saved(req.into_inner()).await?,
        ))
    }

    async fn artifacts(
        &self,
        req: Request<pb::SessionArtifactsParams>,
    ) -> Result<Response<pb::SessionArtifactsResult>, Status> {
        Ok(Response::new(
            self.app.sessions.artifacts(req.into_inner()).await?,
        ))
    }

    async fn attachments(
        &self,
        req: Request<pb::SessionAttachmentsParams>,
    ) -> Result<Response<pb::SessionAttachmentsResult>, Status> {
        Ok(Response::new(
            self.app.turns.attachments(req.into_inner()).await?,
        ))
    }

    async fn tool_content(
        &self,
        req: Request<pb::SessionToolContentParams>,
    ) -> Result<Response<pb::SessionToolContentResult>, Status> {
        Ok(Response::new(
            self.app.turns.tool_content(req.into_inner()).await?,
        ))
    }
}

//! `snowpea.scheduler.v1.SchedulerInternalService`: the agent tools `schedule_create`,
//! `schedule_list`, `schedule_cancel` (jobs report `createdVia: "tool"`) and the manual test
//! clock (`SetClock`). Carries no JSON-RPC names, so the gateway never exposes it.

use jiff::{SignedDuration, Timestamp};
use snowpea_proto::rpc::v1::OkResult;
use snowpea_proto::scheduler::v1::scheduler_internal_service_server::{
    SchedulerInternalService, SchedulerInternalServiceServer,
};
use snowpea_proto::scheduler::v1::*;
use tonic::{Request, Response, Status};

use super::job::{JobApi, NewJob};
use crate::error::JobError;
use crate::ownership::Caller;
use crate::spec::iso;

/// The gRPC service.
#[derive(Debug, Clone)]
pub struct InternalRpc {
    api: JobApi,
}

impl InternalRpc {
    /// Serves `api`.
    pub fn new(api: JobApi) -> Self {
        InternalRpc { api }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> SchedulerInternalServiceServer<Self> {
        SchedulerInternalServiceServer::new(self)
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

#[tonic::async_trait]
impl SchedulerInternalService for InternalRpc {
    async fn tool_schedule(
        &self,
        req: Request<ToolScheduleRequest>,
    ) -> Result<Response<JobScheduleResult>, Status> {
        let p = req.into_inner();
        let caller = Caller::Tool {
            session_id: p.session_id.clone(),
        };
        let new = NewJob {
            spec: p.spec,
            task: p.task,
            mode: p.mode,
            agent: p.agent,
            workdir: Some(p.workdir).filter(|w| !w.is_empty()),
            created_via: "tool",
            origin_session_id: Some(p.session_id).filter(|s| !s.is_empty()),
            ..Default::default()
        };
        let r = self
            .api
            .blocking("schedule_create", move |api| api.schedule(&caller, new))
            .await?;
        Ok(Response::new(r))
    }

    async fn tool_list(
        &self,
        req: Request<ToolListRequest>,
    ) -> Result<Response<JobListResult>, Status> {
        let caller = Caller::Tool {
            session_id: req.into_inner().session_id,
        };
        let r = self
            .api
            .blocking("schedule_list", move |api| api.list(&caller))
            .await?;
        Ok(Response::new(r))
    }

    async fn tool_cancel(
        &self,
        req: Request<ToolCancelRequest>,
    ) -> Result<Response<OkResult>, Status> {
        let p = req.into_inner();
        let caller = Caller::Tool {
            session_id: p.session_id,
        };
        let r = self
            .api
            .blocking("schedule_cancel", move |api| api.cancel(&caller, &p.job_id))
            .await?;
        Ok(Response::new(r))
    }

    async fn cancel_agent_jobs(
        &self,
        req: Request<CancelAgentJobsRequest>,
    ) -> Result<Response<CancelAgentJobsReply>, Status> {
        let agent = req.into_inner().agent;
        let job_ids = self
            .api
            .blocking("cancel_agent_jobs", move |api| {
                api.cancel_agent_jobs(&agent)
            })
            .await?;
        Ok(Response::new(CancelAgentJobsReply { job_ids }))
    }

    async fn set_clock(
        &self,
        req: Request<SetClockRequest>,
    ) -> Result<Response<SetClockReply>, Status> {
        let p = req.into_inner();
        let Some(clock) = self.api.sched.clock.as_manual() else {
            return Err(JobError::RealClock.into());
        };
        let now = match p.set_to {
            Some(to) => {
                let to: Timestamp = to.parse().map_err(|e| JobError::Invalid {
                    field: "setTo",
                    message: format!("not an ISO-8601 instant: {e}"),
                })?;
                clock.set(to)
            }
            None => clock.advance(SignedDuration::from_millis(p.advance_ms)),
        };
        // The tick re-reads the clock when its sleep wakes; nudge it anyway.
        self.api.sched.wake();
        Ok(Response::new(SetClockReply { now: iso(now) }))
    }
}

//! The client of svc-scheduler (issue 5): its internal `SchedulerInternalService` over
//! `run/scheduler.sock`, used by the agent tools `schedule_create` / `schedule_list` /
//! `schedule_cancel` ([`crate::tools::schedule`]).

use std::time::Duration;

use snowpea_common::home::Home;
use snowpea_proto::scheduler::v1::scheduler_internal_service_client::SchedulerInternalServiceClient;
use tonic::transport::Channel;

/// Longest wait for svc-scheduler.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A lazily connecting client of svc-scheduler's internal service.
pub type SchedulerClient = SchedulerInternalServiceClient<Channel>;

/// The client of the scheduler of `home` (connects on first use, reconnects after a restart).
pub fn connect(home: &Home) -> SchedulerClient {
    SchedulerInternalServiceClient::new(snowpea_common::client::unix_channel(
        home.socket("scheduler"),
    ))
    .max_decoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    .max_encoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
}

/// Cancels every job of svc-scheduler that names agent `agent` (`agent.delete`); returns
/// their ids. Fails when svc-scheduler does not answer within [`CALL_TIMEOUT`].
pub async fn cancel_agent_jobs(home: &Home, agent: &str) -> anyhow::Result<Vec<String>> {
    let mut client = connect(home);
    let call = client.cancel_agent_jobs(snowpea_proto::scheduler::v1::CancelAgentJobsRequest {
        agent: agent.to_owned(),
    });
    let reply = tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .map_err(|_| anyhow::anyhow!("svc-scheduler did not answer within {CALL_TIMEOUT:?}"))?
        .map_err(|s| anyhow::anyhow!("svc-scheduler: {}", s.message()))?;
    Ok(reply.into_inner().job_ids)
}

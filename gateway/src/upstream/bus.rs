//! The small `ServiceBus` calls the gateway makes on one service, each with a deadline:
//! SyncConnections, Capabilities, Reply and CallStats (proto/snowpea/rpc/v1/bus.proto).

use std::time::Duration;

use snowpea_proto::rpc::v1::service_bus_client::ServiceBusClient;
use snowpea_proto::rpc::v1::{CallStatsReply, ClientReply, ConnectionSet};
use tonic::Code;

use super::services::Service;

/// Deadline of the small bus calls (SyncConnections, Capabilities, Reply, Subscribe's start).
pub const BUS_CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// A bus client of `svc` with the message limits of every hop ([`snowpea_proto::limits`]):
/// a notification or result up to `GRPC_RESPONSE` travels.
pub fn client(svc: &Service) -> ServiceBusClient<tonic::transport::Channel> {
    ServiceBusClient::new(svc.channel.clone())
        .max_decoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
        .max_encoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
}

/// Sends one connection set (a delta or the full set). Failures are only logged: a
/// service that is down relearns everything from the full set sent when the gateway
/// re-subscribes after its restart.
pub async fn sync_connections(svc: &Service, set: ConnectionSet) {
    let mut client = client(svc);
    match tokio::time::timeout(BUS_CALL_TIMEOUT, client.sync_connections(set)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::debug!(service = %svc.name, error = %e.message(), "SyncConnections failed")
        }
        Err(_) => tracing::debug!(service = %svc.name, "SyncConnections timed out"),
    }
}

/// Asks the service for its capabilities and remembers them (system.hello answers the union).
pub async fn refresh_capabilities(svc: &Service) {
    let mut client = client(svc);
    match tokio::time::timeout(BUS_CALL_TIMEOUT, client.capabilities(())).await {
        Ok(Ok(reply)) => {
            let caps = reply.into_inner().capabilities;
            tracing::debug!(service = %svc.name, ?caps, "capabilities");
            svc.set_capabilities(caps);
        }
        Ok(Err(e)) => {
            tracing::warn!(service = %svc.name, error = %e.message(), "Capabilities failed")
        }
        Err(_) => tracing::warn!(service = %svc.name, "Capabilities timed out"),
    }
}

/// Hands a client's answer to a server→client request back to the service that asked.
pub async fn reply(svc: &Service, answer: ClientReply) {
    let mut client = client(svc);
    match tokio::time::timeout(BUS_CALL_TIMEOUT, client.reply(answer)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::warn!(service = %svc.name, error = %e.message(), "ServiceBus.Reply failed")
        }
        Err(_) => tracing::warn!(service = %svc.name, "ServiceBus.Reply timed out"),
    }
}

/// The service's per-method call counters, or `None` when it is down, does not answer
/// within `deadline` or does not implement `CallStats` (system.info leaves it out).
pub async fn call_stats(svc: &Service, deadline: Duration) -> Option<CallStatsReply> {
    let mut client = client(svc);
    match tokio::time::timeout(deadline, client.call_stats(())).await {
        Ok(Ok(reply)) => Some(reply.into_inner()),
        Ok(Err(e)) if e.code() == Code::Unimplemented => None,
        Ok(Err(e)) => {
            tracing::debug!(service = %svc.name, error = %e.message(), "CallStats failed");
            None
        }
        Err(_) => {
            tracing::debug!(service = %svc.name, "CallStats timed out");
            None
        }
    }
}

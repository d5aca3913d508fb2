//! Server→client requests (`approval.request`, `question.request`, `tool.invoke`;
//! DESIGN.md §4): a service asks one connection through its bus stream; the gateway
//! sends a JSON-RPC request with its own id (`srv-<n>`, never a client's), and hands the
//! client's answer — or `connection_gone` when the connection is not there or closes
//! first — back through `ServiceBus.Reply`. Timeouts are the service's.

use std::sync::Arc;

use serde_json::Value;
use snowpea_proto::rpc::v1::service_bus_client::ServiceBusClient;
use snowpea_proto::rpc::v1::{client_reply::Outcome, BusClientRequest, ClientReply};

use crate::counters::bump;
use crate::jsonrpc;
use crate::services::{is_json, Service, BUS_CALL_TIMEOUT};
use crate::state::Gateway;
use crate::ws::handle::{Connection, Frame, PendingCallback};

/// Sends a service's request to its connection.
pub fn deliver(gw: &Arc<Gateway>, svc: &Arc<Service>, req: BusClientRequest) {
    let pending = PendingCallback {
        service: svc.name.clone(),
        request_id: req.request_id,
    };
    let Some(conn) = gw
        .connections
        .get(&req.connection_id)
        .filter(|c| c.peer().is_some())
    else {
        tracing::debug!(service = %svc.name, conn = %req.connection_id, method = %req.method, "server→client request for a connection that is not live");
        reply(gw, pending, Outcome::ConnectionGone(true));
        return;
    };
    if !is_json(&req.params_json) {
        tracing::warn!(service = %svc.name, method = %req.method, "server→client request params are not JSON");
        let error =
            serde_json::json!({"code": -32603, "message": "gateway: request params were not JSON"});
        reply(gw, pending, Outcome::ErrorJson(error.to_string()));
        return;
    }
    let id = gw.next_callback_id();
    if !conn.add_pending(id.clone(), pending.clone()) {
        reply(gw, pending, Outcome::ConnectionGone(true));
        return;
    }
    bump(&gw.counters.server_requests);
    let text = jsonrpc::server_request(&id, &req.method, &req.params_json);
    if !conn.send(Frame::text(text)) {
        if let Some(p) = conn.take_pending(&id) {
            reply(gw, p, Outcome::ConnectionGone(true));
        }
    }
}

/// Routes a client's answer (`result` or `error`) to the service that asked.
pub fn on_answer(gw: &Arc<Gateway>, conn: &Connection, id: &Value, outcome: Result<Value, Value>) {
    let Some(p) = id.as_str().and_then(|id| conn.take_pending(id)) else {
        tracing::debug!(%id, "answer to an unknown request id; ignored");
        return;
    };
    let outcome = match outcome {
        Ok(result) => Outcome::ResultJson(result.to_string()),
        Err(error) => Outcome::ErrorJson(error.to_string()),
    };
    reply(gw, p, outcome);
}

/// Answers every request a closed connection still owed with `connection_gone`.
pub fn connection_gone(gw: &Arc<Gateway>, pending: Vec<PendingCallback>) {
    for p in pending {
        reply(gw, p, Outcome::ConnectionGone(true));
    }
}

fn reply(gw: &Arc<Gateway>, p: PendingCallback, outcome: Outcome) {
    let Some(svc) = gw.services.get(&p.service) else {
        return;
    };
    tokio::spawn(async move {
        let mut client = ServiceBusClient::new(svc.channel.clone());
        let request = ClientReply {
            request_id: p.request_id,
            outcome: Some(outcome),
        };
        match tokio::time::timeout(BUS_CALL_TIMEOUT, client.reply(request)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(service = %svc.name, error = %e.message(), "ServiceBus.Reply failed")
            }
            Err(_) => tracing::warn!(service = %svc.name, "ServiceBus.Reply timed out"),
        }
    });
}

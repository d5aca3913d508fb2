//! Server→client requests (`approval.request`, `question.request`, `tool.invoke`;
//! DESIGN.md §4): a service asks one connection through its bus stream; the gateway
//! sends a JSON-RPC request with its own id (`srv-<n>`, never a client's), and hands the
//! client's answer — or `connection_gone` when the connection is not there or closes
//! first — back through `ServiceBus.Reply`. Timeouts are the service's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::Value;
use snowpea_proto::rpc::v1::{client_reply::Outcome, BusClientRequest, ClientReply};

use crate::upstream::bus;
use crate::upstream::services::Services;
use crate::wire::connection::{Connection, Frame, PendingCallback};
use crate::wire::counters::{bump, Counters};
use crate::wire::jsonrpc;
use crate::wire::registry::Registry;

/// Sends services' requests to connections and their answers back.
#[derive(Debug)]
pub struct ServerRequests {
    services: Arc<Services>,
    connections: Arc<Registry>,
    counters: Arc<Counters>,
    next_id: AtomicU64,
}

impl ServerRequests {
    /// Requests between `services` and `connections`, counted in `counters`.
    pub fn new(
        services: Arc<Services>,
        connections: Arc<Registry>,
        counters: Arc<Counters>,
    ) -> Self {
        ServerRequests {
            services,
            connections,
            counters,
            next_id: AtomicU64::new(1),
        }
    }

    /// A fresh id for a server→client request: `srv-<n>`, a string so it can never
    /// collide with the ids a client picks for its own requests' answers.
    fn next_id(&self) -> String {
        format!("srv-{}", self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Sends `service`'s request to its connection.
    pub fn deliver(&self, service: &str, req: BusClientRequest) {
        let pending = PendingCallback {
            service: service.to_owned(),
            request_id: req.request_id,
        };
        let Some(conn) = self
            .connections
            .get(&req.connection_id)
            .filter(|c| c.peer().is_some())
        else {
            tracing::debug!(%service, conn = %req.connection_id, method = %req.method, "server→client request for a connection that is not live");
            self.reply(pending, Outcome::ConnectionGone(true));
            return;
        };
        if !jsonrpc::is_json(&req.params_json) {
            tracing::warn!(%service, method = %req.method, "server→client request params are not JSON");
            let error = serde_json::json!({"code": -32603, "message": "gateway: request params were not JSON"});
            self.reply(pending, Outcome::ErrorJson(error.to_string()));
            return;
        }
        let id = self.next_id();
        if !conn.add_pending(id.clone(), pending.clone()) {
            self.reply(pending, Outcome::ConnectionGone(true));
            return;
        }
        bump(&self.counters.server_requests);
        let text = jsonrpc::server_request(&id, &req.method, &req.params_json);
        if !conn.send(Frame::text(text)) {
            if let Some(p) = conn.take_pending(&id) {
                self.reply(p, Outcome::ConnectionGone(true));
            }
        }
    }

    /// Routes a client's answer (`result` or `error`) to the service that asked.
    pub fn on_answer(&self, conn: &Connection, id: &Value, outcome: Result<Value, Value>) {
        let Some(p) = id.as_str().and_then(|id| conn.take_pending(id)) else {
            tracing::debug!(%id, "answer to an unknown request id; ignored");
            return;
        };
        let outcome = match outcome {
            Ok(result) => Outcome::ResultJson(result.to_string()),
            Err(error) => Outcome::ErrorJson(error.to_string()),
        };
        self.reply(p, outcome);
    }

    /// Answers every request a closed connection still owed with `connection_gone`.
    pub fn connection_gone(&self, pending: Vec<PendingCallback>) {
        for p in pending {
            self.reply(p, Outcome::ConnectionGone(true));
        }
    }

    fn reply(&self, p: PendingCallback, outcome: Outcome) {
        let Some(svc) = self.services.get(&p.service) else {
            return;
        };
        let answer = ClientReply {
            request_id: p.request_id,
            outcome: Some(outcome),
        };
        tokio::spawn(async move { bus::reply(&svc, answer).await });
    }
}

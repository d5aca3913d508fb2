//! The service side of the internal bus (`snowpea.rpc.v1.ServiceBus`, DESIGN.md §4).
//!
//! A service publishes notifications and sends server→client requests through a
//! [`BusHub`]; [`BusService`] serves the hub to the gateway: `Subscribe` streams the
//! outbound items, `Reply` completes a pending request, `SyncConnections` keeps the
//! table of live client connections. Notifications published while no gateway is
//! subscribed are dropped — what must not be lost (session events) is durable and
//! clients recover it with `session.resume`.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use serde_json::Value;
use snowpea_proto::rpc::v1::{
    client_reply, outbound, service_bus_server::ServiceBus, BusAck, BusClientRequest,
    BusNotification, ClientReply, ConnectionInfo, ConnectionSet, Outbound, SubscribeRequest,
};
use snowpea_proto::typed::Notification;
use tokio::sync::{broadcast, oneshot};
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status};

/// Capacity of the outbound queue to the gateway (items beyond it while the gateway is
/// stalled are dropped with a warning; clients resume from durable state).
const OUTBOUND_CAPACITY: usize = 65_536;

/// Why a server→client request got no result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The client answered with a JSON-RPC error (`{code, message, data}`).
    #[error("client answered with an error: {0}")]
    Answered(Value),
    /// The connection closed, or was not live, before it answered.
    #[error("connection gone")]
    ConnectionGone,
    /// No answer within the timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// A change to the table of live connections.
#[derive(Debug, Clone, PartialEq)]
pub enum ConnectionEvent {
    /// A connection completed system.hello (or was re-announced).
    Opened(ConnectionInfo),
    /// A connection closed.
    Closed(String),
}

/// Outbound side of a service: notifications, server→client requests, live connections.
#[derive(Debug)]
pub struct BusHub {
    outbound: broadcast::Sender<Outbound>,
    pending: Mutex<HashMap<String, oneshot::Sender<ClientReply>>>,
    connections: Mutex<HashMap<String, ConnectionInfo>>,
    conn_events: broadcast::Sender<ConnectionEvent>,
    capabilities: Mutex<Vec<String>>,
    /// Notifications published while no gateway was subscribed (e.g. a job fired by the
    /// scheduler's catch-up right after a restart, before the gateway re-subscribed);
    /// replayed, oldest first, to the next subscriber. Bounded by [`BACKLOG_CAPACITY`].
    backlog: Mutex<std::collections::VecDeque<Outbound>>,
}

/// Notifications kept for the next subscriber while none is connected.
const BACKLOG_CAPACITY: usize = 4096;

impl Default for BusHub {
    fn default() -> Self {
        BusHub {
            outbound: broadcast::channel(OUTBOUND_CAPACITY).0,
            pending: Mutex::new(HashMap::new()),
            connections: Mutex::new(HashMap::new()),
            conn_events: broadcast::channel(1024).0,
            capabilities: Mutex::new(Vec::new()),
            backlog: Mutex::new(std::collections::VecDeque::new()),
        }
    }
}

impl BusHub {
    /// A new hub behind an `Arc`.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Publishes a typed notification (issue 13 §2): `params` is the generated params
    /// message of the notification `N::METHOD`, encoded to the protocol's JSON by
    /// [`Notification::to_params`]. `targets` empty = every authenticated connection.
    pub fn publish<N: Notification>(&self, params: &N, targets: Vec<String>) {
        self.notify_json(N::METHOD, params.to_params().to_string(), targets);
    }

    /// Publishes a notification built as JSON. `targets` empty = every authenticated
    /// connection. Prefer [`BusHub::publish`]; this stays until the last JSON-built
    /// notification (in svc-session) is typed.
    pub fn notify(&self, method: &str, params: &Value, targets: Vec<String>) {
        self.notify_json(method, params.to_string(), targets);
    }

    /// Publishes a notification whose params are already JSON text.
    pub fn notify_json(&self, method: &str, params_json: String, targets: Vec<String>) {
        let item = Outbound {
            item: Some(outbound::Item::Notification(BusNotification {
                method: method.to_owned(),
                params_json,
                connection_ids: targets,
            })),
        };
        // Hold the backlog lock while sending so a subscriber that takes the backlog sees
        // every item either there or on its receiver, never neither.
        let mut backlog = self.backlog.lock().expect("backlog lock");
        if let Err(broadcast::error::SendError(item)) = self.outbound.send(item) {
            // No gateway is subscribed right now: keep it for the next one.
            if backlog.len() == BACKLOG_CAPACITY {
                backlog.pop_front();
            }
            backlog.push_back(item);
        }
    }

    /// Sends a server→client request to one connection and waits for its answer.
    /// Returns the JSON-RPC result, or why there is none. A connection that is not
    /// live fails at once with [`RequestError::ConnectionGone`].
    pub async fn request(
        &self,
        connection_id: &str,
        method: &str,
        params: &Value,
        timeout: Duration,
    ) -> Result<Value, RequestError> {
        if !self.is_live(connection_id) {
            return Err(RequestError::ConnectionGone);
        }
        let request_id = crate::ids::new_id("rq");
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .expect("pending lock")
            .insert(request_id.clone(), tx);
        let item = Outbound {
            item: Some(outbound::Item::Request(BusClientRequest {
                request_id: request_id.clone(),
                connection_id: connection_id.to_owned(),
                method: method.to_owned(),
                params_json: params.to_string(),
            })),
        };
        if self.outbound.send(item).is_err() {
            self.pending
                .lock()
                .expect("pending lock")
                .remove(&request_id);
            return Err(RequestError::ConnectionGone);
        }
        let outcome = tokio::time::timeout(timeout, rx).await;
        self.pending
            .lock()
            .expect("pending lock")
            .remove(&request_id);
        match outcome {
            Err(_) => Err(RequestError::Timeout(timeout)),
            Ok(Err(_)) => Err(RequestError::ConnectionGone),
            Ok(Ok(reply)) => match reply.outcome {
                Some(client_reply::Outcome::ResultJson(s)) => {
                    Ok(serde_json::from_str(&s).unwrap_or(Value::Null))
                }
                Some(client_reply::Outcome::ErrorJson(s)) => Err(RequestError::Answered(
                    serde_json::from_str(&s).unwrap_or(Value::Null),
                )),
                Some(client_reply::Outcome::ConnectionGone(_)) | None => {
                    Err(RequestError::ConnectionGone)
                }
            },
        }
    }

    /// Declares the system.hello capabilities this service implements.
    pub fn set_capabilities(&self, caps: &[&str]) {
        *self.capabilities.lock().expect("capabilities lock") =
            caps.iter().map(|s| s.to_string()).collect();
    }

    /// True when the connection is live (announced and not closed).
    pub fn is_live(&self, connection_id: &str) -> bool {
        self.connections
            .lock()
            .expect("connections lock")
            .contains_key(connection_id)
    }

    /// The live connection with this id.
    pub fn connection(&self, connection_id: &str) -> Option<ConnectionInfo> {
        self.connections
            .lock()
            .expect("connections lock")
            .get(connection_id)
            .cloned()
    }

    /// Every live connection.
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.connections
            .lock()
            .expect("connections lock")
            .values()
            .cloned()
            .collect()
    }

    /// Connection changes as they happen (e.g. to re-bind a session's origin when a
    /// client with the same clientId reconnects).
    pub fn connection_events(&self) -> broadcast::Receiver<ConnectionEvent> {
        self.conn_events.subscribe()
    }

    fn apply(&self, set: ConnectionSet) {
        let mut events = Vec::new();
        {
            let mut conns = self.connections.lock().expect("connections lock");
            if set.full {
                let live: std::collections::HashSet<_> = set
                    .connections
                    .iter()
                    .map(|c| c.connection_id.clone())
                    .collect();
                let gone: Vec<String> = conns
                    .keys()
                    .filter(|k| !live.contains(*k))
                    .cloned()
                    .collect();
                for id in gone {
                    conns.remove(&id);
                    events.push(ConnectionEvent::Closed(id));
                }
            }
            for c in set.connections {
                conns.insert(c.connection_id.clone(), c.clone());
                events.push(ConnectionEvent::Opened(c));
            }
            for id in set.closed {
                if conns.remove(&id).is_some() {
                    events.push(ConnectionEvent::Closed(id));
                }
            }
        }
        // Requests pending on a closed connection need nothing here: the gateway answers
        // each of them with `connection_gone` through Reply.
        for e in events {
            let _ = self.conn_events.send(e);
        }
    }

    fn complete(&self, reply: ClientReply) {
        let tx = self
            .pending
            .lock()
            .expect("pending lock")
            .remove(&reply.request_id);
        if let Some(tx) = tx {
            let _ = tx.send(reply);
        }
    }
}

/// gRPC server of [`BusHub`] (`snowpea.rpc.v1.ServiceBus`).
#[derive(Debug, Clone)]
pub struct BusService {
    hub: Arc<BusHub>,
}

impl BusService {
    /// Serves `hub`.
    pub fn new(hub: Arc<BusHub>) -> Self {
        BusService { hub }
    }

    /// The tonic server wrapper, ready for `Routes::add_service`.
    pub fn into_server(self) -> snowpea_proto::rpc::v1::service_bus_server::ServiceBusServer<Self> {
        snowpea_proto::rpc::v1::service_bus_server::ServiceBusServer::new(self)
    }
}

/// The Subscribe stream type.
pub type OutboundStream = Pin<Box<dyn Stream<Item = Result<Outbound, Status>> + Send>>;

/// Fully qualified name of the bus service (for health and reflection).
pub const BUS_SERVICE_NAME: &str = "snowpea.rpc.v1.ServiceBus";

#[tonic::async_trait]
impl ServiceBus for BusService {
    async fn subscribe(
        &self,
        req: Request<SubscribeRequest>,
    ) -> Result<Response<OutboundStream>, Status> {
        tracing::info!(gateway = %req.get_ref().gateway_id, "gateway subscribed");
        let draining = crate::service::draining().clone().cancelled_owned();
        let (receiver, held) = {
            let mut backlog = self.hub.backlog.lock().expect("backlog lock");
            (self.hub.outbound.subscribe(), std::mem::take(&mut *backlog))
        };
        let held = tokio_stream::iter(held.into_iter().map(Ok));
        let stream = held.chain(BroadcastStream::new(receiver).filter_map(|item| match item {
            Ok(o) => Some(Ok(o)),
            Err(tokio_stream::wrappers::errors::BroadcastStreamRecvError::Lagged(n)) => {
                tracing::warn!(dropped = n, "gateway lagged; notifications dropped (clients resume from durable events)");
                None
            }
        }));
        // End the feed when the process drains, so shutdown is not held up by it.
        Ok(Response::new(Box::pin(futures::StreamExt::take_until(
            stream, draining,
        ))))
    }

    async fn reply(&self, req: Request<ClientReply>) -> Result<Response<BusAck>, Status> {
        self.hub.complete(req.into_inner());
        Ok(Response::new(BusAck {}))
    }

    async fn capabilities(
        &self,
        _req: Request<snowpea_proto::rpc::v1::CapabilitiesRequest>,
    ) -> Result<Response<snowpea_proto::rpc::v1::CapabilitiesReply>, Status> {
        let capabilities = self
            .hub
            .capabilities
            .lock()
            .expect("capabilities lock")
            .clone();
        Ok(Response::new(snowpea_proto::rpc::v1::CapabilitiesReply {
            capabilities,
        }))
    }

    async fn sync_connections(
        &self,
        req: Request<ConnectionSet>,
    ) -> Result<Response<BusAck>, Status> {
        self.hub.apply(req.into_inner());
        Ok(Response::new(BusAck {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(id: &str) -> ConnectionInfo {
        ConnectionInfo {
            connection_id: id.into(),
            client_version: "t".into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn notifications_published_before_a_subscriber_are_replayed_to_it() {
        let hub = BusHub::new();
        hub.notify("job.event", &serde_json::json!({"n": 1}), vec![]);
        hub.notify("job.event", &serde_json::json!({"n": 2}), vec![]);
        let svc = BusService::new(hub.clone());
        let mut stream = svc
            .subscribe(Request::new(SubscribeRequest {
                gateway_id: "g".into(),
            }))
            .await
            .unwrap()
            .into_inner();
        hub.notify("job.event", &serde_json::json!({"n": 3}), vec![]);
        let mut seen = Vec::new();
        for _ in 0..3 {
            let item = tokio::time::timeout(Duration::from_secs(5), stream.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            let Some(outbound::Item::Notification(n)) = item.item else {
                panic!("notification")
            };
            seen.push(n.params_json);
        }
        assert_eq!(seen, vec![r#"{"n":1}"#, r#"{"n":2}"#, r#"{"n":3}"#]);
        assert!(hub.backlog.lock().unwrap().is_empty());
    }

    #[test]
    fn publish_sends_the_typed_params_as_protocol_json() {
        let hub = BusHub::new();
        let mut rx = hub.outbound.subscribe();
        hub.publish(
            &snowpea_proto::mcp::v1::McpChangedNotification {
                name: "fs".into(),
                state: "ready".into(),
                tool_count: 3,
                ..Default::default()
            },
            vec!["c1".into()],
        );
        let Some(outbound::Item::Notification(n)) = rx.try_recv().unwrap().item else {
            panic!("notification")
        };
        assert_eq!(n.method, "mcp.changed");
        assert_eq!(n.connection_ids, vec!["c1".to_string()]);
        assert_eq!(
            n.params_json,
            r#"{"name":"fs","scope":"","state":"ready","toolCount":3}"#
        );
    }

    #[tokio::test]
    async fn request_to_unknown_connection_fails_fast() {
        let hub = BusHub::new();
        let r = hub
            .request(
                "nope",
                "approval.request",
                &Value::Null,
                Duration::from_secs(5),
            )
            .await;
        assert_eq!(r, Err(RequestError::ConnectionGone));
    }

    #[tokio::test]
    async fn request_is_answered_through_reply() {
        let hub = BusHub::new();
        hub.apply(ConnectionSet {
            full: true,
            connections: vec![conn("c1")],
            closed: vec![],
        });
        let mut rx = hub.outbound.subscribe();
        let h2 = hub.clone();
        let task = tokio::spawn(async move {
            h2.request(
                "c1",
                "approval.request",
                &serde_json::json!({"x": 1}),
                Duration::from_secs(5),
            )
            .await
        });
        let item = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        let Some(outbound::Item::Request(r)) = item.item else {
            panic!("expected a request")
        };
        assert_eq!(r.connection_id, "c1");
        hub.complete(ClientReply {
            request_id: r.request_id,
            outcome: Some(client_reply::Outcome::ResultJson(
                "{\"decision\":\"allow\"}".into(),
            )),
        });
        let v = tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(v["decision"], "allow");
    }

    #[tokio::test]
    async fn request_times_out() {
        let hub = BusHub::new();
        hub.apply(ConnectionSet {
            full: false,
            connections: vec![conn("c1")],
            closed: vec![],
        });
        let _rx = hub.outbound.subscribe();
        let r = hub
            .request("c1", "m", &Value::Null, Duration::from_millis(20))
            .await;
        assert!(matches!(r, Err(RequestError::Timeout(_))));
        assert!(
            hub.pending.lock().unwrap().is_empty(),
            "no leak of pending entries"
        );
    }

    #[test]
    fn full_sync_replaces_the_table_and_reports_closures() {
        let hub = BusHub::new();
        let mut ev = hub.connection_events();
        hub.apply(ConnectionSet {
            full: true,
            connections: vec![conn("a"), conn("b")],
            closed: vec![],
        });
        hub.apply(ConnectionSet {
            full: true,
            connections: vec![conn("b")],
            closed: vec![],
        });
        assert!(!hub.is_live("a") && hub.is_live("b"));
        let mut closed = vec![];
        while let Ok(e) = ev.try_recv() {
            if let ConnectionEvent::Closed(id) = e {
                closed.push(id);
            }
        }
        assert_eq!(closed, vec!["a".to_string()]);
    }
}

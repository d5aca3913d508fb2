//! The service side of the internal bus (`snowpea.rpc.v1.ServiceBus`, DESIGN.md §4).
//!
//! A service publishes notifications and sends server→client requests through a
//! [`BusHub`]; [`BusService`] serves the hub to the gateway: `Subscribe` streams the
//! outbound items, `Reply` completes a pending request, `SyncConnections` keeps the
//! table of live client connections, `CallStats` reports the per-method counters of the
//! server's call layer ([`crate::calls`]). Notifications published while no gateway is
//! subscribed are dropped — what must not be lost (session events) is durable and
//! clients recover it with `session.resume`.
//!
//! Each subscriber gets its own bounded queue of [`OUTBOUND_CAPACITY`] items (configurable
//! with [`OUTBOUND_CAPACITY_ENV`]; a tokio `mpsc` channel: it allocates in small blocks as
//! items are queued and frees them as they are read, so an idle service holds no ring; a
//! `broadcast` channel of the same capacity allocated all 65,536 slots up front, ≈ 7.8 MB
//! resident per service — issue 14).
//!
//! A subscriber whose queue is full when an item is published has lagged: nothing is
//! dropped silently. It is cut off at once — it still receives everything queued before,
//! in order, and then its stream ends with `DATA_LOSS` ([`LAGGED_MESSAGE`]) — and the
//! gateway closes its clients with the overflow reason so they reconnect and re-read the
//! durable events (`session.resume`), as it does for a client that cannot keep up.
//! Items published after the cut wait in the backlog for the gateway's re-subscription.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use serde_json::Value;
use snowpea_proto::rpc::v1::{
    client_reply, outbound, service_bus_server::ServiceBus, BusClientRequest, BusNotification,
    ClientReply, ConnectionInfo, ConnectionSet, Outbound, SettingsChange, SubscribeRequest,
};
use snowpea_proto::typed::{FreeForm, Notification, ServerRequest};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status};

/// Default capacity of each subscriber's outbound queue to the gateway, in items (a
/// subscriber that lets it fill is cut off as lagged, see the module documentation).
/// Memory is used only for queued items.
pub const OUTBOUND_CAPACITY: usize = 65_536;

/// Environment variable setting the outbound queue capacity (items, 16 to 1,048,576).
pub const OUTBOUND_CAPACITY_ENV: &str = "SNOWPEA_BUS_QUEUE";

/// The message of the `DATA_LOSS` status that ends a lagged subscriber's stream.
pub const LAGGED_MESSAGE: &str = "outbound queue full: the subscriber lagged and was cut off";

/// The outbound capacity from [`OUTBOUND_CAPACITY_ENV`], else [`OUTBOUND_CAPACITY`].
pub fn outbound_capacity_from_env() -> usize {
    std::env::var(OUTBOUND_CAPACITY_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map(|n| n.clamp(16, 1 << 20))
        .unwrap_or(OUTBOUND_CAPACITY)
}

/// One subscribed gateway's queue.
#[derive(Debug)]
struct Subscriber {
    tx: mpsc::Sender<Outbound>,
    /// Set when the queue was full: the subscriber is cut off and its stream ends with
    /// `DATA_LOSS` after what it queued.
    lagged: Arc<AtomicBool>,
}

/// The subscribed gateways (usually one; two while a restarted gateway replaces the old).
#[derive(Debug)]
struct Outbounds {
    capacity: usize,
    subscribers: Mutex<Vec<Subscriber>>,
}

impl Outbounds {
    fn new(capacity: usize) -> Self {
        Outbounds {
            capacity: capacity.max(1),
            subscribers: Mutex::new(Vec::new()),
        }
    }

    /// A new subscriber's receiving end and its lagged flag.
    fn subscribe(&self) -> (mpsc::Receiver<Outbound>, Arc<AtomicBool>) {
        let (tx, rx) = mpsc::channel(self.capacity);
        let lagged = Arc::new(AtomicBool::new(false));
        self.subscribers
            .lock()
            .expect("subscribers lock")
            .push(Subscriber {
                tx,
                lagged: lagged.clone(),
            });
        (rx, lagged)
    }

    /// Queues `item` for every live subscriber; gives it back when there is none (as
    /// `broadcast::Sender::send` did). A subscriber whose queue is full is cut off.
    fn send(&self, item: Outbound) -> Result<(), Outbound> {
        let mut subs = self.subscribers.lock().expect("subscribers lock");
        subs.retain(|s| !s.tx.is_closed());
        let Some((last, rest)) = subs.split_last() else {
            return Err(item);
        };
        let mut cut = false;
        for s in rest {
            cut |= !self.offer(s, item.clone());
        }
        cut |= !self.offer(last, item);
        if cut {
            // Dropping its sender ends its stream after the queued items.
            subs.retain(|s| !s.lagged.load(Ordering::Relaxed));
        }
        Ok(())
    }

    /// Queues `item` for `s`; false when its queue was full (it is marked lagged).
    fn offer(&self, s: &Subscriber, item: Outbound) -> bool {
        match s.tx.try_send(item) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                tracing::warn!(
                    capacity = self.capacity,
                    "gateway lagging: outbound queue full; cutting it off (its clients are closed and resume from durable events)"
                );
                s.lagged.store(true, Ordering::Relaxed);
                false
            }
            // Gone since `retain`: the next send removes it.
            Err(TrySendError::Closed(_)) => true,
        }
    }

    /// Items queued and not yet read, per live subscriber.
    fn queued(&self) -> Vec<usize> {
        self.subscribers
            .lock()
            .expect("subscribers lock")
            .iter()
            .filter(|s| !s.tx.is_closed())
            .map(|s| s.tx.max_capacity() - s.tx.capacity())
            .collect()
    }
}

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

/// What a [`BusHub`] holds at one moment ([`BusHub::held`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Held {
    /// Items queued and not yet read, one entry per live subscriber.
    pub queued: Vec<usize>,
    /// Notifications waiting for the next subscriber.
    pub backlog: usize,
    /// Server→client requests waiting for an answer.
    pub pending: usize,
    /// Live connections.
    pub connections: usize,
}

/// Outbound side of a service: notifications, server→client requests, live connections.
#[derive(Debug)]
pub struct BusHub {
    outbound: Outbounds,
    pending: Mutex<HashMap<String, oneshot::Sender<ClientReply>>>,
    connections: Mutex<HashMap<String, ConnectionInfo>>,
    conn_events: broadcast::Sender<ConnectionEvent>,
    capabilities: Mutex<Vec<String>>,
    /// Notifications published while no gateway was subscribed (e.g. a job fired by the
    /// scheduler's catch-up right after a restart, before the gateway re-subscribed);
    /// replayed, oldest first, to the next subscriber. Bounded by [`BACKLOG_CAPACITY`].
    backlog: Mutex<std::collections::VecDeque<Outbound>>,
    /// `ServiceBus.SettingsChanged` calls from the settings owner ([`BusHub::settings_changes`]).
    settings_events: broadcast::Sender<SettingsChange>,
}

/// Capacity of [`BusHub::settings_changes`] (a listener that lags behind it is told
/// [`broadcast::error::RecvError::Lagged`] and should re-read everything).
pub const SETTINGS_EVENTS_CAPACITY: usize = 64;

/// Notifications kept for the next subscriber while none is connected.
pub const BACKLOG_CAPACITY: usize = 4096;

/// Capacity of [`BusHub::connection_events`] (a `broadcast` ring, allocated up front).
pub const CONNECTION_EVENTS_CAPACITY: usize = 1024;

impl Default for BusHub {
    /// A hub whose outbound queues hold [`outbound_capacity_from_env`] items.
    fn default() -> Self {
        Self::with_outbound_capacity(outbound_capacity_from_env())
    }
}

impl BusHub {
    /// A hub whose subscribers' outbound queues hold `capacity` items each.
    pub fn with_outbound_capacity(capacity: usize) -> Self {
        BusHub {
            outbound: Outbounds::new(capacity),
            pending: Mutex::new(HashMap::new()),
            connections: Mutex::new(HashMap::new()),
            conn_events: broadcast::channel(CONNECTION_EVENTS_CAPACITY).0,
            capabilities: Mutex::new(Vec::new()),
            backlog: Mutex::new(std::collections::VecDeque::new()),
            settings_events: broadcast::channel(SETTINGS_EVENTS_CAPACITY).0,
        }
    }

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

    /// [`BusHub::publish`] with the free-form fields of `free` written verbatim
    /// ([`snowpea_proto::typed::encode_with`]).
    pub fn publish_with<N: Notification>(
        &self,
        params: &N,
        free: FreeForm<'_>,
        targets: Vec<String>,
    ) {
        self.notify_json(N::METHOD, params.to_params_with(free).to_string(), targets);
    }

    /// Publishes a notification whose params are already JSON text, encoded from its typed
    /// params message (svc-session's event writer, which encodes when it queues).
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
        if let Err(item) = self.outbound.send(item) {
            // No gateway is subscribed right now: keep it for the next one.
            if backlog.len() == BACKLOG_CAPACITY {
                backlog.pop_front();
            }
            backlog.push_back(item);
        }
    }

    /// Sends a typed server→client request (`params` is the generated params message of
    /// `R::METHOD`, its free-form fields in `free` written verbatim) to one connection and
    /// waits for its answer. Returns the JSON-RPC result, or why there is none. A
    /// connection that is not live fails at once with [`RequestError::ConnectionGone`].
    pub async fn request<R: ServerRequest>(
        &self,
        connection_id: &str,
        params: &R,
        free: FreeForm<'_>,
        timeout: Duration,
    ) -> Result<Value, RequestError> {
        let params = params.to_request_params(free);
        self.request_json(connection_id, R::METHOD, &params, timeout)
            .await
    }

    async fn request_json(
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

    /// How much the hub holds right now, to check its bounds: items queued per subscriber
    /// (each ≤ the configured outbound capacity), the backlog (≤ [`BACKLOG_CAPACITY`]), pending
    /// server→client requests, live connections.
    pub fn held(&self) -> Held {
        Held {
            queued: self.outbound.queued(),
            backlog: self.backlog.lock().expect("backlog lock").len(),
            pending: self.pending.lock().expect("pending lock").len(),
            connections: self.connections.lock().expect("connections lock").len(),
        }
    }

    /// Changes of `$SNOWPEA_HOME/settings.json` announced by the settings owner
    /// (`ServiceBus.SettingsChanged`, or [`BusHub::settings_changed`] in the owner's own
    /// process). A service subscribes once at start and applies the keys it uses; a
    /// `Lagged` receiver should re-read everything.
    pub fn settings_changes(&self) -> broadcast::Receiver<SettingsChange> {
        self.settings_events.subscribe()
    }

    /// Delivers a settings change to this process's [`BusHub::settings_changes`] listeners.
    pub fn settings_changed(&self, change: SettingsChange) {
        tracing::info!(scope = %change.scope, keys = ?change.keys, "settings changed");
        let _ = self.settings_events.send(change);
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
            .max_decoding_message_size(snowpea_proto::limits::GRPC_REQUEST)
            .max_encoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
    }
}

/// The Subscribe stream type.
pub type OutboundStream = Pin<Box<dyn Stream<Item = Result<Outbound, Status>> + Send>>;

#[tonic::async_trait]
impl ServiceBus for BusService {
    async fn subscribe(
        &self,
        req: Request<SubscribeRequest>,
    ) -> Result<Response<OutboundStream>, Status> {
        tracing::info!(gateway = %req.get_ref().gateway_id, "gateway subscribed");
        let draining = crate::service::draining().clone().cancelled_owned();
        let ((receiver, lagged), held) = {
            let mut backlog = self.hub.backlog.lock().expect("backlog lock");
            (self.hub.outbound.subscribe(), std::mem::take(&mut *backlog))
        };
        let held = tokio_stream::iter(held.into_iter().map(Ok));
        // After everything queued: DATA_LOSS when it was cut off for lagging.
        let end = futures::stream::once(async move {
            lagged
                .load(Ordering::Relaxed)
                .then(|| Status::data_loss(LAGGED_MESSAGE))
        })
        .filter_map(|lag| lag.map(Err));
        let stream = held.chain(ReceiverStream::new(receiver).map(Ok)).chain(end);
        // End the feed when the process drains, so shutdown is not held up by it.
        Ok(Response::new(Box::pin(futures::StreamExt::take_until(
            stream, draining,
        ))))
    }

    async fn reply(&self, req: Request<ClientReply>) -> Result<Response<()>, Status> {
        self.hub.complete(req.into_inner());
        Ok(Response::new(()))
    }

    async fn capabilities(
        &self,
        _req: Request<()>,
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

    async fn call_stats(
        &self,
        _req: Request<()>,
    ) -> Result<Response<snowpea_proto::rpc::v1::CallStatsReply>, Status> {
        Ok(Response::new(crate::calls::snapshot()))
    }

    async fn sync_connections(&self, req: Request<ConnectionSet>) -> Result<Response<()>, Status> {
        self.hub.apply(req.into_inner());
        Ok(Response::new(()))
    }

    async fn settings_changed(&self, req: Request<SettingsChange>) -> Result<Response<()>, Status> {
        self.hub.settings_changed(req.into_inner());
        Ok(Response::new(()))
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
        hub.notify_json("job.event", r#"{"n":1}"#.into(), vec![]);
        hub.notify_json("job.event", r#"{"n":2}"#.into(), vec![]);
        let svc = BusService::new(hub.clone());
        let mut stream = svc
            .subscribe(Request::new(SubscribeRequest {
                gateway_id: "g".into(),
            }))
            .await
            .unwrap()
            .into_inner();
        hub.notify_json("job.event", r#"{"n":3}"#.into(), vec![]);
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
        let (mut rx, _) = hub.outbound.subscribe();
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
            .request_json(
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
        let (mut rx, _) = hub.outbound.subscribe();
        let h2 = hub.clone();
        let task = tokio::spawn(async move {
            h2.request_json(
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
            .request_json("c1", "m", &Value::Null, Duration::from_millis(20))
            .await;
        assert!(matches!(r, Err(RequestError::Timeout(_))));
        assert!(
            hub.pending.lock().unwrap().is_empty(),
            "no leak of pending entries"
        );
    }

    /// The regression guard of issue 14: what the hub holds is bounded by its configured
    /// sizes, an idle hub holds nothing, and finished work leaves nothing behind.
    #[tokio::test]
    async fn the_hub_holds_no_more_than_its_configured_sizes() {
        const CAP: usize = 64;
        let hub = Arc::new(BusHub::with_outbound_capacity(CAP));
        assert_eq!(hub.held(), Held::default(), "an idle hub holds nothing");
        // No subscriber: the backlog keeps the newest BACKLOG_CAPACITY.
        for n in 0..BACKLOG_CAPACITY + 10 {
            hub.notify_json("job.event", format!(r#"{{"n":{n}}}"#), vec![]);
        }
        assert_eq!(hub.held().backlog, BACKLOG_CAPACITY);
        let svc = BusService::new(hub.clone());
        let mut stream = svc
            .subscribe(Request::new(SubscribeRequest {
                gateway_id: "g".into(),
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(hub.held().backlog, 0, "the backlog went to the subscriber");
        // A subscriber that keeps up: its queue never holds more than what is unread.
        for n in 0..CAP {
            hub.notify_json("job.event", n.to_string(), vec![]);
        }
        assert_eq!(hub.held().queued, vec![CAP]);
        for _ in 0..BACKLOG_CAPACITY + CAP {
            stream.next().await.unwrap().unwrap();
        }
        assert_eq!(hub.held().queued, vec![0], "reading drains it");
        // A stalled subscriber: its queue stops at the capacity, then it is cut off.
        for n in 0..CAP + 100 {
            hub.notify_json("job.event", n.to_string(), vec![]);
        }
        let held = hub.held();
        assert!(held.queued.is_empty(), "the lagged subscriber is cut off");
        assert_eq!(held.backlog, 99, "what came after waits for the next one");
        // It still gets what it queued, in order, then DATA_LOSS: nothing silently lost.
        for n in 0..CAP {
            let item = stream.next().await.unwrap().unwrap();
            let Some(outbound::Item::Notification(got)) = item.item else {
                panic!("notification")
            };
            assert_eq!(got.params_json, n.to_string());
        }
        let end = stream.next().await.unwrap().unwrap_err();
        assert_eq!(end.code(), tonic::Code::DataLoss);
        assert!(stream.next().await.is_none());
        // Finished requests leave no pending entry; a closed subscriber is forgotten.
        let mut stream = svc
            .subscribe(Request::new(SubscribeRequest {
                gateway_id: "g2".into(),
            }))
            .await
            .unwrap()
            .into_inner();
        hub.apply(ConnectionSet {
            full: true,
            connections: vec![conn("c1")],
            closed: vec![],
        });
        for _ in 0..3 {
            let r = hub
                .request_json("c1", "m", &Value::Null, Duration::from_millis(1))
                .await;
            assert!(matches!(r, Err(RequestError::Timeout(_))));
        }
        hub.apply(ConnectionSet {
            full: false,
            connections: vec![],
            closed: vec!["c1".into()],
        });
        for _ in 0..99 + 3 {
            stream.next().await.unwrap().unwrap();
        }
        drop(stream);
        hub.notify_json("job.event", "0".into(), vec![]);
        assert_eq!(
            hub.held(),
            Held {
                backlog: 1,
                ..Held::default()
            }
        );
    }

    #[test]
    fn the_outbound_capacity_is_configurable_and_bounded() {
        // Only the parsing: the variable itself is process-wide.
        assert_eq!(OUTBOUND_CAPACITY, 65_536);
        let hub = BusHub::with_outbound_capacity(16);
        let (rx, _) = hub.outbound.subscribe();
        assert_eq!(rx.max_capacity(), 16);
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

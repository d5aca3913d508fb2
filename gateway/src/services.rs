//! The services of the suite (`--services`) as the gateway sees them: one cached gRPC
//! channel each, the capabilities each reports, and one `ServiceBus.Subscribe` loop each
//! that fans notifications out, hands server→client requests to their connection and,
//! every time it (re)subscribes — the service may have restarted — re-sends the full set
//! of live connections and refreshes the capabilities (DESIGN.md §4).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use snowpea_common::client::unix_channel;
use snowpea_common::home::Home;
use snowpea_proto::rpc::v1::service_bus_client::ServiceBusClient;
use snowpea_proto::rpc::v1::{
    outbound, BusNotification, CapabilitiesRequest, ConnectionSet, Outbound, SubscribeRequest,
};
use tonic::transport::Channel;

use crate::counters::bump;
use crate::state::Gateway;
use crate::ws::handle::{Connection, Frame};
use crate::{callbacks, jsonrpc};

const MIN_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_millis(200);
/// Deadline of the small bus calls (SyncConnections, Capabilities, Subscribe's start).
pub const BUS_CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// One service of the suite.
#[derive(Debug)]
pub struct Service {
    /// Its name, e.g. `session` (socket `run/<name>.sock`).
    pub name: String,
    /// Lazily connecting channel to its socket, shared by every call.
    pub channel: Channel,
    capabilities: RwLock<Vec<String>>,
    /// Serialises SyncConnections to this service so deltas and full sets arrive in order.
    sync: tokio::sync::Mutex<()>,
}

/// Every service of the suite.
#[derive(Debug, Default)]
pub struct Services {
    list: Vec<Arc<Service>>,
}

impl Services {
    /// Channels for `names` (duplicates ignored); nothing connects until used.
    pub fn new(home: &Home, names: &[String]) -> Self {
        let mut list: Vec<Arc<Service>> = Vec::new();
        for name in names {
            if list.iter().any(|s| &s.name == name) {
                continue;
            }
            list.push(Arc::new(Service {
                name: name.clone(),
                channel: unix_channel(home.socket(name)),
                capabilities: RwLock::new(Vec::new()),
                sync: tokio::sync::Mutex::new(()),
            }));
        }
        Services { list }
    }

    /// The service with this name, if the suite runs it.
    pub fn get(&self, name: &str) -> Option<Arc<Service>> {
        self.list.iter().find(|s| s.name == name).cloned()
    }

    /// Union of what the running services report, sorted (system.hello `capabilities`).
    pub fn capabilities(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .list
            .iter()
            .flat_map(|s| s.capabilities.read().map(|c| c.clone()).unwrap_or_default())
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// Starts one Subscribe loop per service.
    pub fn start(gw: &Arc<Gateway>) {
        for svc in &gw.services.list {
            tokio::spawn(subscribe_loop(gw.clone(), svc.clone()));
        }
    }
}

/// Tells every service the current state of one connection (live with its hello
/// facts, or closed). The state is read under each service's sync lock, so whichever
/// of two racing announcements goes last carries the latest state.
pub async fn announce(gw: &Gateway, conn: &Connection) {
    let calls = gw.services.list.iter().map(|svc| async move {
        let _order = svc.sync.lock().await;
        let set = match conn.peer() {
            Some(p) => ConnectionSet {
                full: false,
                connections: vec![p.info.clone()],
                closed: vec![],
            },
            None => ConnectionSet {
                full: false,
                connections: vec![],
                closed: vec![conn.id.clone()],
            },
        };
        sync(svc, set).await;
    });
    futures::future::join_all(calls).await;
}

/// Sends the complete set of authenticated connections to one service.
async fn announce_all(gw: &Gateway, svc: &Service) {
    let _order = svc.sync.lock().await;
    let mut connections = Vec::new();
    gw.connections.for_each_authenticated(|c| {
        if let Some(p) = c.peer() {
            connections.push(p.info.clone());
        }
    });
    sync(
        svc,
        ConnectionSet {
            full: true,
            connections,
            closed: vec![],
        },
    )
    .await;
}

async fn sync(svc: &Service, set: ConnectionSet) {
    let mut client = ServiceBusClient::new(svc.channel.clone());
    match tokio::time::timeout(BUS_CALL_TIMEOUT, client.sync_connections(set)).await {
        Ok(Ok(_)) => {}
        // A service that is down relearns everything from the full set sent when the
        // gateway re-subscribes after its restart.
        Ok(Err(e)) => {
            tracing::debug!(service = %svc.name, error = %e.message(), "SyncConnections failed")
        }
        Err(_) => tracing::debug!(service = %svc.name, "SyncConnections timed out"),
    }
}

async fn refresh_capabilities(svc: &Service) {
    let mut client = ServiceBusClient::new(svc.channel.clone());
    match tokio::time::timeout(
        BUS_CALL_TIMEOUT,
        client.capabilities(CapabilitiesRequest {}),
    )
    .await
    {
        Ok(Ok(reply)) => {
            let caps = reply.into_inner().capabilities;
            tracing::debug!(service = %svc.name, ?caps, "capabilities");
            if let Ok(mut c) = svc.capabilities.write() {
                *c = caps;
            }
        }
        Ok(Err(e)) => {
            tracing::warn!(service = %svc.name, error = %e.message(), "Capabilities failed")
        }
        Err(_) => tracing::warn!(service = %svc.name, "Capabilities timed out"),
    }
}

async fn subscribe_loop(gw: Arc<Gateway>, svc: Arc<Service>) {
    let mut backoff = MIN_BACKOFF;
    let mut reported_down = false;
    loop {
        let mut client = ServiceBusClient::new(svc.channel.clone());
        let request = SubscribeRequest {
            gateway_id: gw.instance.clone(),
        };
        let started = tokio::select! {
            _ = gw.shutdown.cancelled() => return,
            r = tokio::time::timeout(BUS_CALL_TIMEOUT, client.subscribe(request)) => r,
        };
        match started {
            Ok(Ok(response)) => {
                tracing::info!(service = %svc.name, "subscribed to service bus");
                reported_down = false;
                backoff = MIN_BACKOFF;
                let mut stream = response.into_inner();
                announce_all(&gw, &svc).await;
                refresh_capabilities(&svc).await;
                loop {
                    let item = tokio::select! {
                        _ = gw.shutdown.cancelled() => return,
                        m = stream.message() => m,
                    };
                    match item {
                        Ok(Some(item)) => on_outbound(&gw, &svc, item),
                        Ok(None) => {
                            tracing::info!(service = %svc.name, "service bus stream ended; re-subscribing");
                            break;
                        }
                        Err(e) => {
                            tracing::info!(service = %svc.name, error = %e.message(), "service bus stream failed; re-subscribing");
                            break;
                        }
                    }
                }
            }
            Ok(Err(e)) if !reported_down => {
                tracing::info!(service = %svc.name, error = %e.message(), "service bus not reachable yet; retrying");
                reported_down = true;
            }
            Err(_) if !reported_down => {
                tracing::info!(service = %svc.name, "service bus subscribe timed out; retrying");
                reported_down = true;
            }
            _ => {}
        }
        tokio::select! {
            _ = gw.shutdown.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

fn on_outbound(gw: &Arc<Gateway>, svc: &Arc<Service>, item: Outbound) {
    match item.item {
        Some(outbound::Item::Notification(n)) => fan_out(gw, svc, n),
        Some(outbound::Item::Request(r)) => callbacks::deliver(gw, svc, r),
        None => {}
    }
}

/// Delivers a notification to its connections (none named = every authenticated one).
fn fan_out(gw: &Gateway, svc: &Service, n: BusNotification) {
    if !is_json(&n.params_json) {
        tracing::warn!(service = %svc.name, method = %n.method, "notification params are not JSON; dropped");
        return;
    }
    let frame: axum::extract::ws::Utf8Bytes =
        jsonrpc::notification(&n.method, &n.params_json).into();
    let deliver = |c: &Arc<Connection>| {
        if c.send(Frame::text(frame.clone())) {
            bump(&gw.counters.notifications);
        }
    };
    if n.connection_ids.is_empty() {
        gw.connections.for_each_authenticated(deliver);
    } else {
        for id in &n.connection_ids {
            if let Some(c) = gw.connections.get(id).filter(|c| c.peer().is_some()) {
                deliver(&c);
            }
        }
    }
}

/// True when `text` is one JSON value (empty counts as `{}`).
pub fn is_json(text: &str) -> bool {
    text.is_empty() || serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

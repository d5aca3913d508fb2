//! [`Chat`]: the hub of svc-chat. It holds the bindings (cached from the store), one running
//! platform connection per credential and never two per bot token (a second
//! `credentialsRef` holding a token already connected stays unconnected, with a
//! `gateway.event{error}`; bindings sharing a bot share its connection; an
//! inbound message goes to the binding whose `channelId` is that chat, else to the one
//! without a `channelId`), the per-binding state (`active` while its connection is up) and
//! `gateway.event` publishing. It is the [`Sink`] of every adapter; inbound handling is in
//! [`crate::inbound`], the way back in [`crate::relay`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{json, Value};
use snowpea_common::bus::BusHub;
use snowpea_common::home::Home;
use snowpea_proto::chat::v1::GatewayEventNotification;

use crate::binding::{self, Credential, Platform};
use crate::daemon::Daemon;
use crate::platform::{self, AdapterConfig, ConnKey, Handled, Inbound, Outbound, Sink};
use crate::relay::Relay;
use crate::store::{BindingRow, Store};

/// A running platform connection.
struct Conn {
    outbound: Arc<dyn Outbound>,
    task: tokio::task::JoinHandle<()>,
    up: bool,
    /// The credential and settings it was started with: a change restarts it.
    started_with: (Credential, AdapterConfig),
    /// The current outage was already reported as `gateway.event{error}`.
    reported: bool,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The hub.
pub struct Chat {
    /// The Snowpea home.
    pub home: Home,
    /// The chat database.
    pub store: Arc<Store>,
    /// The bus the gateway reads `gateway.event` from.
    pub bus: Arc<BusHub>,
    /// The daemon client.
    pub daemon: Daemon,
    /// Sessions, approvals and questions of the conversations.
    pub relay: Relay,
    /// Held while a binding is checked and added (`gateway.bind`, `gateway.sync`), so two
    /// concurrent identical binds cannot both pass the duplicate check.
    pub bind_lock: tokio::sync::Mutex<()>,
    bindings: RwLock<Vec<BindingRow>>,
    conns: Mutex<BTreeMap<ConnKey, Conn>>,
    me: std::sync::Weak<Chat>,
}

impl std::fmt::Debug for Chat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chat").finish_non_exhaustive()
    }
}

impl Chat {
    /// Builds the hub (no connection started yet; see [`Chat::restore`]).
    pub fn new(home: Home, store: Arc<Store>, bus: Arc<BusHub>, daemon: Daemon) -> Arc<Chat> {
        Arc::new_cyclic(|me| Chat {
            relay: Relay::new(store.clone()),
            home,
            store,
            bus,
            daemon,
            bind_lock: tokio::sync::Mutex::new(()),
            bindings: RwLock::new(Vec::new()),
            conns: Mutex::new(BTreeMap::new()),
            me: me.clone(),
        })
    }

    /// This hub as an `Arc` (it is only ever built by [`Chat::new`]).
    pub fn arc(&self) -> Option<Arc<Chat>> {
        self.me.upgrade()
    }

    /// Loads every stored binding and starts their connections (at start-up).
    pub async fn restore(self: &Arc<Self>) -> anyhow::Result<()> {
        let store = self.store.clone();
        let rows =
            snowpea_common::db::blocking("restore bindings", move || store.bindings()).await??;
        *self.bindings.write().unwrap_or_else(|e| e.into_inner()) = rows;
        self.reconcile_connections();
        Ok(())
    }

    /// The bindings, oldest first.
    pub fn bindings(&self) -> Vec<BindingRow> {
        self.bindings
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// One binding.
    pub fn binding(&self, id: &str) -> Option<BindingRow> {
        self.bindings().into_iter().find(|b| b.binding_id == id)
    }

    /// Adds a stored binding and starts (or joins) its connection.
    pub fn added(self: &Arc<Self>, row: BindingRow) {
        self.bindings
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(row);
        self.reconcile_connections();
    }

    /// Forgets a removed binding; its connection stops when no binding uses it.
    pub fn removed(self: &Arc<Self>, id: &str) {
        self.bindings
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|b| b.binding_id != id);
        self.relay.forget_binding(id);
        self.reconcile_connections();
    }

    /// `active` while the binding's platform connection is up, else `inactive`.
    pub fn state_of(&self, b: &BindingRow) -> &'static str {
        let key = key_of(b);
        match key {
            Some(k) => match self.conns.lock().unwrap_or_else(|e| e.into_inner()).get(&k) {
                Some(c) if c.up => "active",
                _ => "inactive",
            },
            None => "inactive",
        }
    }

    /// The sender of a binding's connection.
    pub fn outbound_of(&self, b: &BindingRow) -> Option<Arc<dyn Outbound>> {
        let key = key_of(b)?;
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .map(|c| c.outbound.clone())
    }

    /// Starts the connections bindings need (retrying ones whose credential could not be
    /// read before), restarts those whose credential or `settings.gateway.<platform>`
    /// (`baseUrl`, timeouts, …) changed since they started, and stops the ones none needs.
    pub fn reconcile_connections(self: &Arc<Self>) {
        let wanted: BTreeMap<ConnKey, BindingRow> = self
            .bindings()
            .into_iter()
            .filter_map(|b| key_of(&b).map(|k| (k, b)))
            .collect();
        if !wanted.is_empty() {
            self.daemon.ensure_started();
        }
        let settings =
            snowpea_common::settings::load_file(&self.home.settings_path()).unwrap_or(Value::Null);
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.retain(|k, _| wanted.contains_key(k));
        // One connection per bot token: running connections keep their token, so they go
        // first; a later key holding the same token is not connected (see below).
        let mut order: Vec<(ConnKey, BindingRow)> = wanted.into_iter().collect();
        order.sort_by_key(|(k, _)| !conns.contains_key(k));
        let mut tokens: BTreeMap<(Platform, String), ConnKey> = BTreeMap::new();
        for (key, b) in order {
            let config = AdapterConfig::from_settings(
                key.platform,
                settings
                    .get("gateway")
                    .and_then(|g| g.get(key.platform.key())),
            );
            match binding::resolve_credential(&self.home, key.platform, &key.credentials_ref) {
                Ok(cred) => {
                    let token = (key.platform, cred.token.clone());
                    if let Some(owner) = tokens.get(&token) {
                        // Two pollers on one Telegram token take each other's updates (and
                        // two Discord/Slack sessions get every event twice): only the first
                        // credentialsRef holding the token is connected.
                        conns.remove(&key);
                        let message = format!(
                            "not connected: credential {:?} is the same {} bot token as {:?}, \
                             which already has the connection; bind with credentialsRef {:?}",
                            binding::clip(&key.credentials_ref),
                            key.platform.key(),
                            binding::clip(&owner.credentials_ref),
                            binding::clip(&owner.credentials_ref)
                        );
                        tracing::warn!(binding = %b.binding_id, error = %message, "binding cannot start");
                        for x in self.bindings_of(&key) {
                            self.event(&x.binding_id, "error", json!({ "message": message }));
                        }
                        continue;
                    }
                    tokens.insert(token, key.clone());
                    let wanted_with = (cred, config);
                    if let Some(c) = conns.get(&key) {
                        if c.started_with == wanted_with {
                            continue;
                        }
                        tracing::info!(
                            platform = key.platform.key(),
                            "platform credential or settings changed: reconnecting"
                        );
                    }
                    let sink: Arc<dyn Sink> = self.clone();
                    let running = platform::start(
                        key.clone(),
                        wanted_with.0.clone(),
                        wanted_with.1.clone(),
                        sink,
                    );
                    // Replacing the old one drops (aborts) it.
                    conns.insert(
                        key,
                        Conn {
                            outbound: running.outbound,
                            task: running.task,
                            up: false,
                            started_with: wanted_with,
                            reported: false,
                        },
                    );
                }
                Err(e) => {
                    // Listed as inactive (a running connection stops: its credential is
                    // gone); the reason goes out as a gateway.event error.
                    conns.remove(&key);
                    let message = e.to_string();
                    tracing::warn!(binding = %b.binding_id, error = %message, "binding cannot start");
                    for x in self.bindings_of(&key) {
                        self.event(&x.binding_id, "error", json!({ "message": message }));
                    }
                }
            }
        }
    }

    /// The bindings served by connection `key`.
    pub fn bindings_of(&self, key: &ConnKey) -> Vec<BindingRow> {
        self.bindings()
            .into_iter()
            .filter(|b| key_of(b).as_ref() == Some(key))
            .collect()
    }

    /// The binding an inbound item of `channel` on `key` belongs to: the one limited to that
    /// chat, else the catch-all one (oldest first).
    pub fn route(&self, key: &ConnKey, channel: &str) -> Option<BindingRow> {
        let of = self.bindings_of(key);
        of.iter()
            .find(|b| b.channel_id.as_deref() == Some(channel))
            .or_else(|| of.iter().find(|b| b.channel_id.is_none()))
            .cloned()
    }

    /// Publishes `gateway.event {bindingId, kind, payload}` to every client.
    pub fn event(&self, binding_id: &str, kind: &str, payload: Value) {
        let note = GatewayEventNotification {
            binding_id: binding_id.to_owned(),
            kind: kind.to_owned(),
            payload: Some(snowpea_proto::wkt::to_struct(&payload)),
        };
        self.bus.publish(&note, Vec::new());
    }
}

/// The connection key of a binding (`None` for an unknown platform, which bind refuses).
pub fn key_of(b: &BindingRow) -> Option<ConnKey> {
    Some(ConnKey {
        platform: Platform::parse(&b.platform)?,
        credentials_ref: b.credentials_ref.clone(),
    })
}

#[tonic::async_trait]
impl Sink for Chat {
    async fn inbound(&self, conn: &ConnKey, item: Inbound) -> Handled {
        crate::inbound::handle(self, conn, item).await
    }

    /// Up: `connected` when it was down. Down after being up: `disconnected` with why.
    /// A failed attempt while already down: `error` with why, once per outage (the next one
    /// is reported only after the connection came up again), so a platform that cannot be
    /// reached for hours is one event, not one per retry.
    fn state(&self, conn: &ConnKey, up: bool, why: &str) {
        enum Report {
            Nothing,
            Changed,
            Outage,
        }
        let report = {
            let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
            match conns.get_mut(conn) {
                Some(c) if up => {
                    c.reported = false;
                    if c.up {
                        Report::Nothing
                    } else {
                        c.up = true;
                        Report::Changed
                    }
                }
                Some(c) => {
                    if c.up {
                        c.up = false;
                        Report::Changed
                    } else if !c.reported {
                        c.reported = true;
                        Report::Outage
                    } else {
                        Report::Nothing
                    }
                }
                None => Report::Nothing,
            }
        };
        match report {
            Report::Nothing => {}
            Report::Changed => {
                let kind = if up { "connected" } else { "disconnected" };
                tracing::info!(
                    platform = conn.platform.key(),
                    kind,
                    why,
                    "platform connection"
                );
                for b in self.bindings_of(conn) {
                    self.event(
                        &b.binding_id,
                        kind,
                        json!({ "platform": conn.platform.key(), "reason": why }),
                    );
                }
            }
            Report::Outage => {
                tracing::warn!(
                    platform = conn.platform.key(),
                    error = why,
                    "platform unreachable; retrying with backoff"
                );
                for b in self.bindings_of(conn) {
                    self.event(
                        &b.binding_id,
                        "error",
                        json!({ "platform": conn.platform.key(), "message": why }),
                    );
                }
            }
        }
    }

    /// While the connection is up every error is told; while it is down only the first of
    /// the outage (see [`Sink::state`]), so a refused token retried with backoff is one event.
    fn error(&self, conn: &ConnKey, message: &str) {
        {
            let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = conns.get_mut(conn) {
                if !c.up {
                    if c.reported {
                        return;
                    }
                    c.reported = true;
                }
            }
        }
        for b in self.bindings_of(conn) {
            self.event(
                &b.binding_id,
                "error",
                json!({ "platform": conn.platform.key(), "message": message }),
            );
        }
    }

    async fn load_cursor(&self, conn: &ConnKey) -> Option<Value> {
        let store = self.store.clone();
        let (p, r) = (conn.platform.key(), conn.credentials_ref.clone());
        snowpea_common::db::blocking("load cursor", move || store.cursor(p, &r))
            .await
            .ok()
            .and_then(Result::ok)
            .flatten()
    }

    async fn save_cursor(&self, conn: &ConnKey, cursor: Value) {
        let store = self.store.clone();
        let (p, r) = (conn.platform.key(), conn.credentials_ref.clone());
        match snowpea_common::db::blocking("save cursor", move || store.set_cursor(p, &r, &cursor))
            .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %format!("{e:#}"), "saving a cursor failed"),
            Err(e) => tracing::error!(error = %e, "saving a cursor failed"),
        }
    }

    async fn seen(&self, conn: &ConnKey, key: &str) -> bool {
        let store = self.store.clone();
        let (p, r, k) = (
            conn.platform.key(),
            conn.credentials_ref.clone(),
            key.to_owned(),
        );
        snowpea_common::db::blocking("seen", move || store.seen(p, &r, &k))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(false)
    }

    async fn mark_seen(&self, conn: &ConnKey, key: &str) {
        let store = self.store.clone();
        let (p, r, k) = (
            conn.platform.key(),
            conn.credentials_ref.clone(),
            key.to_owned(),
        );
        if let Ok(Err(e)) =
            snowpea_common::db::blocking("mark seen", move || store.mark_seen(p, &r, &k)).await
        {
            tracing::error!(error = %format!("{e:#}"), "recording a handled item failed");
        }
    }
}

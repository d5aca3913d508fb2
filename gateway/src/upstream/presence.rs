//! Which connections the services should know (DESIGN.md §4): connects and disconnects
//! arrive as [`Change`]s on the presence stream ([`Presence::announce`]); one task
//! ([`PresenceFeed::run`]) keeps the set of live connections and sends each change to
//! every service as a `SyncConnections` delta, and each (re)subscription sends the full
//! set ([`send_full_set`]). A delta is built from the set as it is when the service's
//! sync lock is taken, so whichever of two racing deltas goes last carries the latest state.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use snowpea_proto::rpc::v1::{ConnectionInfo, ConnectionSet};
use tokio::sync::{mpsc, oneshot};

use super::bus::sync_connections;
use super::services::{Service, Services};

/// One connection's new state.
#[derive(Debug, Clone)]
pub enum Change {
    /// Authenticated, with its system.hello facts.
    Live(ConnectionInfo),
    /// Closed, or no longer authenticated (by connection id).
    Closed(String),
}

#[derive(Debug)]
struct Event {
    change: Change,
    done: oneshot::Sender<()>,
}

/// The connections the services should know, by connection id.
#[derive(Debug, Default)]
pub struct Live {
    map: Mutex<BTreeMap<String, ConnectionInfo>>,
}

impl Live {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ConnectionInfo>> {
        // Plain inserts and removals: a panic elsewhere cannot leave the map inconsistent.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn apply(&self, change: &Change) -> String {
        let mut map = self.lock();
        match change {
            Change::Live(info) => {
                map.insert(info.connection_id.clone(), info.clone());
                info.connection_id.clone()
            }
            Change::Closed(id) => {
                map.remove(id);
                id.clone()
            }
        }
    }

    /// The delta that tells a service the current state of connection `id`.
    fn delta(&self, id: &str) -> ConnectionSet {
        match self.lock().get(id) {
            Some(info) => ConnectionSet {
                full: false,
                connections: vec![info.clone()],
                closed: vec![],
            },
            None => ConnectionSet {
                full: false,
                connections: vec![],
                closed: vec![id.to_owned()],
            },
        }
    }

    fn full_set(&self) -> ConnectionSet {
        ConnectionSet {
            full: true,
            connections: self.lock().values().cloned().collect(),
            closed: vec![],
        }
    }
}

/// The sending end of the presence stream (cheap to clone).
#[derive(Debug, Clone)]
pub struct Presence {
    tx: mpsc::UnboundedSender<Event>,
}

/// The receiving end: [`PresenceFeed::run`] consumes it.
#[derive(Debug)]
pub struct PresenceFeed {
    rx: mpsc::UnboundedReceiver<Event>,
    live: Arc<Live>,
}

/// Resolves once every service was told about one change (or failed to hear it).
#[derive(Debug)]
pub struct Announced(Option<oneshot::Receiver<()>>);

impl Announced {
    /// Waits at most `within`; false when the services were not all told in time.
    pub async fn wait(self, within: Duration) -> bool {
        let Some(rx) = self.0 else {
            return false;
        };
        matches!(tokio::time::timeout(within, rx).await, Ok(Ok(())))
    }
}

impl Presence {
    /// A new presence stream.
    pub fn channel() -> (Presence, PresenceFeed) {
        let (tx, rx) = mpsc::unbounded_channel();
        let live = Arc::new(Live::default());
        (Presence { tx }, PresenceFeed { rx, live })
    }

    /// Queues a change (never blocks, so it may be called under a connection's lock,
    /// which keeps one connection's changes in order).
    pub fn announce(&self, change: Change) -> Announced {
        let (done, rx) = oneshot::channel();
        match self.tx.send(Event { change, done }) {
            Ok(()) => Announced(Some(rx)),
            Err(_) => Announced(None),
        }
    }
}

impl PresenceFeed {
    /// The live set, for the full sets sent on (re)subscription.
    pub fn live(&self) -> Arc<Live> {
        self.live.clone()
    }

    /// Applies every change in arrival order and sends it to every service, until the
    /// stream ends. Deltas of different changes go out concurrently; per service they
    /// are serialised by the service's sync lock.
    pub async fn run(mut self, services: Arc<Services>) {
        while let Some(Event { change, done }) = self.rx.recv().await {
            let id = self.live.apply(&change);
            let (services, live) = (services.clone(), self.live.clone());
            tokio::spawn(async move {
                let calls = services.iter().map(|svc| {
                    let (live, id) = (&live, &id);
                    async move {
                        let _order = svc.sync.lock().await;
                        sync_connections(svc, live.delta(id)).await;
                    }
                });
                futures::future::join_all(calls).await;
                let _ = done.send(());
            });
        }
    }
}

/// Sends the complete set of live connections to one service (after it (re)subscribed:
/// it may have restarted and know none).
pub async fn send_full_set(svc: &Service, live: &Live) {
    let _order = svc.sync.lock().await;
    sync_connections(svc, live.full_set()).await;
}

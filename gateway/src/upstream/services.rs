//! The services of the suite (`--services`): one lazily connecting gRPC channel each and
//! the capabilities each last reported (DESIGN.md §4).

use std::sync::{Arc, RwLock};

use snowpea_common::client::unix_channel;
use snowpea_common::home::Home;
use tonic::transport::Channel;

/// One service of the suite.
#[derive(Debug)]
pub struct Service {
    /// Its name, e.g. `session` (socket `run/<name>.sock`).
    pub name: String,
    /// Lazily connecting channel to its socket, shared by every call.
    pub channel: Channel,
    capabilities: RwLock<Vec<String>>,
    /// Serialises SyncConnections to this service so deltas and full sets arrive in order.
    pub(super) sync: tokio::sync::Mutex<()>,
}

impl Service {
    /// Replaces what the service reported in `ServiceBus.Capabilities`.
    pub(super) fn set_capabilities(&self, caps: Vec<String>) {
        if let Ok(mut c) = self.capabilities.write() {
            *c = caps;
        }
    }
}

/// Every service of the suite, in `--services` order.
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

    /// Every service, in `--services` order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Service>> {
        self.list.iter()
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
}

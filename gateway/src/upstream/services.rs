//! The services of the suite (`--services`): one lazily connecting gRPC channel each and
//! the capabilities each last reported (DESIGN.md §4).

use std::sync::{Arc, RwLock};
use std::time::Instant;

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
    /// True once the service reported its capabilities (its first Subscribe succeeded).
    reported: tokio::sync::watch::Sender<bool>,
    /// Serialises SyncConnections to this service so deltas and full sets arrive in order.
    pub(super) sync: tokio::sync::Mutex<()>,
}

impl Service {
    /// Replaces what the service reported in `ServiceBus.Capabilities`.
    pub(super) fn set_capabilities(&self, caps: Vec<String>) {
        if let Ok(mut c) = self.capabilities.write() {
            *c = caps;
        }
        self.reported.send_replace(true);
    }
}

/// Every service of the suite, in `--services` order.
#[derive(Debug, Default)]
pub struct Services {
    list: Vec<Arc<Service>>,
    /// Until when [`Services::first_reports`] waits for services that have not reported
    /// yet (`None`: never waits).
    first_reports_until: Option<Instant>,
}

impl Services {
    /// Channels for `names` (duplicates ignored); nothing connects until used.
    /// `first_reports_until`: the services start together with this gateway (issue 14),
    /// so until then [`Services::first_reports`] waits for each one's first report.
    pub fn new(home: &Home, names: &[String], first_reports_until: Option<Instant>) -> Self {
        let mut list: Vec<Arc<Service>> = Vec::new();
        for name in names {
            if list.iter().any(|s| &s.name == name) {
                continue;
            }
            list.push(Arc::new(Service {
                name: name.clone(),
                channel: unix_channel(home.socket(name)),
                capabilities: RwLock::new(Vec::new()),
                reported: tokio::sync::watch::Sender::new(false),
                sync: tokio::sync::Mutex::new(()),
            }));
        }
        Services {
            list,
            first_reports_until,
        }
    }

    /// Waits until every service reported its capabilities once, but never past the
    /// deadline given to [`Services::new`] (returns at once without one, or once it has
    /// passed). `system.hello` calls it so a client connecting while the services are
    /// still starting gets the same capabilities as one connecting after.
    pub async fn first_reports(&self) {
        let Some(until) = self.first_reports_until else {
            return;
        };
        let until = tokio::time::Instant::from_std(until);
        for svc in &self.list {
            let mut reported = svc.reported.subscribe();
            if tokio::time::timeout_at(until, reported.wait_for(|r| *r))
                .await
                .is_err()
            {
                return;
            }
        }
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

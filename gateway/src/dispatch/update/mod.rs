//! `system.checkUpdate` and `system.update` (spec "system.checkUpdate", "system.update",
//! "system.updateProgress"; issue 15), answered by the gateway like every `system.*` method:
//! they concern the whole installed suite rather than one service, need no service to be
//! running, and the notification goes to every connection the gateway holds.
//!
//! * [`check`]: the newest published release from the crates.io sparse index of the
//!   `snowpea` package (or `updates.indexUrl`), strictly-newer semver comparison, cached 24 h
//!   in `$SNOWPEA_HOME/update-check.json`; never an RPC error.
//! * [`run`]: the upgrade in a detached subprocess (its own process group, so stopping the
//!   suite does not stop it), output in `$SNOWPEA_HOME/logs/update.log`, progress as
//!   `system.updateProgress{phase: started | done | failed}`, `restartRequired` in
//!   `system.info` once it succeeded; never two at once.
//!
//! Settings read (global `settings.json`): `updates.indexUrl`, `updates.command` (the
//! installer argv, e.g. for a packaged install or a test's fake installer).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use snowpea_common::home::Home;
use snowpea_proto::typed::Notification;

use crate::wire::connection::Frame;
use crate::wire::counters::{bump, Counters};
use crate::wire::jsonrpc;
use crate::wire::registry::Registry;

pub mod check;
pub mod run;

/// The update state of this gateway: whether an upgrade runs or finished, and where the
/// progress notifications go.
#[derive(Debug, Clone)]
pub struct Updates {
    home: Home,
    connections: Arc<Registry>,
    counters: Arc<Counters>,
    running: Arc<Mutex<Option<u32>>>,
    restart_required: Arc<AtomicBool>,
}

impl Updates {
    /// The state of `home`, notifying `connections`.
    pub fn new(home: Home, connections: Arc<Registry>, counters: Arc<Counters>) -> Self {
        Updates {
            home,
            connections,
            counters,
            running: Arc::new(Mutex::new(None)),
            restart_required: Arc::new(AtomicBool::new(false)),
        }
    }

    /// True once an upgrade finished successfully (the daemon runs the old code until it
    /// restarts).
    pub fn restart_required(&self) -> bool {
        self.restart_required.load(Ordering::SeqCst)
    }

    /// The home.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// Sends `params` to every authenticated connection.
    fn broadcast<N: Notification>(&self, params: &N) {
        let frame: axum::extract::ws::Utf8Bytes =
            jsonrpc::notification(N::METHOD, &params.to_params().to_string()).into();
        self.connections.for_each_authenticated(|c| {
            if c.send(Frame::text(frame.clone())) {
                bump(&self.counters.notifications);
            }
        });
    }
}

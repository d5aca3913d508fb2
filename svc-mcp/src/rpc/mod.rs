//! gRPC services of svc-mcp, one file per service: [`mcp`] (`McpService`, the `mcp.*`
//! JSON-RPC methods) and [`internal`] (`McpInternalService`, tools for svc-session). The
//! span of each call is opened by the shared call layer of `snowpea_common::service::serve`.

use std::sync::Arc;

use tokio::sync::Mutex;

use crate::host::Host;
use crate::sessions::SessionLookup;

pub mod internal;
pub mod mcp;

/// State shared by the services.
#[derive(Debug)]
pub struct App {
    /// The hosted servers.
    pub host: Host,
    /// Resolves `sessionId` → workdir.
    pub sessions: SessionLookup,
    /// Serialises read-modify-write of config files.
    pub write_lock: Mutex<()>,
}

impl App {
    /// The shared state.
    pub fn new(host: Host) -> Arc<App> {
        let sessions = SessionLookup::new(host.home().socket("session"));
        Arc::new(App {
            host,
            sessions,
            write_lock: Mutex::new(()),
        })
    }
}

//! Reaching the suite: start it when it is not running (the supervisor's own code path,
//! handed in as a [`SuiteStarter`]), then connect with the Rust SDK as an `acp` client that
//! reconnects (re-reading `daemon.json`, so a restarted suite on a new port is found) and
//! resumes its sessions (`session.resume` from the last seq it saw).
//!
//! The daemon token is read from `<home>/daemon.json` by the SDK; it is never logged and
//! never passed on a command line.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use snowpea_sdk::{Client, ConnectOptions, ReconnectPolicy};

use crate::BoxFuture;

/// Starts the suite on a home unless it runs already; `Err` carries the reason for humans
/// (it becomes the message of the `initialize` error). `snowpea acp` passes the
/// supervisor's `start_suite`.
pub type SuiteStarter = Arc<dyn Fn(&Path) -> BoxFuture<Result<(), String>> + Send + Sync>;

/// Timeout of one native call (the SDK's default is 30 s; a call that waits for a
/// reconnect counts against it).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts the suite if needed and connects; the error is for humans.
pub async fn connect(home: &Path, starter: &SuiteStarter) -> Result<Arc<Client>, String> {
    starter(home)
        .await
        .map_err(|e| format!("the Snowpea daemon is unavailable: {e}"))?;
    let opts = ConnectOptions::from_home(home)
        .map_err(|e| format!("the Snowpea daemon is unavailable: {e}"))?
        .with_client_id(format!("acp-{}", std::process::id()))
        .with_client_kind("acp")
        .with_call_timeout(CALL_TIMEOUT)
        // A daemon restart mid-session: keep trying (the editor sees a pause), resuming the
        // tracked sessions once it is back.
        .with_reconnect(ReconnectPolicy::default());
    let client = Client::connect(opts)
        .await
        .map_err(|e| format!("the Snowpea daemon is unavailable: {e}"))?;
    Ok(Arc::new(client))
}

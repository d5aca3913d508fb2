//! Reaching the suite: start it when it is not running (the supervisor's own code path,
//! handed in as a [`SuiteStarter`]), then connect with the Rust SDK as an `mcp` client that
//! reconnects (re-reading `daemon.json`, so a restarted suite on a new port is found) and
//! resumes the sessions it follows.
//!
//! The daemon token is read from `<home>/daemon.json` by the SDK; it is never logged and
//! never passed on a command line.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use snowpea_sdk::{Client, ConnectOptions, ReconnectPolicy};

use crate::BoxFuture;

/// Starts the suite on a home unless it runs already; `Err` carries the reason for humans
/// (it becomes the text of the tool error). `snowpea mcp serve` passes the supervisor's
/// `start_suite`.
pub type SuiteStarter = Arc<dyn Fn(&Path) -> BoxFuture<Result<(), String>> + Send + Sync>;

/// Timeout of one native call (the SDK's default is 30 s; a call that waits for a
/// reconnect counts against it).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The `clientKind` this front end announces in `system.hello`.
pub const CLIENT_KIND: &str = "mcp";

/// Starts the suite if needed and connects; the error is for humans. `role` tells the
/// connections of one process apart in the `clientId` (`mcp-<pid>-<role>`): `main` carries
/// the turns and their approvals, `reader` the transcript reads (a `session.resume` on the
/// main connection would move the SDK's per-session delivery mark under a turn being
/// followed there, and live events of that turn could be dropped as already seen).
pub async fn connect(
    home: &Path,
    starter: &SuiteStarter,
    role: &str,
) -> Result<Arc<Client>, String> {
    let unavailable = |e: &dyn std::fmt::Display| format!("the Snowpea daemon is unavailable: {e}");
    starter(home).await.map_err(|e| unavailable(&e))?;
    let opts = ConnectOptions::from_home(home)
        .map_err(|e| unavailable(&e))?
        .with_client_id(format!("mcp-{}-{role}", std::process::id()))
        .with_client_kind(CLIENT_KIND)
        .with_call_timeout(CALL_TIMEOUT)
        // A daemon restart mid-turn: keep trying (the host sees a pause), resuming the
        // tracked sessions once it is back.
        .with_reconnect(ReconnectPolicy::default());
    let client = Client::connect(opts).await.map_err(|e| unavailable(&e))?;
    Ok(Arc::new(client))
}

//! Reaching the suite: start it when it is not running (the supervisor's own code path,
//! handed in as a [`SuiteStarter`]), then connect with the Rust SDK as an `mcp` client that
//! reconnects (re-reading `daemon.json`, so a restarted suite on a new port is found) and
//! resumes the sessions it follows.
//!
//! The daemon token is read from `<home>/daemon.json` by the SDK; it is never logged and
//! never passed on a command line.
//!
//! Diagnostics ([`diag`]) are single lines on stderr (hosts show a server's stderr in their
//! MCP log): when this server starts the suite, when it cannot reach it, and when it loses
//! the gateway and when it is back ([`watch_connection`]). stdout carries only MCP.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use snowpea_sdk::{Client, ConnectOptions, ConnectionState, ReconnectPolicy};

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
    // The starter answers the same whether the suite ran already or it started it; a
    // `daemon.json` written meanwhile tells them apart.
    let before = std::fs::read(home.join("daemon.json")).ok();
    if let Err(e) = starter(home).await {
        let e = unavailable(&e);
        diag(&e);
        return Err(e);
    }
    let after = std::fs::read(home.join("daemon.json")).ok();
    if after.is_some() && after != before && !STARTED_SAID.swap(true, Ordering::SeqCst) {
        diag(&format!(
            "started the Snowpea suite in {} (it keeps running after this server exits; `snowpea supervisor stop` stops it)",
            home.display()
        ));
    }
    let opts = ConnectOptions::from_home(home)
        .map_err(|e| unavailable(&e))?
        .with_client_id(format!("mcp-{}-{role}", std::process::id()))
        .with_client_kind(CLIENT_KIND)
        .with_call_timeout(CALL_TIMEOUT)
        // A daemon restart mid-turn: keep trying (the host sees a pause), resuming the
        // tracked sessions once it is back.
        .with_reconnect(ReconnectPolicy::default());
    let client = Client::connect(opts).await.map_err(|e| {
        let e = unavailable(&e);
        diag(&e);
        e
    })?;
    Ok(Arc::new(client))
}

/// Set once "started the Snowpea suite" was said (two connections may race to start it).
static STARTED_SAID: AtomicBool = AtomicBool::new(false);

/// Writes one diagnostic line to stderr (`snowpea mcp serve: <line>`); never stdout.
pub fn diag(line: &str) {
    eprintln!("snowpea mcp serve: {line}");
}

/// How often [`watch_connection`] looks at the connection.
pub const WATCH_EVERY: Duration = Duration::from_millis(200);

/// Says on stderr when `client` loses the gateway and when it is connected again (while the
/// client lives).
pub fn watch_connection(client: &Arc<Client>) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(client);
    let mut generation = client.generation();
    let mut lost = false;
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            let Some(client) = weak.upgrade() else { return };
            let (state, now) = (client.connection_state(), client.generation());
            drop(client);
            if state == ConnectionState::Closed {
                return;
            }
            if !lost && (state == ConnectionState::Reconnecting || now != generation) {
                lost = true;
                diag("lost the connection to the Snowpea gateway; reconnecting (tool calls wait for it)");
            }
            if lost && state == ConnectionState::Connected && now != generation {
                lost = false;
                generation = now;
                diag("reconnected to the Snowpea gateway");
            }
        }
    })
}

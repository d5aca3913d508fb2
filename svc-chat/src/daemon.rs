//! svc-chat's connection to the daemon: a protocol client of the gateway (the Rust SDK over
//! `ws://127.0.0.1:<port>/ws`, port and token from `$SNOWPEA_HOME/daemon.json`), with
//! `clientKind: "gateway"` and the stable `clientId` [`CLIENT_ID`].
//!
//! Why a protocol client and not svc-session's internal rpc: a chat conversation is an
//! interactive surface. Being the sessions' origin connection gives svc-chat exactly what a
//! surface gets — `approval.request` / `question.request` sent to it, `session.event` for every
//! event, and after a restart the same clientId re-binds the sessions it created so pending
//! approvals are sent to it again — with no new svc-session code. Every call is bounded; a
//! svc-chat crash only closes one client connection (a turn never waits for svc-chat: its
//! approvals time out as usual).
//!
//! The gateway starts after the services, so the client connects in the background once the
//! first binding exists, retrying with backoff, and reconnects (resuming tracked sessions) when
//! the suite restarts.

use std::sync::Arc;
use std::time::Duration;

use snowpea_sdk::{Client, ConnectOptions, ReconnectPolicy};
use tokio::sync::watch;

/// `clientId` of svc-chat's connection (stable across restarts, so pending approvals of its
/// sessions are re-sent to the new connection).
pub const CLIENT_ID: &str = "snowpea-svc-chat";
/// `clientKind` of svc-chat's connection.
pub const CLIENT_KIND: &str = "gateway";
/// Deadline of one call to the daemon.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// What starts the connection (taken by the first [`Daemon::ensure_started`]).
type Starter = (std::path::PathBuf, Box<dyn FnOnce(Arc<Client>) + Send>);

/// The lazily connected daemon client.
#[derive(Clone)]
pub struct Daemon {
    rx: watch::Receiver<Option<Arc<Client>>>,
    tx: Arc<watch::Sender<Option<Arc<Client>>>>,
    starter: Arc<std::sync::Mutex<Option<Starter>>>,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("connected", &self.rx.borrow().is_some())
            .finish()
    }
}

impl Daemon {
    /// A daemon client for `home`, not connecting yet: [`Daemon::ensure_started`] starts it
    /// (when the first binding exists, so a suite without bindings has no svc-chat client).
    /// `on_connect` runs once with the client when the first connection is up (register
    /// handlers, resume sessions).
    pub fn new(
        home: std::path::PathBuf,
        on_connect: impl FnOnce(Arc<Client>) + Send + 'static,
    ) -> Daemon {
        let (tx, rx) = watch::channel(None);
        Daemon {
            rx,
            tx: Arc::new(tx),
            starter: Arc::new(std::sync::Mutex::new(Some((home, Box::new(on_connect))))),
        }
    }

    /// Starts connecting in the background (once; later calls do nothing), retrying every
    /// 0.2 s growing to 1 s until the gateway answers.
    pub fn ensure_started(&self) {
        let Some((home, on_connect)) = self
            .starter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let mut delay = Duration::from_millis(200);
            loop {
                match Self::connect_once(&home).await {
                    Ok(client) => {
                        let client = Arc::new(client);
                        tracing::info!("connected to the daemon");
                        on_connect(client.clone());
                        let _ = tx.send(Some(client));
                        return;
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "daemon not reachable yet");
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(1));
                    }
                }
            }
        });
    }

    async fn connect_once(home: &std::path::Path) -> Result<Client, snowpea_sdk::Error> {
        let mut opts = ConnectOptions::from_home(home)?
            .with_client_id(CLIENT_ID)
            .with_client_kind(CLIENT_KIND)
            .with_call_timeout(CALL_TIMEOUT)
            .with_reconnect(ReconnectPolicy::default());
        opts.client_version = env!("CARGO_PKG_VERSION").to_owned();
        Client::connect(opts).await
    }

    /// The client, once connected.
    pub fn client(&self) -> Option<Arc<Client>> {
        self.rx.borrow().clone()
    }
}

//! How to reach the daemon: [`ConnectOptions`], the reconnect policy, and `daemon.json`
//! (protocol § Transport: `$SNOWPEA_HOME/daemon.json` = `{port, pid, token, startedAt,
//! protocolVersion}`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::Rng;
use serde::Deserialize;

use crate::Error;

/// The protocol version this SDK was written against.
pub const PROTOCOL_VERSION: &str = "1.25.0";
/// The WebSocket path of the daemon.
pub const WS_PATH: &str = "/ws";

/// Everything [`crate::Client::connect`] needs.
///
/// Build one with [`ConnectOptions::new`], [`ConnectOptions::from_url`] or
/// [`ConnectOptions::from_home`], then adjust fields (all public) or use the `with_*` helpers.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Full WebSocket URL; when set, `host`, `port` and `path` are ignored.
    pub url: Option<String>,
    /// Host to connect to (default `127.0.0.1`).
    pub host: String,
    /// TCP port of the gateway.
    pub port: u16,
    /// WebSocket path (default `/ws`).
    pub path: String,
    /// The daemon token sent in `system.hello`.
    pub token: String,
    /// When set, every connect and reconnect re-reads `<home>/daemon.json` for the port and
    /// token (they may change when the suite restarts), overriding `port` and `token`.
    pub home: Option<PathBuf>,
    /// `clientVersion` sent in `system.hello` (default: this crate's version).
    pub client_version: String,
    /// `protocolVersion` sent in `system.hello` (default [`PROTOCOL_VERSION`]).
    pub protocol_version: String,
    /// `clientId` sent in `system.hello`: stable across restarts of this client install. Set it
    /// when reconnecting should re-bind the sessions (and their approvals) this client started.
    pub client_id: Option<String>,
    /// `clientKind` sent in `system.hello`, e.g. `"cli"`.
    pub client_kind: Option<String>,
    /// `instanceId` sent in `system.hello`: id of this run of the client.
    pub instance_id: Option<String>,
    /// `keepAlive` sent in `system.hello` when true (keeps the daemon from idle shutdown).
    pub keep_alive: bool,
    /// Default timeout of [`crate::Client::call`]; it includes waiting for a reconnect.
    pub call_timeout: Duration,
    /// Timeout of one connect attempt: TCP + WebSocket upgrade + `system.hello`. It also bounds
    /// each WebSocket write and the close handshake.
    pub connect_timeout: Duration,
    /// Interval of WebSocket pings; a connection on which nothing arrived for three intervals
    /// is considered dead. `None` disables pings (a dead peer is then noticed only by TCP).
    pub ping_interval: Option<Duration>,
    /// Capacity of the notification broadcast channel; a subscriber that falls further behind
    /// than this loses the oldest notifications (see [`crate::Client::subscribe`]).
    pub notification_buffer: usize,
    /// Reconnect (and resume tracked sessions) when the connection drops; `None` = a dropped
    /// connection closes the client.
    pub reconnect: Option<ReconnectPolicy>,
}

impl ConnectOptions {
    /// Options for `ws://127.0.0.1:<port>/ws` with `token`, everything else at its default.
    pub fn new(port: u16, token: impl Into<String>) -> Self {
        ConnectOptions {
            url: None,
            host: "127.0.0.1".to_owned(),
            port,
            path: WS_PATH.to_owned(),
            token: token.into(),
            home: None,
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            protocol_version: PROTOCOL_VERSION.to_owned(),
            client_id: None,
            client_kind: None,
            instance_id: None,
            keep_alive: false,
            call_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            ping_interval: Some(Duration::from_secs(15)),
            notification_buffer: 4096,
            reconnect: None,
        }
    }

    /// Options for an explicit WebSocket URL (e.g. `ws://127.0.0.1:4100/ws`).
    pub fn from_url(url: impl Into<String>, token: impl Into<String>) -> Self {
        ConnectOptions {
            url: Some(url.into()),
            ..ConnectOptions::new(0, token)
        }
    }

    /// Options from `<home>/daemon.json`; `home` is remembered so that reconnects re-read it.
    pub fn from_home(home: &Path) -> Result<Self, Error> {
        let info = DaemonInfo::read(home)?;
        Ok(ConnectOptions {
            home: Some(home.to_owned()),
            ..info.connect_options()
        })
    }

    /// Sets [`ConnectOptions::reconnect`].
    pub fn with_reconnect(mut self, policy: ReconnectPolicy) -> Self {
        self.reconnect = Some(policy);
        self
    }

    /// Sets [`ConnectOptions::call_timeout`].
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Sets [`ConnectOptions::client_version`].
    pub fn with_client_version(mut self, version: impl Into<String>) -> Self {
        self.client_version = version.into();
        self
    }

    /// Sets [`ConnectOptions::client_id`].
    pub fn with_client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = Some(id.into());
        self
    }

    /// Sets [`ConnectOptions::client_kind`].
    pub fn with_client_kind(mut self, kind: impl Into<String>) -> Self {
        self.client_kind = Some(kind.into());
        self
    }

    /// The WebSocket URL these options point at (without re-reading `daemon.json`).
    pub fn ws_url(&self) -> String {
        match &self.url {
            Some(url) => url.clone(),
            None => format!("ws://{}:{}{}", self.host, self.port, self.path),
        }
    }

    /// URL and token for the next connect attempt, re-reading `daemon.json` when `home` is set.
    pub(crate) fn resolve(&self) -> Result<(String, String), Error> {
        match &self.home {
            Some(home) => {
                let info = DaemonInfo::read(home)?;
                let resolved = ConnectOptions {
                    port: info.port,
                    ..self.clone()
                };
                Ok((resolved.ws_url(), info.token))
            }
            None => Ok((self.ws_url(), self.token.clone())),
        }
    }
}

/// How to retry after the connection drops: jittered exponential backoff.
///
/// The n-th retry waits a random time between half and all of
/// `min(initial_delay * multiplier^n, max_delay)`.
#[derive(Debug, Clone)]
pub struct ReconnectPolicy {
    /// Delay before the first retry (default 100 ms).
    pub initial_delay: Duration,
    /// Upper bound of a delay (default 5 s).
    pub max_delay: Duration,
    /// Growth factor per failed attempt (default 2).
    pub multiplier: f64,
    /// Give up (and close the client) after this many failed attempts in a row; `None`
    /// retries forever (default).
    pub max_attempts: Option<u32>,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        ReconnectPolicy {
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            multiplier: 2.0,
            max_attempts: None,
        }
    }
}

impl ReconnectPolicy {
    /// The jittered delay before retry number `attempt` (0-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = self.multiplier.max(1.0).powi(attempt.min(64) as i32);
        let base = (self.initial_delay.as_secs_f64() * exp).min(self.max_delay.as_secs_f64());
        let factor: f64 = rand::rng().random_range(0.5..=1.0);
        Duration::from_secs_f64(base * factor)
    }
}

/// The contents of `$SNOWPEA_HOME/daemon.json`, written by the gateway once it listens.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DaemonInfo {
    /// TCP port the gateway listens on (127.0.0.1 only).
    pub port: u16,
    /// Process id of the supervisor (killing it stops the suite).
    #[serde(default)]
    pub pid: u32,
    /// The daemon token for `system.hello`.
    pub token: String,
    /// UTC ISO-8601 start time.
    #[serde(default)]
    pub started_at: String,
    /// Protocol version the daemon speaks.
    #[serde(default)]
    pub protocol_version: String,
}

impl DaemonInfo {
    /// Where `daemon.json` lives under `home`.
    pub fn path(home: &Path) -> PathBuf {
        home.join("daemon.json")
    }

    /// Reads and parses `<home>/daemon.json`; a missing or unreadable file is
    /// [`Error::Connect`] (the daemon is not running there).
    pub fn read(home: &Path) -> Result<Self, Error> {
        let path = Self::path(home);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::Connect(format!("reading {}: {e}", path.display())))?;
        serde_json::from_str(&text)
            .map_err(|e| Error::Connect(format!("parsing {}: {e}", path.display())))
    }

    /// Connect options for this daemon (port and token set, nothing re-read on reconnect).
    pub fn connect_options(&self) -> ConnectOptions {
        ConnectOptions::new(self.port, self.token.clone())
    }
}

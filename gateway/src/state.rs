//! The gateway's shared state: configuration read once at start-up, the service
//! registry, the route table, the live connections and the counters. One `Arc<Gateway>`
//! is handed to every connection and every service subscription.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use snowpea_common::home::Home;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::counters::Counters;
use crate::router::Routes;
use crate::services::Services;
use crate::ws::registry::Registry;

/// Limits and waits; defaults suit production, tests shorten some through env vars.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Frames queued per connection before it is closed as too slow.
    pub outbound_queue: usize,
    /// Largest WebSocket message accepted from a client (bytes).
    pub max_message: usize,
    /// Largest WebSocket frame accepted from a client (bytes).
    pub max_frame: usize,
    /// How long a call waits for a service that is down (a restart in progress).
    pub unavailable_wait: Duration,
    /// Longest a forwarded call may take.
    pub call_timeout: Duration,
    /// Requests in flight per connection before the gateway stops reading from it.
    pub max_in_flight: usize,
}

impl Limits {
    /// Defaults, with `SNOWPEA_UNAVAILABLE_WAIT_MS`, `SNOWPEA_CALL_TIMEOUT_MS` and
    /// `SNOWPEA_GATEWAY_QUEUE` applied when set.
    pub fn from_env() -> Self {
        fn env_u64(name: &str) -> Option<u64> {
            std::env::var(name).ok()?.trim().parse().ok()
        }
        Limits {
            outbound_queue: env_u64("SNOWPEA_GATEWAY_QUEUE")
                .map(|n| n.clamp(1, 1 << 20) as usize)
                .unwrap_or(8192),
            max_message: 16 << 20,
            max_frame: 16 << 20,
            unavailable_wait: Duration::from_millis(
                env_u64("SNOWPEA_UNAVAILABLE_WAIT_MS").unwrap_or(5_000),
            ),
            call_timeout: Duration::from_millis(
                env_u64("SNOWPEA_CALL_TIMEOUT_MS").unwrap_or(600_000),
            ),
            max_in_flight: 1024,
        }
    }
}

/// Everything the gateway process shares.
pub struct Gateway {
    /// The Snowpea home.
    pub home: Home,
    /// The daemon token from `$SNOWPEA_HOME/token`; compared in constant time, never logged.
    token: String,
    /// TCP port the gateway listens on.
    pub port: u16,
    /// UTC ISO-8601 time this gateway started.
    pub started_at: String,
    /// Random id of this gateway process (Subscribe's `gateway_id`, logs).
    pub instance: String,
    /// Limits and waits.
    pub limits: Limits,
    /// `system.info` counters.
    pub counters: Counters,
    /// The services of the suite.
    pub services: Services,
    /// JSON-RPC method → where it goes.
    pub routes: Routes,
    /// Live WebSocket connections.
    pub connections: Registry,
    /// Cancelled when the gateway should stop (SIGTERM or a local system.shutdown).
    pub shutdown: CancellationToken,
    /// Tracks connection tasks so shutdown can wait for their close frames.
    pub tasks: TaskTracker,
    next_callback_id: AtomicU64,
}

impl Gateway {
    /// Builds the state for `services` (the suite's service names).
    pub fn new(home: Home, token: String, port: u16, services: &[String], limits: Limits) -> Self {
        let services = Services::new(&home, services);
        let routes = Routes::build(&services);
        Gateway {
            home,
            token,
            port,
            started_at: snowpea_common::time::now_iso(),
            instance: snowpea_common::ids::random_hex(4),
            limits,
            counters: Counters::default(),
            services,
            routes,
            connections: Registry::default(),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
            next_callback_id: AtomicU64::new(1),
        }
    }

    /// The daemon token (for `system.hello` only).
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// A fresh id for a server→client request: `srv-<n>`, a string so it can never
    /// collide with the ids a client picks for its own requests' answers.
    pub fn next_callback_id(&self) -> String {
        format!(
            "srv-{}",
            self.next_callback_id.fetch_add(1, Ordering::Relaxed)
        )
    }
}

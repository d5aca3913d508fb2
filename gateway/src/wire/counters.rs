//! Lifecycle counters of the gateway, reported by `system.info` (`counters`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Monotonic counters (and one gauge) updated lock-free on the hot path.
#[derive(Debug, Default)]
pub struct Counters {
    /// Open WebSocket connections (gauge).
    pub connections: AtomicU64,
    /// WebSocket connections accepted since start.
    pub connections_total: AtomicU64,
    /// JSON-RPC requests and client notifications received (batch members count one each).
    pub requests: AtomicU64,
    /// Requests answered with an error.
    pub errors: AtomicU64,
    /// Notifications delivered to connections (one per target connection).
    pub notifications: AtomicU64,
    /// Server→client requests sent to clients.
    pub server_requests: AtomicU64,
    /// Connections closed because their outbound queue was full.
    pub queue_overflows: AtomicU64,
    /// Requests refused `busy` because their connection's own queue was full (issue 24 §1).
    pub busy: AtomicU64,
    /// Upgrades refused because the connections waiting for `system.hello` were at their
    /// cap (issue 37 §3).
    pub unauthenticated_refused: AtomicU64,
    /// Connections closed because they did not authenticate within the hello deadline.
    pub hello_timeouts: AtomicU64,
}

/// Adds one to a counter.
pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    /// The gateway's entries of the `system.info` `counters` map.
    pub fn to_map(&self) -> HashMap<String, i64> {
        let g = |c: &AtomicU64| i64::try_from(c.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        [
            ("connections", g(&self.connections)),
            ("connectionsTotal", g(&self.connections_total)),
            ("requests", g(&self.requests)),
            ("errors", g(&self.errors)),
            ("notifications", g(&self.notifications)),
            ("serverRequests", g(&self.server_requests)),
            ("queueOverflows", g(&self.queue_overflows)),
            ("busy", g(&self.busy)),
            ("unauthenticatedRefused", g(&self.unauthenticated_refused)),
            ("helloTimeouts", g(&self.hello_timeouts)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

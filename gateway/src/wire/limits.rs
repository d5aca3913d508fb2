//! Limits and waits of the gateway; defaults suit production, tests shorten some through
//! environment variables (documented in `--help`).

use std::time::Duration;

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
    /// Requests of one connection running at once; its further requests wait in that
    /// connection's own queue (issue 24 §1: one client's flood cannot fill a shared one).
    pub max_in_flight: usize,
    /// Requests of one connection waiting for one of its running slots; one more is refused
    /// `unavailable` with `details.reason: "busy"`.
    pub max_queued: usize,
    /// Longest a large message waits for room in the gateway-wide budget
    /// (`GATEWAY_LARGE_REQUEST_BYTES`) before its calls are refused busy.
    pub large_wait: Duration,
    /// Accepted TCP connections open at once (issue 37 §3); past it the accept loop waits.
    /// Kept below the descriptor limit at start (`wire/preauth.rs`).
    pub max_connections: usize,
    /// WebSocket connections without a successful `system.hello` at once; one more upgrade
    /// is refused 503.
    pub max_unauthenticated: usize,
    /// How long an accepted socket has to send its HTTP request, and an upgraded WebSocket
    /// to complete `system.hello`.
    pub hello_deadline: Duration,
    /// The services were started together with this gateway (`--services-starting`,
    /// issue 14): for `unavailable_wait` after its start, `system.hello` waits for each
    /// service's first capabilities report.
    pub services_starting: bool,
}

impl Limits {
    /// Defaults, with `SNOWPEA_UNAVAILABLE_WAIT_MS`, `SNOWPEA_CALL_TIMEOUT_MS`,
    /// `SNOWPEA_GATEWAY_QUEUE`, `SNOWPEA_MAX_UNAUTHENTICATED` and
    /// `SNOWPEA_HELLO_DEADLINE_MS` applied when set.
    pub fn from_env() -> Self {
        fn env_u64(name: &str) -> Option<u64> {
            std::env::var(name).ok()?.trim().parse().ok()
        }
        Limits {
            outbound_queue: env_u64("SNOWPEA_GATEWAY_QUEUE")
                .map(|n| n.clamp(1, 1 << 20) as usize)
                .unwrap_or(8192),
            max_message: snowpea_proto::limits::WS_MESSAGE,
            max_frame: snowpea_proto::limits::WS_MESSAGE,
            unavailable_wait: Duration::from_millis(
                env_u64("SNOWPEA_UNAVAILABLE_WAIT_MS").unwrap_or(5_000),
            ),
            call_timeout: Duration::from_millis(
                env_u64("SNOWPEA_CALL_TIMEOUT_MS").unwrap_or(600_000),
            ),
            max_in_flight: 4,
            max_queued: 1024,
            large_wait: Duration::from_secs(10),
            max_connections: 4096,
            max_unauthenticated: env_u64("SNOWPEA_MAX_UNAUTHENTICATED")
                .map(|n| n.clamp(1, 1 << 16) as usize)
                .unwrap_or(256),
            hello_deadline: Duration::from_millis(
                env_u64("SNOWPEA_HELLO_DEADLINE_MS").unwrap_or(10_000),
            ),
            services_starting: false,
        }
    }
}

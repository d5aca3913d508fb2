//! THE list of supervised processes (DESIGN.md §2, §5). Every process starts at once (each
//! service reconnects lazily to the others; the gateway waits for a service still starting
//! within its `unavailable_wait`, issue 14). Adding a
//! service (svc-memory, svc-scheduler, …) is one line in [`SERVICES`].

/// One `snowpea-svc-<name>` service process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceSpec {
    /// Process and socket name: serves on `run/<name>.sock`, logs to `logs/<name>.log`.
    pub name: &'static str,
    /// Binary file name, found by [`crate::bins`].
    pub binary: &'static str,
}

/// The services (also the order `status` lists them in). One line per service.
#[rustfmt::skip]
pub const SERVICES: &[ServiceSpec] = &[
    ServiceSpec { name: "session", binary: "snowpea-svc-session" },
    ServiceSpec { name: "memory", binary: "snowpea-svc-memory" },
    ServiceSpec { name: "scheduler", binary: "snowpea-svc-scheduler" },
    ServiceSpec { name: "mcp", binary: "snowpea-svc-mcp" },
    ServiceSpec { name: "audio", binary: "snowpea-svc-audio" },
    ServiceSpec { name: "chat", binary: "snowpea-svc-chat" },
];

/// The gateway, started with the services (`--listen-fd 3 --services <names>`).
pub const GATEWAY: ServiceSpec = ServiceSpec {
    name: "gateway",
    binary: "snowpea-gateway",
};

/// Whether a supervised process is a gRPC service or the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessKind {
    /// A service: ready when its socket answers SERVING.
    Service,
    /// The gateway: inherits the listener, ready when `GET /health` answers 200.
    Gateway,
}

/// Every supervised process in `status` order: the services, then the gateway (all start
/// together).
pub fn all() -> Vec<(ServiceSpec, ProcessKind)> {
    SERVICES
        .iter()
        .map(|s| (*s, ProcessKind::Service))
        .chain(std::iter::once((GATEWAY, ProcessKind::Gateway)))
        .collect()
}

/// Names `supervisor restart` and `supervisor logs` accept: every supervised process, plus
/// `supervisor` (its own log) for `logs` and `all` for both.
pub fn process_names() -> Vec<&'static str> {
    all().into_iter().map(|(s, _)| s.name).collect()
}

/// The `--services` argument of the gateway: service names, comma separated.
pub fn service_names() -> String {
    SERVICES
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(",")
}

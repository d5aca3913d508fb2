//! The one tower layer on every service's gRPC server (issue 13 §3), installed by
//! [`crate::service::serve`]: handlers contain only their own logic, and this layer does what
//! every call needs.
//!
//! For each call it
//! * finds the JSON-RPC name from the gRPC path through the descriptor
//!   (`/snowpea.session.v1.SessionService/Create` → `session.create`; an internal rpc keeps its
//!   gRPC path);
//! * reads the connection id, client kind and request id from metadata
//!   ([`crate::context`]);
//! * runs the whole call inside one span `rpc` with the fields `rpc.method`, `request_id`
//!   (the gateway logs the same field, so one call is followed across processes),
//!   `connection_id`, `client_kind`, and, once answered, `code` and `elapsed_us`;
//! * times the call up to its response headers and records the outcome code (the protocol
//!   error code the status carries, `ok` on success) in per-method counters.
//!
//! The counters ([`snapshot`]) are served by `ServiceBus.CallStats` ([`crate::bus`]); memory
//! is bounded: at most [`MAX_METHODS`] rows, each keeping the latencies of its last
//! [`RESERVOIR`] calls.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{LazyLock, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use snowpea_proto::error::RpcError;
use snowpea_proto::rpc::v1::{CallStatsReply, MethodCallStats};
use tracing::Instrument;

use crate::context::{CLIENT_KIND, CONNECTION_ID, REQUEST_ID};

/// Most method rows kept; calls to further unknown paths are counted under [`OTHER`].
pub const MAX_METHODS: usize = 512;
/// Latency samples kept per method (the most recent calls); p50/p99 are over these.
pub const RESERVOIR: usize = 1024;
/// Row of calls beyond [`MAX_METHODS`] distinct methods.
pub const OTHER: &str = "(other)";

/// gRPC path → JSON-RPC name, for every rpc with a `json_method` option.
fn json_names() -> &'static HashMap<String, String> {
    static NAMES: LazyLock<HashMap<String, String>> = LazyLock::new(|| {
        snowpea_proto::schema::schema()
            .methods
            .values()
            .map(|m| (m.grpc_path.clone(), m.name.clone()))
            .collect()
    });
    &NAMES
}

/// The name a call is reported under: its JSON-RPC method, or the gRPC path of an internal rpc.
pub fn method_name(grpc_path: &str) -> String {
    json_names()
        .get(grpc_path)
        .cloned()
        .unwrap_or_else(|| grpc_path.to_owned())
}

/// Counters of one method.
#[derive(Debug, Default)]
struct Counters {
    count: u64,
    errors: BTreeMap<String, u64>,
    latencies_us: VecDeque<u64>,
}

impl Counters {
    fn record(&mut self, code: &str, elapsed_us: u64) {
        self.count += 1;
        if code != "ok" {
            *self.errors.entry(code.to_owned()).or_default() += 1;
        }
        if self.latencies_us.len() == RESERVOIR {
            self.latencies_us.pop_front();
        }
        self.latencies_us.push_back(elapsed_us);
    }

    fn row(&self, method: &str) -> MethodCallStats {
        let mut sorted: Vec<u64> = self.latencies_us.iter().copied().collect();
        sorted.sort_unstable();
        MethodCallStats {
            method: method.to_owned(),
            count: self.count,
            errors: self.errors.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            p50_us: percentile(&sorted, 50),
            p99_us: percentile(&sorted, 99),
        }
    }
}

/// The `pct`th percentile (nearest rank) of ascending `sorted`; 0 when empty.
fn percentile(sorted: &[u64], pct: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (pct * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn table() -> &'static Mutex<HashMap<String, Counters>> {
    static TABLE: LazyLock<Mutex<HashMap<String, Counters>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    &TABLE
}

fn service_name() -> &'static OnceLock<String> {
    static NAME: OnceLock<String> = OnceLock::new();
    &NAME
}

/// Records one answered call (the layer calls it; public for tests of readers).
pub fn record(method: &str, code: &str, elapsed_us: u64) {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    let key = if t.contains_key(method) || t.len() < MAX_METHODS {
        method
    } else {
        OTHER
    };
    t.entry(key.to_owned())
        .or_default()
        .record(code, elapsed_us);
}

/// The counters of this process, one row per method called at least once, sorted by method
/// (`ServiceBus.CallStats`).
pub fn snapshot() -> CallStatsReply {
    let t = table().lock().unwrap_or_else(|e| e.into_inner());
    let mut methods: Vec<MethodCallStats> = t.iter().map(|(m, c)| c.row(m)).collect();
    methods.sort_by(|a, b| a.method.cmp(&b.method));
    CallStatsReply {
        service: service_name().get().cloned().unwrap_or_default(),
        methods,
    }
}

/// The tower layer (see the module docs). `service` is the name the supervisor knows the
/// process by (`memory`, `session`, …), reported by `ServiceBus.CallStats`.
#[derive(Debug, Clone)]
pub struct CallLayer;

impl CallLayer {
    /// The layer of the service called `service`.
    pub fn new(service: &str) -> Self {
        let _ = service_name().set(service.to_owned());
        CallLayer
    }
}

impl<S> tower::Layer<S> for CallLayer {
    type Service = CallService<S>;
    fn layer(&self, inner: S) -> CallService<S> {
        CallService { inner }
    }
}

/// The service [`CallLayer`] wraps around a server's routes.
#[derive(Debug, Clone)]
pub struct CallService<S> {
    inner: S,
}

fn header(h: &http::HeaderMap, key: &str) -> Option<String> {
    h.get(key)
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The outcome code of a response: `ok`, or the protocol error code of its status (the
/// `snowpea-code` a service sets, else the gRPC code mapped by [`RpcError::from_status`]).
/// An error status is in the headers (a trailers-only response); a success has none there.
pub fn outcome_code(headers: &http::HeaderMap) -> String {
    let Some(grpc) = headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return "ok".into();
    };
    if grpc == 0 {
        return "ok".into();
    }
    let mut status = tonic::Status::new(tonic::Code::from_i32(grpc), "");
    if let Some(code) = headers
        .get("snowpea-code")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
    {
        status.metadata_mut().insert("snowpea-code", code);
    }
    RpcError::from_status(&status).code.wire().to_owned()
}

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for CallService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        // The clone is not ready; call the one that is (tower's documented pattern).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let method = method_name(req.uri().path());
        let h = req.headers();
        let span = tracing::info_span!(
            "rpc",
            rpc.method = %method,
            request_id = header(h, REQUEST_ID).as_deref().unwrap_or(""),
            connection_id = header(h, CONNECTION_ID).as_deref().unwrap_or(""),
            client_kind = header(h, CLIENT_KIND).as_deref().unwrap_or(""),
            code = tracing::field::Empty,
            elapsed_us = tracing::field::Empty,
        );
        let started = Instant::now();
        let fut = inner.call(req);
        Box::pin(
            async move {
                let out = fut.await;
                let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                let code = match &out {
                    Ok(resp) => outcome_code(resp.headers()),
                    // The server could not produce a response at all (transport).
                    Err(_) => "unavailable".to_owned(),
                };
                let span = tracing::Span::current();
                span.record("code", code.as_str());
                span.record("elapsed_us", elapsed_us);
                tracing::debug!(code = %code, elapsed_us, "answered");
                record(&method, &code, elapsed_us);
                out
            }
            .instrument(span),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_rpc_names_come_from_the_descriptor_and_internal_rpcs_keep_their_path() {
        assert_eq!(
            method_name("/snowpea.memory.v1.MemoryService/Search"),
            "memory.search"
        );
        assert_eq!(
            method_name("/snowpea.rpc.v1.ServiceBus/CallStats"),
            "/snowpea.rpc.v1.ServiceBus/CallStats"
        );
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50), 50);
        assert_eq!(percentile(&v, 99), 99);
        assert_eq!(percentile(&[7], 99), 7);
        assert_eq!(percentile(&[], 50), 0);
    }

    #[test]
    fn counters_keep_errors_by_code_and_a_bounded_reservoir() {
        let mut c = Counters::default();
        for i in 0..(RESERVOIR as u64 + 10) {
            c.record(if i % 2 == 0 { "ok" } else { "not_found" }, i);
        }
        let row = c.row("m");
        assert_eq!(row.count, RESERVOIR as u64 + 10);
        assert_eq!(
            row.errors.get("not_found"),
            Some(&(RESERVOIR as u64 / 2 + 5))
        );
        assert!(!row.errors.contains_key("ok"));
        assert_eq!(c.latencies_us.len(), RESERVOIR);
        assert_eq!(row.p50_us, 10 + RESERVOIR as u64 / 2 - 1);
    }

    #[test]
    fn outcome_code_reads_the_snowpea_code_else_maps_the_grpc_code() {
        let status =
            RpcError::new(snowpea_proto::error::ErrorCode::SessionBusy, "busy").into_status();
        let headers = status.into_http::<tonic::body::Body>().headers().clone();
        assert_eq!(outcome_code(&headers), "session_busy");
        let plain = tonic::Status::unimplemented("nope")
            .into_http::<tonic::body::Body>()
            .headers()
            .clone();
        assert_eq!(outcome_code(&plain), "not_implemented");
        assert_eq!(outcome_code(&http::HeaderMap::new()), "ok");
    }
}

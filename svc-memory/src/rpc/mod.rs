//! gRPC services of svc-memory, one file per service: [`memory`] (`MemoryService`,
//! `memory.*`) and [`site`] (`SiteService`, `site.*`). Each handler runs in a span with the
//! JSON-RPC method and the caller's connection id; database work runs on the blocking pool.

use snowpea_common::context::CallContext;
use tonic::Status;

use crate::error::{Error, Result};

pub mod memory;
pub mod site;

/// Fully qualified names of the services (for health and reflection).
pub const SERVICE_NAMES: &[&str] = &[
    "snowpea.memory.v1.MemoryService",
    "snowpea.memory.v1.SiteService",
];

/// The span a handler runs in.
pub(crate) fn span(method: &'static str, ctx: &CallContext) -> tracing::Span {
    tracing::info_span!(
        "rpc",
        rpc.method = method,
        connection_id = ctx.connection_id.as_deref().unwrap_or("-"),
    )
}

/// Runs blocking database work off the async threads, in `span`.
pub(crate) async fn blocking<T: Send + 'static>(
    span: tracing::Span,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(move || span.in_scope(f))
        .await
        .map_err(|e| Error::Internal(format!("handler panicked: {e}")))
        .and_then(|r| r)
        .map_err(Error::into_status)
}

/// A `limit` param: 0 = `default`, capped at `max`; negative is `invalid_params`.
pub(crate) fn limit(n: i64, default: usize, max: usize) -> Result<usize> {
    match n {
        0 => Ok(default),
        n if n < 0 => Err(Error::invalid("params.limit", "must not be negative")),
        n => Ok((n as usize).min(max)),
    }
}

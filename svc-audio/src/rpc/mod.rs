//! gRPC services of svc-audio: [`audio`] (`AudioService`, the `audio.*` JSON-RPC methods).
//! Each handler runs in a span with the method and the caller's connection id.

use snowpea_common::context::CallContext;

pub mod audio;

/// Fully qualified names of the services (for health and reflection).
pub const SERVICE_NAMES: &[&str] = &["snowpea.audio.v1.AudioService"];

/// The span a handler runs in.
pub(crate) fn span(method: &'static str, ctx: &CallContext) -> tracing::Span {
    tracing::info_span!(
        "rpc",
        rpc.method = method,
        connection_id = ctx.connection_id.as_deref().unwrap_or("-"),
    )
}

//! gRPC implementations of the `snowpea.session.v1` services this process serves, one
//! file per service: [`session`] (`SessionService`), [`approval`] (`ApprovalService`),
//! [`tool`] (`ToolService`). Methods not implemented here answer the generated default
//! (`UNIMPLEMENTED` → `not_implemented` at the gateway). Each handler runs in a span with
//! the JSON-RPC method and the caller's connection id.

use snowpea_common::context::CallContext;

pub mod approval;
pub mod internal;
pub mod session;
pub mod tool;

/// Fully qualified names of the services (for health and reflection).
pub const SERVICE_NAMES: &[&str] = &[
    "snowpea.session.v1.SessionService",
    "snowpea.session.v1.ApprovalService",
    "snowpea.session.v1.ToolService",
];

/// The span a handler runs in.
pub(crate) fn span(method: &'static str, ctx: &CallContext) -> tracing::Span {
    tracing::info_span!(
        "rpc",
        rpc.method = method,
        connection_id = ctx.connection_id.as_deref().unwrap_or("-"),
    )
}

//! gRPC services of svc-memory, one file per service, each only the generated trait over the
//! family's logic: [`memory`] (`MemoryService`, `memory.*`, over [`crate::memory::MemoryApi`])
//! and [`site`] (`SiteService`, `site.*`, over [`crate::site::api::SiteApi`]). The span of each call (JSON-RPC
//! method, request and connection id) is opened by the shared call layer of
//! `snowpea_common::service::serve`; database work runs through `snowpea_common::db::blocking`.

use crate::error::{Error, Result};

pub mod memory;
pub mod site;

/// Runs blocking database work off the async threads (`snowpea_common::db::blocking`, in the
/// call's span, bounded wait); `what` is the JSON-RPC method.
pub(crate) async fn blocking<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    snowpea_common::db::blocking(what, f).await?
}

/// A `limit` param: 0 = `default`, capped at `max`; negative is `invalid_params`.
pub(crate) fn limit(n: i64, default: usize, max: usize) -> Result<usize> {
    match n {
        0 => Ok(default),
        n if n < 0 => Err(Error::invalid("params.limit", "must not be negative")),
        n => Ok((n as usize).min(max)),
    }
}

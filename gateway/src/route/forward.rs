//! Forwarding one validated call to its service: a generic tonic unary call on the
//! service's cached channel with [`EncodedCodec`] (the request encoded once, its bytes
//! reused by every attempt), the connection's context as
//! metadata, the answer converted back to protocol JSON. A service that is down is
//! retried with a short backoff for `Limits::unavailable_wait` (a restart in progress),
//! then answered `unavailable` (DESIGN.md §4).

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value};
use snowpea_common::context::REQUEST_ID;
use snowpea_proto::codec::EncodedCodec;
use snowpea_proto::error::{ErrorCode, RpcError};
use snowpea_proto::json::{to_json, CLEARED_FIELDS_KEY, MAX_CLEARED_FIELDS};
use tonic::metadata::MetadataMap;
use tonic::{Code, Status};

use super::table::Route;
use crate::upstream::services::Service;
use crate::wire::connection::Peer;
use crate::wire::limits::Limits;

/// First wait before retrying a service that is down; doubles up to [`MAX_BACKOFF`].
/// Short, because a retry is one failed `connect(2)` on a unix socket (microseconds) and
/// the first call after a (cold) start should not wait long past the service's bind
/// (issue 14: was 10 ms doubling to 250 ms, up to ≈ 150 ms late at a 100 ms start).
const MIN_BACKOFF: Duration = Duration::from_millis(2);
const MAX_BACKOFF: Duration = Duration::from_millis(4);

enum Failure {
    /// The service cannot be reached (not listening, restarting).
    Down(String),
    /// The service answered with an error.
    Status(Status),
    /// No answer within the call timeout.
    TimedOut,
}

/// Calls `route` on `svc` with the request `body` (encoded once by
/// [`snowpea_proto::json::encode_request`]) and `metadata` (see [`call_metadata`]) and
/// returns the result as protocol JSON.
pub async fn call(
    limits: &Limits,
    svc: &Service,
    route: &Route,
    body: Bytes,
    metadata: &MetadataMap,
) -> Result<Value, RpcError> {
    let deadline = Instant::now() + limits.unavailable_wait;
    let mut backoff = MIN_BACKOFF;
    loop {
        match once(svc, route, body.clone(), metadata, limits.call_timeout).await {
            Ok(v) => return Ok(v),
            Err(Failure::Down(why)) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(RpcError::new(
                        ErrorCode::Unavailable,
                        format!("service {} is unavailable: {why}", svc.name),
                    )
                    .with_details(json!({ "service": svc.name })));
                }
                tracing::debug!(service = %svc.name, %why, "service down; retrying");
                tokio::time::sleep(backoff.min(deadline - now)).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(Failure::Status(status)) => return Err(status_to_rpc(&status)),
            Err(Failure::TimedOut) => {
                return Err(RpcError::new(
                    ErrorCode::Unavailable,
                    format!(
                        "service {} did not answer within {} s",
                        svc.name,
                        limits.call_timeout.as_secs()
                    ),
                )
                .with_details(json!({ "service": svc.name })))
            }
        }
    }
}

/// The metadata of one call: the connection's [`CallContext`](snowpea_common::context),
/// the call's `request_id` under [`REQUEST_ID`] and, when the params sent fields as
/// `null`/`{}`/`[]`, their paths under [`CLEARED_FIELDS_KEY`] (at most
/// [`MAX_CLEARED_FIELDS`] bytes).
pub fn call_metadata(peer: &Peer, cleared: &[String], request_id: &str) -> MetadataMap {
    let mut md = peer.metadata.clone();
    if let Ok(v) = request_id.parse() {
        md.insert(REQUEST_ID, v);
    }
    let mut list = String::new();
    for p in cleared {
        if list.len() + p.len() + 1 > MAX_CLEARED_FIELDS {
            break;
        }
        if !list.is_empty() {
            list.push(',');
        }
        list.push_str(p);
    }
    if let Ok(v) = list.parse() {
        if !list.is_empty() {
            md.insert(CLEARED_FIELDS_KEY, v);
        }
    }
    md
}

async fn once(
    svc: &Service,
    route: &Route,
    body: Bytes,
    metadata: &MetadataMap,
    timeout: Duration,
) -> Result<Value, Failure> {
    // Results may exceed tonic's 4 MiB default (a long session.resume): the limits of every
    // hop come from one place; a request over GRPC_REQUEST was refused before (`forward`).
    let mut grpc = tonic::client::Grpc::new(svc.channel.clone())
        .max_decoding_message_size(snowpea_proto::limits::GRPC_RESPONSE)
        .max_encoding_message_size(snowpea_proto::limits::GRPC_REQUEST);
    let attempt = async {
        grpc.ready()
            .await
            .map_err(|e| Failure::Down(e.to_string()))?;
        let request = tonic::Request::from_parts(metadata.clone(), Default::default(), body);
        let codec = EncodedCodec::new(route.spec.output());
        match grpc.unary(request, route.path.clone(), codec).await {
            Ok(resp) => Ok(to_json(resp.get_ref())),
            Err(status) if never_reached(&status) => {
                Err(Failure::Down(status.message().to_owned()))
            }
            Err(status) if is_down(&status) => Err(Failure::Status(
                RpcError::new(
                    ErrorCode::Unavailable,
                    format!(
                        "service {} went away during the call; it may or may not have taken effect",
                        svc.name
                    ),
                )
                .with_details(json!({ "service": svc.name, "inFlight": true }))
                .into_status(),
            )),
            Err(status) => Err(Failure::Status(status)),
        }
    };
    tokio::time::timeout(timeout, attempt)
        .await
        .unwrap_or(Err(Failure::TimedOut))
}

/// True when the call never reached the service: the connection attempt itself failed
/// (socket missing, connection refused). Only such calls are retried — a call that was
/// sent and then lost its connection may have taken effect (a prompt, a write), so
/// resending it could apply it twice.
fn never_reached(status: &Status) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(status);
    while let Some(err) = source {
        if err.downcast_ref::<tonic::ConnectError>().is_some() {
            return true;
        }
        source = err.source();
    }
    false
}

/// True for a transport failure (nothing listening, connection refused or reset) as
/// opposed to the service answering `unavailable` itself, which carries a Snowpea code.
fn is_down(status: &Status) -> bool {
    matches!(status.code(), Code::Unavailable | Code::Unknown)
        && status.metadata().get("snowpea-code").is_none()
}

/// The one mapping of a service's gRPC status to a protocol error (STYLE.md "Errors").
fn status_to_rpc(status: &Status) -> RpcError {
    RpcError::from_status(status)
}

//! The generic router (DESIGN.md §4): every client-callable method of the schema is
//! routed by its owner — `system` to the gateway itself, a service of the suite to its
//! socket, any other service to `not_implemented`. The table is built once at start-up
//! from `snowpea_proto::schema::schema()`; per call the gateway only checks the
//! handshake, validates params against the descriptor and picks the route.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use http::uri::PathAndQuery;
use serde_json::{json, Value};
use snowpea_proto::error::{ErrorCode, RpcError};
use snowpea_proto::json::{cleared_paths, to_message};
use snowpea_proto::schema::{schema, Direction, MethodSpec};
use tracing::Instrument;

use crate::counters::bump;
use crate::forward;
use crate::jsonrpc::{self, Call};
use crate::services::{Service, Services};
use crate::state::Gateway;
use crate::system::{self, AfterReply, SystemMethod};
use crate::ws::handle::Connection;

/// Where a method goes.
#[derive(Debug)]
pub enum Target {
    /// Answered by the gateway.
    System(SystemMethod),
    /// Forwarded to a running service.
    Service(Arc<Service>),
    /// Owned by a service this suite does not run.
    NotRunning(String),
}

/// One routable method.
#[derive(Debug)]
pub struct Route {
    /// Its schema entry.
    pub spec: &'static MethodSpec,
    /// Where it goes.
    pub target: Target,
    /// The gRPC path, parsed once.
    pub path: PathAndQuery,
}

/// Every client-callable method by JSON-RPC name.
#[derive(Debug, Default)]
pub struct Routes {
    map: HashMap<&'static str, Route>,
}

impl Routes {
    /// Builds the table for the services the suite runs.
    pub fn build(services: &Services) -> Routes {
        let mut map = HashMap::new();
        for (name, spec) in &schema().methods {
            // approval.request & co. are the daemon's to send, never a client's to call.
            if spec.direction == Direction::ServerToClient {
                continue;
            }
            let target = if spec.owner == "system" {
                Target::System(SystemMethod::from_name(name))
            } else {
                match services.get(&spec.owner) {
                    Some(s) => Target::Service(s),
                    None => Target::NotRunning(spec.owner.clone()),
                }
            };
            let Ok(path) =
                PathAndQuery::from_maybe_shared(bytes::Bytes::from(spec.grpc_path.clone()))
            else {
                tracing::error!(method = %name, path = %spec.grpc_path, "unroutable gRPC path; method left out");
                continue;
            };
            map.insert(name.as_str(), Route { spec, target, path });
        }
        Routes { map }
    }

    /// The route of a method.
    pub fn get(&self, method: &str) -> Option<&Route> {
        self.map.get(method)
    }
}

/// The outcome of one call: the response object (none for a notification) and what to
/// do once the client has it.
#[derive(Debug, Default)]
pub struct Handled {
    /// The JSON-RPC response; `None` for a notification.
    pub response: Option<Value>,
    /// An action to run after the response went out.
    pub after: Option<AfterReply>,
}

/// Handles one request or notification, inside its own span.
pub async fn call(gw: &Arc<Gateway>, conn: &Arc<Connection>, call: Call) -> Handled {
    bump(&gw.counters.requests);
    // Never log params (they may carry secrets); an unknown method name is the
    // client's text, so only a bounded prefix of it.
    let method: &str = gw
        .routes
        .get(&call.method)
        .map(|r| r.spec.name.as_str())
        .unwrap_or_else(|| truncate(&call.method, 64));
    let id = call.id.as_ref().map(Value::to_string);
    let span = tracing::info_span!(
        "rpc",
        rpc.method = %method,
        rpc.id = id.as_deref().map(|s| truncate(s, 64)).unwrap_or("-"),
        conn = %conn.id,
    );
    let started = Instant::now();
    let outcome = dispatch(gw, conn, &call.method, call.params)
        .instrument(span.clone())
        .await;
    let _enter = span.enter();
    match outcome {
        Ok((result, after)) => {
            tracing::debug!(elapsed_us = started.elapsed().as_micros() as u64, "ok");
            Handled {
                response: call.id.map(|id| jsonrpc::result(id, result)),
                after,
            }
        }
        Err(e) => {
            bump(&gw.counters.errors);
            log_error(&e);
            Handled {
                response: call.id.map(|id| jsonrpc::error(id, e.to_jsonrpc())),
                after: None,
            }
        }
    }
}

/// Internal errors are logged once, here at the edge; a client's mistakes only at debug.
fn log_error(e: &RpcError) {
    match e.code {
        ErrorCode::Internal | ErrorCode::Unspecified => {
            tracing::warn!(code = e.code.wire(), message = %e.message, "call failed")
        }
        ErrorCode::Unavailable => {
            tracing::info!(code = e.code.wire(), message = %e.message, "call failed")
        }
        _ => tracing::debug!(code = e.code.wire(), message = %e.message, "call failed"),
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

async fn dispatch(
    gw: &Arc<Gateway>,
    conn: &Arc<Connection>,
    method: &str,
    params: Value,
) -> Result<(Value, Option<AfterReply>), RpcError> {
    let route = gw.routes.get(method);
    let is_hello = matches!(
        route.map(|r| &r.target),
        Some(Target::System(SystemMethod::Hello))
    );
    // Spec "Handshake": anything before a successful system.hello is unauthorized —
    // even a method that does not exist, so nothing is revealed before the token.
    let peer = conn.peer();
    if peer.is_none() && !is_hello {
        return Err(RpcError::unauthorized(
            "not authenticated: call system.hello with the daemon token first",
        ));
    }
    let Some(route) = route else {
        return Err(RpcError::new(
            ErrorCode::MethodNotFound,
            format!("no such method: {}", truncate(method, 64)),
        ));
    };
    let msg = to_message(&route.spec.input(), &params, "params")?;
    match (&route.target, peer) {
        (Target::System(m), _) => system::handle(gw, conn, *m, &route.spec.name, msg).await,
        (Target::NotRunning(owner), _) => Err(RpcError::new(
            ErrorCode::NotImplemented,
            format!("{method} is not implemented: service {owner} is not part of this suite"),
        )
        .with_details(json!({ "service": owner }))),
        (Target::Service(svc), Some(peer)) => {
            let cleared = cleared_paths(&route.spec.input(), &params);
            forward::call(gw, svc, route, msg, &peer, &cleared)
                .await
                .map(|v| (v, None))
        }
        (Target::Service(_), None) => Err(RpcError::unauthorized("not authenticated")),
    }
}

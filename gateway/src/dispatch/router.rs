//! The generic router (DESIGN.md §4): per call the gateway only checks the handshake,
//! validates params against the descriptor, picks the route from the table and either
//! answers a `system.*` method itself or forwards the call. Every call runs in its own
//! span (`rpc.method`, `rpc.id`, `conn`, `request_id`); the request id is new for every
//! call and travels with a forwarded one as `snowpea-request-id` metadata, so the service's
//! span logs it under the same field name and one call can be followed across processes.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use snowpea_proto::error::{ErrorCode, RpcError};
use snowpea_proto::json::{encode_request, to_message, to_request};
use tracing::Instrument;

use super::hello;
use super::info::Daemon;
use super::system::{self, AfterReply};
use crate::route::forward;
use crate::route::table::{Routes, SystemMethod, Target};
use crate::upstream::presence::Presence;
use crate::upstream::services::Services;
use crate::wire::connection::Connection;
use crate::wire::counters::{bump, Counters};
use crate::wire::jsonrpc::{self, Call};
use crate::wire::limits::Limits;

/// The outcome of one call: the response object (none for a notification) and what to
/// do once the client has it.
#[derive(Debug, Default)]
pub struct Handled {
    /// The JSON-RPC response; `None` for a notification.
    pub response: Option<Value>,
    /// An action to run after the response went out.
    pub after: Option<AfterReply>,
}

/// What dispatching a call needs: the route table and the pieces of the gateway the
/// `system.*` methods read.
pub struct Dispatcher {
    /// JSON-RPC method → where it goes.
    pub routes: Routes,
    /// Limits of forwarded calls.
    pub limits: Limits,
    /// `system.info` counters (requests, errors).
    pub counters: Arc<Counters>,
    /// The services of the suite (capabilities, call counters).
    pub services: Arc<Services>,
    /// Where system.hello announces connections.
    pub presence: Presence,
    /// What system.info reports about the daemon.
    pub daemon: Daemon,
    /// The daemon token from `$SNOWPEA_HOME/token`; compared in constant time, never logged.
    token: String,
}

impl Dispatcher {
    /// A dispatcher for `routes`; `token` is the daemon token system.hello checks.
    pub fn new(
        routes: Routes,
        limits: Limits,
        counters: Arc<Counters>,
        services: Arc<Services>,
        presence: Presence,
        daemon: Daemon,
        token: String,
    ) -> Self {
        Dispatcher {
            routes,
            limits,
            counters,
            services,
            presence,
            daemon,
            token,
        }
    }

    /// Handles one request or notification, inside its own span.
    pub async fn call(&self, conn: &Arc<Connection>, call: Call) -> Handled {
        bump(&self.counters.requests);
        // Never log params (they may carry secrets); an unknown method name is the
        // client's text, so only a bounded prefix of it.
        let method: &str = self
            .routes
            .get(&call.method)
            .map(|r| r.spec.name.as_str())
            .unwrap_or_else(|| truncate(&call.method, 64));
        let id = call.id.as_ref().map(Value::to_string);
        let request_id = snowpea_common::ids::new_id("r");
        let span = tracing::info_span!(
            "rpc",
            rpc.method = %method,
            rpc.id = id.as_deref().map(|s| truncate(s, 64)).unwrap_or("-"),
            conn = %conn.id,
            request_id = %request_id,
        );
        let started = Instant::now();
        let outcome = self
            .dispatch(conn, &call.method, call.params, &request_id)
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
                bump(&self.counters.errors);
                log_error(&e);
                Handled {
                    response: call.id.map(|id| jsonrpc::error(id, e.to_jsonrpc())),
                    after: None,
                }
            }
        }
    }

    async fn dispatch(
        &self,
        conn: &Arc<Connection>,
        method: &str,
        params: Value,
        request_id: &str,
    ) -> Result<(Value, Option<AfterReply>), RpcError> {
        let route = self.routes.get(method);
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
        // A method the declaration leaves out is not implemented whatever its params.
        if matches!(route.target, Target::NotImplemented) {
            return Err(RpcError::not_implemented_yet());
        }
        if let (Target::Service(svc), Some(peer)) = (&route.target, &peer) {
            // One walk of the JSON gives the message and its cleared paths, one encode the
            // bytes every attempt sends (issue 34); the JSON tree and the message (as big
            // as the request, and more) are let go before the call waits (issue 40).
            let request = to_request(&route.spec.input(), &params, "params")?;
            drop(params);
            let body = encode_request(&request.message, "params")?;
            drop(request.message);
            let metadata = forward::call_metadata(peer, &request.cleared, request_id);
            return forward::call(&self.limits, svc, route, body, &metadata)
                .await
                .map(|v| (v, None));
        }
        let msg = to_message(&route.spec.input(), &params, "params")?;
        drop(params);
        match (&route.target, peer) {
            (Target::System(SystemMethod::Hello), _) => {
                let v = hello::hello(
                    &self.token,
                    &self.presence,
                    &self.services,
                    conn,
                    route.spec,
                    &msg,
                )
                .await?;
                Ok((v, None))
            }
            (Target::System(m), _) => {
                system::handle(
                    &self.daemon,
                    &self.counters,
                    &self.services,
                    *m,
                    route.spec,
                    msg,
                )
                .await
            }
            (Target::NotRunning(owner), _) => Err(RpcError::new(
                ErrorCode::NotImplemented,
                format!("{method} is not implemented: service {owner} is not part of this suite"),
            )
            .with_details(json!({ "service": owner }))),
            (Target::NotImplemented, _) => Err(RpcError::not_implemented_yet()),
            (Target::Service(_), _) => Err(RpcError::unauthorized("not authenticated")),
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

//! `system.hello` (spec "Handshake"): the token is compared in constant time, the
//! protocol majors must match, and the client's ids must be usable as gRPC metadata.
//! Success makes the connection authenticated and announces it to every service before
//! the answer goes out, so the client's next call already finds it known. A failed
//! hello — also a second one on an authenticated connection — leaves it unauthenticated.

use std::sync::Arc;
use std::time::Duration;

use prost_reflect::DynamicMessage;
use serde_json::{json, Value};
use snowpea_proto::error::{ErrorCode, RpcError};
use snowpea_proto::rpc::v1::ConnectionInfo;
use snowpea_proto::schema::MethodSpec;
use snowpea_proto::system::v1::{SystemHelloParams, SystemHelloResult};
use snowpea_proto::PROTOCOL_VERSION;
use subtle::ConstantTimeEq;

use super::typed::{decode, encode};
use crate::upstream::presence::{Announced, Change, Presence};
use crate::upstream::services::Services;
use crate::wire::connection::{Connection, Peer};

/// Longest clientId / clientKind / instanceId accepted.
const MAX_ID_LEN: usize = 256;
/// Longest a hello waits for every service to learn of the connection (each
/// SyncConnections has its own, shorter deadline; this bounds the queue before it).
const ANNOUNCE_WAIT: Duration = Duration::from_secs(10);

/// Handles a validated `system.hello` (`spec` is its schema entry): `token` is the daemon
/// token, changes of the connection's state go out on `presence`, `services` report the
/// capabilities.
pub async fn hello(
    token: &str,
    presence: &Presence,
    services: &Services,
    conn: &Arc<Connection>,
    spec: &MethodSpec,
    params: &DynamicMessage,
) -> Result<Value, RpcError> {
    let params: SystemHelloParams = decode(params)?;
    let result = check(token, conn, params);
    let was_authenticated = conn.peer().is_some();
    match result {
        Ok(info) => {
            let announced = conn
                .set_peer(Some(Arc::new(Peer::new(info))), |p| {
                    p.map(|p| presence.announce(Change::Live(p.info.clone())))
                })
                .flatten()
                .ok_or_else(|| RpcError::unauthorized("connection is closing"))?;
            wait(announced).await;
            // Services starting with the gateway: their capabilities first (bounded).
            services.first_reports().await;
            // `update`: system.checkUpdate / system.update, answered by the gateway itself.
            let mut capabilities = services.capabilities();
            capabilities.push("update".to_owned());
            capabilities.sort();
            capabilities.dedup();
            let result = SystemHelloResult {
                capabilities,
                protocol_version: PROTOCOL_VERSION.to_owned(),
                server_version: snowpea_common::VERSION.to_owned(),
            };
            encode(&spec.output(), &result)
        }
        Err(e) => {
            if was_authenticated {
                let closed = Change::Closed(conn.id.clone());
                if let Some(announced) = conn.set_peer(None, |_| presence.announce(closed)) {
                    wait(announced).await;
                }
            }
            Err(e)
        }
    }
}

async fn wait(announced: Announced) {
    if !announced.wait(ANNOUNCE_WAIT).await {
        tracing::debug!("not every service heard of the connection in time");
    }
}

fn check(
    daemon_token: &str,
    conn: &Connection,
    params: SystemHelloParams,
) -> Result<ConnectionInfo, RpcError> {
    if !bool::from(params.token.as_bytes().ct_eq(daemon_token.as_bytes())) {
        return Err(RpcError::unauthorized("invalid token"));
    }
    let client_protocol = params.protocol_version;
    let Some(client_major) = major(&client_protocol) else {
        return Err(RpcError::invalid_params(
            "params.protocolVersion",
            format!("{client_protocol:?} is not a semver version"),
        ));
    };
    if Some(client_major) != major(PROTOCOL_VERSION) {
        return Err(RpcError::new(
            ErrorCode::ProtocolIncompatible,
            format!(
                "client speaks protocol {client_protocol}, this daemon speaks {PROTOCOL_VERSION}; the majors differ"
            ),
        )
        .with_details(json!({
            "clientProtocolVersion": client_protocol,
            "protocolVersion": PROTOCOL_VERSION,
        })));
    }
    Ok(ConnectionInfo {
        connection_id: conn.id.clone(),
        client_id: metadata_safe(params.client_id, "params.clientId")?,
        client_kind: metadata_safe(params.client_kind, "params.clientKind")?,
        instance_id: metadata_safe(params.instance_id, "params.instanceId")?,
        client_version: params.client_version,
    })
}

/// The semver major of `v` (`"1.25.0"` → 1).
fn major(v: &str) -> Option<u64> {
    v.trim().split('.').next()?.parse().ok()
}

/// An id the client chose; it travels as gRPC metadata, so visible ASCII only.
fn metadata_safe(value: Option<String>, path: &str) -> Result<Option<String>, RpcError> {
    let Some(v) = value else {
        return Ok(None);
    };
    if v.len() > MAX_ID_LEN {
        return Err(RpcError::invalid_params(
            path,
            format!("longer than {MAX_ID_LEN} characters"),
        ));
    }
    if !v.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(RpcError::invalid_params(path, "must be printable ASCII"));
    }
    Ok((!v.is_empty()).then_some(v))
}

#[cfg(test)]
mod tests {
    use super::major;

    #[test]
    fn majors() {
        assert_eq!(major("1.25.0"), Some(1));
        assert_eq!(major("2"), Some(2));
        assert_eq!(major("x.1"), None);
        assert_eq!(major(""), None);
    }
}

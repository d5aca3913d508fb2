//! Delivering a service's notification (DESIGN.md §4): to the connections it names, or
//! to every authenticated connection when it names none.

use std::sync::Arc;

use snowpea_proto::rpc::v1::BusNotification;

use crate::wire::connection::{Connection, Frame};
use crate::wire::counters::{bump, Counters};
use crate::wire::jsonrpc;
use crate::wire::registry::Registry;

/// Delivers `n` from `service`; params that are not JSON are dropped with a warning.
pub fn fan_out(connections: &Registry, counters: &Counters, service: &str, n: BusNotification) {
    if !jsonrpc::is_json(&n.params_json) {
        tracing::warn!(%service, method = %n.method, "notification params are not JSON; dropped");
        return;
    }
    let frame: axum::extract::ws::Utf8Bytes =
        jsonrpc::notification(&n.method, &n.params_json).into();
    let deliver = |c: &Arc<Connection>| {
        if c.send(Frame::text(frame.clone())) {
            bump(&counters.notifications);
        }
    };
    if n.connection_ids.is_empty() {
        connections.for_each_authenticated(deliver);
    } else {
        for id in &n.connection_ids {
            if let Some(c) = connections.get(id).filter(|c| c.peer().is_some()) {
                deliver(&c);
            }
        }
    }
}

//! What happens to one message from a client: framing errors are answered at once,
//! answers to server→client requests go back to their service, and every request (or
//! batch) runs in its own task so a slow call never holds up the next one — replies may
//! go out in any order (DESIGN.md §4).
//!
//! Fairness (issue 24 §1): a connection runs at most `Limits::max_in_flight` requests at
//! once; the rest wait in that connection's own queue (its lane, [`Connection::admit`]),
//! never in one shared with other connections, and the reader keeps reading (answers to
//! server→client requests are never stuck behind them). Only when a connection's own queue
//! is full is its next request refused: `unavailable` with `details.reason: "busy"`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};
use snowpea_proto::error::{ErrorCode, RpcError};
use snowpea_proto::limits::{CONNECTION_REQUEST_BYTES, GATEWAY_LARGE_REQUEST_BYTES, LARGE_MESSAGE};
use tokio::sync::oneshot;

use crate::dispatch::router::Handled;
use crate::dispatch::system::AfterReply;
use crate::gateway::Gateway;
use crate::wire::connection::{Admitted, Connection, Frame};
use crate::wire::counters::bump;
use crate::wire::jsonrpc::{self, Incoming, Item};
use crate::wire::large::Room;

/// Handles one text (or binary) message. A large one first waits for room in the
/// gateway-wide budget (`GATEWAY_LARGE_REQUEST_BYTES`; this connection's reader pauses
/// meanwhile), held until it is answered.
pub async fn on_message(gw: &Arc<Gateway>, conn: &Arc<Connection>, bytes: &[u8]) {
    let room = gw.large.room(bytes.len(), gw.limits.large_wait).await;
    let (held, room_full) = match room {
        Room::Small => (None, false),
        Room::Held(permit) => (Some(permit), false),
        Room::Full => (None, true),
    };
    let lane = Admission {
        bytes: bytes.len(),
        room_full,
    };
    match jsonrpc::parse(bytes) {
        Incoming::Rejected(response) | Incoming::Single(Item::Invalid(response)) => {
            tracing::debug!(code = %response["error"]["code"], "framing error");
            send_json(conn, &response, None);
        }
        Incoming::Single(Item::Response { id, outcome }) => {
            gw.requests.on_answer(conn, &id, outcome);
        }
        Incoming::Single(Item::Call(call)) => {
            let Some(admitted) = admit(gw, conn, std::slice::from_ref(&call.id), false, lane)
            else {
                return;
            };
            let (gw, conn) = (gw.clone(), conn.clone());
            tokio::spawn(async move {
                let permit = admitted.run().await;
                let handled = gw.dispatcher.call(&conn, call).await;
                drop(permit);
                drop(admitted);
                deliver(
                    &gw,
                    &conn,
                    handled.response,
                    handled.after.into_iter().collect(),
                );
            });
        }
        Incoming::Batch(items) => {
            let ids: Vec<Option<Value>> = items
                .iter()
                .map(|item| match item {
                    Item::Call(call) => call.id.clone(),
                    _ => None,
                })
                .collect();
            let Some(admitted) = admit(gw, conn, &ids, true, lane) else {
                return;
            };
            let (gw, conn) = (gw.clone(), conn.clone());
            tokio::spawn(async move {
                let permit = admitted.run().await;
                // At most max_in_flight members at once, like single requests (issue 40:
                // one batch must not open a thousand calls at a time); answers in order.
                let results: Vec<Handled> = futures::stream::iter(items)
                    .map(|item| batch_member(&gw, &conn, item))
                    .buffered(gw.limits.max_in_flight.max(1))
                    .collect()
                    .await;
                drop(permit);
                drop(admitted);
                drop(held);
                let mut responses = Vec::new();
                let mut after = Vec::new();
                for h in results {
                    responses.extend(h.response);
                    after.extend(h.after);
                }
                // All notifications: nothing to answer (JSON-RPC 2.0 §6).
                let response = (!responses.is_empty()).then_some(Value::Array(responses));
                deliver(&gw, &conn, response, after);
            });
        }
    }
}

async fn batch_member(gw: &Arc<Gateway>, conn: &Arc<Connection>, item: Item) -> Handled {
    match item {
        Item::Call(call) => gw.dispatcher.call(conn, call).await,
        Item::Response { id, outcome } => {
            gw.requests.on_answer(conn, &id, outcome);
            Handled::default()
        }
        Item::Invalid(response) => Handled {
            response: Some(response),
            after: None,
        },
    }
}

/// What [`admit`] needs to know of a message besides its ids.
#[derive(Debug, Clone, Copy)]
struct Admission {
    /// Its length.
    bytes: usize,
    /// A large message that found no room in the gateway-wide budget.
    room_full: bool,
}

/// Admits a request (or a `batch`; `ids` are its calls' ids) into the connection's lane,
/// or answers each id `busy`: when the connection's own queue is full (its count, or
/// `CONNECTION_REQUEST_BYTES` of admitted messages), or when a large message found no room
/// in the gateway-wide budget.
fn admit(
    gw: &Gateway,
    conn: &Connection,
    ids: &[Option<Value>],
    batch: bool,
    lane: Admission,
) -> Option<Admitted> {
    let (message, details) = if lane.room_full {
        (
            format!(
                "busy: the gateway is already handling {GATEWAY_LARGE_REQUEST_BYTES} bytes of large requests (of {LARGE_MESSAGE} bytes or more); try again shortly"
            ),
            json!({"reason": "busy", "largeBytes": GATEWAY_LARGE_REQUEST_BYTES}),
        )
    } else {
        match conn.admit(lane.bytes) {
            Some(admitted) => return Some(admitted),
            None => (
                format!(
                    "busy: this connection already has as many requests running and waiting as it may ({} running, {} waiting, {} bytes in all); wait for answers before sending more",
                    gw.limits.max_in_flight, gw.limits.max_queued, CONNECTION_REQUEST_BYTES
                ),
                json!({
                    "reason": "busy",
                    "running": gw.limits.max_in_flight,
                    "waiting": gw.limits.max_queued,
                    "bytes": CONNECTION_REQUEST_BYTES,
                }),
            ),
        }
    };
    let error = RpcError::new(ErrorCode::Unavailable, message)
        .with_details(details)
        .to_jsonrpc();
    let responses: Vec<Value> = ids
        .iter()
        .flatten()
        .map(|id| {
            bump(&gw.counters.busy);
            crate::wire::jsonrpc::error(id.clone(), error.clone())
        })
        .collect();
    if batch && !responses.is_empty() {
        send_json(conn, &Value::Array(responses), None);
    } else if let Some(r) = responses.first() {
        send_json(conn, r, None);
    }
    None
}

/// Sends the answer, then runs what had to wait until the client got it.
fn deliver(
    gw: &Arc<Gateway>,
    conn: &Arc<Connection>,
    response: Option<Value>,
    after: Vec<AfterReply>,
) {
    if after.is_empty() {
        if let Some(r) = response {
            send_json(conn, &r, None);
        }
        return;
    }
    let (tx, rx) = oneshot::channel();
    match response {
        Some(r) => send_json(conn, &r, Some(tx)),
        None => drop(tx),
    }
    let gw = gw.clone();
    tokio::spawn(async move {
        // Give the answer a moment to reach the client before the daemon goes away.
        let _ = tokio::time::timeout(Duration::from_secs(2), rx).await;
        for a in after {
            a.run(&gw.home, &gw.shutdown).await;
        }
    });
}

fn send_json(conn: &Connection, value: &Value, sent: Option<oneshot::Sender<()>>) {
    // Serialising a serde_json::Value cannot fail (string keys only).
    let text = serde_json::to_string(value).unwrap_or_default();
    conn.send(Frame {
        text: text.into(),
        sent,
    });
}

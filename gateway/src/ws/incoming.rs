//! What happens to one message from a client: framing errors are answered at once,
//! answers to server→client requests go back to their service, and every request (or
//! batch) runs in its own task so a slow call never holds up the next one — replies may
//! go out in any order (DESIGN.md §4).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use crate::dispatch::router::Handled;
use crate::dispatch::system::AfterReply;
use crate::gateway::Gateway;
use crate::wire::connection::{Connection, Frame};
use crate::wire::jsonrpc::{self, Incoming, Item};

/// Handles one text (or binary) message.
pub async fn on_message(gw: &Arc<Gateway>, conn: &Arc<Connection>, bytes: &[u8]) {
    match jsonrpc::parse(bytes) {
        Incoming::Rejected(response) | Incoming::Single(Item::Invalid(response)) => {
            tracing::debug!(code = %response["error"]["code"], "framing error");
            send_json(conn, &response, None);
        }
        Incoming::Single(Item::Response { id, outcome }) => {
            gw.requests.on_answer(conn, &id, outcome);
        }
        Incoming::Single(Item::Call(call)) => {
            let permit = permit(conn).await;
            let (gw, conn) = (gw.clone(), conn.clone());
            tokio::spawn(async move {
                let handled = gw.dispatcher.call(&conn, call).await;
                drop(permit);
                deliver(
                    &gw,
                    &conn,
                    handled.response,
                    handled.after.into_iter().collect(),
                );
            });
        }
        Incoming::Batch(items) => {
            let permit = permit(conn).await;
            let (gw, conn) = (gw.clone(), conn.clone());
            tokio::spawn(async move {
                let results = futures::future::join_all(
                    items.into_iter().map(|item| batch_member(&gw, &conn, item)),
                )
                .await;
                drop(permit);
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

async fn permit(conn: &Connection) -> Option<OwnedSemaphorePermit> {
    // The semaphore is never closed; `None` would only mean "unbounded" anyway.
    conn.in_flight.clone().acquire_owned().await.ok()
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

//! The life of one WebSocket connection: register it, start its writer, read messages
//! until the client leaves (or is closed by the gateway), then tear down — tell the
//! services it is gone and answer its unanswered server→client requests with
//! `connection_gone`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use futures::StreamExt;
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio_tungstenite::tungstenite;
use tracing::Instrument;

use super::{incoming, outbound};
use crate::gateway::Gateway;
use crate::upstream::presence::Change;
use crate::wire::connection::{Connection, CLOSE_POLICY};
use crate::wire::counters::bump;
use crate::wire::preauth::HELLO_DEADLINE_REASON;
use crate::wire::socket::PeerSocket;

/// WebSocket close code: message too big (RFC 6455 §7.4.1).
const CLOSE_TOO_BIG: u16 = 1009;
/// WebSocket close code: protocol error.
const CLOSE_PROTOCOL: u16 = 1002;
/// WebSocket close code: invalid payload data (bad UTF-8).
const CLOSE_INVALID_DATA: u16 = 1007;

/// Serves one upgraded WebSocket until it ends. `waiting` is its place among the
/// connections waiting for `system.hello` (issue 37 §3), given back once it authenticates.
pub async fn run(
    gw: Arc<Gateway>,
    socket: WebSocket,
    peer: PeerSocket,
    waiting: OwnedSemaphorePermit,
) {
    let id = snowpea_common::ids::new_id("c");
    let span = tracing::info_span!("conn", conn = %id);
    async move {
        tracing::debug!(peer_addr = %peer.addr, "connected");
        let (tx, rx) = mpsc::channel(gw.limits.outbound_queue);
        let conn = Arc::new(Connection::new(
            id,
            tx,
            gw.limits.max_in_flight,
            gw.limits.max_queued,
        ));
        gw.connections.insert(conn.clone());
        bump(&gw.counters.connections_total);
        bump(&gw.counters.connections);

        let (sink, stream) = socket.split();
        let writer = tokio::spawn(outbound::write_loop(
            sink,
            rx,
            conn.close_receiver(),
            peer,
            conn.outbound_bytes(),
        ));
        read_loop(&gw, &conn, stream, waiting).await;

        conn.stop();
        let (pending, announced) = conn.mark_closed(|was_authenticated| {
            was_authenticated.then(|| gw.presence.announce(Change::Closed(conn.id.clone())))
        });
        gw.connections.remove(&conn.id);
        if conn.overflowed() {
            bump(&gw.counters.queue_overflows);
        }
        gw.requests.connection_gone(pending);
        if let Some(announced) = announced {
            if !announced.wait(Duration::from_secs(10)).await {
                tracing::debug!("not every service heard of the close in time");
            }
        }
        if tokio::time::timeout(Duration::from_secs(6), writer)
            .await
            .is_err()
        {
            tracing::debug!("writer did not finish in time");
        }
        // Counted until the socket is let go (its close frame handed to the kernel).
        gw.counters
            .connections
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        tracing::debug!("disconnected");
    }
    .instrument(span)
    .await
}

async fn read_loop(
    gw: &Arc<Gateway>,
    conn: &Arc<Connection>,
    mut stream: futures::stream::SplitStream<WebSocket>,
    waiting: OwnedSemaphorePermit,
) {
    let mut close = conn.close_receiver();
    // Its place in the budget goes with the first successful hello (`Connection::set_peer`);
    // without one by the deadline, the connection is closed.
    conn.hold_until_hello(waiting);
    let hello_by = tokio::time::sleep(gw.pre_auth.deadline);
    tokio::pin!(hello_by);
    let mut hello_due = true;
    loop {
        let msg = tokio::select! {
            biased;
            _ = close.changed() => return,
            _ = &mut hello_by, if hello_due => {
                hello_due = false;
                // Only a connection that never authenticated: a failed second hello leaves
                // an earlier client unauthenticated, not subject to the deadline.
                if !conn.ever_authenticated() {
                    bump(&gw.counters.hello_timeouts);
                    tracing::debug!("no system.hello within the deadline; closing");
                    conn.close(CLOSE_POLICY, HELLO_DEADLINE_REASON);
                    return;
                }
                continue;
            }
            m = stream.next() => m,
        };
        match msg {
            None | Some(Ok(Message::Close(_))) => return,
            Some(Ok(Message::Text(text))) => incoming::on_message(gw, conn, text.as_bytes()).await,
            Some(Ok(Message::Binary(bytes))) => incoming::on_message(gw, conn, &bytes).await,
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Err(e)) => {
                on_read_error(conn, e, gw.limits.max_message);
                return;
            }
        }
    }
}

/// A read error ends the connection; a size or protocol violation says why first.
fn on_read_error(conn: &Connection, e: axum::Error, max: usize) {
    let inner = e.into_inner();
    match inner.downcast_ref::<tungstenite::Error>() {
        Some(tungstenite::Error::Capacity(c)) => {
            tracing::debug!(error = %c, "message over the size limit");
            conn.close(
                CLOSE_TOO_BIG,
                &format!("message too big (limit {max} bytes)"),
            );
        }
        Some(tungstenite::Error::Protocol(p)) => {
            tracing::debug!(error = %p, "WebSocket protocol violation");
            conn.close(CLOSE_PROTOCOL, "WebSocket protocol error");
        }
        Some(tungstenite::Error::Utf8(_)) => {
            conn.close(CLOSE_INVALID_DATA, "text frame is not valid UTF-8");
        }
        _ => tracing::debug!(error = %inner, "read failed"),
    }
}

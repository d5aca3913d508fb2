//! The writer half of a connection: drains the bounded outbound queue into the socket
//! (coalescing whatever is queued into one flush) until the close switch flips, then
//! sends the close frame ahead of whatever is still queued (that backlog is dropped; the
//! client recovers it with `session.resume`). The socket's send buffer was kept with room
//! for it (`wire/socket.rs`), so the close frame reaches a client that stopped reading
//! whenever it reads again; the wait for it is bounded, then the socket is dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::stream::SplitSink;
use futures::SinkExt;
use tokio::sync::{mpsc, oneshot, watch};

use crate::wire::connection::{CloseState, Frame};
use crate::wire::socket::PeerSocket;

/// Frames written before one flush.
const COALESCE: usize = 64;
/// How long a close frame may take to go out.
const CLOSE_DEADLINE: Duration = Duration::from_secs(5);

/// Writes frames until the queue ends or the close switch flips; subtracts each frame's
/// length from `queued` (the connection's unread byte count) once it is written.
pub async fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    mut rx: mpsc::Receiver<Frame>,
    mut close: watch::Receiver<CloseState>,
    socket: PeerSocket,
    queued: Arc<AtomicUsize>,
) {
    let mut sent: Vec<oneshot::Sender<()>> = Vec::new();
    let end = loop {
        let frame = tokio::select! {
            biased;
            r = close.changed() => break ended(r.is_ok(), &close),
            f = rx.recv() => match f {
                Some(f) => f,
                None => break CloseState::Stop,
            },
        };
        let write = async {
            feed(&mut sink, frame, &mut sent, &queued).await?;
            for _ in 1..COALESCE {
                match rx.try_recv() {
                    Ok(f) => feed(&mut sink, f, &mut sent, &queued).await?,
                    Err(_) => break,
                }
            }
            sink.flush().await
        };
        let result = tokio::select! {
            biased;
            r = close.changed() => break ended(r.is_ok(), &close),
            r = write => r,
        };
        if result.is_err() {
            // The socket is gone; the reader sees the same and tears down.
            return;
        }
        for tx in sent.drain(..) {
            let _ = tx.send(());
        }
    };
    if let CloseState::Close { code, reason } = end {
        drop(rx);
        socket.make_room_for_close();
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        if tokio::time::timeout(CLOSE_DEADLINE, sink.send(Message::Close(Some(frame))))
            .await
            .is_err()
        {
            tracing::debug!("close frame not taken by the client within the deadline");
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
}

fn ended(still_open: bool, close: &watch::Receiver<CloseState>) -> CloseState {
    if still_open {
        close.borrow().clone()
    } else {
        CloseState::Stop
    }
}

async fn feed(
    sink: &mut SplitSink<WebSocket, Message>,
    frame: Frame,
    sent: &mut Vec<oneshot::Sender<()>>,
    queued: &AtomicUsize,
) -> Result<(), axum::Error> {
    if let Some(tx) = frame.sent {
        sent.push(tx);
    }
    // Out of the queue and into the socket's buffer (bounded by the WebSocket writer).
    queued.fetch_sub(frame.text.len(), Ordering::AcqRel);
    sink.feed(Message::Text(frame.text)).await
}

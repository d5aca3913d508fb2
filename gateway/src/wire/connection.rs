//! [`Connection`]: what the gateway holds of one WebSocket client — its
//! bounded outbound queue, its close switch, what `system.hello` established, and the
//! server→client requests it still owes an answer to.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::ws::Utf8Bytes;
use snowpea_common::context::CallContext;
use snowpea_proto::limits::{CONNECTION_OUTBOUND_BYTES, CONNECTION_REQUEST_BYTES};
use snowpea_proto::rpc::v1::ConnectionInfo;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tonic::metadata::MetadataMap;

/// Close reason when a client does not read fast enough (DESIGN.md §4: never a silent drop).
pub const QUEUE_FULL_REASON: &str = "outbound queue full; reconnect and call session.resume";
/// WebSocket close code for a policy violation (RFC 6455 §7.4.1).
pub const CLOSE_POLICY: u16 = 1008;

/// One text frame for the client; `sent` fires once it is written to the socket.
#[derive(Debug)]
pub struct Frame {
    /// The JSON text.
    pub text: Utf8Bytes,
    /// Notified after the frame was flushed (used to act after answering, e.g. shutdown).
    pub sent: Option<oneshot::Sender<()>>,
}

impl Frame {
    /// A frame nobody waits on.
    pub fn text(text: impl Into<Utf8Bytes>) -> Self {
        Frame {
            text: text.into(),
            sent: None,
        }
    }
}

/// What the writer should do with the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseState {
    /// Keep writing.
    Open,
    /// Send a close frame with this code and reason, then stop.
    Close {
        /// WebSocket close code.
        code: u16,
        /// Close reason shown to the client.
        reason: String,
    },
    /// Stop without a close frame (the client already closed, or the socket failed).
    Stop,
}

/// An authenticated client: what `system.hello` said, ready to travel as gRPC metadata.
#[derive(Debug)]
pub struct Peer {
    /// As announced to the services.
    pub info: ConnectionInfo,
    /// The [`CallContext`] of every call of this connection, already encoded.
    pub metadata: MetadataMap,
}

impl Peer {
    /// Builds the peer and its call metadata.
    pub fn new(info: ConnectionInfo) -> Self {
        let ctx = CallContext {
            connection_id: Some(info.connection_id.clone()),
            client_id: info.client_id.clone(),
            client_kind: info.client_kind.clone(),
            instance_id: info.instance_id.clone(),
        };
        let mut metadata = MetadataMap::new();
        ctx.apply(&mut metadata);
        Peer { info, metadata }
    }
}

/// A server→client request waiting for the client's answer.
#[derive(Debug, Clone)]
pub struct PendingCallback {
    /// Service that sent it (gets the answer through ServiceBus.Reply).
    pub service: String,
    /// The service's own request id.
    pub request_id: String,
}

#[derive(Debug, Default)]
struct Inner {
    peer: Option<Arc<Peer>>,
    /// Its place among the connections waiting for `system.hello` (issue 37 §3), given
    /// back by the first successful hello or when the connection goes.
    waiting_for_hello: Option<OwnedSemaphorePermit>,
    /// A `system.hello` succeeded at least once (a later failed one leaves the connection
    /// unauthenticated, but it is no longer subject to the hello deadline).
    ever_authenticated: bool,
    closed: bool,
    pending: HashMap<String, PendingCallback>,
}

/// One WebSocket client connection.
#[derive(Debug)]
pub struct Connection {
    /// Gateway-assigned id, unique across gateway restarts.
    pub id: String,
    outbound: mpsc::Sender<Frame>,
    close: watch::Sender<CloseState>,
    inner: Mutex<Inner>,
    overflowed: AtomicBool,
    /// Bytes of frames queued and not yet written; shared with the writer, which
    /// subtracts what it wrote (bounded by `CONNECTION_OUTBOUND_BYTES`).
    outbound_bytes: Arc<AtomicUsize>,
    /// This connection's requests: at most `max_in_flight` run, the others wait for a slot
    /// in arrival order (the semaphore's queue is this connection's own).
    lane: Arc<Lane>,
}

/// The running slots and the count of one connection's admitted requests.
#[derive(Debug)]
struct Lane {
    running: Arc<Semaphore>,
    /// Requests admitted and not yet answered (running or waiting).
    admitted: AtomicUsize,
    /// Most requests admitted at once: running slots plus queue.
    max_admitted: usize,
    /// Bytes of the admitted requests' messages.
    bytes: AtomicUsize,
}

/// One admitted request's place in its connection's lane; released when dropped.
#[derive(Debug)]
pub struct Admitted {
    lane: Arc<Lane>,
    bytes: usize,
}

impl Admitted {
    /// Waits for a running slot (behind this connection's earlier requests only).
    pub async fn run(&self) -> Option<OwnedSemaphorePermit> {
        // The semaphore is never closed.
        self.lane.running.clone().acquire_owned().await.ok()
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.lane.admitted.fetch_sub(1, Ordering::AcqRel);
        self.lane.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

impl Connection {
    /// A connection whose frames go into `outbound`, running at most `max_in_flight` of
    /// its requests at once with up to `max_queued` more waiting.
    pub fn new(
        id: String,
        outbound: mpsc::Sender<Frame>,
        max_in_flight: usize,
        max_queued: usize,
    ) -> Self {
        Connection {
            id,
            outbound,
            close: watch::channel(CloseState::Open).0,
            inner: Mutex::new(Inner::default()),
            overflowed: AtomicBool::new(false),
            outbound_bytes: Arc::new(AtomicUsize::new(0)),
            lane: Arc::new(Lane {
                running: Arc::new(Semaphore::new(max_in_flight)),
                admitted: AtomicUsize::new(0),
                max_admitted: max_in_flight.saturating_add(max_queued),
                bytes: AtomicUsize::new(0),
            }),
        }
    }

    /// Admits one request (or batch) whose message is `bytes` long into this connection's
    /// lane; `None` when its own queue is full or its admitted requests would hold more
    /// than [`CONNECTION_REQUEST_BYTES`] (the request is then refused `busy`). A message
    /// is always admitted when nothing else is.
    pub fn admit(&self, bytes: usize) -> Option<Admitted> {
        let lane = &self.lane;
        if lane.admitted.fetch_add(1, Ordering::AcqRel) >= lane.max_admitted {
            lane.admitted.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let before = lane.bytes.fetch_add(bytes, Ordering::AcqRel);
        if before > 0 && before.saturating_add(bytes) > CONNECTION_REQUEST_BYTES {
            lane.bytes.fetch_sub(bytes, Ordering::AcqRel);
            lane.admitted.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Admitted {
            lane: lane.clone(),
            bytes,
        })
    }

    /// The byte count of frames queued for the writer; the writer subtracts each frame's
    /// length once written (see [`Connection::send`]).
    pub fn outbound_bytes(&self) -> Arc<AtomicUsize> {
        self.outbound_bytes.clone()
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave it inconsistent (plain inserts).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a frame. A full queue — its frame count, or more than
    /// [`CONNECTION_OUTBOUND_BYTES`] unread (one bigger frame goes into an empty queue) —
    /// closes the connection with [`QUEUE_FULL_REASON`] and returns false; a connection
    /// that is already going away returns false.
    pub fn send(&self, frame: Frame) -> bool {
        let len = frame.text.len();
        let before = self.outbound_bytes.fetch_add(len, Ordering::AcqRel);
        if before > 0 && before.saturating_add(len) > CONNECTION_OUTBOUND_BYTES {
            self.outbound_bytes.fetch_sub(len, Ordering::AcqRel);
            self.overflow();
            return false;
        }
        match self.outbound.try_send(frame) {
            Ok(()) => true,
            Err(e) => {
                self.outbound_bytes.fetch_sub(len, Ordering::AcqRel);
                if matches!(e, TrySendError::Full(_)) {
                    self.overflow();
                }
                false
            }
        }
    }

    fn overflow(&self) {
        if !self.overflowed.swap(true, Ordering::Relaxed) {
            tracing::warn!(conn = %self.id, "client does not keep up; closing it");
        }
        self.close(CLOSE_POLICY, QUEUE_FULL_REASON);
    }

    /// True once the queue overflowed.
    pub fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Relaxed)
    }

    /// Asks the writer to send a close frame and end the connection (first call wins).
    pub fn close(&self, code: u16, reason: &str) {
        self.close.send_if_modified(|s| {
            if *s == CloseState::Open {
                *s = CloseState::Close {
                    code,
                    reason: reason.to_owned(),
                };
                true
            } else {
                false
            }
        });
    }

    /// Ends the connection without a close frame, unless a close is already under way.
    pub fn stop(&self) {
        self.close.send_if_modified(|s| {
            if *s == CloseState::Open {
                *s = CloseState::Stop;
                true
            } else {
                false
            }
        });
    }

    /// Watches the close switch.
    pub fn close_receiver(&self) -> watch::Receiver<CloseState> {
        self.close.subscribe()
    }

    /// Holds `place` (among the connections waiting for `system.hello`) until the first
    /// successful hello ([`Connection::set_peer`]) or the end of the connection.
    pub fn hold_until_hello(&self, place: OwnedSemaphorePermit) {
        let mut inner = self.inner();
        if inner.peer.is_none() && !inner.closed {
            inner.waiting_for_hello = Some(place);
        }
    }

    /// True once a `system.hello` has succeeded on this connection (whatever came after).
    pub fn ever_authenticated(&self) -> bool {
        self.inner().ever_authenticated
    }

    /// The authenticated peer, if `system.hello` succeeded.
    pub fn peer(&self) -> Option<Arc<Peer>> {
        self.inner().peer.clone()
    }

    /// Sets (or, with `None`, clears) the authenticated peer, then runs `then` with the new
    /// peer while still holding the connection's lock, so what `then` announces about one
    /// connection goes out in the order its state changed. Refused (`None`, `then` not
    /// run) once the connection is closed, so a hello racing a disconnect never
    /// resurrects it.
    pub fn set_peer<R>(
        &self,
        peer: Option<Arc<Peer>>,
        then: impl FnOnce(Option<&Peer>) -> R,
    ) -> Option<R> {
        let mut inner = self.inner();
        if inner.closed && peer.is_some() {
            return None;
        }
        if peer.is_some() {
            inner.waiting_for_hello = None;
            inner.ever_authenticated = true;
        }
        inner.peer = peer;
        Some(then(inner.peer.as_deref()))
    }

    /// Marks the connection closed and hands back its unanswered server→client requests;
    /// `then` runs under the connection's lock with whether it was authenticated (see
    /// [`Connection::set_peer`] for why under the lock).
    pub fn mark_closed<R>(&self, then: impl FnOnce(bool) -> R) -> (Vec<PendingCallback>, R) {
        let mut inner = self.inner();
        inner.closed = true;
        inner.waiting_for_hello = None;
        let was_authenticated = inner.peer.take().is_some();
        let after = then(was_authenticated);
        (inner.pending.drain().map(|(_, p)| p).collect(), after)
    }

    /// Records a server→client request; false when the connection is closed.
    pub fn add_pending(&self, id: String, p: PendingCallback) -> bool {
        let mut inner = self.inner();
        if inner.closed {
            return false;
        }
        inner.pending.insert(id, p);
        true
    }

    /// Takes the request a client answer refers to.
    pub fn take_pending(&self, id: &str) -> Option<PendingCallback> {
        self.inner().pending.remove(id)
    }
}

#[cfg(test)]
#[path = "connection_tests.rs"]
mod tests;

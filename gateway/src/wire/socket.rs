//! Keeping room in a client's TCP send buffer for its close frame (issue 24 §3).
//!
//! A client that stops reading fills its receive buffer, then ours; once the outbound queue
//! overflows the gateway closes it with 1008 and a reason. If our kernel send buffer is full
//! at that moment the close frame cannot get in behind the backlog, and after the bounded
//! wait the socket is dropped: a client that resumes reading later sees the backlog, then a
//! bare EOF. So every accepted socket gets `TCP_NOTSENT_LOWAT` ([`NOTSENT_LOWAT`]): the
//! kernel stops taking writes once that much is waiting unsent, long before the buffer is
//! full, and the frames wait in the gateway's own queue instead. To close, the writer lifts
//! the mark ([`PeerSocket::make_room_for_close`]): the frames already handed to the socket
//! and the close frame then fit in the buffer at once, and the kernel delivers them (then
//! FIN) whenever the client reads again — also after the gateway has dropped the socket.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::net::{TcpListener, TcpStream};

use super::preauth::{Budgeted, PreAuth};

/// Unsent bytes the kernel holds for a client before writes wait (128 KiB).
pub const NOTSENT_LOWAT: u32 = 128 << 10;

/// Sets `TCP_NODELAY` and [`NOTSENT_LOWAT`] on a newly accepted socket (best effort:
/// logged when refused). Events go out as many small frames: without TCP_NODELAY, Nagle's
/// algorithm holds them back until the client's delayed ACK (~40 ms), so a turn's events
/// would arrive in a late burst instead of as they happen.
pub fn tap(tcp: &mut TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
    }
    keep_room(tcp);
}

/// Sets [`NOTSENT_LOWAT`] on a socket (best effort: logged when refused).
pub fn keep_room(tcp: &TcpStream) {
    if let Err(e) = socket2::SockRef::from(tcp).set_tcp_notsent_lowat(NOTSENT_LOWAT) {
        tracing::debug!(error = %e, "cannot set TCP_NOTSENT_LOWAT");
    }
}

/// The peer of an HTTP connection and its socket, as axum's connect info.
#[derive(Debug, Clone)]
pub struct PeerSocket {
    /// The client's address.
    pub addr: SocketAddr,
    /// Set once the connection is upgraded: its socket's request deadline is off
    /// ([`Budgeted`]).
    upgraded: Arc<AtomicBool>,
    /// The accepted socket. Valid while the connection it was accepted for is served: a
    /// WebSocket's writer, which holds that socket, is the only user.
    fd: RawFd,
}

impl PeerSocket {
    /// The request arrived and was upgraded: the socket's request deadline no longer
    /// applies (the WebSocket's hello deadline does).
    pub fn mark_upgraded(&self) {
        self.upgraded.store(true, Ordering::Release);
    }

    /// Lifts the low-water mark of [`keep_room`] so the close frame (and what is already
    /// handed to the socket) goes into the send buffer without the client reading.
    ///
    /// Only call while the connection's socket is still held (its writer is running).
    pub fn make_room_for_close(&self) {
        // SAFETY: the fd belongs to the TCP stream of this connection, which its writer (the
        // only caller) still holds, so it is open and is that socket.
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        if let Err(e) = socket2::SockRef::from(&fd).set_tcp_notsent_lowat(i32::MAX as u32) {
            tracing::debug!(error = %e, "cannot lift TCP_NOTSENT_LOWAT");
        }
    }
}

/// The gateway's listener: it accepts only while the open-socket budget has room
/// ([`PreAuth::open_socket`]), and every accepted socket goes through [`tap`] and gets its
/// request deadline ([`Budgeted`]).
#[derive(Debug)]
pub struct Tapped {
    /// The bound listener.
    pub listener: TcpListener,
    /// The budgets before authentication.
    pub pre_auth: PreAuth,
}

impl Listener for Tapped {
    type Io = Budgeted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Budgeted, SocketAddr) {
        let open = self.pre_auth.open_socket().await;
        // axum's accept loop for TcpListener (it retries accept errors after a pause).
        let (mut tcp, addr) = Listener::accept(&mut self.listener).await;
        tap(&mut tcp);
        (Budgeted::new(tcp, open, self.pre_auth.deadline), addr)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

impl Connected<IncomingStream<'_, Tapped>> for PeerSocket {
    fn connect_info(stream: IncomingStream<'_, Tapped>) -> Self {
        PeerSocket {
            addr: *stream.remote_addr(),
            upgraded: stream.io().upgraded(),
            fd: stream.io().tcp().as_raw_fd(),
        }
    }
}

//! Before authentication (issue 37 §3): what a client that has not completed `system.hello`
//! may hold of the gateway, so that a flood of idle upgrades and half-open sockets neither
//! exhausts descriptors nor slows authenticated clients.
//!
//! * **Open sockets.** At most [`Limits::max_connections`] accepted TCP connections at once
//!   (a permit travels with each socket, [`Budgeted`]); past it the accept loop waits and
//!   new connections stay in the kernel's backlog, costing the gateway nothing. At start the
//!   descriptor limit is raised to its hard maximum
//!   (`snowpea_common::descriptors::raise_to_hard_limit`) and the cap
//!   kept below it, so the gateway itself always has descriptors left.
//! * **The HTTP request.** A socket must send a complete request within
//!   [`Limits::hello_deadline`] of its accept ([`Budgeted`]: its reads fail with
//!   `TimedOut` once the deadline passed and the connection has not been upgraded), so a
//!   half-open socket or one that trickles its headers is dropped.
//! * **The hello.** At most [`Limits::max_unauthenticated`] WebSocket connections may be
//!   waiting for a successful `system.hello` at once; one more upgrade is refused `503`
//!   before it is upgraded ([`PreAuth::try_enter`]). A connection without a successful
//!   hello [`Limits::hello_deadline`] after its upgrade is closed with 1008 and
//!   [`HELLO_DEADLINE_REASON`].
//!
//! [`Limits::max_connections`]: crate::wire::limits::Limits::max_connections
//! [`Limits::hello_deadline`]: crate::wire::limits::Limits::hello_deadline
//! [`Limits::max_unauthenticated`]: crate::wire::limits::Limits::max_unauthenticated

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tokio::time::Sleep;

/// Close reason of a WebSocket that did not authenticate in time.
pub const HELLO_DEADLINE_REASON: &str =
    "no successful system.hello in time; reconnect and call it first";

/// Descriptors the gateway keeps for itself below the limit (service sockets, files, logs).
pub const RESERVED_DESCRIPTORS: u64 = 128;

/// The open-socket cap for a descriptor limit `nofile`: `wanted`, kept
/// [`RESERVED_DESCRIPTORS`] below the limit (at least 16).
pub fn connection_cap(wanted: usize, nofile: Option<u64>) -> usize {
    match nofile {
        Some(n) => wanted.min(n.saturating_sub(RESERVED_DESCRIPTORS).max(16) as usize),
        None => wanted,
    }
}

/// The budgets of unauthenticated clients, shared by the listener and the upgrade handler.
#[derive(Debug, Clone)]
pub struct PreAuth {
    open: Arc<Semaphore>,
    waiting_for_hello: Arc<Semaphore>,
    /// How long a socket has for its request, and a WebSocket for its hello.
    pub deadline: Duration,
    max_unauthenticated: usize,
}

impl PreAuth {
    /// Budgets of `max_connections` open sockets and `max_unauthenticated` WebSockets
    /// waiting for their hello, each with `deadline`.
    pub fn new(max_connections: usize, max_unauthenticated: usize, deadline: Duration) -> Self {
        PreAuth {
            open: Arc::new(Semaphore::new(max_connections.max(1))),
            waiting_for_hello: Arc::new(Semaphore::new(max_unauthenticated.max(1))),
            deadline,
            max_unauthenticated: max_unauthenticated.max(1),
        }
    }

    /// Waits for room for one more open socket (the accept loop pauses meanwhile).
    pub async fn open_socket(&self) -> OwnedSemaphorePermit {
        // The semaphore is never closed.
        self.open
            .clone()
            .acquire_owned()
            .await
            .expect("the open-socket semaphore is never closed")
    }

    /// A place among the WebSockets waiting for their hello, or `Err` with the refusal
    /// text when all [`Limits::max_unauthenticated`] are taken.
    ///
    /// [`Limits::max_unauthenticated`]: crate::wire::limits::Limits::max_unauthenticated
    pub fn try_enter(&self) -> Result<OwnedSemaphorePermit, String> {
        match self.waiting_for_hello.clone().try_acquire_owned() {
            Ok(p) => Ok(p),
            Err(TryAcquireError::NoPermits | TryAcquireError::Closed) => Err(format!(
                "too many connections waiting for system.hello (at most {}); try again shortly\n",
                self.max_unauthenticated
            )),
        }
    }
}

/// An accepted socket with its place in the open-socket budget and the deadline of its
/// first request: until [`Budgeted::upgraded`]'s flag is set, a read after the deadline
/// fails with `TimedOut` (hyper then drops the connection).
#[derive(Debug)]
pub struct Budgeted {
    tcp: TcpStream,
    deadline: Option<Pin<Box<Sleep>>>,
    upgraded: Arc<AtomicBool>,
    _open: OwnedSemaphorePermit,
}

impl Budgeted {
    /// Wraps `tcp`, holding `open` until it is dropped, with `deadline` from now.
    pub fn new(tcp: TcpStream, open: OwnedSemaphorePermit, deadline: Duration) -> Self {
        Budgeted {
            tcp,
            deadline: Some(Box::pin(tokio::time::sleep(deadline))),
            upgraded: Arc::new(AtomicBool::new(false)),
            _open: open,
        }
    }

    /// The socket.
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// The flag the upgrade handler sets: the request arrived, the deadline is off.
    pub fn upgraded(&self) -> Arc<AtomicBool> {
        self.upgraded.clone()
    }
}

impl AsyncRead for Budgeted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(deadline) = this.deadline.as_mut() {
            if this.upgraded.load(Ordering::Acquire) {
                this.deadline = None;
            } else if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no complete request before the deadline",
                )));
            }
        }
        Pin::new(&mut this.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Budgeted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn the_cap_stays_below_the_descriptor_limit() {
        assert_eq!(
            connection_cap(4096, Some(1024)),
            1024 - RESERVED_DESCRIPTORS as usize
        );
        assert_eq!(connection_cap(4096, Some(1 << 20)), 4096);
        assert_eq!(connection_cap(4096, Some(100)), 16);
        assert_eq!(connection_cap(4096, None), 4096);
    }

    #[test]
    fn a_full_hello_budget_refuses_at_once_and_frees_on_drop() {
        let pre = PreAuth::new(8, 2, Duration::from_secs(1));
        let a = pre.try_enter().unwrap();
        let _b = pre.try_enter().unwrap();
        let e = pre.try_enter().unwrap_err();
        assert!(e.contains("at most 2"), "{e}");
        drop(a);
        assert!(pre.try_enter().is_ok());
    }

    async fn pair(pre: &PreAuth) -> (Budgeted, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let permit = pre.open_socket().await;
        (Budgeted::new(server, permit, pre.deadline), client)
    }

    #[tokio::test]
    async fn a_silent_socket_times_out_and_gives_its_place_back() {
        let pre = PreAuth::new(1, 1, Duration::from_millis(100));
        let (mut server, _client) = pair(&pre).await;
        assert!(
            tokio::time::timeout(Duration::from_millis(20), pre.open_socket())
                .await
                .is_err(),
            "the one place is taken"
        );
        let mut buf = [0u8; 8];
        let e = snowpea_testkit::within(
            Duration::from_secs(10),
            "the deadline",
            server.read(&mut buf),
        )
        .await
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        drop(server);
        let _place = snowpea_testkit::within(
            Duration::from_secs(10),
            "the freed place",
            pre.open_socket(),
        )
        .await;
    }

    #[tokio::test]
    async fn an_upgraded_socket_has_no_deadline() {
        let pre = PreAuth::new(4, 4, Duration::from_millis(50));
        let (mut server, mut client) = pair(&pre).await;
        server.upgraded().store(true, Ordering::Release);
        tokio::time::sleep(Duration::from_millis(100)).await;
        client.write_all(b"late").await.unwrap();
        let mut buf = [0u8; 4];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"late");
    }
}

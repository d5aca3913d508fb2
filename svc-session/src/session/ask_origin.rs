//! Asking a session's origin connection a server→client request and waiting for the first
//! resolution (shared by `approval.request` and `question.request`; see [`ask_origin`]).
//!
//! The loop follows the session's origin: when the origin changes (a `session.attach`, the
//! same clientId re-connecting, the gateway re-announcing the connection) the request is sent
//! to the new one; a re-announce of the connection already asked keeps the request in flight,
//! so a client is never asked twice. What a client's reply means (an answer, a reason to stop,
//! or "wait for another origin") is the caller's decision ([`Reply`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use snowpea_common::bus::{BusHub, RequestError};
use snowpea_proto::typed::ServerRequest;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How [`ask_origin`] treats the origin connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AskOptions {
    /// When the wait ends with [`Ended::TimedOut`].
    pub deadline: Instant,
    /// Extra time the client gets to answer beyond the deadline (a request sent with
    /// `deadline - now + grace` as its timeout).
    pub grace: Duration,
    /// Only send to an origin the gateway reports live (a closed origin is not tried and the
    /// request waits for another one); without it a gone origin fails at once and the
    /// caller's [`Reply`] decides.
    pub require_live: bool,
}

/// What the caller makes of one reply (or failure) of the origin.
pub(crate) enum Reply<R> {
    /// The request is resolved with this.
    Resolve(R),
    /// Not an answer: wait for the origin to change (or another resolution).
    WaitForNewOrigin,
}

/// How the wait ended when no reply of the origin resolved it.
pub(crate) enum Ended<R> {
    /// Resolved by a reply of the origin ([`Reply::Resolve`]) or through `answered` (e.g. a
    /// `*.respond` call from a client).
    Resolved(R),
    /// `deadline` passed.
    TimedOut,
    /// Cancelled (interrupt, close), `answered` dropped, or the session went away.
    Interrupted,
}

type ClientAnswer = Pin<Box<dyn Future<Output = Result<Value, RequestError>> + Send>>;

/// Sends `request` to the session's origin connection (following `origin` as it changes) and
/// waits, at most until `options.deadline`, for the first of: a reply the caller's `on_reply` resolves,
/// `answered` (e.g. another client's `*.respond`), `cancel`. The request in flight is dropped
/// when the origin changes to another connection; a connection a reply was
/// [`Reply::WaitForNewOrigin`] for is not asked again until the origin changes.
pub(crate) async fn ask_origin<P, R>(
    hub: &Arc<BusHub>,
    mut origin: watch::Receiver<Option<String>>,
    request: &P,
    options: AskOptions,
    answered: &mut oneshot::Receiver<R>,
    cancel: &CancellationToken,
    mut on_reply: impl FnMut(Result<Value, RequestError>) -> Reply<R>,
) -> Ended<R>
where
    P: ServerRequest + Clone + Send + Sync + 'static,
{
    // The request in flight and its target.
    let mut inflight: Option<(String, ClientAnswer)> = None;
    // The connection a reply said to wait past (until the origin changes).
    let mut failed_on: Option<String> = None;
    loop {
        let current = origin.borrow_and_update().clone();
        match current {
            Some(o) if inflight.as_ref().is_some_and(|(t, _)| *t == o) => {}
            Some(o)
                if failed_on.as_deref() != Some(o.as_str())
                    && (!options.require_live || hub.is_live(&o)) =>
            {
                let wait =
                    options.deadline.saturating_duration_since(Instant::now()) + options.grace;
                let (hub, conn, params) = (hub.clone(), o.clone(), request.clone());
                let fut = async move { hub.request(&conn, &params, &[], wait).await };
                inflight = Some((o, Box::pin(fut)));
            }
            _ => inflight = None,
        }
        let ask_client = async {
            match inflight.as_mut() {
                Some((_, fut)) => fut.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = &mut *answered => return r.map_or(Ended::Interrupted, Ended::Resolved),
            _ = tokio::time::sleep_until(options.deadline) => return Ended::TimedOut,
            _ = cancel.cancelled() => return Ended::Interrupted,
            changed = origin.changed() => {
                if changed.is_err() {
                    return Ended::Interrupted;
                }
                failed_on = None;
            }
            outcome = ask_client => {
                let target = inflight.take().map(|(t, _)| t);
                match on_reply(outcome) {
                    Reply::Resolve(r) => return Ended::Resolved(r),
                    Reply::WaitForNewOrigin => failed_on = target,
                }
            }
        }
    }
}

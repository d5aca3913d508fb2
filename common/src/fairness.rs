//! Fair scheduling between client connections in every service (issue 24 §1): a tower layer
//! next to [`crate::calls::CallLayer`], installed by [`crate::service::serve`].
//!
//! Every call that carries a connection id (metadata `snowpea-connection-id`, set by the
//! gateway for a client's call) runs in that connection's own *lane*: at most
//! [`PER_CONNECTION_RUNNING`] of its calls run at once and the rest wait, in arrival order,
//! in that lane — never in a queue shared with other connections — so a connection
//! flooding a service holds at most that many of its workers, and a well-behaved
//! connection's call starts as soon as a worker is free. When one connection already has
//! [`PER_CONNECTION_WAITING`] calls waiting, its next call is answered at once with
//! `unavailable`, `details: {reason: "busy", connectionId, running, waiting}`: only a
//! connection's own overflow is refused, never anybody else's call. Calls without a
//! connection id (service → service rpcs, the gateway's bus and health calls) are not
//! limited. A lane lives while it has calls running or waiting.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde_json::json;
use snowpea_proto::error::{ErrorCode, RpcError};
use tokio::sync::Semaphore;

use crate::context::CONNECTION_ID;

/// Calls of one connection running at once in one service.
pub const PER_CONNECTION_RUNNING: usize = 16;
/// Calls of one connection waiting in its lane before further ones are refused `busy`
/// (the gateway itself stops reading a connection at 1,024 requests in flight).
pub const PER_CONNECTION_WAITING: usize = 1024;

/// One connection's lane.
#[derive(Debug)]
struct Lane {
    running: Arc<Semaphore>,
    waiting: AtomicUsize,
}

/// The lanes of this process, by connection id.
#[derive(Debug, Default)]
struct Lanes {
    by_connection: Mutex<HashMap<String, Arc<Lane>>>,
}

impl Lanes {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Lane>>> {
        // Plain inserts and removes: a panic elsewhere cannot leave the map inconsistent.
        self.by_connection.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lane of `connection` (created on first use).
    fn enter(&self, connection: &str) -> Arc<Lane> {
        self.map()
            .entry(connection.to_owned())
            .or_insert_with(|| {
                Arc::new(Lane {
                    running: Arc::new(Semaphore::new(PER_CONNECTION_RUNNING)),
                    waiting: AtomicUsize::new(0),
                })
            })
            .clone()
    }

    /// A call leaves its lane (it still holds its clone); the last one removes the lane.
    /// Holds are taken under the map's lock and a call drops any other clone before its
    /// hold, so two references (the map's and the leaving call's) mean no other call.
    fn leave(&self, connection: &str) {
        let mut map = self.map();
        if map
            .get(connection)
            .is_some_and(|l| Arc::strong_count(l) == 2)
        {
            map.remove(connection);
        }
    }
}

/// The tower layer (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct FairLayer {
    lanes: Arc<Lanes>,
}

impl FairLayer {
    /// A layer with no lanes yet.
    pub fn new() -> Self {
        FairLayer::default()
    }
}

impl<S> tower::Layer<S> for FairLayer {
    type Service = FairService<S>;
    fn layer(&self, inner: S) -> FairService<S> {
        FairService {
            inner,
            lanes: self.lanes.clone(),
        }
    }
}

/// The service [`FairLayer`] wraps around a server's routes.
#[derive(Debug, Clone)]
pub struct FairService<S> {
    inner: S,
    lanes: Arc<Lanes>,
}

/// The `busy` answer of a connection whose lane is full.
fn busy(connection: &str) -> tonic::Status {
    RpcError::new(
        ErrorCode::Unavailable,
        format!(
            "busy: this connection already has {PER_CONNECTION_RUNNING} calls running and \
             {PER_CONNECTION_WAITING} waiting in this service; wait for answers before sending more"
        ),
    )
    .with_details(json!({
        "reason": "busy",
        "connectionId": connection,
        "running": PER_CONNECTION_RUNNING,
        "waiting": PER_CONNECTION_WAITING,
    }))
    .into_status()
}

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for FairService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        // The clone is not ready; call the one that is (tower's documented pattern).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let connection = req
            .headers()
            .get(CONNECTION_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let Some(connection) = connection else {
            return Box::pin(inner.call(req));
        };
        let lanes = self.lanes.clone();
        Box::pin(async move {
            let mut held = Held::enter(lanes, connection);
            let lane = held.lane.clone();
            let _permit = match lane.running.clone().try_acquire_owned() {
                Ok(p) => p,
                Err(_) => {
                    if lane.waiting.fetch_add(1, Ordering::AcqRel) >= PER_CONNECTION_WAITING {
                        lane.waiting.fetch_sub(1, Ordering::AcqRel);
                        return Ok(busy(&held.connection).into_http());
                    }
                    held.waiting = true;
                    let acquired = lane.running.clone().acquire_owned().await;
                    lane.waiting.fetch_sub(1, Ordering::AcqRel);
                    held.waiting = false;
                    match acquired {
                        Ok(p) => p,
                        // A lane's semaphore is never closed; should it be, refuse, not panic.
                        Err(_) => return Ok(busy(&held.connection).into_http()),
                    }
                }
            };
            inner.call(req).await
        })
    }
}

/// A call's hold on its lane, released when the call ends or its future is dropped
/// (the gateway gave up on it) — also while it waits.
struct Held {
    lanes: Arc<Lanes>,
    connection: String,
    lane: Arc<Lane>,
    /// Counted in the lane's `waiting`.
    waiting: bool,
}

impl Held {
    fn enter(lanes: Arc<Lanes>, connection: String) -> Held {
        let lane = lanes.enter(&connection);
        Held {
            lanes,
            connection,
            lane,
            waiting: false,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.waiting {
            self.lane.waiting.fetch_sub(1, Ordering::AcqRel);
        }
        self.lanes.leave(&self.connection);
    }
}

#[cfg(test)]
#[path = "fairness_tests.rs"]
mod tests;

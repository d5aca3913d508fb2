//! The lanes of [`FairLayer`], polled by hand (no timing): a connection's calls beyond
//! its running limit wait in its own lane while another connection's call runs at once;
//! only the flooding connection's own overflow is refused `busy`; lanes go away.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::task::noop_waker_ref;
use futures::FutureExt;
use tokio::sync::Semaphore;
use tower::{Layer, Service, ServiceExt};

use super::*;

type Body = tonic::body::Body;

/// An inner service whose calls count themselves as started, then wait for `gate`.
fn gated(
    started: Arc<AtomicUsize>,
    gate: Arc<Semaphore>,
) -> impl Service<
    http::Request<Body>,
    Response = http::Response<Body>,
    Error = std::convert::Infallible,
    Future = impl Send,
> + Clone
       + Send
       + 'static {
    tower::service_fn(move |_req: http::Request<Body>| {
        let (started, gate) = (started.clone(), gate.clone());
        async move {
            started.fetch_add(1, Ordering::SeqCst);
            // Each finished call uses up one permit of the gate.
            if let Ok(p) = gate.acquire().await {
                p.forget();
            }
            Ok(http::Response::new(Body::default()))
        }
    })
}

fn request(connection: Option<&str>) -> http::Request<Body> {
    let mut req = http::Request::new(Body::default());
    if let Some(c) = connection {
        req.headers_mut().insert(CONNECTION_ID, c.parse().unwrap());
    }
    req
}

type Call =
    Pin<Box<dyn Future<Output = Result<http::Response<Body>, std::convert::Infallible>> + Send>>;

/// Starts a call and polls it once.
fn start<S>(svc: &mut S, connection: Option<&str>) -> (Call, Poll<()>)
where
    S: Service<
        http::Request<Body>,
        Response = http::Response<Body>,
        Error = std::convert::Infallible,
        Future = Call,
    >,
{
    let mut fut = svc.call(request(connection));
    let mut cx = Context::from_waker(noop_waker_ref());
    let p = fut.poll_unpin(&mut cx).map(|_| ());
    (fut, p)
}

fn lanes_of(layer: &FairLayer) -> usize {
    layer.lanes.map().len()
}

#[tokio::test]
async fn a_flooding_connection_waits_in_its_own_lane_and_only_it_is_refused_busy() {
    let started = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let layer = FairLayer::new();
    let mut svc = layer.layer(gated(started.clone(), gate.clone()));
    svc.ready().await.unwrap();

    // The flood: the first PER_CONNECTION_RUNNING run, the next PER_CONNECTION_WAITING wait.
    let mut flood = Vec::new();
    for _ in 0..PER_CONNECTION_RUNNING + PER_CONNECTION_WAITING {
        let (fut, p) = start(&mut svc, Some("c_flood"));
        assert!(p.is_pending());
        flood.push(fut);
    }
    assert_eq!(started.load(Ordering::SeqCst), PER_CONNECTION_RUNNING);

    // Another connection's call starts at once, behind nobody.
    let (_polite, p) = start(&mut svc, Some("c_polite"));
    assert!(p.is_pending());
    assert_eq!(started.load(Ordering::SeqCst), PER_CONNECTION_RUNNING + 1);
    // So does a call without a connection (service → service).
    let (_internal, p) = start(&mut svc, None);
    assert!(p.is_pending());
    assert_eq!(started.load(Ordering::SeqCst), PER_CONNECTION_RUNNING + 2);

    // The flood's own overflow is refused busy, naming the connection.
    let mut over = svc.call(request(Some("c_flood")));
    let mut cx = Context::from_waker(noop_waker_ref());
    let Poll::Ready(Ok(resp)) = over.poll_unpin(&mut cx) else {
        panic!("the overflow is answered at once");
    };
    let status = tonic::Status::from_header_map(resp.headers()).expect("an error status");
    let err = RpcError::from_status(&status);
    assert_eq!(err.code, ErrorCode::Unavailable);
    assert!(err.message.starts_with("busy"), "{}", err.message);
    let details = err.details.expect("details");
    assert_eq!(details["reason"], "busy");
    assert_eq!(details["connectionId"], "c_flood");

    // Once calls finish, the waiting ones run in turn; dropped calls leave their lane too.
    assert_eq!(lanes_of(&layer), 2);
    drop(flood);
    drop(_polite);
    assert_eq!(lanes_of(&layer), 0, "lanes end with their calls");
}

#[tokio::test]
async fn waiting_calls_run_in_arrival_order_as_running_ones_finish() {
    let started = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let layer = FairLayer::new();
    let mut svc = layer.layer(gated(started.clone(), gate.clone()));
    svc.ready().await.unwrap();
    let mut calls: Vec<Call> = (0..PER_CONNECTION_RUNNING + 2)
        .map(|_| start(&mut svc, Some("c1")).0)
        .collect();
    assert_eq!(started.load(Ordering::SeqCst), PER_CONNECTION_RUNNING);
    // One running call finishes: exactly one waiting call starts.
    gate.add_permits(1);
    let mut cx = Context::from_waker(noop_waker_ref());
    let finished = calls
        .iter_mut()
        .position(|c| c.poll_unpin(&mut cx).is_ready())
        .expect("a running call finished");
    assert!(finished < PER_CONNECTION_RUNNING);
    drop(calls.remove(finished));
    for c in calls.iter_mut() {
        let _ = c.poll_unpin(&mut cx);
    }
    assert_eq!(started.load(Ordering::SeqCst), PER_CONNECTION_RUNNING + 1);
    gate.add_permits(usize::MAX >> 4);
    for c in calls {
        c.await.unwrap();
    }
    assert_eq!(started.load(Ordering::SeqCst), PER_CONNECTION_RUNNING + 2);
    assert_eq!(lanes_of(&layer), 0);
}

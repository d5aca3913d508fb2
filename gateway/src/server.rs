//! The axum server: routes, the loopback Host guard, the WebSocket upgrade with its
//! Origin check and size limits, and graceful shutdown — on SIGTERM/SIGINT or a local
//! `system.shutdown`, stop accepting, close every socket with 1001 "daemon shutting
//! down", and return within a few seconds.

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::gateway::Gateway;
use crate::wire::counters::bump;
use crate::wire::socket::{self, PeerSocket};
use crate::ws::lifecycle;
use crate::{http, origin};

/// WebSocket close code: going away (RFC 6455 §7.4.1).
const CLOSE_GOING_AWAY: u16 = 1001;
/// Close reason on shutdown.
pub const SHUTDOWN_REASON: &str = "daemon shutting down";
/// How long in-flight HTTP requests get once shutdown starts.
const HTTP_DRAIN: Duration = Duration::from_secs(2);
/// How long connections get to take their close frames.
const WS_DRAIN: Duration = Duration::from_secs(3);

/// The router of every endpoint.
pub fn app(gw: Arc<Gateway>) -> Router {
    Router::new()
        .route("/health", get(http::health))
        .route("/version", get(http::version))
        .route("/protocol.json", get(http::protocol))
        .route(snowpea_proto::WS_PATH, get(upgrade))
        .layer(axum::middleware::from_fn(origin::host_guard))
        .with_state(gw)
}

async fn upgrade(
    State(gw): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<PeerSocket>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if let Err(reason) = origin::check_origin(&gw.home, headers.get(header::ORIGIN)) {
        return (StatusCode::FORBIDDEN, reason).into_response();
    }
    if gw.shutdown.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "daemon shutting down\n").into_response();
    }
    // A place among the connections waiting for their hello, refused cheaply when full.
    let waiting = match gw.pre_auth.try_enter() {
        Ok(p) => p,
        Err(reason) => {
            bump(&gw.counters.unauthenticated_refused);
            return (StatusCode::SERVICE_UNAVAILABLE, reason).into_response();
        }
    };
    peer.mark_upgraded();
    let tracked = gw.tasks.token();
    ws.max_message_size(gw.limits.max_message)
        .max_frame_size(gw.limits.max_frame)
        .on_failed_upgrade(|e| tracing::debug!(error = %e, "WebSocket upgrade failed"))
        .on_upgrade(move |socket| async move {
            let _tracked = tracked;
            lifecycle::run(gw, socket, peer, waiting).await;
        })
}

/// Serves until SIGTERM/SIGINT or `gw.shutdown`, then drains with deadlines.
pub async fn serve(gw: Arc<Gateway>, listener: tokio::net::TcpListener) -> anyhow::Result<()> {
    {
        // Installed now, not when the spawned task is first polled: a SIGTERM right after
        // the first connection must still close it with 1001.
        let signal = snowpea_common::service::termination_signal();
        let gw = gw.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = signal => {},
                _ = gw.shutdown.cancelled() => {},
            }
            gw.shutdown.cancel();
        });
    }
    let stop = gw.shutdown.clone();
    let close_gw = gw.clone();
    // TCP_NODELAY, and TCP_NOTSENT_LOWAT to keep room for a close frame (`wire/socket.rs`).
    let listener = socket::Tapped {
        listener,
        pre_auth: gw.pre_auth.clone(),
    };
    let server = axum::serve(
        listener,
        app(gw.clone()).into_make_service_with_connect_info::<PeerSocket>(),
    )
    .with_graceful_shutdown(async move {
        stop.cancelled().await;
        tracing::info!("shutting down");
        close_gw
            .connections
            .close_all(CLOSE_GOING_AWAY, SHUTDOWN_REASON);
    });
    let mut server = std::pin::pin!(server.into_future());
    tokio::select! {
        r = &mut server => r?,
        _ = async { gw.shutdown.cancelled().await; tokio::time::sleep(HTTP_DRAIN).await } => {
            tracing::debug!("HTTP drain deadline passed");
        }
    }
    // Connections that opened while the close went round get it too.
    gw.connections.close_all(CLOSE_GOING_AWAY, SHUTDOWN_REASON);
    gw.tasks.close();
    if tokio::time::timeout(WS_DRAIN, gw.tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("connections did not close within the deadline");
    }
    tracing::info!("stopped");
    Ok(())
}

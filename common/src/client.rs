//! gRPC clients over unix sockets (gateway → service, service → service, CLI →
//! supervisor). Channels connect lazily and reconnect on the next call after the peer
//! restarts, so callers tolerate the other side restarting (DESIGN.md §6).

use std::path::PathBuf;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// A lazily connecting channel to the gRPC server on `socket`. The authority is
/// `localhost` (what grpcurl's `-authority localhost` also sends).
pub fn unix_channel(socket: impl Into<PathBuf>) -> Channel {
    let socket: PathBuf = socket.into();
    Endpoint::from_static("http://localhost")
        .connect_timeout(Duration::from_secs(2))
        .tcp_nodelay(true)
        .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        }))
}

/// Asks `grpc.health.v1.Health/Check` on `socket` for `service` ("" = overall) and
/// returns true when it answers SERVING within `timeout`.
pub async fn is_serving(socket: impl Into<PathBuf>, service: &str, timeout: Duration) -> bool {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;
    let mut client = HealthClient::new(unix_channel(socket));
    let req = HealthCheckRequest {
        service: service.to_owned(),
    };
    match tokio::time::timeout(timeout, client.check(req)).await {
        Ok(Ok(resp)) => {
            resp.into_inner().status
                == tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        }
        _ => false,
    }
}

//! Readiness checks: a service is ready when its socket answers SERVING on
//! `grpc.health.v1`; the gateway when `GET /health` on its port answers 200.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Interval between readiness attempts.
pub const RETRY_EVERY: Duration = Duration::from_millis(20);

/// One health check of the service serving on `socket`.
pub async fn service_serving(socket: &Path) -> bool {
    snowpea_common::client::is_serving(socket, "", Duration::from_millis(500)).await
}

/// One `GET /health` against `127.0.0.1:<port>`; true on a 200 answer.
pub async fn gateway_healthy(port: u16) -> bool {
    let attempt = async {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        let req =
            format!("GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::with_capacity(256);
        let mut chunk = [0u8; 256];
        while !buf.contains(&b'\n') && buf.len() < 4096 {
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let line = String::from_utf8_lossy(&buf);
        let mut parts = line.split_whitespace();
        let _version = parts.next()?;
        Some(parts.next()? == "200")
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), attempt).await,
        Ok(Some(true))
    )
}

/// Retries `check` every [`RETRY_EVERY`] until it succeeds (true) or `timeout` passes
/// (false).
pub async fn wait_until<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        if let Ok(true) = tokio::time::timeout(left, check()).await {
            return true;
        }
        tokio::time::sleep(RETRY_EVERY.min(left)).await;
    }
}

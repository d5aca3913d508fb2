//! Opening a platform websocket (`ws://` for the test fakes on loopback, `wss://` for the
//! real platforms) over tokio-tungstenite's `client_async`, with TLS from tokio-rustls and the
//! webpki root certificates (ring provider). Bounded by [`CONNECT_TIMEOUT`].

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;

/// Longest wait for TCP + TLS + upgrade.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// A stream that is either plain TCP or TLS over TCP.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// An open platform websocket.
pub type Socket = WebSocketStream<Box<dyn Io>>;

/// Connects to `url` (`ws://` or `wss://`).
pub async fn connect(url: &str) -> anyhow::Result<Socket> {
    tokio::time::timeout(CONNECT_TIMEOUT, connect_inner(url))
        .await
        .map_err(|_| anyhow::anyhow!("websocket connect timed out"))?
}

async fn connect_inner(url: &str) -> anyhow::Result<Socket> {
    let parsed = url::Url::parse(url).map_err(|e| anyhow::anyhow!("bad websocket url: {e}"))?;
    let tls = match parsed.scheme() {
        "ws" => false,
        "wss" => true,
        other => anyhow::bail!("bad websocket scheme {other:?}"),
    };
    let host = parsed
        .host_str()
        .ok_or_else(|| anyhow::anyhow!("websocket url without host"))?
        .to_owned();
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| anyhow::anyhow!("websocket url without port"))?;
    let tcp = TcpStream::connect((host.trim_matches(['[', ']']), port)).await?;
    tcp.set_nodelay(true)?;
    let io: Box<dyn Io> = if tls {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from(host.clone())?;
        let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await?;
        Box::new(stream)
    } else {
        Box::new(tcp)
    };
    let (socket, _) = tokio_tungstenite::client_async(url, io).await?;
    Ok(socket)
}

//! The HTTP side: /health, /version, /protocol.json, the loopback Host check and the
//! WebSocket Origin check.

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use super::harness::{GatewayProc, Opts, TestHome, T};

/// A bare HTTP/1.1 GET: (status, body).
async fn get(port: u16, path: &str, host: &str) -> (u16, String) {
    let io = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(T, io)
        .await
        .expect("HTTP timed out")
        .expect("HTTP");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text[9..12].parse().expect("status code");
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn json_body(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[tokio::test]
async fn health_version_and_protocol_json() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let host = format!("127.0.0.1:{}", gw.port);
    let (status, body) = get(gw.port, "/health", &host).await;
    assert_eq!((status, json_body(&body)), (200, json!({"status": "ok"})));
    let (status, body) = get(gw.port, "/version", "localhost").await;
    assert_eq!(status, 200);
    let v = json_body(&body);
    assert_eq!(v["protocolVersion"], snowpea_proto::PROTOCOL_VERSION);
    assert!(v["serverVersion"].is_string());
    let (status, body) = get(gw.port, "/protocol.json", "[::1]").await;
    assert_eq!(status, 200);
    assert_eq!(json_body(&body), snowpea_proto::gen::protocol_json());
}

#[tokio::test]
async fn a_foreign_host_is_refused() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let (status, body) = get(gw.port, "/health", "evil.example").await;
    assert_eq!(status, 403);
    assert!(body.contains("Host"), "{body}");
    let (status, _) = get(
        gw.port,
        "/ws",
        &format!("localhost.evil.example:{}", gw.port),
    )
    .await;
    assert_eq!(status, 403);
}

async fn upgrade_status(gw: &GatewayProc, origin: Option<&str>) -> u16 {
    let mut req = gw.ws_url().into_client_request().unwrap();
    if let Some(o) = origin {
        req.headers_mut()
            .insert("Origin", HeaderValue::from_str(o).unwrap());
    }
    match tokio::time::timeout(T, tokio_tungstenite::connect_async(req))
        .await
        .expect("upgrade timed out")
    {
        Ok((_, resp)) => resp.status().as_u16(),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("upgrade failed oddly: {e}"),
    }
}

#[tokio::test]
async fn browser_origins_need_settings() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    assert_eq!(
        upgrade_status(&gw, None).await,
        101,
        "no Origin: not a browser"
    );
    assert_eq!(upgrade_status(&gw, Some("https://evil.example")).await, 403);
    home.write_settings(&json!({"gateway": {"allowedOrigins": ["http://localhost:5173"]}}));
    assert_eq!(
        upgrade_status(&gw, Some("http://localhost:5173")).await,
        101,
        "re-read on upgrade"
    );
    assert_eq!(upgrade_status(&gw, Some("https://evil.example")).await, 403);
}

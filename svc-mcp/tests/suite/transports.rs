//! The transports with real registry servers: the everything server over stdio, streamable
//! HTTP and legacy SSE, and a server built with the `mcp` PyPI package.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;
use snowpea_proto::mcp::v1::CallToolRequest;

use super::*;

/// The everything server in an HTTP mode on a free port, killed on drop.
struct HttpEverything {
    child: Child,
    port: u16,
}

impl HttpEverything {
    async fn start(script: &std::path::Path, mode: &str) -> HttpEverything {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("node")
            .arg(script)
            .arg(mode)
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        within(Duration::from_secs(20), "everything listening", async {
            while tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        HttpEverything { child, port }
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn echo(svc: &Svc, server: &str) -> String {
    let r = within(
        Duration::from_secs(30),
        "echo",
        svc.internal().call_tool(CallToolRequest {
            server: server.into(),
            tool: "echo".into(),
            arguments_json: json!({"message": "hi there"}).to_string(),
            ..Default::default()
        }),
    )
    .await
    .unwrap()
    .into_inner();
    assert!(r.ok, "{r:?}");
    r.content
}

#[tokio::test]
async fn everything_over_stdio() {
    let Some(script) = everything() else { return };
    let svc = Svc::start_with(json!({"ev": everything_entry(&script)})).await;
    svc.wait_state("ev", "ready", Duration::from_secs(30)).await;
    assert!(echo(&svc, "ev").await.contains("hi there"));
}

#[tokio::test]
async fn everything_over_streamable_http() {
    let Some(script) = everything() else { return };
    let server = HttpEverything::start(&script, "streamableHttp").await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let svc = Svc::start_with(
        json!({"web": {"type": "http", "url": url, "headers": {"X-Api-Key": "k-123456"}}}),
    )
    .await;
    let row = svc
        .wait_state("web", "ready", Duration::from_secs(30))
        .await;
    assert_eq!(row.transport, "http");
    assert_eq!(row.header_keys, vec!["X-Api-Key".to_string()]);
    assert!(!format!("{row:?}").contains("k-123456"));
    assert!(echo(&svc, "web").await.contains("hi there"));
}

#[tokio::test]
async fn everything_over_legacy_sse() {
    let Some(script) = everything() else { return };
    let server = HttpEverything::start(&script, "sse").await;
    let url = format!("http://127.0.0.1:{}/sse", server.port);
    let svc = Svc::start_with(json!({"old": {"url": url}})).await;
    let row = svc
        .wait_state("old", "ready", Duration::from_secs(30))
        .await;
    assert_eq!(row.transport, "sse");
    assert!(echo(&svc, "old").await.contains("hi there"));
}

#[tokio::test]
async fn a_server_built_with_the_mcp_pypi_package() {
    let Some(script) = py_server() else { return };
    let svc = Svc::start_with(
        json!({"py": {"command": "python3", "args": [script.display().to_string()]}}),
    )
    .await;
    let row = svc.wait_state("py", "ready", Duration::from_secs(30)).await;
    assert!(row.tools.iter().any(|t| t.name == "add"));
    let r = within(
        Duration::from_secs(30),
        "add",
        svc.internal().call_tool(CallToolRequest {
            server: "py".into(),
            tool: "add".into(),
            arguments_json: json!({"a": 2, "b": 40}).to_string(),
            ..Default::default()
        }),
    )
    .await
    .unwrap()
    .into_inner();
    assert!(r.ok, "{r:?}");
    assert_eq!(r.content, "42");
}

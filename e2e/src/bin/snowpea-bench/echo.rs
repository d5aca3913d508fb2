//! `snowpea-bench --echo-server PORT` (issue 14): the machine's floor for a WebSocket
//! JSON-RPC round trip — a multi-threaded tokio runtime, tokio-tungstenite, `TCP_NODELAY`,
//! every text frame parsed as JSON-RPC and answered `{"jsonrpc":"2.0","id":…,"result":{}}`
//! at once. Binds 127.0.0.1 only; runs until SIGTERM/SIGINT.

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

/// Serves on 127.0.0.1:`port` until a termination signal.
pub async fn serve(port: u16) {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap_or_else(|e| panic!("bind 127.0.0.1:{port}: {e}"));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = term.recv() => return,
            _ = tokio::signal::ctrl_c() => return,
        };
        let Ok((tcp, _)) = accepted else { continue };
        let _ = tcp.set_nodelay(true);
        tokio::spawn(async move {
            let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                return;
            };
            while let Some(Ok(frame)) = ws.next().await {
                let Message::Text(text) = frame else {
                    continue;
                };
                let id = serde_json::from_str::<Value>(&text)
                    .map(|v| v["id"].clone())
                    .unwrap_or(Value::Null);
                let answer = json!({"jsonrpc": "2.0", "id": id, "result": {}});
                if ws.send(Message::text(answer.to_string())).await.is_err() {
                    return;
                }
            }
        });
    }
}

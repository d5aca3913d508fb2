//! A raw JSON-RPC WebSocket client for framing and error-path tests: sends exactly the
//! text it is given and returns frames as JSON, skipping notifications when asked.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A raw connection to `/ws`.
pub struct RawWs {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    /// Notifications received while waiting for responses.
    pub notifications: Vec<Value>,
}

impl RawWs {
    /// Connects to `ws://127.0.0.1:<port>/ws`.
    pub async fn connect(port: u16) -> RawWs {
        let url = format!("ws://127.0.0.1:{port}/ws");
        let (ws, _) = tokio::time::timeout(
            super::WAIT,
            tokio_tungstenite::connect_async_with_config(url, None, true),
        )
        .await
        .expect("ws connect timed out")
        .expect("ws connect");
        RawWs {
            ws,
            next_id: 1,
            notifications: Vec::new(),
        }
    }

    /// Sends raw text.
    pub async fn send_text(&mut self, text: &str) {
        self.ws.send(Message::text(text)).await.expect("send");
    }

    /// Next frame that is a response (has `id` and no `method`), or `None` on close/timeout.
    pub async fn recv_response(&mut self, limit: Duration) -> Option<Value> {
        loop {
            let frame = tokio::time::timeout(limit, self.ws.next()).await.ok()??;
            match frame {
                Ok(Message::Text(t)) => {
                    let v: Value = serde_json::from_str(&t).ok()?;
                    if v.is_array() || v.get("method").is_none() {
                        return Some(v);
                    }
                    self.notifications.push(v);
                }
                Ok(Message::Close(_)) | Err(_) => return None,
                _ => {}
            }
        }
    }

    /// Next frame of any kind.
    pub async fn recv_any(&mut self, limit: Duration) -> Option<Value> {
        loop {
            match tokio::time::timeout(limit, self.ws.next()).await.ok()?? {
                Ok(Message::Text(t)) => return serde_json::from_str(&t).ok(),
                Ok(Message::Close(_)) | Err(_) => return None,
                _ => {}
            }
        }
    }

    /// Sends a request and returns its response object.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_text(&req.to_string()).await;
        loop {
            let r = self
                .recv_response(super::WAIT)
                .await
                .unwrap_or_else(|| panic!("no response to {method}"));
            if r["id"] == json!(id) {
                return r;
            }
        }
    }

    /// Returns `error.data.code` of a response (or "" when it is not an error).
    pub fn code(resp: &Value) -> String {
        resp["error"]["data"]["code"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    }
}

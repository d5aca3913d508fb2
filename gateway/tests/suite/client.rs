//! A tiny JSON-RPC test client over tokio-tungstenite. Every await has a deadline.

use std::collections::VecDeque;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::harness::T;

pub struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    /// Messages received while waiting for something else.
    backlog: VecDeque<Value>,
}

impl Client {
    pub async fn connect(url: &str) -> Client {
        let (ws, _) = tokio::time::timeout(T, tokio_tungstenite::connect_async(url))
            .await
            .expect("connect timed out")
            .expect("connect");
        Client {
            ws,
            next_id: 1,
            backlog: VecDeque::new(),
        }
    }

    pub async fn send_raw(&mut self, text: &str) {
        tokio::time::timeout(T, self.ws.send(Message::text(text)))
            .await
            .expect("send timed out")
            .expect("send");
    }

    /// Sends, tolerating the server closing mid-write.
    pub async fn send_raw_lenient(&mut self, text: &str) -> Result<(), String> {
        match tokio::time::timeout(T, self.ws.send(Message::text(text))).await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err("send timed out".into()),
        }
    }

    pub async fn send(&mut self, v: &Value) {
        self.send_raw(&v.to_string()).await;
    }

    /// The next WebSocket message, whatever it is.
    pub async fn next_message(&mut self) -> Option<Message> {
        tokio::time::timeout(T, self.ws.next())
            .await
            .expect("no message within the deadline")
            .map(|m| m.expect("read"))
    }

    /// The next JSON message (backlog first).
    pub async fn recv(&mut self) -> Value {
        if let Some(v) = self.backlog.pop_front() {
            return v;
        }
        self.recv_fresh().await
    }

    async fn recv_fresh(&mut self) -> Value {
        loop {
            match self.next_message().await {
                Some(Message::Text(t)) => return serde_json::from_str(&t).expect("JSON"),
                Some(Message::Ping(_) | Message::Pong(_)) => continue,
                other => panic!("expected a text message, got {other:?}"),
            }
        }
    }

    /// Sends a request and waits for the response with its id; anything else that
    /// arrives meanwhile is kept for later.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.response_to(&json!(id)).await
    }

    /// Waits for the response with `id`.
    pub async fn response_to(&mut self, id: &Value) -> Value {
        if let Some(pos) = self
            .backlog
            .iter()
            .position(|m| m.get("id") == Some(id) && m.get("method").is_none())
        {
            return self.backlog.remove(pos).unwrap();
        }
        loop {
            let m = self.recv_fresh().await;
            if m.get("id") == Some(id) && m.get("method").is_none() {
                return m;
            }
            self.backlog.push_back(m);
        }
    }

    /// The result of a call that must succeed.
    pub async fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params).await;
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    /// The error object of a call that must fail.
    pub async fn err(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params).await;
        assert!(r.get("result").is_none(), "{method} should fail: {r}");
        r["error"].clone()
    }

    pub async fn hello(&mut self, token: &str) -> Value {
        self.ok(
            "system.hello",
            json!({"token": token, "clientVersion": "test", "protocolVersion": snowpea_proto::PROTOCOL_VERSION,
                   "clientId": "test-client", "clientKind": "test"}),
        )
        .await
    }

    /// The next message that is a request or notification named `method`.
    pub async fn next_named(&mut self, method: &str) -> Value {
        if let Some(pos) = self.backlog.iter().position(|m| m["method"] == method) {
            return self.backlog.remove(pos).unwrap();
        }
        loop {
            let m = self.recv_fresh().await;
            if m["method"] == method {
                return m;
            }
            self.backlog.push_back(m);
        }
    }

    /// Proves nothing else was sent: a health round trip must be the very next message.
    pub async fn assert_quiet(&mut self) {
        assert!(
            self.backlog.is_empty(),
            "unexpected messages: {:?}",
            self.backlog
        );
        let id = json!("quiet-probe");
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "system.health"}))
            .await;
        let m = self.recv_fresh().await;
        assert_eq!(
            m["id"], id,
            "unexpected message before the probe's answer: {m}"
        );
    }

    /// Reads until the server's close frame (skipping other messages).
    pub async fn expect_close(&mut self) -> Option<CloseFrame> {
        loop {
            match tokio::time::timeout(T, self.ws.next())
                .await
                .expect("no close within the deadline")
            {
                Some(Ok(Message::Close(frame))) => return frame,
                Some(Ok(_)) => continue,
                Some(Err(e)) => panic!("connection failed without a close frame: {e}"),
                None => panic!("connection ended without a close frame"),
            }
        }
    }

    /// Closes from the client side.
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(T, self.ws.close(None)).await;
    }
}

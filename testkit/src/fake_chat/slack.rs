//! A fake Slack: `apps.connections.open` (app token) naming the Socket Mode websocket
//! `/socket` (`hello`, envelopes, acks recorded; an unacknowledged envelope is sent again on
//! the next connection, as Slack retries), `chat.postMessage` (bot token) and a
//! `response_url` endpoint.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{json, Value};
use tokio::sync::broadcast;

use crate::CheckedTask;

#[derive(Default)]
struct Inner {
    next: u64,
    /// Envelopes not acknowledged yet.
    unacked: Vec<Value>,
    acked: Vec<String>,
    posted: Vec<Value>,
    responses: Vec<Value>,
    opens: u64,
    fail_429: u32,
    rate_limited: u64,
}

#[derive(Clone)]
struct Shared {
    app_token: String,
    bot_token: String,
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    tx: broadcast::Sender<Option<Value>>,
}

/// The fake Slack of one app.
pub struct FakeSlack {
    shared: Shared,
    _task: CheckedTask<()>,
}

impl FakeSlack {
    /// Starts the fake for an app token (`xapp-…`) and a bot token (`xoxb-…`).
    pub async fn start(app_token: &str, bot_token: &str) -> FakeSlack {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, _) = broadcast::channel(1024);
        let shared = Shared {
            app_token: app_token.to_owned(),
            bot_token: bot_token.to_owned(),
            addr,
            inner: Arc::new(Mutex::new(Inner::default())),
            tx,
        };
        let router = axum::Router::new()
            .route("/apps.connections.open", post(open))
            .route("/chat.postMessage", post(post_message))
            .route("/response", post(response))
            .route("/socket", get(socket_ws))
            .with_state(shared.clone());
        let task = CheckedTask::spawn("fake slack", async move {
            axum::serve(listener, router).await.expect("fake slack");
        });
        FakeSlack {
            shared,
            _task: task,
        }
    }

    /// `settings.gateway.slack.baseUrl`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.shared.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn envelope(&self, kind: &str, payload: Value) -> String {
        let env = {
            let mut i = self.lock();
            i.next += 1;
            let env = json!({ "envelope_id": format!("env-{}", i.next), "type": kind,
                              "payload": payload, "accepts_response_payload": false });
            i.unacked.push(env.clone());
            env
        };
        let id = env["envelope_id"].as_str().unwrap_or("").to_owned();
        let _ = self.shared.tx.send(Some(env));
        id
    }

    /// A `message` event from `user` in `channel`; returns the envelope id.
    pub fn message(&self, channel: &str, user: &str, text: &str) -> String {
        self.envelope(
            "events_api",
            json!({ "type": "event_callback", "event": {
                "type": "message", "channel": channel, "user": user, "text": text, "ts": "1.0" } }),
        )
    }

    /// A `block_actions` press of the button with `value` by `user` in `channel`.
    pub fn press(&self, channel: &str, user: &str, value: &str) -> String {
        let response_url = format!("http://{}/response", self.shared.addr);
        self.envelope(
            "interactive",
            json!({ "type": "block_actions", "user": { "id": user }, "channel": { "id": channel },
                    "response_url": response_url,
                    "actions": [{ "action_id": value, "value": value, "type": "button" }] }),
        )
    }

    /// Closes every live socket without a close frame.
    pub fn drop_connections(&self) {
        let _ = self.shared.tx.send(None);
    }

    /// `chat.postMessage` bodies so far.
    pub fn posted(&self) -> Vec<Value> {
        self.lock().posted.clone()
    }

    /// Texts posted to `channel`.
    pub fn texts_to(&self, channel: &str) -> Vec<String> {
        self.posted()
            .iter()
            .filter(|p| p["channel"] == channel)
            .filter_map(|p| p["text"].as_str().map(str::to_owned))
            .collect()
    }

    /// Bodies posted to the `response_url`.
    pub fn responses(&self) -> Vec<Value> {
        self.lock().responses.clone()
    }

    /// Acknowledged envelope ids.
    pub fn acked(&self) -> Vec<String> {
        self.lock().acked.clone()
    }

    /// How many times `apps.connections.open` succeeded.
    pub fn opens(&self) -> u64 {
        self.lock().opens
    }

    /// Answers the next `n` Web API calls with 429 (retry-after 1 s).
    pub fn rate_limit_next(&self, n: u32) {
        self.lock().fail_429 = n;
    }

    /// How many calls were answered 429.
    pub fn rate_limited(&self) -> u64 {
        self.lock().rate_limited
    }
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned)
}

fn limited(s: &Shared) -> bool {
    let mut i = s.inner.lock().unwrap_or_else(|e| e.into_inner());
    if i.fail_429 > 0 {
        i.fail_429 -= 1;
        i.rate_limited += 1;
        true
    } else {
        false
    }
}

async fn open(State(s): State<Shared>, headers: HeaderMap) -> Response {
    if limited(&s) {
        return super::too_many(1);
    }
    if bearer(&headers).as_deref() != Some(s.app_token.as_str()) {
        return axum::Json(json!({ "ok": false, "error": "invalid_auth" })).into_response();
    }
    s.inner.lock().unwrap_or_else(|e| e.into_inner()).opens += 1;
    axum::Json(json!({ "ok": true, "url": format!("ws://{}/socket", s.addr) })).into_response()
}

async fn post_message(
    State(s): State<Shared>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    if limited(&s) {
        return super::too_many(1);
    }
    if bearer(&headers).as_deref() != Some(s.bot_token.as_str()) {
        return axum::Json(json!({ "ok": false, "error": "invalid_auth" })).into_response();
    }
    s.inner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .posted
        .push(body);
    axum::Json(json!({ "ok": true, "ts": "2.0" })).into_response()
}

async fn response(State(s): State<Shared>, axum::Json(body): axum::Json<Value>) -> Response {
    s.inner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .responses
        .push(body);
    axum::Json(json!({ "ok": true })).into_response()
}

async fn socket_ws(State(s): State<Shared>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| session(s, socket))
}

async fn session(s: Shared, mut socket: WebSocket) {
    let mut rx = s.tx.subscribe();
    let pending: Vec<Value> = s
        .inner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .unacked
        .clone();
    let hello = json!({ "type": "hello", "num_connections": 1 });
    if socket
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    // Slack retries what was not acknowledged.
    for env in pending {
        if socket
            .send(Message::Text(env.to_string().into()))
            .await
            .is_err()
        {
            return;
        }
    }
    loop {
        tokio::select! {
            item = rx.recv() => match item {
                Ok(Some(env)) => {
                    if socket.send(Message::Text(env.to_string().into())).await.is_err() {
                        return;
                    }
                }
                _ => return,
            },
            msg = socket.recv() => {
                let Some(Ok(m)) = msg else { return };
                if let Message::Text(t) = m {
                    let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                    if let Some(id) = v["envelope_id"].as_str() {
                        let mut i = s.inner.lock().unwrap_or_else(|e| e.into_inner());
                        i.unacked.retain(|e| e["envelope_id"] != id);
                        i.acked.push(id.to_owned());
                    }
                }
            }
        }
    }
}

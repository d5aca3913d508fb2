//! A fake Discord: REST (`GET /gateway/bot`, `POST /channels/{id}/messages`, `POST
//! /channels/{id}/typing`, `POST /interactions/{id}/{token}/callback`) and the gateway websocket
//! (`/gateway`): Hello, Identify → READY, Resume → the dispatches after the client's sequence
//! and RESUMED, heartbeats acked. Dispatches are kept in a log, so a resumed client gets what it
//! missed; [`FakeDiscord::drop_connections`] closes every live socket abruptly.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{json, Value};
use tokio::sync::broadcast;

use crate::CheckedTask;

#[derive(Default)]
struct Inner {
    seq: u64,
    /// Every dispatch (seq, frame) since the start.
    log: Vec<(u64, Value)>,
    sent: Vec<(String, Value)>,
    typing: Vec<String>,
    callbacks: Vec<Value>,
    identifies: u64,
    resumes: Vec<u64>,
    fail_429: u32,
    rate_limited: u64,
    connections: u64,
}

#[derive(Clone)]
struct Shared {
    token: String,
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    /// New dispatches (`Some`) and "drop every socket" (`None`).
    tx: broadcast::Sender<Option<Value>>,
}

/// The fake Discord of one bot token.
pub struct FakeDiscord {
    shared: Shared,
    _task: CheckedTask<()>,
}

impl FakeDiscord {
    /// Starts the fake for `token`.
    pub async fn start(token: &str) -> FakeDiscord {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, _) = broadcast::channel(1024);
        let shared = Shared {
            token: token.to_owned(),
            addr,
            inner: Arc::new(Mutex::new(Inner::default())),
            tx,
        };
        let router = axum::Router::new()
            .route("/gateway/bot", get(gateway_bot))
            .route("/gateway", get(gateway_ws))
            .route("/channels/{id}/messages", post(create_message))
            .route("/channels/{id}/typing", post(typing))
            .route("/interactions/{id}/{token}/callback", post(callback))
            .with_state(shared.clone());
        let task = CheckedTask::spawn("fake discord", async move {
            axum::serve(listener, router).await.expect("fake discord");
        });
        FakeDiscord {
            shared,
            _task: task,
        }
    }

    /// `settings.gateway.discord.baseUrl`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.shared.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn dispatch(&self, t: &str, d: Value) {
        let frame = {
            let mut i = self.lock();
            i.seq += 1;
            let frame = json!({ "op": 0, "s": i.seq, "t": t, "d": d });
            let seq = i.seq;
            i.log.push((seq, frame.clone()));
            frame
        };
        let _ = self.shared.tx.send(Some(frame));
    }

    /// A `MESSAGE_CREATE` from `user` in `channel`.
    pub fn message(&self, channel: &str, user: &str, text: &str) {
        let id = format!("m{}", self.lock().seq + 1000);
        self.dispatch(
            "MESSAGE_CREATE",
            json!({ "id": id, "channel_id": channel, "content": text,
                    "author": { "id": user, "bot": false } }),
        );
    }

    /// An `INTERACTION_CREATE` (button `custom_id`) by `user` in `channel`.
    pub fn press(&self, channel: &str, user: &str, custom_id: &str) {
        let id = format!("i{}", self.lock().seq + 1000);
        self.dispatch(
            "INTERACTION_CREATE",
            json!({ "id": id, "token": "itok", "type": 3, "channel_id": channel,
                    "member": { "user": { "id": user } }, "data": { "custom_id": custom_id } }),
        );
    }

    /// Closes every live gateway socket without a close frame.
    pub fn drop_connections(&self) {
        let _ = self.shared.tx.send(None);
    }

    /// Messages the bot posted: (channel, body).
    pub fn sent(&self) -> Vec<(String, Value)> {
        self.lock().sent.clone()
    }

    /// Texts posted to `channel`.
    pub fn texts_to(&self, channel: &str) -> Vec<String> {
        self.sent()
            .iter()
            .filter(|(c, _)| c == channel)
            .filter_map(|(_, b)| b["content"].as_str().map(str::to_owned))
            .collect()
    }

    /// Channels the bot showed typing in.
    pub fn typing(&self) -> Vec<String> {
        self.lock().typing.clone()
    }

    /// Interaction callbacks the bot sent.
    pub fn callbacks(&self) -> Vec<Value> {
        self.lock().callbacks.clone()
    }

    /// How many Identify and which Resume sequences arrived.
    pub fn sessions(&self) -> (u64, Vec<u64>) {
        let i = self.lock();
        (i.identifies, i.resumes.clone())
    }

    /// Gateway connections so far.
    pub fn connections(&self) -> u64 {
        self.lock().connections
    }

    /// Answers the next `n` REST calls with 429 (retry-after 1 s).
    pub fn rate_limit_next(&self, n: u32) {
        self.lock().fail_429 = n;
    }

    /// How many calls were answered 429.
    pub fn rate_limited(&self) -> u64 {
        self.lock().rate_limited
    }
}

fn authorized(s: &Shared, headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        == Some(format!("Bot {}", s.token).as_str())
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

async fn gateway_bot(State(s): State<Shared>, headers: HeaderMap) -> Response {
    if !authorized(&s, &headers) {
        return axum::http::StatusCode::UNAUTHORIZED.into_response();
    }
    if limited(&s) {
        return super::too_many(1);
    }
    axum::Json(json!({ "url": format!("ws://{}/gateway", s.addr), "shards": 1 })).into_response()
}

async fn create_message(
    State(s): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    if !authorized(&s, &headers) {
        return axum::http::StatusCode::UNAUTHORIZED.into_response();
    }
    if limited(&s) {
        return super::too_many(1);
    }
    s.inner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .sent
        .push((id.clone(), body.clone()));
    axum::Json(json!({ "id": "sent", "channel_id": id, "content": body["content"] }))
        .into_response()
}

async fn typing(State(s): State<Shared>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    if !authorized(&s, &headers) {
        return axum::http::StatusCode::UNAUTHORIZED.into_response();
    }
    s.inner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .typing
        .push(id);
    axum::http::StatusCode::NO_CONTENT.into_response()
}

async fn callback(
    State(s): State<Shared>,
    Path((_id, _token)): Path<(String, String)>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    s.inner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .callbacks
        .push(body);
    axum::http::StatusCode::NO_CONTENT.into_response()
}

async fn gateway_ws(State(s): State<Shared>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| session(s, socket))
}

async fn session(s: Shared, mut socket: WebSocket) {
    s.inner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .connections += 1;
    let mut rx = s.tx.subscribe();
    let hello = json!({ "op": 10, "d": { "heartbeat_interval": 45_000 } });
    if socket
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    let mut live = false;
    loop {
        tokio::select! {
            item = rx.recv() => match item {
                Ok(Some(frame)) if live => {
                    if socket.send(Message::Text(frame.to_string().into())).await.is_err() {
                        return;
                    }
                }
                Ok(Some(_)) => {}
                // Drop: end without a close frame.
                Ok(None) => return,
                Err(_) => return,
            },
            msg = socket.recv() => {
                let Some(Ok(Message::Text(t))) = msg else {
                    if matches!(msg, Some(Ok(_))) { continue; }
                    return;
                };
                let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                match v["op"].as_u64() {
                    Some(1) => {
                        let ack = json!({ "op": 11 });
                        let _ = socket.send(Message::Text(ack.to_string().into())).await;
                    }
                    Some(2) => {
                        if v["d"]["token"].as_str() != Some(s.token.as_str()) {
                            let _ = socket.send(Message::Close(Some(axum::extract::ws::CloseFrame {
                                code: 4004, reason: "Authentication failed".into() }))).await;
                            return;
                        }
                        let frame = {
                            let mut i = s.inner.lock().unwrap_or_else(|e| e.into_inner());
                            i.identifies += 1;
                            i.seq += 1;
                            let frame = json!({ "op": 0, "s": i.seq, "t": "READY", "d": {
                                "session_id": format!("fake-session-{}", i.identifies),
                                "resume_gateway_url": format!("ws://{}/gateway", s.addr),
                                "user": { "id": "bot", "bot": true },
                            }});
                            let seq = i.seq;
                            i.log.push((seq, frame.clone()));
                            frame
                        };
                        live = true;
                        if socket.send(Message::Text(frame.to_string().into())).await.is_err() {
                            return;
                        }
                    }
                    Some(6) => {
                        let after = v["d"]["seq"].as_u64().unwrap_or(0);
                        let missed: Vec<Value> = {
                            let mut i = s.inner.lock().unwrap_or_else(|e| e.into_inner());
                            i.resumes.push(after);
                            i.log.iter().filter(|(q, _)| *q > after).map(|(_, f)| f.clone()).collect()
                        };
                        for f in missed {
                            if socket.send(Message::Text(f.to_string().into())).await.is_err() {
                                return;
                            }
                        }
                        live = true;
                        let resumed = json!({ "op": 0, "s": null, "t": "RESUMED", "d": {} });
                        if socket.send(Message::Text(resumed.to_string().into())).await.is_err() {
                            return;
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

//! A fake Telegram Bot API: `getUpdates` (long polling with offset confirmation, `limit`,
//! `timeout` honoured up to 2 s), `sendMessage`, `sendChatAction`, `answerCallbackQuery`,
//! `getFile` + file download. Requests for another token answer 401.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::CheckedTask;

#[derive(Default)]
struct Inner {
    next_id: i64,
    /// Pending updates: (update_id, body bytes — valid JSON or deliberately not).
    updates: Vec<(i64, Vec<u8>)>,
    sent: Vec<Value>,
    actions: Vec<Value>,
    callback_answers: Vec<Value>,
    files: Vec<(String, Vec<u8>)>,
    get_updates_calls: u64,
    /// Answer the next N API calls (any method) with 429 retry-after 1.
    fail_429: u32,
    /// Answer the next N getUpdates with 502 (a dropped upstream).
    fail_502: u32,
    rate_limited: u64,
}

/// The fake Bot API of one bot token.
pub struct FakeTelegram {
    addr: SocketAddr,
    token: String,
    inner: Arc<Mutex<Inner>>,
    notify: Arc<Notify>,
    _task: CheckedTask<()>,
}

#[derive(Clone)]
struct Shared {
    token: String,
    inner: Arc<Mutex<Inner>>,
    notify: Arc<Notify>,
}

impl FakeTelegram {
    /// Starts the fake for `token`.
    pub async fn start(token: &str) -> FakeTelegram {
        let shared = Shared {
            token: token.to_owned(),
            inner: Arc::new(Mutex::new(Inner {
                next_id: 100,
                ..Inner::default()
            })),
            notify: Arc::new(Notify::new()),
        };
        let router = axum::Router::new()
            .route("/{bot}/{method}", post(api))
            .route("/file/{bot}/{*path}", get(file))
            .with_state(shared.clone());
        let (addr, task) = super::serve(router).await;
        FakeTelegram {
            addr,
            token: token.to_owned(),
            inner: shared.inner,
            notify: shared.notify,
            _task: task,
        }
    }

    /// `settings.gateway.telegram.baseUrl`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The token it accepts.
    pub fn token(&self) -> &str {
        &self.token
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, make: impl FnOnce(i64) -> Vec<u8>) -> i64 {
        let id = {
            let mut i = self.lock();
            i.next_id += 1;
            let id = i.next_id;
            let body = make(id);
            i.updates.push((id, body));
            id
        };
        self.notify.notify_waiters();
        id
    }

    /// Queues a text message from `user` in chat `chat`; returns its update id.
    pub fn message(&self, chat: i64, user: i64, text: &str) -> i64 {
        self.push(|id| {
            json!({ "update_id": id, "message": {
                "message_id": id, "date": 0, "text": text,
                "chat": { "id": chat, "type": "private" },
                "from": { "id": user, "is_bot": false, "first_name": "u" },
            }})
            .to_string()
            .into_bytes()
        })
    }

    /// Queues a document message (the bytes served by `getFile`).
    pub fn document(&self, chat: i64, user: i64, caption: &str, name: &str, bytes: &[u8]) -> i64 {
        let file_id = format!("f{}", self.lock().files.len());
        self.lock().files.push((file_id.clone(), bytes.to_vec()));
        self.push(|id| {
            json!({ "update_id": id, "message": {
                "message_id": id, "date": 0, "caption": caption,
                "chat": { "id": chat, "type": "private" },
                "from": { "id": user, "is_bot": false, "first_name": "u" },
                "document": { "file_id": file_id, "file_name": name,
                              "mime_type": "text/plain", "file_size": bytes.len() },
            }})
            .to_string()
            .into_bytes()
        })
    }

    /// Queues a raw update body (invalid UTF-8, not JSON at all, …).
    pub fn raw(&self, body: impl FnOnce(i64) -> Vec<u8>) -> i64 {
        self.push(body)
    }

    /// Queues a press of the inline button with `data` by `user` in `chat`.
    pub fn press(&self, chat: i64, user: i64, data: &str) -> i64 {
        self.push(|id| {
            json!({ "update_id": id, "callback_query": {
                "id": format!("cb{id}"), "data": data,
                "from": { "id": user, "is_bot": false, "first_name": "u" },
                "message": { "message_id": 1, "date": 0, "chat": { "id": chat, "type": "private" } },
            }})
            .to_string()
            .into_bytes()
        })
    }

    /// Every `sendMessage` body so far.
    pub fn sent(&self) -> Vec<Value> {
        self.lock().sent.clone()
    }

    /// The texts sent to `chat`.
    pub fn texts_to(&self, chat: i64) -> Vec<String> {
        self.sent()
            .iter()
            .filter(|m| m["chat_id"] == json!(chat) || m["chat_id"] == json!(chat.to_string()))
            .filter_map(|m| m["text"].as_str().map(str::to_owned))
            .collect()
    }

    /// Every `sendChatAction` body so far.
    pub fn actions(&self) -> Vec<Value> {
        self.lock().actions.clone()
    }

    /// Every `answerCallbackQuery` body so far.
    pub fn callback_answers(&self) -> Vec<Value> {
        self.lock().callback_answers.clone()
    }

    /// Updates not yet confirmed by an offset past them.
    pub fn unconfirmed(&self) -> usize {
        self.lock().updates.len()
    }

    /// How many `getUpdates` calls arrived.
    pub fn get_updates_calls(&self) -> u64 {
        self.lock().get_updates_calls
    }

    /// Answers the next `n` API calls with 429 (retry-after 1 s).
    pub fn rate_limit_next(&self, n: u32) {
        self.lock().fail_429 = n;
    }

    /// How many calls were answered 429.
    pub fn rate_limited(&self) -> u64 {
        self.lock().rate_limited
    }

    /// Answers the next `n` `getUpdates` with 502 (the connection to the API dropped).
    pub fn drop_next_polls(&self, n: u32) {
        self.lock().fail_502 = n;
    }
}

async fn api(
    State(s): State<Shared>,
    Path((bot, method)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    if bot.strip_prefix("bot") != Some(s.token.as_str()) {
        return (
            axum::http::StatusCode::UNAUTHORIZED,
            axum::Json(json!({"ok": false, "error_code": 401, "description": "Unauthorized"})),
        )
            .into_response();
    }
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    {
        let mut i = s.inner.lock().unwrap_or_else(|e| e.into_inner());
        if i.fail_429 > 0 {
            i.fail_429 -= 1;
            i.rate_limited += 1;
            return super::too_many(1);
        }
    }
    let ok = |result: Value| axum::Json(json!({ "ok": true, "result": result })).into_response();
    match method.as_str() {
        "getUpdates" => get_updates(&s, &req).await,
        "sendMessage" => {
            let mut i = s.inner.lock().unwrap_or_else(|e| e.into_inner());
            i.sent.push(req);
            let n = i.sent.len();
            ok(json!({ "message_id": n }))
        }
        "sendChatAction" => {
            s.inner
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .actions
                .push(req);
            ok(json!(true))
        }
        "answerCallbackQuery" => {
            s.inner
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .callback_answers
                .push(req);
            ok(json!(true))
        }
        "getFile" => {
            let id = req["file_id"].as_str().unwrap_or("").to_owned();
            ok(json!({ "file_id": id, "file_path": format!("documents/{id}") }))
        }
        _ => (
            axum::http::StatusCode::NOT_FOUND,
            axum::Json(json!({"ok": false, "description": "Not Found"})),
        )
            .into_response(),
    }
}

async fn get_updates(s: &Shared, req: &Value) -> Response {
    {
        let mut i = s.inner.lock().unwrap_or_else(|e| e.into_inner());
        i.get_updates_calls += 1;
        if i.fail_502 > 0 {
            i.fail_502 -= 1;
            return axum::http::StatusCode::BAD_GATEWAY.into_response();
        }
    }
    let offset = req["offset"].as_i64();
    let limit = req["limit"].as_u64().unwrap_or(100).clamp(1, 100) as usize;
    let wait = Duration::from_secs(req["timeout"].as_u64().unwrap_or(0).min(2));
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let notified = s.notify.notified();
        let batch: Vec<Vec<u8>> = {
            let mut i = s.inner.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(o) = offset {
                // Confirmation: everything below the offset is gone for good.
                i.updates.retain(|(id, _)| *id >= o);
            }
            i.updates
                .iter()
                .take(limit)
                .map(|(_, b)| b.clone())
                .collect()
        };
        if !batch.is_empty() || tokio::time::Instant::now() >= deadline {
            let mut body = b"{\"ok\":true,\"result\":[".to_vec();
            for (n, b) in batch.iter().enumerate() {
                if n > 0 {
                    body.push(b',');
                }
                body.extend_from_slice(b);
            }
            body.extend_from_slice(b"]}");
            return (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                body,
            )
                .into_response();
        }
        let _ = tokio::time::timeout_at(deadline, notified).await;
    }
}

async fn file(State(s): State<Shared>, Path((bot, path)): Path<(String, String)>) -> Response {
    if bot.strip_prefix("bot") != Some(s.token.as_str()) {
        return axum::http::StatusCode::UNAUTHORIZED.into_response();
    }
    let id = path.rsplit('/').next().unwrap_or("");
    let i = s.inner.lock().unwrap_or_else(|e| e.into_inner());
    match i.files.iter().find(|(f, _)| f == id) {
        Some((_, bytes)) => bytes.clone().into_response(),
        None => axum::http::StatusCode::NOT_FOUND.into_response(),
    }
}

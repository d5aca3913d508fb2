//! Telegram Bot API adapter: long polling with `getUpdates` (no webhook), `sendMessage`
//! (HTML, inline keyboards), `sendChatAction typing`, `answerCallbackQuery`, `getFile`.
//!
//! Cursor: `{"updateId": n}`, the last update handled; polling asks `offset = n + 1`, so an
//! update whose turn svc-session has not accepted is fetched again. An update the service
//! cannot read (a body that is not JSON) is isolated by polling one at a time and then
//! skipped by id, so it never blocks the updates after it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::http::{self, CallError};
use super::{
    AdapterConfig, Attachment, Backoff, Button, ButtonAck, ConnKey, Handled, Inbound, InboundKind,
    Outbound, Running, Sink,
};
use crate::binding::Credential;

/// Sending side of one bot.
pub struct TelegramOut {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl TelegramOut {
    fn url(&self, method: &str) -> String {
        format!("{}/bot{}/{method}", self.base, self.token)
    }

    async fn api(&self, what: &'static str, method: &str, body: Value) -> Result<Value, CallError> {
        let url = self.url(method);
        let v = http::call(what, || self.http.post(&url).json(&body)).await?;
        if v.get("ok").and_then(Value::as_bool) == Some(false) {
            let d = v
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("ok: false");
            return Err(CallError::Refused(what, d.chars().take(200).collect()));
        }
        Ok(v.get("result").cloned().unwrap_or(Value::Null))
    }
}

fn chat_id(channel: &str) -> Value {
    channel
        .parse::<i64>()
        .map(Value::from)
        .unwrap_or_else(|_| Value::from(channel))
}

#[tonic::async_trait]
impl Outbound for TelegramOut {
    async fn send(
        &self,
        channel: &str,
        text: &str,
        html: bool,
        buttons: &[Button],
    ) -> anyhow::Result<()> {
        let mut body = json!({ "chat_id": chat_id(channel), "text": text });
        if html {
            body["parse_mode"] = json!("HTML");
        }
        if !buttons.is_empty() {
            let row: Vec<Value> = buttons
                .iter()
                .map(|b| json!({ "text": b.label, "callback_data": b.data }))
                .collect();
            body["reply_markup"] = json!({ "inline_keyboard": [row] });
        }
        match self.api("sendMessage", "sendMessage", body.clone()).await {
            Ok(_) => Ok(()),
            // Markup Telegram cannot parse: send the same text plain.
            Err(CallError::Refused(..)) if html => {
                body.as_object_mut().map(|o| o.remove("parse_mode"));
                self.api("sendMessage", "sendMessage", body).await?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn typing(&self, channel: &str) -> anyhow::Result<()> {
        self.api(
            "sendChatAction",
            "sendChatAction",
            json!({ "chat_id": chat_id(channel), "action": "typing" }),
        )
        .await?;
        Ok(())
    }

    async fn answer_button(&self, ack: &ButtonAck, text: &str) -> anyhow::Result<()> {
        if let ButtonAck::Telegram(id) = ack {
            self.api(
                "answerCallbackQuery",
                "answerCallbackQuery",
                json!({ "callback_query_id": id, "text": text }),
            )
            .await?;
        }
        Ok(())
    }
}

/// Starts polling for `key`.
pub fn start(
    key: ConnKey,
    credential: Credential,
    config: AdapterConfig,
    sink: Arc<dyn Sink>,
) -> Running {
    let out = Arc::new(TelegramOut {
        http: http::client(Duration::from_secs(30)),
        base: config.base_url.clone(),
        token: credential.token.clone(),
    });
    let poller = Poller {
        http: http::client(Duration::from_secs(config.poll_timeout_sec + 15)),
        out: out.clone(),
        key,
        config,
        sink,
    };
    Running {
        outbound: out,
        task: tokio::spawn(poller.run()),
    }
}

struct Poller {
    http: reqwest::Client,
    out: Arc<TelegramOut>,
    key: ConnKey,
    config: AdapterConfig,
    sink: Arc<dyn Sink>,
}

enum Batch {
    Updates(Vec<Value>),
    Unreadable,
}

impl Poller {
    async fn run(self) {
        let mut backoff = Backoff::new(self.config.max_backoff);
        let mut last = self
            .sink
            .load_cursor(&self.key)
            .await
            .and_then(|c| c.get("updateId").and_then(Value::as_i64));
        let mut up = false;
        let mut isolate = false;
        loop {
            let offset = last.map(|l| l + 1);
            match self.poll(offset, isolate).await {
                Ok(Batch::Updates(updates)) => {
                    if !up {
                        up = true;
                        self.sink.state(&self.key, true, "polling");
                    }
                    backoff.reset();
                    if !updates.is_empty() {
                        isolate = false;
                    }
                    for update in updates {
                        let Some(id) = update.get("update_id").and_then(Value::as_i64) else {
                            continue;
                        };
                        if last.is_some_and(|l| id <= l) {
                            continue;
                        }
                        match self.handle(&update).await {
                            Handled::Done => {
                                last = Some(id);
                                self.sink
                                    .save_cursor(&self.key, json!({ "updateId": id }))
                                    .await;
                            }
                            Handled::Retry => {
                                // Fetch it again after a pause; nothing after it is handled first.
                                tokio::time::sleep(backoff.next_delay()).await;
                                break;
                            }
                        }
                    }
                }
                Ok(Batch::Unreadable) if !isolate => isolate = true,
                Ok(Batch::Unreadable) => {
                    // One update alone is unreadable: skip it by id (asking for the next one
                    // confirms it to Telegram).
                    let next = last.map(|l| l + 1).unwrap_or(0);
                    tracing::warn!(update_id = next, "skipping an unreadable Telegram update");
                    self.sink
                        .error(&self.key, "an unreadable update was skipped");
                    if last.is_none() {
                        // Without a known id the best is to ask for the newest ones only.
                        last = Some(-2);
                    } else {
                        last = Some(next);
                        self.sink
                            .save_cursor(&self.key, json!({ "updateId": next }))
                            .await;
                    }
                    isolate = false;
                }
                Err(e) => {
                    if up {
                        up = false;
                    }
                    self.sink.state(&self.key, false, &e.to_string());
                    if matches!(e, CallError::Unauthorized(..)) {
                        self.sink.error(&self.key, &e.to_string());
                    }
                    tokio::time::sleep(backoff.next_delay()).await;
                }
            }
        }
    }

    async fn poll(&self, offset: Option<i64>, isolate: bool) -> Result<Batch, CallError> {
        let mut body = json!({
            "timeout": self.config.poll_timeout_sec,
            "allowed_updates": ["message", "callback_query"],
        });
        if let Some(o) = offset {
            body["offset"] = json!(o);
        }
        if isolate {
            body["limit"] = json!(1);
        }
        let url = self.out.url("getUpdates");
        let v = http::call("getUpdates", || self.http.post(&url).json(&body)).await?;
        if v.is_null() {
            return Ok(Batch::Unreadable);
        }
        if v.get("ok").and_then(Value::as_bool) == Some(false) {
            return Err(CallError::Refused(
                "getUpdates",
                v.get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("ok: false")
                    .chars()
                    .take(200)
                    .collect(),
            ));
        }
        match v.get("result").and_then(Value::as_array) {
            Some(a) => Ok(Batch::Updates(a.clone())),
            None => Ok(Batch::Unreadable),
        }
    }

    async fn handle(&self, update: &Value) -> Handled {
        if let Some(cb) = update.get("callback_query") {
            let channel = id_str(cb.pointer("/message/chat/id"));
            let user = id_str(cb.pointer("/from/id"));
            let (Some(channel), Some(user)) = (channel, user) else {
                return Handled::Done;
            };
            let data = cb
                .get("data")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let id = cb
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            return self
                .sink
                .inbound(
                    &self.key,
                    Inbound {
                        channel,
                        user,
                        kind: InboundKind::Button {
                            data,
                            ack: ButtonAck::Telegram(id),
                        },
                    },
                )
                .await;
        }
        let Some(msg) = update.get("message") else {
            return Handled::Done;
        };
        let (Some(channel), Some(user)) = (
            id_str(msg.pointer("/chat/id")),
            id_str(msg.pointer("/from/id")),
        ) else {
            return Handled::Done;
        };
        if msg.pointer("/from/is_bot").and_then(Value::as_bool) == Some(true) {
            return Handled::Done;
        }
        let text = msg
            .get("text")
            .or_else(|| msg.get("caption"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let (attachments, skipped) = self.attachments(msg).await;
        self.sink
            .inbound(
                &self.key,
                Inbound {
                    channel,
                    user,
                    kind: InboundKind::Message {
                        text: super::clean_text(text),
                        attachments,
                        skipped,
                    },
                },
            )
            .await
    }

    /// The document or largest photo of a message, within the size cap.
    async fn attachments(&self, msg: &Value) -> (Vec<Attachment>, Vec<String>) {
        let mut files = Vec::new();
        if let Some(doc) = msg.get("document") {
            files.push((
                doc.get("file_id").and_then(Value::as_str),
                doc.get("file_name")
                    .and_then(Value::as_str)
                    .unwrap_or("document")
                    .to_owned(),
                doc.get("mime_type")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                doc.get("file_size").and_then(Value::as_u64),
            ));
        }
        if let Some(photo) = msg
            .get("photo")
            .and_then(Value::as_array)
            .and_then(|p| p.last())
        {
            files.push((
                photo.get("file_id").and_then(Value::as_str),
                "photo.jpg".to_owned(),
                Some("image/jpeg".to_owned()),
                photo.get("file_size").and_then(Value::as_u64),
            ));
        }
        let mut out = Vec::new();
        let mut skipped = Vec::new();
        for (id, name, mime, size) in files {
            let Some(id) = id else { continue };
            let cap = self.config.max_attachment_bytes;
            if size.is_some_and(|s| s > cap) {
                skipped.push(format!("{name}: larger than {cap} bytes"));
                continue;
            }
            match self.download(id, cap).await {
                Ok(bytes) => out.push(Attachment {
                    name: name.clone(),
                    mime,
                    bytes,
                }),
                Err(e) => skipped.push(format!("{name}: {e}")),
            }
        }
        (out, skipped)
    }

    async fn download(&self, file_id: &str, cap: u64) -> anyhow::Result<Vec<u8>> {
        let file = self
            .out
            .api("getFile", "getFile", json!({ "file_id": file_id }))
            .await?;
        let path = file
            .get("file_path")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow::anyhow!("no file_path"))?;
        let url = format!("{}/file/bot{}/{}", self.out.base, self.out.token, path);
        http::download(&self.out.http, &url, None, cap).await
    }
}

fn id_str(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

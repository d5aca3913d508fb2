//! Discord adapter: REST (`POST /channels/{id}/messages` with button components,
//! `POST /channels/{id}/typing`, interaction callbacks) and the gateway websocket (URL from
//! `GET /gateway/bot`): Hello → Identify (or Resume with the stored session id and sequence),
//! heartbeats (a missing ack means a zombie connection: reconnect and resume), `READY`,
//! `MESSAGE_CREATE`, `INTERACTION_CREATE`; op 7 reconnects with resume, op 9 re-identifies
//! when not resumable.
//!
//! Cursor: `{"sessionId", "seq", "resumeUrl"}`. The sequence is committed only after the
//! dispatch was handled; an item svc-session could not take yet drops the connection and
//! resumes from the committed sequence, so Discord replays it. Message ids are also recorded
//! (`seen`), so a replay after a fresh Identify never answers a message twice.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use super::http::{self, CallError};
use super::{
    AdapterConfig, Backoff, Button, ButtonAck, ConnKey, Handled, Inbound, InboundKind, Outbound,
    Running, Sink,
};
use crate::binding::Credential;

/// Gateway intents: GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT.
pub const INTENTS: u64 = (1 << 9) | (1 << 12) | (1 << 15);

/// Sending side of one bot.
pub struct DiscordOut {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl DiscordOut {
    async fn post(&self, what: &'static str, path: &str, body: Value) -> Result<Value, CallError> {
        let url = format!("{}{path}", self.base);
        let auth = format!("Bot {}", self.token);
        http::call(what, || {
            self.http
                .post(&url)
                .header(reqwest::header::AUTHORIZATION, &auth)
                .json(&body)
        })
        .await
    }
}

#[tonic::async_trait]
impl Outbound for DiscordOut {
    async fn send(
        &self,
        channel: &str,
        text: &str,
        _html: bool,
        buttons: &[Button],
    ) -> anyhow::Result<()> {
        let mut body = json!({ "content": text, "allowed_mentions": { "parse": [] } });
        if !buttons.is_empty() {
            let row: Vec<Value> = buttons
                .iter()
                .map(|b| {
                    let style = if b.label.starts_with("Deny") { 4 } else { 1 };
                    json!({ "type": 2, "style": style, "label": b.label, "custom_id": b.data })
                })
                .collect();
            body["components"] = json!([{ "type": 1, "components": row }]);
        }
        self.post(
            "createMessage",
            &format!("/channels/{}/messages", path_segment(channel)),
            body,
        )
        .await?;
        Ok(())
    }

    async fn typing(&self, channel: &str) -> anyhow::Result<()> {
        self.post(
            "triggerTyping",
            &format!("/channels/{}/typing", path_segment(channel)),
            json!({}),
        )
        .await?;
        Ok(())
    }

    async fn answer_button(&self, ack: &ButtonAck, text: &str) -> anyhow::Result<()> {
        if let ButtonAck::Discord { id, token } = ack {
            // An ephemeral reply only the presser sees.
            self.post(
                "interactionCallback",
                &format!(
                    "/interactions/{}/{}/callback",
                    path_segment(id),
                    path_segment(token)
                ),
                json!({ "type": 4, "data": { "content": text, "flags": 64 } }),
            )
            .await?;
        }
        Ok(())
    }
}

/// A platform id as one URL path segment (ids are digits; anything else is percent-encoded).
fn path_segment(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Starts the gateway connection of `key`.
pub fn start(
    key: ConnKey,
    credential: Credential,
    config: AdapterConfig,
    sink: Arc<dyn Sink>,
) -> Running {
    let out = Arc::new(DiscordOut {
        http: http::client(Duration::from_secs(30)),
        base: config.base_url.clone(),
        token: credential.token.clone(),
    });
    let gw = Gateway {
        out: out.clone(),
        key,
        config,
        sink,
        session_id: None,
        seq: None,
        resume_url: None,
    };
    Running {
        outbound: out,
        task: tokio::spawn(gw.run()),
    }
}

struct Gateway {
    out: Arc<DiscordOut>,
    key: ConnKey,
    config: AdapterConfig,
    sink: Arc<dyn Sink>,
    session_id: Option<String>,
    seq: Option<u64>,
    resume_url: Option<String>,
}

/// Why one gateway connection ended.
enum End {
    /// Reconnect and resume.
    Resume(String),
    /// Reconnect with a fresh Identify.
    Reidentify(String),
    /// The token was refused.
    Unauthorized(String),
}

impl Gateway {
    async fn run(mut self) {
        if let Some(c) = self.sink.load_cursor(&self.key).await {
            self.session_id = c
                .get("sessionId")
                .and_then(Value::as_str)
                .map(str::to_owned);
            self.seq = c.get("seq").and_then(Value::as_u64);
            self.resume_url = c
                .get("resumeUrl")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        let mut backoff = Backoff::new(self.config.max_backoff);
        loop {
            let started = tokio::time::Instant::now();
            let end = self.connect_once().await;
            self.sink.state(
                &self.key,
                false,
                match &end {
                    End::Resume(w) | End::Reidentify(w) | End::Unauthorized(w) => w,
                },
            );
            match end {
                End::Resume(_) => {}
                End::Reidentify(_) => {
                    self.session_id = None;
                    self.seq = None;
                    self.resume_url = None;
                    self.save().await;
                }
                End::Unauthorized(why) => self.sink.error(&self.key, &why),
            }
            if started.elapsed() > Duration::from_secs(60) {
                backoff.reset();
            }
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }

    async fn save(&self) {
        self.sink
            .save_cursor(
                &self.key,
                json!({ "sessionId": self.session_id, "seq": self.seq, "resumeUrl": self.resume_url }),
            )
            .await;
    }

    async fn gateway_url(&self) -> Result<String, End> {
        if let (Some(url), Some(_)) = (&self.resume_url, &self.session_id) {
            return Ok(url.clone());
        }
        let url = format!("{}/gateway/bot", self.out.base);
        let auth = format!("Bot {}", self.out.token);
        match http::call("getGatewayBot", || {
            self.out
                .http
                .get(&url)
                .header(reqwest::header::AUTHORIZATION, &auth)
        })
        .await
        {
            Ok(v) => v
                .get("url")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| End::Resume("GET /gateway/bot answered no url".into())),
            Err(e @ CallError::Unauthorized(..)) => Err(End::Unauthorized(e.to_string())),
            Err(e) => Err(End::Resume(e.to_string())),
        }
    }

    async fn connect_once(&mut self) -> End {
        let base = match self.gateway_url().await {
            Ok(u) => u,
            Err(end) => return end,
        };
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{}{sep}v=10&encoding=json", base.trim_end_matches('/'));
        let mut ws = match super::ws::connect(&url).await {
            Ok(ws) => ws,
            Err(e) => return End::Resume(format!("gateway connect failed: {e}")),
        };
        // Hello.
        let interval = match tokio::time::timeout(Duration::from_secs(15), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => http::parse_lossy(t.as_bytes())
                .pointer("/d/heartbeat_interval")
                .and_then(Value::as_u64)
                .unwrap_or(41_250),
            _ => return End::Resume("no Hello from the gateway".into()),
        };
        let token = self.out.token.clone();
        let hello_reply = match (&self.session_id, self.seq) {
            (Some(sid), Some(seq)) => {
                json!({ "op": 6, "d": { "token": token, "session_id": sid, "seq": seq } })
            }
            _ => json!({ "op": 2, "d": {
                "token": token,
                "intents": INTENTS,
                "properties": { "os": std::env::consts::OS, "browser": "snowpea", "device": "snowpea" },
            }}),
        };
        if ws
            .send(Message::text(hello_reply.to_string()))
            .await
            .is_err()
        {
            return End::Resume("gateway closed during identify".into());
        }
        let mut heartbeat =
            tokio::time::interval(Duration::from_millis(interval.clamp(1_000, 120_000)));
        heartbeat.tick().await;
        let mut acked = true;
        loop {
            tokio::select! {
                _ = heartbeat.tick() => {
                    if !acked {
                        return End::Resume("no heartbeat ack (zombie connection)".into());
                    }
                    acked = false;
                    let beat = json!({ "op": 1, "d": self.seq });
                    if ws.send(Message::text(beat.to_string())).await.is_err() {
                        return End::Resume("gateway closed".into());
                    }
                }
                msg = ws.next() => {
                    let text = match msg {
                        Some(Ok(Message::Text(t))) => t.to_string(),
                        Some(Ok(Message::Binary(b))) => String::from_utf8_lossy(&b).into_owned(),
                        Some(Ok(Message::Close(frame))) => {
                            let code = frame.as_ref().map(|f| u16::from(f.code)).unwrap_or(1000);
                            return match code {
                                4004 => End::Unauthorized("the gateway refused the token (4004)".into()),
                                4007 | 4009 => End::Reidentify(format!("gateway closed {code}")),
                                4010..=4014 => End::Unauthorized(format!("gateway closed {code}")),
                                _ => End::Resume(format!("gateway closed {code}")),
                            };
                        }
                        Some(Ok(_)) => continue,
                        Some(Err(e)) => return End::Resume(format!("gateway error: {e}")),
                        None => return End::Resume("gateway connection dropped".into()),
                    };
                    let v = http::parse_lossy(text.as_bytes());
                    match v.get("op").and_then(Value::as_u64) {
                        Some(0) => {
                            if let Some(end) = self.dispatch(&v).await {
                                return end;
                            }
                        }
                        Some(1) => {
                            let beat = json!({ "op": 1, "d": self.seq });
                            let _ = ws.send(Message::text(beat.to_string())).await;
                        }
                        Some(7) => return End::Resume("gateway asked to reconnect".into()),
                        Some(9) => {
                            return if v.get("d").and_then(Value::as_bool) == Some(true) {
                                End::Resume("invalid session (resumable)".into())
                            } else {
                                End::Reidentify("invalid session".into())
                            };
                        }
                        Some(11) => acked = true,
                        _ => {}
                    }
                }
            }
        }
    }

    /// Handles one dispatch; `Some` ends the connection (an item to be replayed).
    async fn dispatch(&mut self, v: &Value) -> Option<End> {
        let seq = v.get("s").and_then(Value::as_u64);
        let kind = v.get("t").and_then(Value::as_str).unwrap_or("");
        let d = v.get("d").cloned().unwrap_or(Value::Null);
        let handled = match kind {
            "READY" => {
                self.session_id = d
                    .get("session_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                self.resume_url = d
                    .get("resume_gateway_url")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                self.sink.state(&self.key, true, "ready");
                Handled::Done
            }
            "RESUMED" => {
                self.sink.state(&self.key, true, "resumed");
                Handled::Done
            }
            "MESSAGE_CREATE" => self.message(&d).await,
            "INTERACTION_CREATE" => self.interaction(&d).await,
            _ => Handled::Done,
        };
        match handled {
            Handled::Done => {
                if seq.is_some() {
                    self.seq = seq;
                }
                self.save().await;
                None
            }
            Handled::Retry => Some(End::Resume("svc-session not reachable; replaying".into())),
        }
    }

    async fn message(&self, d: &Value) -> Handled {
        if d.pointer("/author/bot").and_then(Value::as_bool) == Some(true) {
            return Handled::Done;
        }
        let (Some(channel), Some(user), Some(id)) = (
            d.get("channel_id").and_then(Value::as_str),
            d.pointer("/author/id").and_then(Value::as_str),
            d.get("id").and_then(Value::as_str),
        ) else {
            return Handled::Done;
        };
        let seen_key = format!("m:{id}");
        if self.sink.seen(&self.key, &seen_key).await {
            return Handled::Done;
        }
        let text = d.get("content").and_then(Value::as_str).unwrap_or("");
        let (attachments, skipped) = http::attachments(
            &self.out.http,
            d.get("attachments"),
            http::FileKeys {
                name: "filename",
                url: "url",
                size: "size",
                mime: "content_type",
                untrusted: "",
            },
            self.config.max_attachment_bytes,
            None,
            |_| true,
        )
        .await;
        let handled = self
            .sink
            .inbound(
                &self.key,
                Inbound {
                    channel: channel.to_owned(),
                    user: user.to_owned(),
                    kind: InboundKind::Message {
                        text: super::clean_text(text),
                        attachments,
                        skipped,
                    },
                },
            )
            .await;
        if handled == Handled::Done {
            self.sink.mark_seen(&self.key, &seen_key).await;
        }
        handled
    }

    async fn interaction(&self, d: &Value) -> Handled {
        let user = d
            .pointer("/member/user/id")
            .or_else(|| d.pointer("/user/id"))
            .and_then(Value::as_str);
        let (Some(channel), Some(user), Some(id), Some(token), Some(data)) = (
            d.get("channel_id").and_then(Value::as_str),
            user,
            d.get("id").and_then(Value::as_str),
            d.get("token").and_then(Value::as_str),
            d.pointer("/data/custom_id").and_then(Value::as_str),
        ) else {
            return Handled::Done;
        };
        self.sink
            .inbound(
                &self.key,
                Inbound {
                    channel: channel.to_owned(),
                    user: user.to_owned(),
                    kind: InboundKind::Button {
                        data: data.to_owned(),
                        ack: ButtonAck::Discord {
                            id: id.to_owned(),
                            token: token.to_owned(),
                        },
                    },
                },
            )
            .await
    }
}

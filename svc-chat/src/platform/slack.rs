//! Slack adapter: Socket Mode (`apps.connections.open` with the app-level token, then the
//! websocket it names: `hello`, `events_api` envelopes with `message` events, `interactive`
//! `block_actions`, `disconnect`) and the Web API with the bot token (`chat.postMessage` with
//! Block Kit buttons; a press is answered on its `response_url`). Slack has no bot typing
//! indicator in the Web API, so [`Outbound::typing`] does nothing.
//!
//! Cursor: each envelope is acknowledged (`{"envelope_id"}`) only after it was handled, and
//! its id is recorded (`seen`); an envelope Slack sends again is acknowledged without being
//! handled twice. One svc-session could not take yet is left unacknowledged, so Slack
//! redelivers it.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use super::http::{self, CallError};
use super::{
    AdapterConfig, Attachment, Backoff, Button, ButtonAck, ConnKey, Handled, Inbound, InboundKind,
    Outbound, Running, Sink,
};
use crate::binding::Credential;

/// Sending side of one Slack app.
pub struct SlackOut {
    http: reqwest::Client,
    base: String,
    bot_token: String,
}

impl SlackOut {
    async fn api(
        &self,
        what: &'static str,
        method: &str,
        token: &str,
        body: Value,
    ) -> Result<Value, CallError> {
        let url = format!("{}/{method}", self.base);
        let auth = format!("Bearer {token}");
        let v = http::call(what, || {
            self.http
                .post(&url)
                .header(reqwest::header::AUTHORIZATION, &auth)
                .json(&body)
        })
        .await?;
        if v.get("ok").and_then(Value::as_bool) != Some(true) {
            let e = v
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("ok: false");
            if matches!(
                e,
                "invalid_auth" | "not_authed" | "account_inactive" | "token_revoked"
            ) {
                return Err(CallError::Unauthorized(what, 401));
            }
            return Err(CallError::Refused(what, e.chars().take(200).collect()));
        }
        Ok(v)
    }
}

#[tonic::async_trait]
impl Outbound for SlackOut {
    async fn send(
        &self,
        channel: &str,
        text: &str,
        _html: bool,
        buttons: &[Button],
    ) -> anyhow::Result<()> {
        let mut body = json!({ "channel": channel, "text": text, "mrkdwn": true });
        if !buttons.is_empty() {
            let elements: Vec<Value> = buttons
                .iter()
                .map(|b| {
                    let mut e = json!({
                        "type": "button",
                        "text": { "type": "plain_text", "text": b.label },
                        "action_id": b.data,
                        "value": b.data,
                    });
                    if b.label.starts_with("Deny") {
                        e["style"] = json!("danger");
                    } else if b.label.starts_with("Allow") {
                        e["style"] = json!("primary");
                    }
                    e
                })
                .collect();
            body["blocks"] = json!([
                { "type": "section", "text": { "type": "mrkdwn", "text": text } },
                { "type": "actions", "elements": elements },
            ]);
        }
        let token = self.bot_token.clone();
        self.api("chat.postMessage", "chat.postMessage", &token, body)
            .await?;
        Ok(())
    }

    async fn typing(&self, _channel: &str) -> anyhow::Result<()> {
        Ok(())
    }

    async fn answer_button(&self, ack: &ButtonAck, text: &str) -> anyhow::Result<()> {
        if let ButtonAck::Slack(Some(url)) = ack {
            // Only Slack's own hooks (or the configured base's host, for the tests' fake).
            let allowed = url::Url::parse(url).ok().is_some_and(|u| {
                let base_host = url::Url::parse(&self.base)
                    .ok()
                    .and_then(|b| b.host_str().map(str::to_owned));
                u.host_str() == Some("hooks.slack.com")
                    || u.host_str().map(str::to_owned) == base_host
            });
            if allowed {
                http::call("response_url", || {
                    self.http.post(url).json(&json!({
                        "text": text,
                        "response_type": "ephemeral",
                        "replace_original": false,
                    }))
                })
                .await?;
            }
        }
        Ok(())
    }
}

/// Starts the Socket Mode connection of `key`.
pub fn start(
    key: ConnKey,
    credential: Credential,
    config: AdapterConfig,
    sink: Arc<dyn Sink>,
) -> Running {
    let out = Arc::new(SlackOut {
        http: http::client(Duration::from_secs(30)),
        base: config.base_url.clone(),
        bot_token: credential.bot_token.clone().unwrap_or_default(),
    });
    let socket = Socket {
        out: out.clone(),
        app_token: credential.token,
        key,
        config,
        sink,
    };
    Running {
        outbound: out,
        task: tokio::spawn(socket.run()),
    }
}

struct Socket {
    out: Arc<SlackOut>,
    app_token: String,
    key: ConnKey,
    config: AdapterConfig,
    sink: Arc<dyn Sink>,
}

impl Socket {
    async fn run(self) {
        let mut backoff = Backoff::new(self.config.max_backoff);
        loop {
            let started = tokio::time::Instant::now();
            let (why, unauthorized) = self.connect_once().await;
            self.sink.state(&self.key, false, &why);
            if unauthorized {
                self.sink.error(&self.key, &why);
            }
            if started.elapsed() > Duration::from_secs(60) {
                backoff.reset();
            }
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }

    /// One connection; returns why it ended and whether the token was refused.
    async fn connect_once(&self) -> (String, bool) {
        let url = match self
            .out
            .api(
                "apps.connections.open",
                "apps.connections.open",
                &self.app_token,
                json!({}),
            )
            .await
        {
            Ok(v) => match v.get("url").and_then(Value::as_str) {
                Some(u) => u.to_owned(),
                None => return ("apps.connections.open answered no url".into(), false),
            },
            Err(e @ CallError::Unauthorized(..)) => return (e.to_string(), true),
            Err(e) => return (e.to_string(), false),
        };
        let mut ws = match super::ws::connect(&url).await {
            Ok(ws) => ws,
            Err(e) => return (format!("socket connect failed: {e}"), false),
        };
        loop {
            let msg = match tokio::time::timeout(Duration::from_secs(120), ws.next()).await {
                Err(_) => return ("no frame for 120 s".into(), false),
                Ok(None) => return ("socket dropped".into(), false),
                Ok(Some(Err(e))) => return (format!("socket error: {e}"), false),
                Ok(Some(Ok(m))) => m,
            };
            let text = match msg {
                Message::Text(t) => t.to_string(),
                Message::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
                Message::Close(_) => return ("socket closed".into(), false),
                _ => continue,
            };
            let v = http::parse_lossy(text.as_bytes());
            match v.get("type").and_then(Value::as_str) {
                Some("hello") => self.sink.state(&self.key, true, "hello"),
                Some("disconnect") => return ("Slack asked to reconnect".into(), false),
                Some("events_api") | Some("interactive") => {
                    let Some(envelope) = v.get("envelope_id").and_then(Value::as_str) else {
                        continue;
                    };
                    let key = format!("e:{envelope}");
                    let handled = if self.sink.seen(&self.key, &key).await {
                        Handled::Done
                    } else {
                        let h = self.envelope(&v).await;
                        if h == Handled::Done {
                            self.sink.mark_seen(&self.key, &key).await;
                        }
                        h
                    };
                    if handled == Handled::Done {
                        let ack = json!({ "envelope_id": envelope });
                        if ws.send(Message::text(ack.to_string())).await.is_err() {
                            return ("socket closed".into(), false);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    async fn envelope(&self, v: &Value) -> Handled {
        let payload = v.get("payload").cloned().unwrap_or(Value::Null);
        if v.get("type").and_then(Value::as_str) == Some("interactive") {
            let (Some(user), Some(channel), Some(data)) = (
                payload.pointer("/user/id").and_then(Value::as_str),
                payload
                    .pointer("/channel/id")
                    .or_else(|| payload.pointer("/container/channel_id"))
                    .and_then(Value::as_str),
                payload
                    .pointer("/actions/0/value")
                    .or_else(|| payload.pointer("/actions/0/action_id"))
                    .and_then(Value::as_str),
            ) else {
                return Handled::Done;
            };
            return self
                .sink
                .inbound(
                    &self.key,
                    Inbound {
                        channel: channel.to_owned(),
                        user: user.to_owned(),
                        kind: InboundKind::Button {
                            data: data.to_owned(),
                            ack: ButtonAck::Slack(
                                payload
                                    .get("response_url")
                                    .and_then(Value::as_str)
                                    .map(str::to_owned),
                            ),
                        },
                    },
                )
                .await;
        }
        let event = payload.get("event").cloned().unwrap_or(Value::Null);
        if event.get("type").and_then(Value::as_str) != Some("message")
            || event.get("bot_id").is_some()
            || event
                .get("subtype")
                .and_then(Value::as_str)
                .is_some_and(|s| s != "file_share")
        {
            return Handled::Done;
        }
        let (Some(channel), Some(user)) = (
            event.get("channel").and_then(Value::as_str),
            event.get("user").and_then(Value::as_str),
        ) else {
            return Handled::Done;
        };
        let text = event.get("text").and_then(Value::as_str).unwrap_or("");
        let (attachments, skipped) = self.files(&event).await;
        self.sink
            .inbound(
                &self.key,
                Inbound {
                    channel: channel.to_owned(),
                    user: user.to_owned(),
                    kind: InboundKind::Message {
                        text: super::clean_text(&unescape(text)),
                        attachments,
                        skipped,
                    },
                },
            )
            .await
    }

    async fn files(&self, event: &Value) -> (Vec<Attachment>, Vec<String>) {
        let auth = format!("Bearer {}", self.out.bot_token);
        let api_host = url::Url::parse(&self.out.base)
            .ok()
            .and_then(|b| b.host_str().map(str::to_owned));
        http::attachments(
            &self.out.http,
            event.get("files"),
            http::FileKeys {
                name: "name",
                url: "url_private",
                size: "size",
                mime: "mimetype",
                untrusted: "not a Slack file URL",
            },
            self.config.max_attachment_bytes,
            Some(&auth),
            // The bot token goes only to Slack's file host (or the configured API host).
            |url| {
                url::Url::parse(url).ok().is_some_and(|u| {
                    u.scheme() == "https" && u.host_str() == Some("files.slack.com")
                        || u.host_str().is_some() && u.host_str() == api_host.as_deref()
                })
            },
        )
        .await
    }
}

/// Slack escapes `&`, `<`, `>` in message text.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

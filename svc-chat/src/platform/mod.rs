//! Platform adapters: thin clients of the Telegram Bot API (long polling), Discord (REST +
//! gateway websocket with resume) and Slack (Socket Mode + Web API), on reqwest and
//! tokio-tungstenite, with base URLs from `settings.gateway.<platform>.baseUrl` (tests point
//! them at the fakes in `snowpea-testkit`).
//!
//! An adapter owns one platform connection (one credential). It hands every inbound item to
//! the [`Sink`] in order and commits its cursor only when the sink answers
//! [`Handled::Done`]; [`Handled::Retry`] (svc-session not reachable) leaves the cursor, so
//! the item comes again. Sending goes through [`Outbound`]. Every HTTP call honours 429 +
//! retry-after ([`http`]); reconnects back off ([`Backoff`]).

pub mod discord;
pub mod http;
pub mod slack;
pub mod telegram;
pub mod ws;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::binding::{Credential, Platform};

/// One inbound item from a platform.
#[derive(Debug, Clone)]
pub struct Inbound {
    /// Platform chat / channel id.
    pub channel: String,
    /// Platform user id of the sender.
    pub user: String,
    /// What arrived.
    pub kind: InboundKind,
}

/// What arrived.
#[derive(Debug, Clone)]
pub enum InboundKind {
    /// A message: its text (lossily decoded) and attachments.
    Message {
        /// The text (or caption).
        text: String,
        /// Files attached to it, within the size cap.
        attachments: Vec<Attachment>,
        /// Attachments left out, with why (over the size cap, download failed).
        skipped: Vec<String>,
    },
    /// A button press (approval / question answer).
    Button {
        /// The button's data, as we set it.
        data: String,
        /// How to acknowledge it to the platform.
        ack: ButtonAck,
    },
}

/// A downloaded attachment.
#[derive(Debug, Clone)]
pub struct Attachment {
    /// File name.
    pub name: String,
    /// MIME type, when known.
    pub mime: Option<String>,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// How to acknowledge a button press.
#[derive(Debug, Clone)]
pub enum ButtonAck {
    /// Telegram `answerCallbackQuery` id.
    Telegram(String),
    /// Discord interaction id and token.
    Discord {
        /// Interaction id.
        id: String,
        /// Interaction token.
        token: String,
    },
    /// Slack: the action's `response_url`, when given.
    Slack(Option<String>),
}

/// A button under an outbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Button {
    /// What the button shows.
    pub label: String,
    /// What comes back in [`InboundKind::Button`] (at most 64 bytes).
    pub data: String,
}

/// What the sink did with an inbound item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// Handled (or deliberately dropped): commit the cursor past it.
    Done,
    /// Not handled yet (svc-session unreachable): keep the cursor, deliver it again later.
    Retry,
}

/// Identifies a platform connection: one credential of one platform.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnKey {
    /// The platform.
    pub platform: Platform,
    /// The credential name.
    pub credentials_ref: String,
}

/// Where an adapter delivers.
#[tonic::async_trait]
pub trait Sink: Send + Sync + 'static {
    /// Handles one inbound item (in order per connection).
    async fn inbound(&self, conn: &ConnKey, item: Inbound) -> Handled;
    /// The connection came up (`true`) or went down (`false`), with why.
    fn state(&self, conn: &ConnKey, up: bool, why: &str);
    /// A platform error worth telling the bindings' clients (`gateway.event` `error`).
    fn error(&self, conn: &ConnKey, message: &str);
    /// The stored cursor of the connection.
    async fn load_cursor(&self, conn: &ConnKey) -> Option<Value>;
    /// Commits the cursor of the connection.
    async fn save_cursor(&self, conn: &ConnKey, cursor: Value);
    /// Whether an unordered inbound key (Slack envelope, Discord message id) was handled.
    async fn seen(&self, conn: &ConnKey, key: &str) -> bool;
    /// Records an unordered inbound key as handled.
    async fn mark_seen(&self, conn: &ConnKey, key: &str);
}

/// Sending to a platform.
#[tonic::async_trait]
pub trait Outbound: Send + Sync + 'static {
    /// Posts `text` to `channel` (`html`: Telegram HTML), with `buttons` under it.
    async fn send(
        &self,
        channel: &str,
        text: &str,
        html: bool,
        buttons: &[Button],
    ) -> anyhow::Result<()>;
    /// Shows the typing indicator in `channel` (a no-op where the platform has none for bots).
    async fn typing(&self, channel: &str) -> anyhow::Result<()>;
    /// Acknowledges a button press, telling the presser `text` where the platform can.
    async fn answer_button(&self, ack: &ButtonAck, text: &str) -> anyhow::Result<()>;
}

/// Settings of one platform connection (`settings.gateway.<platform>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterConfig {
    /// API base URL (`baseUrl`), without a trailing slash.
    pub base_url: String,
    /// Telegram `getUpdates` long-poll timeout in seconds (`pollTimeoutSec`, default 25).
    pub poll_timeout_sec: u64,
    /// Largest attachment downloaded, in bytes (`maxAttachmentBytes`, default 10 MiB).
    pub max_attachment_bytes: u64,
    /// Longest wait between reconnect attempts (`maxBackoffSec`, default 60 s).
    pub max_backoff: Duration,
}

impl AdapterConfig {
    /// The defaults of `platform` overlaid with `settings` (`settings.gateway.<platform>`).
    pub fn from_settings(platform: Platform, settings: Option<&Value>) -> AdapterConfig {
        let default_base = match platform {
            Platform::Telegram => "https://api.telegram.org",
            Platform::Discord => "https://discord.com/api/v10",
            Platform::Slack => "https://slack.com/api",
        };
        let get = |k: &str| settings.and_then(|s| s.get(k));
        AdapterConfig {
            base_url: get("baseUrl")
                .and_then(Value::as_str)
                .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
                .unwrap_or(default_base)
                .trim_end_matches('/')
                .to_owned(),
            poll_timeout_sec: get("pollTimeoutSec")
                .and_then(Value::as_u64)
                .unwrap_or(25)
                .clamp(0, 50),
            max_attachment_bytes: get("maxAttachmentBytes")
                .and_then(Value::as_u64)
                .unwrap_or(10 * 1024 * 1024)
                .min(50 * 1024 * 1024),
            max_backoff: Duration::from_secs(
                get("maxBackoffSec")
                    .and_then(Value::as_u64)
                    .unwrap_or(60)
                    .clamp(1, 3600),
            ),
        }
    }
}

/// A started adapter: its sender, and the task running its receive loop.
pub struct Running {
    /// Sending to the platform.
    pub outbound: Arc<dyn Outbound>,
    /// The receive loop (aborted on unbind).
    pub task: tokio::task::JoinHandle<()>,
}

/// Starts the adapter of `key`.
pub fn start(
    key: ConnKey,
    credential: Credential,
    config: AdapterConfig,
    sink: Arc<dyn Sink>,
) -> Running {
    match key.platform {
        Platform::Telegram => telegram::start(key, credential, config, sink),
        Platform::Discord => discord::start(key, credential, config, sink),
        Platform::Slack => slack::start(key, credential, config, sink),
    }
}

/// Jittered exponential backoff between reconnects: 0.5 s doubling to the cap, reset after a
/// connection that stayed up.
#[derive(Debug, Clone)]
pub struct Backoff {
    attempt: u32,
    max: Duration,
}

impl Backoff {
    /// Backoff capped at `max`.
    pub fn new(max: Duration) -> Backoff {
        Backoff { attempt: 0, max }
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        let base = Duration::from_millis(500)
            .saturating_mul(1u32 << self.attempt.min(16))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let jitter: f64 = rand::random_range(0.5..=1.0);
        base.mul_f64(jitter)
    }

    /// Forgets the failures (the connection worked).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// The text of an inbound message as it is prompted: invalid UTF-8 replaced, NULs and other
/// control characters except newline and tab dropped.
pub fn clean_text(raw: &str) -> String {
    raw.chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect()
}

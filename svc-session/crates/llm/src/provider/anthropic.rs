//! Anthropic Messages streaming with tool use.
//!
//! Wire: `POST {base_url}/v1/messages` with headers `x-api-key`,
//! `anthropic-version: 2023-06-01` and `stream: true`; the answer is SSE with named
//! events `message_start`, `content_block_start`, `content_block_delta`,
//! `content_block_stop`, `message_delta`, `message_stop`, `ping` and `error`.
//!
//! Mapping decisions:
//! * the system prompt is the top-level `system`; `max_tokens` is required by the API and
//!   defaults to [`DEFAULT_MAX_TOKENS`];
//! * history: assistant tool calls are `tool_use` content blocks; tool results are
//!   `tool_result` blocks (`is_error` when failed; empty output is sent as
//!   `(no output)`) in a user message. A result with images ([`super::interface::ToolImage`], e.g.
//!   from an MCP tool) has a content array instead of a string: the text block, then one
//!   `{"type": "image", "source": {"type": "base64", "media_type", "data"}}` block per image
//!   of a supported type (others are left out; the text still mentions them). Consecutive messages of the same role are merged
//!   (parallel tool results become one user message, a user prompt right after tool
//!   results joins it after the results) and empty text blocks are left out, as the API
//!   requires;
//! * signed thinking: a `thinking` block (its `thinking_delta`s and `signature_delta`s) or a
//!   `redacted_thinking` block becomes one [`StreamEvent::Thinking`] at `content_block_stop`;
//!   the agent loop keeps it on the assistant message and it is sent back first in that
//!   message's content, so thinking continues across tool rounds (the thinking budget is
//!   then sent on the tool-result continuation too);
//! * `message_start.message.model` → [`StreamEvent::Model`];
//! * `text_delta` → text, `thinking_delta` → reasoning, `input_json_delta` fragments are
//!   accumulated per block and a complete tool call is emitted at `content_block_stop`
//!   (arguments parsed like the OpenAI provider: empty → `{}`, invalid → `{"_raw": …}`);
//! * usage: `input_tokens` = `input_tokens` + `cache_creation_input_tokens` +
//!   `cache_read_input_tokens` from `message_start` (the protocol counts cached tokens as
//!   part of the input), `cached_tokens` = `cache_read_input_tokens`, `output_tokens` from
//!   the last `message_delta`; emitted with `Done` at `message_stop`;
//! * an `error` event ends the call with [`ProviderError::Http`] whose status is derived
//!   from the error type (`overloaded_error` 529, `rate_limit_error` 429, `api_error` 500,
//!   `invalid_request_error` 400, …); a stream without `message_stop` is a
//!   [`ProviderError::Network`] error. Unknown event types are ignored (the API may add
//!   some).

use std::collections::BTreeMap;
use std::sync::Arc;

use eventsource_stream::Event;
use serde_json::{json, Value};

use super::config::ProviderConfig;
use super::http::{model, parse_arguments, stream_sse, Remote, RetryPolicy, SseDecoder};
use super::interface::{
    ChatMessage, EventStream, ModelRequest, Provider, ProviderError, Role, StreamEvent,
    ThinkingBlock, ToolCall, Usage,
};

/// `anthropic-version` header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `anthropic-beta` value sent with an OAuth access token (`Authorization: Bearer`).
pub const OAUTH_BETA: &str = "oauth-2025-04-20";

/// `max_tokens` sent when the request sets none (the API requires the field).
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// An Anthropic Messages provider. Cheap to clone.
#[derive(Clone)]
pub struct AnthropicProvider {
    inner: Arc<Remote>,
}

impl std::fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt_debug("AnthropicProvider", f)
    }
}

impl AnthropicProvider {
    /// A provider for `config` (base URL = origin, e.g. `https://api.anthropic.com`) with
    /// the default [`RetryPolicy`].
    pub fn new(config: ProviderConfig) -> Result<Self, ProviderError> {
        Self::with_retry(config, RetryPolicy::default())
    }

    /// A provider with an explicit retry policy (tests use tiny backoffs).
    pub fn with_retry(config: ProviderConfig, retry: RetryPolicy) -> Result<Self, ProviderError> {
        Ok(AnthropicProvider {
            inner: Arc::new(Remote::new(config, retry)?),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &ProviderConfig {
        &self.inner.config
    }

    /// The JSON body of a streaming Messages request.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        build_body(&self.inner.config, request)
    }
}

fn build_body(config: &ProviderConfig, request: &ModelRequest) -> Value {
    let model = model(config, request);
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages_json(&request.messages),
        "stream": true,
    });
    if !request.system.is_empty() {
        body["system"] = json!(request.system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    if let Some(budget) = thinking_budget(request) {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        // max_tokens must leave room for the answer after the thinking.
        let max = request
            .max_tokens
            .unwrap_or(DEFAULT_MAX_TOKENS)
            .max(budget + DEFAULT_MAX_TOKENS);
        body["max_tokens"] = json!(max);
    }
    body
}

/// The thinking budget of `request`'s effort. Sent on a call that follows a user message,
/// and on a tool-result continuation whose assistant message kept its signed thinking
/// blocks ([`ThinkingBlock`], replayed first in that message): the API refuses thinking on
/// a continuation whose assistant message has none, so only such a call goes without.
fn thinking_budget(request: &ModelRequest) -> Option<u32> {
    let effort = request.effort.as_deref()?;
    let allowed = match request.messages.last() {
        Some(m) if m.role == Role::User => true,
        Some(m) if m.role == Role::Tool => request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .is_some_and(|a| !a.thinking.is_empty()),
        _ => false,
    };
    allowed
        .then(|| crate::effort::anthropic_thinking_budget(effort))
        .flatten()
}

/// The wire block of a kept thinking block (`thinking` with its `signature`, or
/// `redacted_thinking` with its `data`), exactly as the API sent it.
fn thinking_json(t: &ThinkingBlock) -> Value {
    match &t.redacted {
        Some(data) => json!({"type": "redacted_thinking", "data": data}),
        None => json!({"type": "thinking", "thinking": t.thinking, "signature": t.signature}),
    }
}

fn messages_json(messages: &[ChatMessage]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in messages {
        let (role, blocks): (&'static str, Vec<Value>) = match m.role {
            Role::User => {
                // Attached images first, then the text (Anthropic's recommended order).
                let mut blocks: Vec<Value> = m
                    .images
                    .iter()
                    .filter(|i| i.is_supported())
                    .map(|i| {
                        json!({"type": "image", "source": {
                            "type": "base64",
                            "media_type": i.mime_type.trim(),
                            "data": i.data,
                        }})
                    })
                    .collect();
                blocks.extend(text_block(&m.content));
                ("user", blocks)
            }
            Role::Assistant => {
                // Signed thinking first, as the API returned it.
                let mut blocks: Vec<Value> = m.thinking.iter().map(thinking_json).collect();
                blocks.extend(text_block(&m.content));
                blocks.extend(m.tool_calls.iter().map(|c| {
                    let input = if c.arguments.is_object() {
                        c.arguments.clone()
                    } else {
                        json!({})
                    };
                    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input})
                }));
                ("assistant", blocks)
            }
            Role::Tool => {
                let content = if m.content.is_empty() {
                    "(no output)".to_string()
                } else {
                    m.content.clone()
                };
                let images: Vec<Value> = m
                    .images
                    .iter()
                    .filter(|i| i.is_supported())
                    .map(|i| {
                        json!({"type": "image", "source": {
                            "type": "base64",
                            "media_type": i.mime_type.trim(),
                            "data": i.data,
                        }})
                    })
                    .collect();
                let content = if images.is_empty() {
                    json!(content)
                } else {
                    let mut blocks = vec![json!({"type": "text", "text": content})];
                    blocks.extend(images);
                    Value::Array(blocks)
                };
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                    "content": content,
                });
                if m.is_error {
                    block["is_error"] = json!(true);
                }
                ("user", vec![block])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

impl Provider for AnthropicProvider {
    fn vendor(&self) -> &str {
        &self.inner.config.vendor
    }

    fn default_model(&self) -> &str {
        &self.inner.config.model
    }

    fn stream(&self, request: ModelRequest) -> EventStream {
        let cfg = &self.inner.config;
        let url = format!("{}/v1/messages", cfg.base_url.trim_end_matches('/'));
        let state = EventState::new(cfg.vendor.clone());
        let oauth = cfg.oauth;
        stream_sse(
            self.inner.clone(),
            url,
            build_body(cfg, &request),
            move |rb, key| {
                let rb = rb.header("anthropic-version", ANTHROPIC_VERSION);
                match key {
                    Some(k) if oauth => rb.bearer_auth(k).header("anthropic-beta", OAUTH_BETA),
                    Some(k) => rb.header("x-api-key", k),
                    None => rb,
                }
            },
            state,
        )
    }
}

enum Block {
    Text,
    Thinking {
        text: String,
        signature: String,
    },
    Redacted(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
        initial: Value,
    },
    Other,
}

/// Accumulates Anthropic stream events into [`StreamEvent`]s.
pub(crate) struct EventState {
    vendor: String,
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    stop_reason: Option<String>,
    stopped: bool,
}

/// HTTP-like status of an Anthropic error type.
fn status_of_error_type(kind: &str) -> u16 {
    match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        _ => 500,
    }
}

impl EventState {
    pub(crate) fn new(vendor: String) -> Self {
        EventState {
            vendor,
            blocks: BTreeMap::new(),
            usage: Usage::default(),
            stop_reason: None,
            stopped: false,
        }
    }

    /// Handles one SSE event (`event:` name and `data:` payload).
    pub(crate) fn on_event(
        &mut self,
        event: &str,
        data: &str,
    ) -> Vec<Result<StreamEvent, ProviderError>> {
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                let snippet: String = data.chars().take(200).collect();
                return vec![Err(ProviderError::Protocol {
                    vendor: self.vendor.clone(),
                    message: format!("invalid JSON in {event} event ({e}): {snippet}"),
                })];
            }
        };
        let kind = v.get("type").and_then(Value::as_str).unwrap_or(event);
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        let mut out = Vec::new();
        match kind {
            "message_start" => {
                if let Some(m) = v
                    .pointer("/message/model")
                    .and_then(Value::as_str)
                    .filter(|m| !m.is_empty())
                {
                    out.push(Ok(StreamEvent::Model(m.to_string())));
                }
                if let Some(u) = v.pointer("/message/usage") {
                    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                    self.usage.input_tokens = n("input_tokens")
                        + n("cache_creation_input_tokens")
                        + n("cache_read_input_tokens");
                    self.usage.cached_tokens = n("cache_read_input_tokens");
                    self.usage.output_tokens = n("output_tokens");
                }
            }
            "content_block_start" => {
                let cb = v.get("content_block").cloned().unwrap_or(Value::Null);
                let block = match cb.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = cb
                            .get("text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(Ok(StreamEvent::TextDelta(t.to_string())));
                        }
                        Block::Text
                    }
                    Some("thinking") => {
                        let text = cb
                            .get("thinking")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string();
                        if !text.is_empty() {
                            out.push(Ok(StreamEvent::ReasoningDelta(text.clone())));
                        }
                        let signature = cb
                            .get("signature")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string();
                        Block::Thinking { text, signature }
                    }
                    Some("redacted_thinking") => Block::Redacted(
                        cb.get("data")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    ),
                    Some("tool_use") => Block::ToolUse {
                        id: cb
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        name: cb
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        json: String::new(),
                        initial: cb.get("input").cloned().unwrap_or(Value::Null),
                    },
                    _ => Block::Other,
                };
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let delta = v.get("delta").cloned().unwrap_or(Value::Null);
                let s = |k: &str| {
                    delta
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let t = s("text");
                        if !t.is_empty() {
                            out.push(Ok(StreamEvent::TextDelta(t)));
                        }
                    }
                    Some("thinking_delta") => {
                        let t = s("thinking");
                        if let Some(Block::Thinking { text, .. }) = self.blocks.get_mut(&index) {
                            text.push_str(&t);
                        }
                        if !t.is_empty() {
                            out.push(Ok(StreamEvent::ReasoningDelta(t)));
                        }
                    }
                    Some("signature_delta") => {
                        if let Some(Block::Thinking { signature, .. }) = self.blocks.get_mut(&index)
                        {
                            signature.push_str(&s("signature"));
                        }
                    }
                    Some("input_json_delta") => match self.blocks.get_mut(&index) {
                        Some(Block::ToolUse { json, .. }) => json.push_str(&s("partial_json")),
                        _ => {
                            return vec![Err(ProviderError::Protocol {
                                vendor: self.vendor.clone(),
                                message: format!(
                                "input_json_delta for block {index}, which is not a tool_use block"
                            ),
                            })]
                        }
                    },
                    // citations_delta, …: nothing to show.
                    _ => {}
                }
            }
            "content_block_stop" => match self.blocks.remove(&index) {
                Some(Block::ToolUse {
                    id,
                    name,
                    json,
                    initial,
                }) => out.push(Ok(StreamEvent::ToolCall(tool_call(
                    id, name, &json, initial,
                )))),
                // Only a signed block can be sent back; an unsigned one is display-only.
                Some(Block::Thinking { text, signature }) if !signature.is_empty() => {
                    out.push(Ok(StreamEvent::Thinking(ThinkingBlock {
                        thinking: text,
                        signature,
                        redacted: None,
                    })))
                }
                Some(Block::Redacted(data)) if !data.is_empty() => {
                    out.push(Ok(StreamEvent::Thinking(ThinkingBlock {
                        thinking: String::new(),
                        signature: String::new(),
                        redacted: Some(data),
                    })))
                }
                _ => {}
            },
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.to_lowercase());
                }
                if let Some(n) = v.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    self.usage.output_tokens = n;
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let kind = v
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("api_error");
                let message = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or(kind)
                    .to_string();
                out.push(Err(ProviderError::Http {
                    vendor: self.vendor.clone(),
                    status: status_of_error_type(kind),
                    message,
                }));
            }
            // "ping" and event types added later.
            _ => {}
        }
        out
    }

    /// Ends the call: `Usage` and `Done`, or an error when `message_stop` never came.
    pub(crate) fn finish(mut self) -> Vec<Result<StreamEvent, ProviderError>> {
        if !self.stopped {
            return vec![Err(ProviderError::Network {
                vendor: self.vendor.clone(),
                message: "the stream ended before message_stop".into(),
            })];
        }
        let mut out = Vec::new();
        // Tool blocks never closed (should not happen): emit what arrived.
        for (_, block) in std::mem::take(&mut self.blocks) {
            if let Block::ToolUse {
                id,
                name,
                json,
                initial,
            } = block
            {
                out.push(Ok(StreamEvent::ToolCall(tool_call(
                    id, name, &json, initial,
                ))));
            }
        }
        out.push(Ok(StreamEvent::Usage(self.usage.clone())));
        out.push(Ok(StreamEvent::Done {
            stop_reason: self.stop_reason.take().unwrap_or_else(|| "end_turn".into()),
        }));
        out
    }
}

fn tool_call(id: String, name: String, json: &str, initial: Value) -> ToolCall {
    let arguments = if json.trim().is_empty() && initial.is_object() {
        initial
    } else {
        parse_arguments(json)
    };
    let id = if id.is_empty() {
        format!("toolu_{}", uuid::Uuid::new_v4().simple())
    } else {
        id
    };
    ToolCall {
        id,
        name,
        arguments,
    }
}

impl SseDecoder for EventState {
    fn on_sse(&mut self, event: &Event) -> Vec<Result<StreamEvent, ProviderError>> {
        self.on_event(&event.event, &event.data)
    }

    fn done(&self) -> bool {
        self.stopped
    }

    fn finish(self) -> Vec<Result<StreamEvent, ProviderError>> {
        EventState::finish(self)
    }
}

#[cfg(test)]
#[path = "anthropic_tests.rs"]
mod tests;

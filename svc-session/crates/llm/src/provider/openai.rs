//! OpenAI-compatible streaming chat completions with tool calls (OpenAI, OpenRouter,
//! llama.cpp server, Ollama, vLLM, LM Studio, any `/v1/chat/completions` server).
//!
//! Wire: `POST {base_url}/chat/completions` with `stream: true` and
//! `stream_options: {include_usage: true}`; the answer is SSE, one
//! `chat.completion.chunk` JSON per `data:` line, ended by `data: [DONE]`.
//!
//! Mapping decisions:
//! * history: assistant tool calls become `tool_calls: [{id, type: "function",
//!   function: {name, arguments: "<json string>"}}]` (content `null` when empty); tool
//!   results become `{role: "tool", tool_call_id, content}`; a failed result's content is
//!   prefixed with `Error: ` (the format has no error flag);
//! * images of tool results ([`super::interface::ToolImage`], e.g. from an MCP tool): chat `tool`
//!   messages accept only text, so after the block of consecutive tool messages (which
//!   must directly follow the assistant message that made the calls) one `user` message
//!   carries them: per result with images a text part `Image(s) returned by tool call <id>
//!   (<name>):` and one `{type: "image_url", image_url: {url: "data:<mime>;base64,…"}}` part
//!   per image of a supported type (others are left out; the tool text mentions them).
//!   Servers without vision support may refuse such a request; only tools that return
//!   images cause one;
//! * the output cap is sent as `max_completion_tokens` to OpenAI itself (its reasoning
//!   models reject `max_tokens`) and as `max_tokens` to every other server;
//! * tool calls arrive split across chunks by `index` (id and name first, `arguments`
//!   fragments after); they are accumulated and emitted complete, in index order, when the
//!   choice's `finish_reason` arrives (or at the end of the stream). Arguments are parsed
//!   as JSON: empty → `{}`, invalid JSON or a non-object → `{"_raw": "<text as sent>"}`,
//!   so the tool's argument check reports the problem to the model. A call without an id
//!   (some local servers) gets `call_<uuid>`;
//! * `delta.content` → text, `delta.reasoning_content` (DeepSeek, vLLM, llama.cpp) or
//!   `delta.reasoning` (OpenRouter, Ollama) → reasoning;
//! * the first chunk's `model` → [`StreamEvent::Model`] (`provider.test`'s `modelEcho`);
//! * llama.cpp's `timings` (its final chunk) ride along in the usage as they are sent
//!   (the spec's five keys only; `usage.timings`, capability `llmTimings`);
//! * usage comes from the final usage chunk (`prompt_tokens`, `completion_tokens`,
//!   `prompt_tokens_details.cached_tokens`); a server that reports none gets an estimate
//!   (≈ 4 characters per token) so every call still yields one `Usage`;
//! * an `error` object inside the stream (OpenRouter does this) ends the call with
//!   [`ProviderError::Http`] (status from its numeric `code`, else 502); a stream that ends
//!   with neither `finish_reason` nor `[DONE]` is a [`ProviderError::Network`] error.

use std::collections::BTreeMap;
use std::sync::Arc;

use eventsource_stream::Event;
use serde_json::{json, Value};

use super::config::ProviderConfig;
use super::http::{
    estimate_tokens, model, parse_arguments, request_chars, stream_sse, Remote, RetryPolicy,
    SseDecoder,
};
use super::interface::{
    ChatMessage, EventStream, ModelRequest, Provider, ProviderError, Role, StreamEvent, ToolCall,
    ToolImage, Usage,
};

/// An OpenAI-compatible provider. Cheap to clone.
#[derive(Clone)]
pub struct OpenAiProvider {
    inner: Arc<Remote>,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt_debug("OpenAiProvider", f)
    }
}

impl OpenAiProvider {
    /// A provider for `config` (base URL without the `/chat/completions` suffix) with the
    /// default [`RetryPolicy`].
    pub fn new(config: ProviderConfig) -> Result<Self, ProviderError> {
        Self::with_retry(config, RetryPolicy::default())
    }

    /// A provider with an explicit retry policy (tests use tiny backoffs).
    pub fn with_retry(config: ProviderConfig, retry: RetryPolicy) -> Result<Self, ProviderError> {
        Ok(OpenAiProvider {
            inner: Arc::new(Remote::new(config, retry)?),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &ProviderConfig {
        &self.inner.config
    }

    /// The JSON body of a streaming chat-completions request.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        build_body(&self.inner.config, request)
    }
}

fn build_body(config: &ProviderConfig, request: &ModelRequest) -> Value {
    let model = model(config, request);
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    let mut pending_images: Vec<Value> = Vec::new();
    for m in &request.messages {
        if m.role != Role::Tool && !pending_images.is_empty() {
            messages.push(images_message(std::mem::take(&mut pending_images)));
        }
        messages.push(message_json(m));
        if m.role == Role::Tool {
            pending_images.extend(tool_images(m));
        }
    }
    if !pending_images.is_empty() {
        messages.push(images_message(pending_images));
    }
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
    }
    if let Some(max) = request.max_tokens {
        let key = if config.vendor == "openai" {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body[key] = json!(max);
    }
    if let Some(e) = request
        .effort
        .as_deref()
        .and_then(crate::effort::openai_reasoning_effort)
    {
        body["reasoning_effort"] = json!(e);
    }
    body
}

/// The content parts showing the images of tool result `m`: a text part naming the call,
/// then one `image_url` part (a `data:` URL) per image of a supported type. Empty when there
/// are none.
fn tool_images(m: &ChatMessage) -> Vec<Value> {
    let images: Vec<&ToolImage> = m.images.iter().filter(|i| i.is_supported()).collect();
    if images.is_empty() {
        return Vec::new();
    }
    let mut parts = vec![json!({"type": "text", "text": format!(
        "Image{} returned by tool call {} ({}):",
        if images.len() == 1 { "" } else { "s" },
        m.tool_call_id.as_deref().unwrap_or_default(),
        m.tool_name.as_deref().unwrap_or_default()
    )})];
    parts.extend(
        images
            .into_iter()
            .map(|i| json!({"type": "image_url", "image_url": {"url": i.data_url()}})),
    );
    parts
}

/// The user message carrying the images of a block of tool results.
fn images_message(parts: Vec<Value>) -> Value {
    json!({"role": "user", "content": parts})
}

fn message_json(m: &ChatMessage) -> Value {
    match m.role {
        Role::User if m.images.iter().any(|i| i.is_supported()) => {
            // Attached images as `image_url` parts (vision input), after the text.
            let mut parts = vec![json!({"type": "text", "text": m.content})];
            parts.extend(
                m.images
                    .iter()
                    .filter(|i| i.is_supported())
                    .map(|i| json!({"type": "image_url", "image_url": {"url": i.data_url()}})),
            );
            json!({"role": "user", "content": parts})
        }
        Role::User => json!({"role": "user", "content": m.content}),
        Role::Assistant => {
            if m.tool_calls.is_empty() {
                json!({"role": "assistant", "content": m.content})
            } else {
                let content = if m.content.is_empty() {
                    Value::Null
                } else {
                    Value::String(m.content.clone())
                };
                let calls: Vec<Value> = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        let args = if c.arguments.is_null() { "{}".to_string() } else { c.arguments.to_string() };
                        json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": args}})
                    })
                    .collect();
                json!({"role": "assistant", "content": content, "tool_calls": calls})
            }
        }
        Role::Tool => {
            let content = if m.is_error {
                format!("Error: {}", m.content)
            } else {
                m.content.clone()
            };
            json!({"role": "tool", "tool_call_id": m.tool_call_id.clone().unwrap_or_default(), "content": content})
        }
    }
}

impl Provider for OpenAiProvider {
    fn vendor(&self) -> &str {
        &self.inner.config.vendor
    }

    fn default_model(&self) -> &str {
        &self.inner.config.model
    }

    fn stream(&self, request: ModelRequest) -> EventStream {
        let cfg = &self.inner.config;
        let url = format!("{}/chat/completions", cfg.base_url.trim_end_matches('/'));
        let state = ChunkState::new(cfg.vendor.clone(), request_chars(&request));
        stream_sse(
            self.inner.clone(),
            url,
            build_body(cfg, &request),
            |rb, key| match key {
                Some(k) => rb.bearer_auth(k),
                None => rb,
            },
            state,
        )
    }
}

#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Accumulates `chat.completion.chunk`s into [`StreamEvent`]s.
pub(crate) struct ChunkState {
    vendor: String,
    input_chars: usize,
    output_chars: usize,
    calls: BTreeMap<u64, PartialCall>,
    emitted_calls: usize,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    /// llama.cpp's `timings` of the last chunk that had them (its final one).
    timings: Option<BTreeMap<String, f64>>,
    saw_done: bool,
    model_seen: bool,
}

impl ChunkState {
    pub(crate) fn new(vendor: String, input_chars: usize) -> Self {
        ChunkState {
            vendor,
            input_chars,
            output_chars: 0,
            calls: BTreeMap::new(),
            emitted_calls: 0,
            finish_reason: None,
            usage: None,
            timings: None,
            saw_done: false,
            model_seen: false,
        }
    }

    fn protocol(&self, message: String) -> ProviderError {
        ProviderError::Protocol {
            vendor: self.vendor.clone(),
            message,
        }
    }

    /// Handles one SSE `data` payload.
    pub(crate) fn on_data(&mut self, data: &str) -> Vec<Result<StreamEvent, ProviderError>> {
        let data = data.trim();
        if data == "[DONE]" {
            self.saw_done = true;
            return self.flush_calls();
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                return vec![Err(self.protocol(format!(
                    "invalid JSON chunk ({e}): {}",
                    truncate(data, 200)
                )))]
            }
        };
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .or_else(|| err.as_str())
                .unwrap_or("error inside the stream")
                .to_string();
            let status = err
                .get("code")
                .and_then(Value::as_u64)
                .filter(|c| (400..600).contains(c))
                .unwrap_or(502) as u16;
            return vec![Err(ProviderError::Http {
                vendor: self.vendor.clone(),
                status,
                message,
            })];
        }
        let mut out = Vec::new();
        if !self.model_seen {
            if let Some(m) = chunk
                .get("model")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
            {
                self.model_seen = true;
                out.push(Ok(StreamEvent::Model(m.to_string())));
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(Usage {
                input_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
                output_tokens: u
                    .get("completion_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                cached_tokens: u
                    .pointer("/prompt_tokens_details/cached_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                timings: None,
            });
        }
        if let Some(t) = chunk.get("timings").and_then(Value::as_object) {
            let timings: BTreeMap<String, f64> = crate::provider::interface::TIMINGS_KEYS
                .iter()
                .filter_map(|k| {
                    let v = t.get(*k)?.as_f64().filter(|v| v.is_finite())?;
                    Some(((*k).to_owned(), v))
                })
                .collect();
            if !timings.is_empty() {
                self.timings = Some(timings);
            }
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return out;
        };
        // Only the first choice (we never ask for n > 1).
        let Some(choice) = choices
            .iter()
            .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        else {
            return out;
        };
        if let Some(delta) = choice.get("delta").filter(|d| d.is_object()) {
            for key in ["reasoning_content", "reasoning"] {
                if let Some(r) = delta
                    .get(key)
                    .and_then(Value::as_str)
                    .filter(|r| !r.is_empty())
                {
                    self.output_chars += r.chars().count();
                    out.push(Ok(StreamEvent::ReasoningDelta(r.to_string())));
                    break;
                }
            }
            if let Some(t) = delta
                .get("content")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                self.output_chars += t.chars().count();
                out.push(Ok(StreamEvent::TextDelta(t.to_string())));
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for tc in calls {
                    self.on_tool_delta(tc);
                }
            }
        }
        if let Some(reason) = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
        {
            self.finish_reason = Some(reason.to_lowercase());
            out.extend(self.flush_calls());
        }
        out
    }

    fn on_tool_delta(&mut self, tc: &Value) {
        let id = tc
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let index = match tc.get("index").and_then(Value::as_u64) {
            Some(i) => i,
            // No index (some servers): a new id starts a new call, else continue the last.
            None => {
                let last = self.calls.keys().next_back().copied();
                match (last, id) {
                    (None, _) => 0,
                    (Some(l), Some(id)) if self.calls[&l].id.as_deref() != Some(id) => l + 1,
                    (Some(l), _) => l,
                }
            }
        };
        let entry = self.calls.entry(index).or_default();
        if let Some(id) = id {
            entry.id.get_or_insert_with(|| id.to_string());
        }
        if let Some(f) = tc.get("function") {
            if let Some(name) = f
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                if entry.name.is_empty() {
                    entry.name = name.to_string();
                }
            }
            match f.get("arguments") {
                Some(Value::String(s)) => entry.arguments.push_str(s),
                // Some servers send the arguments as an object in one piece.
                Some(v @ Value::Object(_)) => entry.arguments.push_str(&v.to_string()),
                _ => {}
            }
        }
    }

    fn flush_calls(&mut self) -> Vec<Result<StreamEvent, ProviderError>> {
        let calls = std::mem::take(&mut self.calls);
        let mut out = Vec::new();
        for (_, c) in calls {
            if c.name.is_empty() && c.arguments.is_empty() {
                continue;
            }
            self.output_chars += c.name.len() + c.arguments.len();
            self.emitted_calls += 1;
            let id =
                c.id.unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple()));
            out.push(Ok(StreamEvent::ToolCall(ToolCall {
                id,
                name: c.name,
                arguments: parse_arguments(&c.arguments),
            })));
        }
        out
    }

    /// Ends the call: remaining tool calls, one `Usage`, `Done` — or an error when the
    /// stream broke off.
    pub(crate) fn finish(mut self) -> Vec<Result<StreamEvent, ProviderError>> {
        if !self.saw_done && self.finish_reason.is_none() {
            return vec![Err(ProviderError::Network {
                vendor: self.vendor.clone(),
                message: "the stream ended before the answer was complete".into(),
            })];
        }
        let mut out = self.flush_calls();
        let mut usage = self.usage.take().unwrap_or_else(|| Usage {
            input_tokens: estimate_tokens(self.input_chars),
            output_tokens: estimate_tokens(self.output_chars),
            cached_tokens: 0,
            timings: None,
        });
        usage.timings = self.timings.take();
        out.push(Ok(StreamEvent::Usage(usage)));
        let stop_reason = self.finish_reason.take().unwrap_or_else(|| {
            if self.emitted_calls > 0 {
                "tool_calls".into()
            } else {
                "stop".into()
            }
        });
        out.push(Ok(StreamEvent::Done { stop_reason }));
        out
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

impl SseDecoder for ChunkState {
    fn on_sse(&mut self, event: &Event) -> Vec<Result<StreamEvent, ProviderError>> {
        self.on_data(&event.data)
    }

    fn done(&self) -> bool {
        self.saw_done
    }

    fn finish(self) -> Vec<Result<StreamEvent, ProviderError>> {
        ChunkState::finish(self)
    }
}

#[cfg(test)]
#[path = "openai_tests.rs"]
mod tests;

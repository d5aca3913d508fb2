//! Gemini streaming `generateContent` with function calling (Google AI Studio's
//! Generative Language API, and servers speaking it).
//!
//! Wire: `POST {base_url}/models/{model}:streamGenerateContent?alt=sse` with the key in
//! `x-goog-api-key` (an OAuth access token as `Authorization: Bearer`); the answer is SSE,
//! one `GenerateContentResponse` JSON per `data:` line, and the stream simply ends (no end
//! mark).
//!
//! Mapping decisions:
//! * the system prompt is `systemInstruction`; user messages are `role: "user"` contents,
//!   assistant messages `role: "model"` with a `text` part and one `functionCall` part per
//!   tool call; the tool results of one round are ONE `user` content of `functionResponse`
//!   parts (`response: {"result": text}`, or `{"error": text}` for a failed call), followed
//!   by `inlineData` parts for images the tools returned (supported types only);
//! * tools are `tools: [{functionDeclarations: [...]}]`; their JSON Schemas are reduced to
//!   the OpenAPI subset the API accepts (keys such as `$schema`, `additionalProperties`,
//!   `default` or `examples` are dropped, recursively);
//! * `maxOutputTokens` carries the output cap;
//! * a part with `thought: true` is reasoning, any other `text` part is answer text; a
//!   `functionCall` part is complete in one chunk and becomes a [`ToolCall`] at once (its
//!   `id` when the API gave one, else `gemini_call_<uuid>`, which is never sent back). A
//!   call's `thoughtSignature` is remembered (process-wide, bounded) and sent back with the
//!   call in later requests, as thinking models require;
//! * the first chunk's `modelVersion` → [`StreamEvent::Model`];
//! * usage is the last `usageMetadata`: `promptTokenCount`, `candidatesTokenCount` +
//!   `thoughtsTokenCount` as output, `cachedContentTokenCount`; without one it is estimated;
//! * `finishReason` (lower-cased; `stop` with tool calls becomes `tool_calls`) ends the
//!   answer; `promptFeedback.blockReason` or an `error` object in the stream end the call
//!   with [`ProviderError::Http`]; a stream that ends without a `finishReason` is a
//!   [`ProviderError::Network`] error.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use eventsource_stream::Event;
use serde_json::{json, Map, Value};

use super::config::ProviderConfig;
use super::http::{
    estimate_tokens, model, request_chars, stream_sse, Remote, RetryPolicy, SseDecoder,
};
use super::interface::{
    ChatMessage, EventStream, ModelRequest, Provider, ProviderError, Role, StreamEvent, ToolCall,
    Usage,
};

/// Prefix of the ids generated for calls the API gave no id.
const GENERATED_ID: &str = "gemini_call_";
/// Thought signatures remembered per call id.
const SIGNATURES_KEPT: usize = 4096;

/// A Gemini provider. Cheap to clone.
#[derive(Clone)]
pub struct GeminiProvider {
    inner: Arc<Remote>,
}

impl std::fmt::Debug for GeminiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt_debug("GeminiProvider", f)
    }
}

impl GeminiProvider {
    /// A provider for `config` (base URL up to `/v1beta`) with the default [`RetryPolicy`].
    pub fn new(config: ProviderConfig) -> Result<Self, ProviderError> {
        Self::with_retry(config, RetryPolicy::default())
    }

    /// A provider with an explicit retry policy (tests use tiny backoffs).
    pub fn with_retry(config: ProviderConfig, retry: RetryPolicy) -> Result<Self, ProviderError> {
        Ok(GeminiProvider {
            inner: Arc::new(Remote::new(config, retry)?),
        })
    }

    /// The JSON body of a streaming request.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        build_body(request)
    }
}

/// Thought signatures by call id, with their insertion order for the bound.
type Signatures = (HashMap<String, String>, VecDeque<String>);

fn signatures() -> &'static Mutex<Signatures> {
    static SIGS: OnceLock<Mutex<Signatures>> = OnceLock::new();
    SIGS.get_or_init(Default::default)
}

fn remember_signature(id: &str, signature: &str) {
    let mut guard = signatures().lock().unwrap_or_else(|e| e.into_inner());
    let (map, order) = &mut *guard;
    if map.insert(id.to_string(), signature.to_string()).is_none() {
        order.push_back(id.to_string());
        if order.len() > SIGNATURES_KEPT {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }
}

fn signature_of(id: &str) -> Option<String> {
    signatures()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .0
        .get(id)
        .cloned()
}

fn build_body(request: &ModelRequest) -> Value {
    let mut contents: Vec<Value> = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    let mut images: Vec<Value> = Vec::new();
    let flush = |contents: &mut Vec<Value>, results: &mut Vec<Value>, images: &mut Vec<Value>| {
        if !results.is_empty() {
            let mut parts = std::mem::take(results);
            parts.append(images);
            contents.push(json!({"role": "user", "parts": parts}));
        }
    };
    for m in &request.messages {
        if m.role != Role::Tool {
            flush(&mut contents, &mut results, &mut images);
        }
        match m.role {
            Role::User => contents.push(json!({"role": "user", "parts": [{"text": m.content}]})),
            Role::Assistant => {
                let mut parts = Vec::new();
                if !m.content.is_empty() {
                    parts.push(json!({"text": m.content}));
                }
                for c in &m.tool_calls {
                    parts.push(function_call_part(c));
                }
                if !parts.is_empty() {
                    contents.push(json!({"role": "model", "parts": parts}));
                }
            }
            Role::Tool => {
                results.push(function_response_part(m));
                images.extend(m.images.iter().filter(|i| i.is_supported()).map(
                    |i| json!({"inlineData": {"mimeType": i.mime_type.trim(), "data": i.data}}),
                ));
            }
        }
    }
    flush(&mut contents, &mut results, &mut images);
    let mut body = json!({"contents": contents});
    if !request.system.is_empty() {
        body["systemInstruction"] = json!({"parts": [{"text": request.system}]});
    }
    if !request.tools.is_empty() {
        let decls: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "description": t.description, "parameters": schema_subset(&t.parameters)})
            })
            .collect();
        body["tools"] = json!([{"functionDeclarations": decls}]);
    }
    if let Some(max) = request.max_tokens {
        body["generationConfig"] = json!({"maxOutputTokens": max});
    }
    body
}

fn function_call_part(c: &ToolCall) -> Value {
    let args = if c.arguments.is_object() {
        c.arguments.clone()
    } else {
        json!({})
    };
    let mut call = json!({"name": c.name, "args": args});
    if !c.id.starts_with(GENERATED_ID) {
        call["id"] = json!(c.id);
    }
    let mut part = json!({"functionCall": call});
    if let Some(sig) = signature_of(&c.id) {
        part["thoughtSignature"] = json!(sig);
    }
    part
}

fn function_response_part(m: &ChatMessage) -> Value {
    let key = if m.is_error { "error" } else { "result" };
    let mut response =
        json!({"name": m.tool_name.clone().unwrap_or_default(), "response": {key: m.content}});
    if let Some(id) = m
        .tool_call_id
        .as_deref()
        .filter(|id| !id.starts_with(GENERATED_ID))
    {
        response["id"] = json!(id);
    }
    json!({"functionResponse": response})
}

/// The OpenAPI-subset schema Gemini accepts: known keys kept, the rest dropped,
/// recursively through `properties`, `items` and `anyOf`.
pub(crate) fn schema_subset(schema: &Value) -> Value {
    const KEEP: &[&str] = &[
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "required",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minProperties",
        "maxProperties",
        "propertyOrdering",
    ];
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (k, v) in map {
        match k.as_str() {
            "properties" => {
                if let Value::Object(props) = v {
                    out.insert(
                        k.clone(),
                        Value::Object(
                            props
                                .iter()
                                .map(|(name, s)| (name.clone(), schema_subset(s)))
                                .collect(),
                        ),
                    );
                }
            }
            "items" => {
                out.insert(k.clone(), schema_subset(v));
            }
            "anyOf" => {
                if let Value::Array(list) = v {
                    out.insert(
                        k.clone(),
                        Value::Array(list.iter().map(schema_subset).collect()),
                    );
                }
            }
            // A JSON-Schema type list like ["string", "null"] → the type plus nullable.
            "type" if v.is_array() => {
                let types: Vec<&str> = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                if let Some(t) = types.iter().find(|t| **t != "null") {
                    out.insert("type".into(), json!(t));
                }
                if types.contains(&"null") {
                    out.insert("nullable".into(), json!(true));
                }
            }
            key if KEEP.contains(&key) => {
                out.insert(k.clone(), v.clone());
            }
            _ => {}
        }
    }
    Value::Object(out)
}

impl Provider for GeminiProvider {
    fn vendor(&self) -> &str {
        &self.inner.config.vendor
    }

    fn default_model(&self) -> &str {
        &self.inner.config.model
    }

    fn stream(&self, request: ModelRequest) -> EventStream {
        let cfg = &self.inner.config;
        let model = model(cfg, &request);
        let model = model.strip_prefix("models/").unwrap_or(model);
        let url = format!(
            "{}/models/{model}:streamGenerateContent?alt=sse",
            cfg.base_url.trim_end_matches('/')
        );
        let state = ChunkState::new(cfg.vendor.clone(), request_chars(&request));
        let oauth = cfg.oauth;
        stream_sse(
            self.inner.clone(),
            url,
            build_body(&request),
            move |rb, key| match key {
                Some(k) if oauth => rb.bearer_auth(k),
                Some(k) => rb.header("x-goog-api-key", k),
                None => rb,
            },
            state,
        )
    }
}

/// Turns `GenerateContentResponse` chunks into [`StreamEvent`]s.
pub(crate) struct ChunkState {
    vendor: String,
    input_chars: usize,
    output_chars: usize,
    calls: usize,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    model_seen: bool,
}

impl ChunkState {
    pub(crate) fn new(vendor: String, input_chars: usize) -> Self {
        ChunkState {
            vendor,
            input_chars,
            output_chars: 0,
            calls: 0,
            finish_reason: None,
            usage: None,
            model_seen: false,
        }
    }

    /// Handles one SSE `data` payload.
    pub(crate) fn on_data(&mut self, data: &str) -> Vec<Result<StreamEvent, ProviderError>> {
        let data = data.trim();
        if data.is_empty() {
            return vec![];
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                return vec![Err(ProviderError::Protocol {
                    vendor: self.vendor.clone(),
                    message: format!(
                        "invalid JSON chunk ({e}): {}",
                        data.chars().take(200).collect::<String>()
                    ),
                })]
            }
        };
        if let Some(err) = chunk.get("error").filter(|e| e.is_object()) {
            let status = err
                .get("code")
                .and_then(Value::as_u64)
                .filter(|c| (400..600).contains(c))
                .unwrap_or(502) as u16;
            return vec![Err(ProviderError::Http {
                vendor: self.vendor.clone(),
                status,
                message: err
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("error inside the stream")
                    .to_string(),
            })];
        }
        if let Some(reason) = chunk
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
        {
            return vec![Err(ProviderError::Http {
                vendor: self.vendor.clone(),
                status: 400,
                message: format!("the prompt was blocked ({reason})"),
            })];
        }
        if let Some(u) = chunk.get("usageMetadata").filter(|u| u.is_object()) {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Some(Usage {
                input_tokens: n("promptTokenCount"),
                output_tokens: n("candidatesTokenCount") + n("thoughtsTokenCount"),
                cached_tokens: n("cachedContentTokenCount"),
                timings: None,
            });
        }
        let mut out = Vec::new();
        if !self.model_seen {
            if let Some(m) = chunk
                .get("modelVersion")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
            {
                self.model_seen = true;
                out.push(Ok(StreamEvent::Model(m.to_string())));
            }
        }
        let Some(candidate) = chunk
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return out;
        };
        let parts = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for part in parts {
            if let Some(call) = part.get("functionCall") {
                let name = call
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let arguments = match call.get("args") {
                    Some(v @ Value::Object(_)) => v.clone(),
                    None | Some(Value::Null) => json!({}),
                    Some(other) => json!({"_raw": other.to_string()}),
                };
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .unwrap_or_else(|| format!("{GENERATED_ID}{}", uuid::Uuid::new_v4().simple()));
                if let Some(sig) = part.get("thoughtSignature").and_then(Value::as_str) {
                    remember_signature(&id, sig);
                }
                self.output_chars += name.len() + arguments.to_string().len();
                self.calls += 1;
                out.push(Ok(StreamEvent::ToolCall(ToolCall {
                    id,
                    name,
                    arguments,
                })));
            } else if let Some(text) = part
                .get("text")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                self.output_chars += text.chars().count();
                if part.get("thought").and_then(Value::as_bool) == Some(true) {
                    out.push(Ok(StreamEvent::ReasoningDelta(text.to_string())));
                } else {
                    out.push(Ok(StreamEvent::TextDelta(text.to_string())));
                }
            }
        }
        if let Some(reason) = candidate
            .get("finishReason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty() && *r != "FINISH_REASON_UNSPECIFIED")
        {
            self.finish_reason = Some(reason.to_lowercase());
        }
        out
    }

    /// Ends the call: one `Usage`, `Done` — or an error when the stream broke off.
    pub(crate) fn finish(mut self) -> Vec<Result<StreamEvent, ProviderError>> {
        let Some(reason) = self.finish_reason.take() else {
            return vec![Err(ProviderError::Network {
                vendor: self.vendor.clone(),
                message: "the stream ended before the answer was complete".into(),
            })];
        };
        let usage = self.usage.take().unwrap_or_else(|| Usage {
            input_tokens: estimate_tokens(self.input_chars),
            output_tokens: estimate_tokens(self.output_chars),
            cached_tokens: 0,
            timings: None,
        });
        let stop_reason = if reason == "stop" && self.calls > 0 {
            "tool_calls".to_string()
        } else {
            reason
        };
        vec![
            Ok(StreamEvent::Usage(usage)),
            Ok(StreamEvent::Done { stop_reason }),
        ]
    }
}

impl SseDecoder for ChunkState {
    fn on_sse(&mut self, event: &Event) -> Vec<Result<StreamEvent, ProviderError>> {
        self.on_data(&event.data)
    }

    fn done(&self) -> bool {
        false
    }

    fn finish(self) -> Vec<Result<StreamEvent, ProviderError>> {
        ChunkState::finish(self)
    }
}

#[cfg(test)]
#[path = "gemini_tests.rs"]
mod tests;

//! The one interface the agent loop uses to call a model (the module doc of [`super`]):
//! messages, tool calls and images, the request, the stream of events, the error, and the
//! [`Provider`] trait every wire implements. It refers to no implementation, so every
//! wire can use it without reaching back through [`super`].

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person (or the system on their behalf).
    User,
    /// The model.
    Assistant,
    /// A tool result fed back to the model.
    Tool,
}

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned call id (generated when the vendor gives none).
    pub id: String,
    /// Tool name, e.g. `shell`.
    pub name: String,
    /// Parsed JSON arguments (an object; `{}` when the model sent none).
    pub arguments: Value,
}

/// An image a tool returned (e.g. an MCP `image` content block), fed back to the model with
/// the tool result. Each provider puts it where its API accepts images (see
/// [`anthropic`] and [`openai`]); the text of the result stays as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolImage {
    /// MIME type, e.g. `image/png`.
    pub mime_type: String,
    /// The image bytes, base64 (standard alphabet, padded) as the tool sent them.
    pub data: String,
}

impl ToolImage {
    /// The image types the vendors' APIs accept (Anthropic and OpenAI alike: PNG, JPEG, GIF,
    /// WebP). Other types are not sent; the result's text still mentions them.
    pub const SUPPORTED: &'static [&'static str] =
        &["image/png", "image/jpeg", "image/gif", "image/webp"];

    /// Rough input-token cost of one image for context estimates (vendors charge by pixel
    /// count; ≈ 800 tokens is a mid-sized image).
    pub const ESTIMATED_TOKENS: u64 = 800;

    /// True when [`ToolImage::SUPPORTED`] lists the type and there is data.
    pub fn is_supported(&self) -> bool {
        !self.data.is_empty()
            && Self::SUPPORTED
                .iter()
                .any(|t| t.eq_ignore_ascii_case(self.mime_type.trim()))
    }

    /// A `data:` URL of the image (`data:<mime>;base64,<data>`).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime_type.trim(), self.data)
    }
}

/// A signed thinking block of an assistant message (Anthropic extended thinking). Sent back
/// verbatim: the vendor verifies `signature` (or decrypts `data`), so neither may change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingBlock {
    /// The visible thinking text (empty for a redacted block).
    #[serde(default)]
    pub thinking: String,
    /// The vendor's signature over `thinking`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
    /// A `redacted_thinking` block's encrypted payload (then `thinking` is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<String>,
}

/// One message of the conversation history sent to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Author.
    pub role: Role,
    /// Text content (may be empty for an assistant message that only calls tools).
    pub content: String,
    /// Tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a `Tool` message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a `Tool` message: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// For a `Tool` message: true when the tool failed or was denied.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// For a `Tool` message: images the tool returned along with its text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ToolImage>,
    /// For an `Assistant` message: the signed thinking blocks that preceded its text and
    /// tool calls (Anthropic; other wires ignore them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking: Vec<ThinkingBlock>,
    /// For a `Tool` message: the result was marked `meta.sensitive` — the model sees it in
    /// this turn, but it is never stored, remembered or sent to a compaction summary.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
}

impl ChatMessage {
    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::User,
            content: text.into(),
            tool_calls: vec![],
            tool_call_id: None,
            tool_name: None,
            is_error: false,
            images: vec![],
            thinking: vec![],
            sensitive: false,
        }
    }
    /// An assistant message with optional tool calls.
    pub fn assistant(text: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        ChatMessage {
            role: Role::Assistant,
            content: text.into(),
            tool_calls,
            tool_call_id: None,
            tool_name: None,
            is_error: false,
            images: vec![],
            thinking: vec![],
            sensitive: false,
        }
    }
    /// A tool result.
    pub fn tool_result(call: &ToolCall, content: impl Into<String>, is_error: bool) -> Self {
        ChatMessage {
            role: Role::Tool,
            content: content.into(),
            tool_calls: vec![],
            tool_call_id: Some(call.id.clone()),
            tool_name: Some(call.name.clone()),
            is_error,
            images: vec![],
            thinking: vec![],
            sensitive: false,
        }
    }
    /// The same message carrying signed `thinking` blocks (for an assistant message).
    pub fn with_thinking(mut self, thinking: Vec<ThinkingBlock>) -> Self {
        self.thinking = thinking;
        self
    }
    /// The same message marked sensitive (a tool result with `meta.sensitive`).
    pub fn sensitive(mut self, sensitive: bool) -> Self {
        self.sensitive = sensitive;
        self
    }
    /// The same message carrying `images` (for a tool result).
    pub fn with_images(mut self, images: Vec<ToolImage>) -> Self {
        self.images = images;
        self
    }
}

/// A tool the model may call: name, description and JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Tool name (API), e.g. `read_file`.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema (`{"type":"object",...}`) of the arguments.
    pub parameters: Value,
}

/// One model call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelRequest {
    /// Model id; empty = the provider's configured default.
    pub model: String,
    /// System prompt.
    pub system: String,
    /// Conversation so far, oldest first.
    pub messages: Vec<ChatMessage>,
    /// Tools offered to the model.
    pub tools: Vec<ToolSpec>,
    /// Output token cap, when set.
    pub max_tokens: Option<u32>,
    /// Reasoning effort (`low`/`medium`/`high`/`max`, already clamped to what the model
    /// offers; `None` sends nothing): Anthropic's thinking budget, OpenAI's
    /// `reasoning_effort` ([`crate::effort`]).
    pub effort: Option<String>,
}

/// Token usage of one model call (the `usage` session event).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt / input tokens.
    pub input_tokens: u64,
    /// Completion / output tokens.
    pub output_tokens: u64,
    /// Input tokens served from the vendor's prompt cache, when reported.
    pub cached_tokens: u64,
    /// llama.cpp's own timings, when an OpenAI-compatible server sends them (the `usage`
    /// event's `timings`, 1.25.0; capability `llmTimings`): [`TIMINGS_KEYS`] only,
    /// milliseconds for `*_ms`, token counts for `*_n`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<std::collections::BTreeMap<String, f64>>,
}

/// The llama.cpp timings the `usage` event carries (spec `usage.timings`).
pub const TIMINGS_KEYS: &[&str] = &[
    "prompt_n",
    "prompt_ms",
    "cache_n",
    "predicted_n",
    "predicted_ms",
];

/// What a provider streams back for one call.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A piece of the answer text.
    TextDelta(String),
    /// A piece of the model's visible reasoning, when the vendor streams it.
    ReasoningDelta(String),
    /// A complete tool call (arguments fully received and parsed).
    ToolCall(ToolCall),
    /// Token usage (sent once per call, before `Done`).
    Usage(Usage),
    /// The model id the vendor reported answering with (OpenAI-style chunks' `model`,
    /// Anthropic `message_start.message.model`, Gemini `modelVersion`); at most once per
    /// call, before `Done`. `provider.test` reports it as `modelEcho`.
    Model(String),
    /// A complete signed thinking block (Anthropic `thinking` with its `signature`, or
    /// `redacted_thinking`), emitted at the block's end. The agent loop stores it with the
    /// assistant message and sends it back unchanged on the next call of the same turn, as
    /// Anthropic requires for thinking across tool rounds.
    Thinking(ThinkingBlock),
    /// The call finished; `stop_reason` is the vendor's (`stop`, `end_turn`,
    /// `tool_calls`, `tool_use`, `length`, …).
    Done {
        /// Vendor stop reason, normalised to lower case.
        stop_reason: String,
    },
}

/// Why a model call failed (ends the turn with an `error` event + `turn.done{reason:"error"}`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The vendor answered with a non-success HTTP status (after retries for 429/5xx).
    #[error("{vendor} returned HTTP {status}: {message}")]
    Http {
        /// Vendor name.
        vendor: String,
        /// HTTP status code.
        status: u16,
        /// The vendor's error message (body), trimmed; never contains the API key.
        message: String,
    },
    /// The connection failed or broke mid-stream.
    #[error("{vendor}: network error: {message}")]
    Network {
        /// Vendor name.
        vendor: String,
        /// What failed.
        message: String,
    },
    /// The stream did not follow the vendor's wire format.
    #[error("{vendor}: malformed stream: {message}")]
    Protocol {
        /// Vendor name.
        vendor: String,
        /// What was wrong.
        message: String,
    },
    /// The provider is not usable as configured (no API key, bad script file, …).
    #[error("provider configuration: {0}")]
    Config(String),
}

/// The stream a provider returns for one call.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, ProviderError>> + Send>>;

/// A model provider. Implementations are cheap to clone behind an `Arc` and safe to use
/// from several sessions at once.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// Vendor name as the protocol reports it (`fake`, `openai`, `anthropic`, …).
    fn vendor(&self) -> &str;
    /// Default model id.
    fn default_model(&self) -> &str;
    /// Starts one streaming call. Errors are reported inside the stream; dropping the
    /// stream aborts the HTTP request.
    fn stream(&self, request: ModelRequest) -> EventStream;
}

/// A shared provider handle.
pub type SharedProvider = Arc<dyn Provider>;

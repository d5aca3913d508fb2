//! Model providers: the one interface the agent loop uses to call a model, and its
//! implementations (issue 2 "Providers"):
//! * [`fake`] — the scripted provider selected by `SNOWPEA_PROVIDER=fake:<script.json>`;
//! * [`openai`] — OpenAI-compatible streaming chat completions with tool calls (OpenAI,
//!   OpenRouter, llama.cpp server, Ollama, vLLM, LM Studio);
//! * [`anthropic`] — Anthropic Messages streaming with tool use;
//! * [`gemini`] — Gemini streaming `generateContent` with function calling.
//!
//! The [`Providers`] component (`component.rs`) answers the `provider.*` methods:
//! [`presets`] (the known vendors), [`credentials`] (`credentials.json`), `manage.rs`
//! (`provider.list/configure/remove`), `models.rs` (`provider.models`), `probe.rs`
//! (`provider.test`) and [`login`] (`provider.loginWeb`, `provider.loginProgress`).
//!
//! A provider turns a [`ModelRequest`] into a stream of [`StreamEvent`]s. Dropping the
//! stream cancels the call (that is how `session.interrupt` stops a model call).

pub mod anthropic;
mod cache;
mod component;
mod config;
pub mod credentials;
pub mod fake;
pub mod gemini;
mod http;
mod interface;
pub mod login;
mod manage;
mod models;
pub mod openai;
pub mod presets;
mod probe;
mod select;
#[cfg(test)]
mod test_server;

pub use cache::{Listing, CACHE_TTL};
pub use component::{Providers, MANAGEMENT_TIMEOUT};
pub use config::{ApiKind, ProviderConfig};
pub use http::RetryPolicy;
pub use interface::{
    ChatMessage, EventStream, ModelRequest, Provider, ProviderError, Role, SharedProvider,
    StreamEvent, ThinkingBlock, ToolCall, ToolImage, ToolSpec, Usage, TIMINGS_KEYS,
};
pub use probe::{TEST_MAX_TOKENS, TEST_PROMPT, TEST_TIMEOUT};
pub use select::{fake_provider, is_configured_vendor, select_provider, select_with};

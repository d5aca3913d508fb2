//! The model side of svc-session (issue 34 "the shape"): every provider wire
//! ([`provider`]: OpenAI-compatible chat completions and Responses, Anthropic, Gemini,
//! local servers, the scripted provider), the `provider.*` component with its credentials
//! and login flows, reasoning effort ([`effort`]), model routing ([`routing`]) and token
//! estimates ([`tokens`]).
//!
//! It depends on the protocol, the common crate and the service's error vocabulary only;
//! nothing here can reach a session, a turn or a tool (Cargo refuses the edge).

pub mod effort;
pub mod provider;
pub mod routing;
pub mod tokens;

/// The environment as the service reads it: a variable's value by name (the process
/// environment in production, a map in tests; `AppConfig::env`).
pub type EnvFn = std::sync::Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

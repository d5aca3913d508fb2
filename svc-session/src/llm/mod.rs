//! The `Sampler` component: `llm.sample` (spec "llm.sample", 1.14.0/1.21.0; issue 15) — one
//! tool-less model call for a session's browser host, on that session's provider.
//!
//! * Only the session's host (the caller whose clientId is the session's `hostToolsFrom`)
//!   may call it; anyone else gets `unauthorized`.
//! * Nothing reaches the transcript except one `usage` event (provider, model, tokens), so
//!   the call is billed like a turn's model call and shows up in `usage.summary`.
//! * The page-derived `input` is the user message, fenced as untrusted; the host's `system`
//!   is the system prompt; `task` follows the fenced input. With `schema` the model is told
//!   to answer JSON only (in the system prompt, or after the input with
//!   `schemaAfterInput`), and the answer is parsed and validated with the `jsonschema` crate:
//!   a failure is `invalid_output` with the validation errors in `details`.
//! * `modelCategory: "fast"` picks `browser.fastModel`, then `models.categories.fast`, then
//!   the vendor's small model ([`fast::small_model`]), then the session's model.
//! * `unavailable` when no provider is configured or the call fails or times out.

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use snowpea_common::context::CallContext;
use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;

use crate::events::EventLog;
use crate::session::Registry;
use snowpea_session_error::{Error, Result};
use snowpea_session_llm::provider::{ChatMessage, ModelRequest, Providers, StreamEvent};

pub mod fast;
pub mod prompt;

/// Largest `maxTokens` (spec: at most 4096).
pub const MAX_TOKENS: i64 = 4096;
/// `maxTokens` when none is given.
pub const DEFAULT_MAX_TOKENS: u32 = 1024;
/// Longest one sample may take, start to last token.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// `llm.sample`.
#[derive(Debug, Clone)]
pub struct Sampler {
    home: Home,
    registry: Registry,
    events: EventLog,
    providers: Providers,
}

impl Sampler {
    /// The component: sessions from `registry`, the usage event through `events`, the
    /// provider from `providers` and the settings of `home`.
    pub fn new(home: Home, registry: Registry, events: EventLog, providers: Providers) -> Self {
        Sampler {
            home,
            registry,
            events,
            providers,
        }
    }

    /// `llm.sample{sessionId, input, system, task, schema, schemaAfterInput, maxTokens,
    /// modelCategory}` for the caller `ctx`. Errors: `not_found` (no live session),
    /// `unauthorized` (not its host), `invalid_params` naming `params.input`,
    /// `params.maxTokens`, `params.modelCategory` or `params.schema` (not a valid JSON
    /// Schema), `unavailable` (no model could answer), `invalid_output` (the answer is not
    /// JSON matching `schema`).
    pub async fn sample(
        &self,
        ctx: &CallContext,
        p: pb::LlmSampleParams,
    ) -> Result<pb::LlmSampleResult> {
        let session = self.registry.get(&p.session_id)?;
        let host = session.host_tools_from();
        if host.is_none() || ctx.client_id != host {
            return Err(Error::Unauthorized(
                "llm.sample is for the session's host client only".into(),
            ));
        }
        if p.input.trim().is_empty() {
            return Err(Error::invalid("params.input", "must not be empty"));
        }
        let max_tokens = match p.max_tokens {
            0 => DEFAULT_MAX_TOKENS,
            n if (1..=MAX_TOKENS).contains(&n) => n as u32,
            n => {
                return Err(Error::invalid(
                    "params.maxTokens",
                    format!("must be between 1 and {MAX_TOKENS}, got {n}"),
                ))
            }
        };
        let fast = match p.model_category.as_str() {
            "" | "default" => false,
            "fast" => true,
            other => {
                return Err(Error::invalid(
                    "params.modelCategory",
                    format!("must be fast or default, not {other:?}"),
                ))
            }
        };
        let schema = p.schema.as_ref().map(snowpea_proto::wkt::from_struct);
        let validator = match &schema {
            Some(s) => Some(jsonschema::validator_for(s).map_err(|e| {
                Error::invalid("params.schema", format!("not a valid JSON Schema: {e}"))
            })?),
            None => None,
        };

        let workdir = session.workdir();
        let settings = snowpea_common::settings::load_effective(&self.home, Some(&workdir))
            .map_err(|e| Error::Unavailable(format!("cannot read settings: {e:#}")))?;
        let row = session.row();
        let (vendor, model) = if fast {
            fast::choose(&settings, row.provider.as_deref(), row.model.as_deref())
        } else {
            (row.provider.clone(), row.model.clone())
        };
        let provider = self
            .providers
            .select(&settings, vendor.as_deref(), model.as_deref())
            .map_err(|(_, message)| Error::UnavailableWith {
                message,
                details: json!({"reason": "no_provider"}),
            })?;
        let model = model.unwrap_or_else(|| provider.default_model().to_owned());
        let request = ModelRequest {
            model: model.clone(),
            system: prompt::system(p.system.as_deref(), schema.as_ref(), p.schema_after_input),
            messages: vec![ChatMessage::user(prompt::user(
                &p.input,
                p.task.as_deref(),
                schema.as_ref().filter(|_| p.schema_after_input),
            ))],
            tools: vec![],
            max_tokens: Some(max_tokens),
            effort: None,
        };
        let vendor = provider.vendor().to_owned();
        let answered = tokio::time::timeout(CALL_TIMEOUT, collect(provider.stream(request))).await;
        let (text, usage) = match answered {
            Err(_) => {
                return Err(Error::UnavailableWith {
                    message: format!("{vendor}: no answer within {}s", CALL_TIMEOUT.as_secs()),
                    details: json!({"reason": "timeout"}),
                })
            }
            Ok(Err(e)) => {
                return Err(Error::UnavailableWith {
                    message: e.to_string(),
                    details: json!({"reason": "provider_error"}),
                })
            }
            Ok(Ok(r)) => r,
        };
        let usage = usage.unwrap_or_else(|| snowpea_session_llm::provider::Usage {
            input_tokens: 0,
            output_tokens: (text.len() as u64).div_ceil(4),
            cached_tokens: 0,
            timings: None,
        });
        self.events.event(
            &session.id,
            session.host_tools_from(),
            &pb::UsageEvent {
                input_tokens: usage.input_tokens as i64,
                output_tokens: usage.output_tokens as i64,
                cached_input_tokens: (usage.cached_tokens > 0)
                    .then_some(usage.cached_tokens as i64),
                model: Some(model.clone()),
                provider: Some(vendor.clone()),
                timings: usage
                    .timings
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
                ..Default::default()
            },
            &[],
        );
        let usage_out = pb::TokenUsage {
            input_tokens: usage.input_tokens as i64,
            output_tokens: usage.output_tokens as i64,
        };
        let model_name = format!("{vendor}:{model}");
        let Some(validator) = validator else {
            return Ok(pb::LlmSampleResult {
                json: None,
                model: model_name,
                text: Some(text),
                usage: Some(usage_out),
            });
        };
        let value = prompt::parse_json(&text).ok_or_else(|| Error::InvalidOutput {
            message: "the model's answer is not JSON".into(),
            details: json!({"model": model_name, "errors": ["not JSON"], "text": truncate(&text, 2000)}),
        })?;
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .take(10)
            .map(|e| {
                let at = e.instance_path.to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        if !errors.is_empty() {
            return Err(Error::InvalidOutput {
                message: format!(
                    "the model's answer does not match the schema: {}",
                    errors[0]
                ),
                details: json!({"model": model_name, "errors": errors, "json": value}),
            });
        }
        Ok(pb::LlmSampleResult {
            json: Some(snowpea_proto::wkt::to_value(&value)),
            model: model_name,
            text: None,
            usage: Some(usage_out),
        })
    }
}

/// The answer text and usage of one call (tool calls are ignored: none were offered).
pub(crate) async fn collect(
    mut stream: snowpea_session_llm::provider::EventStream,
) -> std::result::Result<
    (String, Option<snowpea_session_llm::provider::Usage>),
    snowpea_session_llm::provider::ProviderError,
> {
    let mut text = String::new();
    let mut usage = None;
    while let Some(item) = stream.next().await {
        match item? {
            StreamEvent::TextDelta(d) => text.push_str(&d),
            StreamEvent::Usage(u) => usage = Some(u),
            StreamEvent::Done { .. } => break,
            StreamEvent::ReasoningDelta(_)
            | StreamEvent::ToolCall(_)
            | StreamEvent::Model(_)
            | StreamEvent::Thinking(_) => {}
        }
    }
    Ok((text, usage))
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
#[path = "llm_tests.rs"]
mod tests;

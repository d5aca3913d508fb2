//! `provider.test`: one short real completion ("Reply with the single word: ok", at most
//! [`TEST_MAX_TOKENS`] output tokens, [`TEST_TIMEOUT`]) on a vendor as turns would call it
//! (same settings, credentials and wire). Never an RPC error for a failing vendor: the
//! answer is `{ok:true, provider, model, latencyMs, reply}` or `{ok:false, provider, model,
//! latencyMs, error}` (the error never contains the key). `modelEcho` is the model id the
//! vendor's answer named (OpenAI-style `model`, Anthropic `message.model`, Gemini
//! `modelVersion`), absent when it named none. A passed test is recorded as
//! `providerTested` in `$SNOWPEA_HOME/setup-state.json` (`{vendor, model, at}`), which
//! `setup.status` reads for the browser profile.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use snowpea_proto::session::v1 as pb;

use super::component::Providers;
use super::config::ProviderConfig;
use super::interface::{ChatMessage, ModelRequest, StreamEvent};
use snowpea_session_error::Result;

/// The prompt of the test call.
pub const TEST_PROMPT: &str = "Reply with the single word: ok";
/// Output cap of the test call (room for a reasoning model's short thought).
pub const TEST_MAX_TOKENS: u32 = 128;
/// Longest wait for the whole test call, retries included.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest reply kept (characters of its first line).
const REPLY_CHARS: usize = 200;

impl Providers {
    /// `provider.test` (see the module doc). `invalid_params` only for a malformed
    /// `params.provider`.
    pub async fn test(&self, p: pb::ProviderTestParams) -> Result<pb::ProviderTestResult> {
        let vendor = super::presets::vendor_name(&p.provider, "params.provider")?;
        let requested = p.model.as_deref().map(str::trim).filter(|m| !m.is_empty());
        let failed = |model: String, error: String, latency: u128| pb::ProviderTestResult {
            error: Some(error),
            latency_ms: latency as i64,
            model,
            model_echo: None,
            ok: false,
            provider: vendor.clone(),
            reply: None,
        };
        self.refresh_if_expiring(Some(&vendor)).await;
        let settings = self.global_settings()?;
        let credentials = self.credentials()?;
        let config = match ProviderConfig::resolve_with(
            &settings,
            &credentials,
            Some(&vendor),
            requested,
            &|k| self.env()(k),
        ) {
            Ok(c) => c,
            Err(e) => {
                return Ok(failed(
                    requested.unwrap_or_default().to_string(),
                    e.to_string(),
                    0,
                ))
            }
        };
        let model = config.model.clone();
        let provider = match config.build() {
            Ok(p) => p,
            Err(e) => return Ok(failed(model, e.to_string(), 0)),
        };
        let request = ModelRequest {
            model: model.clone(),
            system: String::new(),
            messages: vec![ChatMessage::user(TEST_PROMPT)],
            tools: vec![],
            max_tokens: Some(TEST_MAX_TOKENS),
            effort: None,
        };
        let started = Instant::now();
        let outcome = tokio::time::timeout(TEST_TIMEOUT, async {
            let mut stream = provider.stream(request);
            let mut text = String::new();
            let mut echo = None;
            while let Some(item) = stream.next().await {
                match item {
                    Ok(StreamEvent::TextDelta(t)) => text.push_str(&t),
                    Ok(StreamEvent::Model(m)) => echo = Some(m),
                    Ok(StreamEvent::Done { .. }) => return Ok((text, echo)),
                    Ok(_) => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
            Err("the stream ended without an answer".to_string())
        })
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", TEST_TIMEOUT.as_secs())));
        let latency = started.elapsed().as_millis();
        match outcome {
            Ok((text, echo)) => {
                let reply: String = text
                    .trim()
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(REPLY_CHARS)
                    .collect();
                self.record_tested(&vendor, &model).await;
                tracing::info!(
                    vendor,
                    model,
                    latency_ms = latency as u64,
                    "provider test passed"
                );
                Ok(pb::ProviderTestResult {
                    error: None,
                    latency_ms: latency as i64,
                    model,
                    model_echo: echo,
                    ok: true,
                    provider: vendor,
                    reply: (!reply.is_empty()).then_some(reply),
                })
            }
            Err(error) => {
                tracing::info!(vendor, model, error, "provider test failed");
                Ok(failed(model, error, latency))
            }
        }
    }

    /// The last passed `provider.test` (`{vendor, model, at}` from `setup-state.json`), for
    /// `setup.status`'s browser profile; `None` when no test passed yet or the file is
    /// unreadable.
    pub fn last_passed_test(&self) -> Option<serde_json::Value> {
        let path = self.inner.home.root().join("setup-state.json");
        snowpea_common::settings::load_file(&path)
            .ok()?
            .get("providerTested")
            .filter(|v| v.is_object())
            .cloned()
    }

    /// Records a passed test in `setup-state.json` (best effort: a failure is logged).
    async fn record_tested(&self, vendor: &str, model: &str) {
        let path = self.inner.home.root().join("setup-state.json");
        let at = jiff::Timestamp::now().to_string();
        let tested = json!({"vendor": vendor, "model": model, "at": at});
        if let Err(e) = snowpea_common::settings::update_file_blocking(path, move |doc| {
            doc["providerTested"] = tested;
            Ok(())
        })
        .await
        {
            tracing::warn!(error = %format!("{e:#}"), "cannot record the provider test");
        }
    }
}

#[cfg(test)]
#[path = "probe_tests.rs"]
mod tests;

//! `provider.models`: which models a vendor serves, from the first rung that answers —
//! `settings` (`providers.<vendor>.models`), a fresh `cache` (a live listing younger than
//! [`CACHE_TTL`]), `live` (the vendor's list endpoint, [`MANAGEMENT_TIMEOUT`]), the last good
//! listing (`cache`, with `error`), or this build's `curated` list (with `error`). A failure
//! is reported in `error`/`detail`, never as an RPC error. Live listings are cached in memory
//! and in `$SNOWPEA_HOME/models-cache.json` (0600; [`ModelCache`]), so the cache and the
//! last good listing survive a restart of svc-session.
//!
//! Endpoints: OpenAI-compatible `GET {base}/models` (`data[].id`, newest `created` first;
//! for `openai` itself embeddings, audio, image and moderation models are left out);
//! Anthropic `GET {base}/v1/models` (merged with the curated list); Gemini
//! `GET {base}/models` (models that support `generateContent`, the `models/` prefix
//! stripped). `vision` is filled where the vendor says (OpenRouter's
//! `architecture.input_modalities`) or every model of the family takes images (Claude,
//! Gemini). `models[0]` is the vendor's preset default when listed.

use std::collections::HashMap;

use serde_json::Value;
use snowpea_proto::session::v1 as pb;

use super::cache::{Listing, CACHE_TTL};
use super::component::{Providers, MANAGEMENT_TIMEOUT};
use super::config::{ApiKind, ProviderConfig};
use super::http::{error_message, redact};
use super::presets::{self, Preset};
use snowpea_session_error::Result;

impl Providers {
    /// `provider.models` (see the module doc).
    pub async fn models(&self, p: pb::ProviderModelsParams) -> Result<pb::ProviderModelsResult> {
        let settings = self.global_settings()?;
        let credentials = self.credentials()?;
        let vendor = match p.vendor.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
            Some(v) => super::presets::vendor_name(v, "params.vendor")?,
            None => self
                .with_view(&settings, |view| view.default_vendor(&credentials))
                .unwrap_or_else(|| "anthropic".to_string()),
        };
        let preset = presets::preset(&vendor);
        let (current, from_settings, base_url) = self.with_view(&settings, |view| {
            (
                view.string(&vendor, "model")
                    .or_else(|| view.default_model(&vendor, preset))
                    .unwrap_or_default(),
                view.section(&vendor)
                    .and_then(|s| s.get("models"))
                    .and_then(Value::as_array)
                    .map(|l| {
                        l.iter()
                            .filter_map(Value::as_str)
                            .map(String::from)
                            .collect::<Vec<_>>()
                    }),
                view.base_url(&vendor, preset),
            )
        });
        let result = |listing: Listing, source: &str, detail: String, error: Option<String>| {
            pb::ProviderModelsResult {
                current: current.clone(),
                detail,
                error,
                models: listing.models,
                source: source.into(),
                vendor: vendor.clone(),
                vision: listing.vision,
            }
        };
        if let Some(models) = from_settings.filter(|m| !m.is_empty()) {
            return Ok(result(
                Listing {
                    models,
                    vision: HashMap::new(),
                },
                "settings",
                format!("from settings providers.{vendor}.models"),
                None,
            ));
        }
        let base_url = base_url.unwrap_or_default();
        let cached = self.inner.models.get(&vendor, &base_url);
        if let Some((age, listing)) = cached.clone().filter(|(age, _)| *age < CACHE_TTL) {
            return Ok(result(
                listing,
                "cache",
                format!("{vendor}'s model list, fetched {} s ago", age.as_secs()),
                None,
            ));
        }
        // A model is not needed to list; a placeholder lets servers without a default resolve.
        let config = ProviderConfig::resolve_with(
            &settings,
            &credentials,
            Some(&vendor),
            Some(if current.is_empty() { "-" } else { &current }),
            &|k| self.env()(k),
        );
        let error = match config {
            Ok(config) => match fetch(&self.inner.http, &config, preset).await {
                Ok(listing) => {
                    self.inner
                        .models
                        .put(&vendor, &base_url, listing.clone())
                        .await;
                    let detail = format!("live from {}", origin_of(&config.base_url));
                    return Ok(result(listing, "live", detail, None));
                }
                Err(e) => e,
            },
            Err(e) => e.to_string(),
        };
        tracing::info!(vendor, error, "live model listing failed");
        if let Some((age, listing)) = cached {
            return Ok(result(
                listing,
                "cache",
                format!(
                    "{vendor}'s last good model list ({} s old); the live listing failed",
                    age.as_secs()
                ),
                Some(error),
            ));
        }
        let mut models: Vec<String> = preset
            .map(|p| p.models.iter().map(|m| m.to_string()).collect())
            .unwrap_or_default();
        if !current.is_empty() && !models.contains(&current) {
            models.insert(0, current.clone());
        }
        Ok(result(
            Listing {
                vision: vision_by_family(&vendor, preset, &models),
                models,
            },
            "curated",
            "this build's curated list; the live listing failed".into(),
            Some(error),
        ))
    }
}

fn origin_of(base_url: &str) -> String {
    reqwest::Url::parse(base_url)
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_else(|_| base_url.to_string())
}

/// Asks the vendor's list endpoint (one GET, [`MANAGEMENT_TIMEOUT`]). The error text never
/// contains the key.
pub(crate) async fn fetch(
    http: &reqwest::Client,
    config: &ProviderConfig,
    preset: Option<&Preset>,
) -> std::result::Result<Listing, String> {
    let base = config.base_url.trim_end_matches('/');
    let key = config.api_key.as_deref();
    let rb = match config.api {
        ApiKind::OpenAi => {
            let rb = http.get(format!("{base}/models"));
            match key {
                Some(k) => rb.bearer_auth(k),
                None => rb,
            }
        }
        ApiKind::Anthropic => {
            let rb = http
                .get(format!("{base}/v1/models?limit=1000"))
                .header("anthropic-version", super::anthropic::ANTHROPIC_VERSION);
            match (key, config.oauth) {
                (Some(k), true) => rb
                    .bearer_auth(k)
                    .header("anthropic-beta", super::anthropic::OAUTH_BETA),
                (Some(k), false) => rb.header("x-api-key", k),
                (None, _) => rb,
            }
        }
        ApiKind::Gemini => {
            let rb = http.get(format!("{base}/models?pageSize=1000"));
            match (key, config.oauth) {
                (Some(k), true) => rb.bearer_auth(k),
                (Some(k), false) => rb.header("x-goog-api-key", k),
                (None, _) => rb,
            }
        }
    };
    let resp = tokio::time::timeout(MANAGEMENT_TIMEOUT, rb.send())
        .await
        .map_err(|_| format!("no answer within {} s", MANAGEMENT_TIMEOUT.as_secs()))?
        .map_err(|e| redact(&describe(&e), key))?;
    let status = resp.status();
    let body = tokio::time::timeout(MANAGEMENT_TIMEOUT, resp.text())
        .await
        .map_err(|_| "the listing did not finish in time".to_string())?
        .map_err(|e| redact(&describe(&e), key))?;
    if !status.is_success() {
        return Err(redact(
            &format!("HTTP {}: {}", status.as_u16(), error_message(&body)),
            key,
        ));
    }
    let doc: Value =
        serde_json::from_str(&body).map_err(|e| format!("the listing is not JSON: {e}"))?;
    let mut listing = parse_listing(config, &doc)?;
    if config.api == ApiKind::Anthropic {
        for m in preset.map(|p| p.models).unwrap_or_default() {
            if !listing.models.iter().any(|x| x == m) {
                listing.models.push(m.to_string());
            }
        }
    }
    if let Some(default) = preset.and_then(|p| p.model) {
        if let Some(i) = listing.models.iter().position(|m| m == default) {
            let m = listing.models.remove(i);
            listing.models.insert(0, m);
        }
    }
    for (k, v) in vision_by_family(&config.vendor, preset, &listing.models) {
        listing.vision.entry(k).or_insert(v);
    }
    Ok(listing)
}

fn describe(e: &reqwest::Error) -> String {
    let mut message = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "connection failed".to_string()
    } else {
        "request failed".to_string()
    };
    if let Some(url) = e.url() {
        message.push_str(&format!(" ({})", url.origin().ascii_serialization()));
    }
    message
}

/// The model ids and vision flags of a list endpoint's answer.
pub(crate) fn parse_listing(
    config: &ProviderConfig,
    doc: &Value,
) -> std::result::Result<Listing, String> {
    let mut listing = Listing::default();
    match config.api {
        ApiKind::Gemini => {
            let models = doc
                .get("models")
                .and_then(Value::as_array)
                .ok_or("the answer has no \"models\" list")?;
            for m in models {
                let Some(name) = m.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let chat = m
                    .get("supportedGenerationMethods")
                    .and_then(Value::as_array)
                    .is_none_or(|l| l.iter().any(|x| x == "generateContent"));
                if chat {
                    listing
                        .models
                        .push(name.strip_prefix("models/").unwrap_or(name).to_string());
                }
            }
        }
        ApiKind::OpenAi | ApiKind::Anthropic => {
            let data = doc
                .get("data")
                .or_else(|| doc.get("models"))
                .and_then(Value::as_array)
                .ok_or("the answer has no \"data\" list")?;
            let mut rows: Vec<(i64, String, Option<bool>)> = data
                .iter()
                .filter_map(|m| {
                    let id = m
                        .get("id")
                        .or_else(|| m.get("name"))
                        .and_then(Value::as_str)?
                        .to_string();
                    let created = m.get("created").and_then(Value::as_i64).unwrap_or(0);
                    let vision = m
                        .pointer("/architecture/input_modalities")
                        .and_then(Value::as_array)
                        .map(|l| l.iter().any(|x| x == "image"));
                    Some((created, id, vision))
                })
                .filter(|(_, id, _)| config.vendor != "openai" || is_openai_chat_model(id))
                .collect();
            if config.api == ApiKind::OpenAi {
                // Newest first; a stable sort keeps the server's order among equals.
                rows.sort_by_key(|r| std::cmp::Reverse(r.0));
            }
            for (_, id, vision) in rows {
                if let Some(v) = vision {
                    listing.vision.insert(id.clone(), v);
                }
                listing.models.push(id);
            }
        }
    }
    if listing.models.is_empty() {
        return Err("the vendor listed no chat models".into());
    }
    Ok(listing)
}

fn is_openai_chat_model(id: &str) -> bool {
    const NOT_CHAT: &[&str] = &[
        "embedding",
        "whisper",
        "tts",
        "dall-e",
        "moderation",
        "davinci",
        "babbage",
        "transcribe",
        "image",
        "realtime",
        "audio",
        "sora",
    ];
    !NOT_CHAT.iter().any(|n| id.contains(n))
}

/// Vision flags known for a whole model family (every Claude and Gemini chat model takes
/// images).
fn vision_by_family(
    vendor: &str,
    preset: Option<&Preset>,
    models: &[String],
) -> HashMap<String, bool> {
    let api = preset.map(|p| p.api);
    models
        .iter()
        .filter(|m| {
            (api == Some(ApiKind::Anthropic) && m.starts_with("claude-"))
                || (api == Some(ApiKind::Gemini) && m.starts_with("gemini-"))
                || (vendor == "openai"
                    && (m.starts_with("gpt-4o")
                        || m.starts_with("gpt-4.1")
                        || m.starts_with("gpt-5")))
        })
        .map(|m| (m.clone(), true))
        .collect()
}

#[cfg(test)]
#[path = "models_tests.rs"]
mod tests;

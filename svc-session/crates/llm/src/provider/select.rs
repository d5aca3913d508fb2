//! Which provider a session uses: [`select_provider`] and the resolved
//! [`ProviderConfig`].
//!
//! Rules, in order:
//! 1. env `SNOWPEA_PROVIDER=fake:<path>` → the scripted provider for that script; one
//!    instance per script path per process, so step consumption is shared by all sessions;
//! 2. the vendor is the explicit argument, else `settings.providers.default`, else env
//!    `SNOWPEA_PROVIDER` (a vendor name), else the first listed preset with a key
//!    (credentials, settings or env; anthropic, openai, openrouter, … in
//!    [`super::presets::PRESETS`] order);
//! 3. known vendors are the [`super::presets`]; any other name with
//!    `settings.providers.<name>.baseUrl` is a user-named OpenAI-compatible server (or an
//!    Anthropic- or Gemini-compatible one with `"api": "anthropic" | "gemini"`);
//! 4. the base URL is `settings.providers.<vendor>.baseUrl`, else the vendor's env override
//!    (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`, `OLLAMA_HOST`), else for `local` the
//!    variant's (`providers.local.variant`), else the preset's;
//! 5. the secret is the vendor's entry of `credentials.json` (an OAuth login's access token,
//!    sent as a bearer token, wins over a stored key; an expired one is an error naming how
//!    to log in again), else `settings.providers.<vendor>.apiKey`, else the vendor's env
//!    variables (`OPENAI_API_KEY`, …);
//! 6. the model is the explicit argument, else `settings.providers.<vendor>.model`, else
//!    the variant's or preset's default; vLLM, LM Studio and user-named servers need a
//!    configured model.
//!
//! API keys never appear in `Debug` output or error messages.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use super::anthropic::AnthropicProvider;
use super::config::{ApiKind, ProviderConfig};
use super::credentials::{Credential, CredentialMap};
use super::fake::{fake_script_path, FakeProvider};
use super::gemini::GeminiProvider;
use super::interface::{ProviderError, SharedProvider};
use super::openai::OpenAiProvider;
use super::presets::{self, Preset};

/// The message of a missing provider.
const NOTHING_CONFIGURED: &str =
    "none is configured (no ANTHROPIC_API_KEY or OPENAI_API_KEY, no settings providers.default)";

impl ProviderConfig {
    /// Builds the provider for this configuration (default retry policy).
    pub fn build(&self) -> Result<SharedProvider, ProviderError> {
        Ok(match self.api {
            ApiKind::OpenAi => Arc::new(OpenAiProvider::new(self.clone())?),
            ApiKind::Anthropic => Arc::new(AnthropicProvider::new(self.clone())?),
            ApiKind::Gemini => Arc::new(GeminiProvider::new(self.clone())?),
        })
    }

    /// Resolves vendor, base URL, key and model per the module rules without stored
    /// credentials (see [`ProviderConfig::resolve_with`]).
    pub fn resolve(
        settings: &Value,
        vendor: Option<&str>,
        model: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ProviderConfig, ProviderError> {
        Self::resolve_with(settings, &CredentialMap::new(), vendor, model, env)
    }

    /// Resolves vendor, base URL, secret and model per the module rules, with the
    /// `credentials.json` entries `credentials` (the fake provider is not a
    /// `ProviderConfig`; see [`select_provider`]).
    pub fn resolve_with(
        settings: &Value,
        credentials: &CredentialMap,
        vendor: Option<&str>,
        model: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ProviderConfig, ProviderError> {
        let view = SettingsView { settings, env };
        let vendor = match vendor.map(str::trim).filter(|v| !v.is_empty()) {
            Some(v) => v.to_lowercase(),
            None => view
                .default_vendor(credentials)
                .ok_or_else(|| ProviderError::Config(NOTHING_CONFIGURED.into()))?,
        };
        let preset = presets::preset(&vendor);
        let api = view.api(&vendor, preset)?;
        let base_url = view.base_url(&vendor, preset).ok_or_else(|| {
            ProviderError::Config(format!(
                "unknown provider {vendor:?}: set settings providers.{vendor}.baseUrl to an OpenAI-compatible \
                 endpoint (known: {})",
                presets::PRESETS
                    .iter()
                    .filter(|p| p.listed)
                    .map(|p| p.vendor)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;

        let now = jiff::Timestamp::now().as_second();
        let stored = credentials.get(&vendor);
        if stored.is_some_and(|c| c.is_expired(now)) {
            return Err(ProviderError::Config(format!(
                "the {vendor} login has expired: log in again (provider.loginWeb) or configure an API key \
                 (provider.configure)"
            )));
        }
        let (api_key, oauth) = match stored.and_then(Credential::secret) {
            Some((secret, oauth)) => (Some(secret), oauth),
            None => (view.key(&vendor, preset), false),
        };
        if api_key.is_none() && preset.is_some_and(|p| p.key_required) {
            let envs = preset.map(|p| p.key_envs.join(" or ")).unwrap_or_default();
            return Err(ProviderError::Config(format!(
                "provider {vendor} needs an API key: set {envs}, configure one with provider.configure, \
                 or settings providers.{vendor}.apiKey"
            )));
        }

        let model = model
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(String::from)
            .or_else(|| view.string(&vendor, "model"))
            .or_else(|| view.default_model(&vendor, preset))
            .ok_or_else(|| {
                ProviderError::Config(format!(
                    "provider {vendor} needs a model: set settings providers.{vendor}.model"
                ))
            })?;

        Ok(ProviderConfig {
            vendor,
            base_url,
            api_key,
            oauth,
            model,
            api,
        })
    }
}

/// Read access to the provider settings and the environment, with the resolution rules
/// that [`ProviderConfig::resolve_with`], `provider.list` and `provider.models` share.
pub(crate) struct SettingsView<'a> {
    /// The effective settings document.
    pub settings: &'a Value,
    /// Environment lookup.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl SettingsView<'_> {
    /// A non-empty environment variable, trimmed.
    pub fn env_nonempty(&self, k: &str) -> Option<String> {
        (self.env)(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// `settings.providers.<vendor>` when it is an object.
    pub fn section(&self, vendor: &str) -> Option<&Value> {
        self.settings
            .get("providers")
            .and_then(|p| p.get(vendor))
            .filter(|s| s.is_object())
    }

    /// A non-empty string of `settings.providers.<vendor>.<key>`, trimmed.
    pub fn string(&self, vendor: &str, key: &str) -> Option<String> {
        self.section(vendor)
            .and_then(|s| s.get(key))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
    }

    /// `settings.providers.default`.
    pub fn configured_default(&self) -> Option<String> {
        self.settings
            .pointer("/providers/default")
            .and_then(Value::as_str)
            .map(|v| v.trim().to_lowercase())
            .filter(|v| !v.is_empty())
    }

    /// The vendor a session without an explicit one uses (rule 2), if any.
    pub fn default_vendor(&self, credentials: &CredentialMap) -> Option<String> {
        self.configured_default()
            .or_else(|| {
                self.env_nonempty("SNOWPEA_PROVIDER")
                    .filter(|v| fake_script_path(v).is_none())
                    .map(|v| v.to_lowercase())
            })
            .or_else(|| {
                presets::PRESETS
                    .iter()
                    .filter(|p| p.listed && p.key_required)
                    .find(|p| {
                        credentials
                            .get(p.vendor)
                            .is_some_and(|c| c.secret().is_some())
                            || self.key(p.vendor, Some(p)).is_some()
                    })
                    .map(|p| p.vendor.to_string())
            })
    }

    /// The wire of `vendor`: `providers.<vendor>.api`, else the preset's, else OpenAI.
    pub fn api(&self, vendor: &str, preset: Option<&Preset>) -> Result<ApiKind, ProviderError> {
        match self.string(vendor, "api") {
            Some(s) => ApiKind::parse(&s).ok_or_else(|| {
                ProviderError::Config(format!(
                    "settings providers.{vendor}.api must be \"openai\", \"anthropic\" or \"gemini\", not {s:?}"
                ))
            }),
            None => Ok(preset.map(|p| p.api).unwrap_or(ApiKind::OpenAi)),
        }
    }

    /// The `local` variant in use (`providers.local.variant`, else the default one).
    pub fn local_variant(&self, vendor: &str) -> Option<&'static presets::LocalVariant> {
        (vendor == "local").then(|| {
            self.string(vendor, "variant")
                .and_then(|v| presets::local_variant(&v))
                .or_else(|| presets::local_variant(presets::DEFAULT_LOCAL_VARIANT))
        })?
    }

    /// The base URL without the settings (env override, variant, preset), trailing `/`
    /// removed.
    pub fn default_base_url(&self, vendor: &str, preset: Option<&Preset>) -> Option<String> {
        let variant = self.local_variant(vendor);
        preset
            .and_then(|p| p.base_env)
            .and_then(|k| self.env_nonempty(k))
            .map(|v| normalise_env_base(vendor, &v))
            .or_else(|| variant.map(|v| v.base_url.to_string()))
            .or_else(|| preset.map(|p| p.base_url.to_string()))
            .map(|u| u.trim_end_matches('/').to_string())
    }

    /// The base URL in use (rule 4), trailing `/` removed.
    pub fn base_url(&self, vendor: &str, preset: Option<&Preset>) -> Option<String> {
        self.string(vendor, "baseUrl")
            .map(|u| u.trim_end_matches('/').to_string())
            .or_else(|| self.default_base_url(vendor, preset))
    }

    /// An API key from the settings or the environment (not `credentials.json`).
    pub fn key(&self, vendor: &str, preset: Option<&Preset>) -> Option<String> {
        self.string(vendor, "apiKey").or_else(|| {
            preset
                .into_iter()
                .flat_map(|p| p.key_envs.iter())
                .find_map(|k| self.env_nonempty(k))
        })
    }

    /// The default model without an explicit or configured one.
    pub fn default_model(&self, vendor: &str, preset: Option<&Preset>) -> Option<String> {
        match self.local_variant(vendor) {
            Some(v) => v.model.map(String::from),
            None => preset.and_then(|p| p.model).map(String::from),
        }
    }
}

/// `OLLAMA_HOST` is `host:port` or a URL without `/v1`; turn it into the `/v1` base.
fn normalise_env_base(vendor: &str, value: &str) -> String {
    if vendor != "ollama" {
        return value.to_string();
    }
    let v = value.trim_end_matches('/');
    let with_scheme = if v.contains("://") {
        v.to_string()
    } else {
        format!("http://{v}")
    };
    if with_scheme.ends_with("/v1") {
        with_scheme
    } else {
        format!("{with_scheme}/v1")
    }
}

/// True when `vendor` names a vendor this daemon can talk to: a built-in one, one with a
/// `settings.providers.<vendor>` object, or `fake` while the scripted provider is selected.
pub fn is_configured_vendor(
    settings: &Value,
    vendor: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> bool {
    let v = vendor.trim().to_lowercase();
    if v.is_empty() {
        return false;
    }
    presets::preset(&v).is_some()
        || settings
            .pointer(&format!("/providers/{v}"))
            .is_some_and(Value::is_object)
        || (v == "fake"
            && env("SNOWPEA_PROVIDER")
                .as_deref()
                .and_then(fake_script_path)
                .is_some())
}

/// Decides which provider a session uses (see the module rules). `env` looks up
/// environment variables (injected so tests never touch the process environment).
pub fn select_provider(
    settings: &Value,
    vendor: Option<&str>,
    model: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<SharedProvider, ProviderError> {
    if let Some(path) = env("SNOWPEA_PROVIDER")
        .as_deref()
        .and_then(fake_script_path)
    {
        return Ok(fake_provider(&path)?);
    }
    select_with(settings, &CredentialMap::new(), vendor, model, env)
}

/// [`select_provider`] with the `credentials.json` entries `credentials`.
pub fn select_with(
    settings: &Value,
    credentials: &CredentialMap,
    vendor: Option<&str>,
    model: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<SharedProvider, ProviderError> {
    if let Some(path) = env("SNOWPEA_PROVIDER")
        .as_deref()
        .and_then(fake_script_path)
    {
        return Ok(fake_provider(&path)?);
    }
    ProviderConfig::resolve_with(settings, credentials, vendor, model, env)?.build()
}

/// The process-wide scripted provider for `path` (loaded on first use, then shared so
/// step consumption is common to every session).
pub fn fake_provider(path: &Path) -> Result<Arc<FakeProvider>, ProviderError> {
    static FAKES: OnceLock<Mutex<HashMap<PathBuf, Arc<FakeProvider>>>> = OnceLock::new();
    let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut map = FAKES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(p) = map.get(&key) {
        return Ok(p.clone());
    }
    let p = Arc::new(FakeProvider::from_path(path)?);
    map.insert(key, p.clone());
    Ok(p)
}

#[cfg(test)]
#[path = "select_tests.rs"]
mod tests;

//! Which provider a session uses: [`select_provider`] and the resolved
//! [`ProviderConfig`].
//!
//! Rules, in order:
//! 1. env `SNOWPEA_PROVIDER=fake:<path>` → the scripted provider for that script; one
//!    instance per script path per process, so step consumption is shared by all sessions;
//! 2. the vendor is the explicit argument, else `settings.providers.default`, else env
//!    `SNOWPEA_PROVIDER` (a vendor name), else the first of anthropic / openai / openrouter
//!    with a key (settings or env);
//! 3. known vendors: `openai`, `openrouter`, `anthropic` (remote, need a key), `ollama`,
//!    `lmstudio`, `llamacpp`, `vllm` (local, key optional); any other name with
//!    `settings.providers.<name>.baseUrl` is an OpenAI-compatible server (or an
//!    Anthropic-compatible one with `"api": "anthropic"`);
//! 4. `settings.providers.<vendor>.{baseUrl, apiKey, model}` override the defaults and win
//!    over the environment; env `OPENAI_BASE_URL` (openai), `ANTHROPIC_BASE_URL`
//!    (anthropic) and `OLLAMA_HOST` (ollama) override the built-in base URLs; keys come
//!    from `OPENAI_API_KEY`, `OPENROUTER_API_KEY`, `ANTHROPIC_API_KEY`;
//! 5. the model is the explicit argument, else `settings.providers.<vendor>.model`, else
//!    the vendor's default (`gpt-4o-mini`, `openai/gpt-4o-mini`, `claude-sonnet-4-5`,
//!    `llama3.2` for ollama, `default` for llama.cpp); LM Studio, vLLM and custom servers
//!    need a configured model.
//!
//! API keys never appear in `Debug` output or error messages.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use super::anthropic::AnthropicProvider;
use super::fake::{fake_script_path, FakeProvider};
use super::openai::OpenAiProvider;
use super::{ProviderError, SharedProvider};

/// Which wire protocol a vendor speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiKind {
    /// OpenAI-compatible `/chat/completions`.
    OpenAi,
    /// Anthropic Messages `/v1/messages`.
    Anthropic,
}

/// A resolved provider configuration. `Debug` masks the API key.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    /// Vendor name (`openai`, `anthropic`, `ollama`, a custom name, …).
    pub vendor: String,
    /// Base URL: for OpenAI-compatible servers up to `/v1` (`/chat/completions` is
    /// appended); for Anthropic the origin (`/v1/messages` is appended).
    pub base_url: String,
    /// API key, when the vendor needs one.
    pub api_key: Option<String>,
    /// Default model id.
    pub model: String,
    /// Wire protocol.
    pub api: ApiKind,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("vendor", &self.vendor)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("model", &self.model)
            .field("api", &self.api)
            .finish()
    }
}

impl ProviderConfig {
    /// Builds the provider for this configuration (default retry policy).
    pub fn build(&self) -> Result<SharedProvider, ProviderError> {
        Ok(match self.api {
            ApiKind::OpenAi => Arc::new(OpenAiProvider::new(self.clone())?),
            ApiKind::Anthropic => Arc::new(AnthropicProvider::new(self.clone())?),
        })
    }

    /// Resolves vendor, base URL, key and model per the module rules (the fake provider
    /// is not a `ProviderConfig`; see [`select_provider`]).
    pub fn resolve(
        settings: &Value,
        vendor: Option<&str>,
        model: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ProviderConfig, ProviderError> {
        let env_nonempty = |k: &str| {
            env(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let vendor_settings = |v: &str| {
            settings
                .get("providers")
                .and_then(|p| p.get(v))
                .filter(|s| s.is_object())
        };
        let setting_str = |v: &str, key: &str| {
            vendor_settings(v)
                .and_then(|s| s.get(key))
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };

        let vendor = vendor
            .map(str::to_string)
            .filter(|v| !v.trim().is_empty())
            .or_else(|| settings.pointer("/providers/default").and_then(Value::as_str).map(String::from).filter(|v| !v.trim().is_empty()))
            .or_else(|| env_nonempty("SNOWPEA_PROVIDER").filter(|v| fake_script_path(v).is_none()))
            .or_else(|| {
                ["anthropic", "openai", "openrouter"].into_iter().find(|v| {
                    let d = builtin(v).expect("builtin vendor");
                    setting_str(v, "apiKey").is_some() || d.key_env.and_then(env_nonempty).is_some()
                }).map(String::from)
            })
            .ok_or_else(|| {
                ProviderError::Config(
                    "no model provider configured: set ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENROUTER_API_KEY, \
                     or settings providers.default (e.g. \"ollama\")"
                        .into(),
                )
            })?;
        let vendor = vendor.trim().to_lowercase();

        let defaults = builtin(&vendor);
        let api = match setting_str(&vendor, "api").as_deref() {
            Some("anthropic") => ApiKind::Anthropic,
            Some("openai") => ApiKind::OpenAi,
            Some(other) => {
                return Err(ProviderError::Config(format!(
                    "settings providers.{vendor}.api must be \"openai\" or \"anthropic\", not {other:?}"
                )))
            }
            None => defaults.as_ref().map(|d| d.api).unwrap_or(ApiKind::OpenAi),
        };

        let base_url = setting_str(&vendor, "baseUrl")
            .or_else(|| defaults.as_ref().and_then(|d| d.base_env).and_then(env_nonempty).map(|v| normalise_env_base(&vendor, &v)))
            .or_else(|| defaults.as_ref().map(|d| d.base_url.to_string()))
            .ok_or_else(|| {
                ProviderError::Config(format!(
                    "unknown provider {vendor:?}: set settings providers.{vendor}.baseUrl to an OpenAI-compatible endpoint \
                     (known: openai, openrouter, anthropic, ollama, lmstudio, llamacpp, vllm)"
                ))
            })?;
        let base_url = base_url.trim_end_matches('/').to_string();

        let key_env = defaults.as_ref().and_then(|d| d.key_env);
        let api_key = setting_str(&vendor, "apiKey").or_else(|| key_env.and_then(env_nonempty));
        if api_key.is_none() && defaults.as_ref().is_some_and(|d| d.key_required) {
            return Err(ProviderError::Config(format!(
                "provider {vendor} needs an API key: set {} or settings providers.{vendor}.apiKey",
                key_env.unwrap_or("an API key")
            )));
        }

        let model = model
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(String::from)
            .or_else(|| setting_str(&vendor, "model"))
            .or_else(|| defaults.as_ref().and_then(|d| d.model).map(String::from))
            .ok_or_else(|| {
                ProviderError::Config(format!(
                    "provider {vendor} needs a model: set settings providers.{vendor}.model"
                ))
            })?;

        Ok(ProviderConfig {
            vendor,
            base_url,
            api_key,
            model,
            api,
        })
    }
}

struct Builtin {
    base_url: &'static str,
    base_env: Option<&'static str>,
    key_env: Option<&'static str>,
    key_required: bool,
    model: Option<&'static str>,
    api: ApiKind,
}

fn builtin(vendor: &str) -> Option<Builtin> {
    let (base_url, base_env, key_env, key_required, model, api) = match vendor {
        "openai" => (
            "https://api.openai.com/v1",
            Some("OPENAI_BASE_URL"),
            Some("OPENAI_API_KEY"),
            true,
            Some("gpt-4o-mini"),
            ApiKind::OpenAi,
        ),
        "openrouter" => (
            "https://openrouter.ai/api/v1",
            None,
            Some("OPENROUTER_API_KEY"),
            true,
            Some("openai/gpt-4o-mini"),
            ApiKind::OpenAi,
        ),
        "anthropic" => (
            "https://api.anthropic.com",
            Some("ANTHROPIC_BASE_URL"),
            Some("ANTHROPIC_API_KEY"),
            true,
            Some("claude-sonnet-4-5"),
            ApiKind::Anthropic,
        ),
        "ollama" => (
            "http://127.0.0.1:11434/v1",
            Some("OLLAMA_HOST"),
            None,
            false,
            Some("llama3.2"),
            ApiKind::OpenAi,
        ),
        "lmstudio" => (
            "http://127.0.0.1:1234/v1",
            None,
            None,
            false,
            None,
            ApiKind::OpenAi,
        ),
        "llamacpp" => (
            "http://127.0.0.1:8080/v1",
            None,
            None,
            false,
            Some("default"),
            ApiKind::OpenAi,
        ),
        "vllm" => (
            "http://127.0.0.1:8000/v1",
            None,
            None,
            false,
            None,
            ApiKind::OpenAi,
        ),
        _ => return None,
    };
    Some(Builtin {
        base_url,
        base_env,
        key_env,
        key_required,
        model,
        api,
    })
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
    builtin(&v).is_some()
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
    ProviderConfig::resolve(settings, vendor, model, env)?.build()
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

/// The `Providers` component: picks the model provider of a turn from the effective
/// settings and the daemon's environment (`SNOWPEA_PROVIDER`, API keys). It owns no table;
/// provider settings arrive with the settings component.
#[derive(Clone)]
pub struct Providers {
    home: snowpea_common::home::Home,
    env: crate::app::EnvFn,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

impl Providers {
    /// Providers of `home`, reading the environment through `env`.
    pub fn new(home: snowpea_common::home::Home, env: crate::app::EnvFn) -> Self {
        Providers { home, env }
    }

    /// True when `vendor` is one this daemon can use ([`is_configured_vendor`]).
    pub fn is_configured(&self, settings: &Value, vendor: &str) -> bool {
        let env = self.env.clone();
        is_configured_vendor(settings, vendor, &|k| env(k))
    }

    /// The provider for a session asking for `vendor` / `model` (see [`select_provider`]);
    /// the error names where to configure one.
    pub fn select(
        &self,
        settings: &Value,
        vendor: Option<&str>,
        model: Option<&str>,
    ) -> Result<SharedProvider, (ProviderError, String)> {
        let env = self.env.clone();
        select_provider(settings, vendor, model, &|k| env(k)).map_err(|e| {
            let message = format!(
                "no usable model provider: {e}. Configure one in {} (providers.default and providers.<vendor>), \
                 or start the suite with an API key such as ANTHROPIC_API_KEY or OPENAI_API_KEY, or with \
                 SNOWPEA_PROVIDER=fake:<script.json> for the scripted demo model (examples/demo.json); \
                 the daemon reads them when it starts",
                self.home.settings_path().display()
            );
            (e, message)
        })
    }
}

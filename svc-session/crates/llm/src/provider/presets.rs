//! The vendor presets (upstream-behaviour §2 "Providers"): every chat vendor this build
//! knows, with its wire, default endpoint, key variables, default and curated models, and
//! the login flows `provider.loginWeb` offers for it. `provider.list` lists the visible
//! presets in [`PRESETS`] order, then the user-named servers of the settings.
//!
//! `local` is one OpenAI-compatible server without a key, in one of the [`LOCAL_VARIANTS`]
//! (vLLM :8000, Ollama :11434, LM Studio :1234; `providers.local.variant`). The older vendor
//! names `ollama`, `lmstudio`, `vllm` and `llamacpp` stay selectable (hidden presets) so
//! existing settings keep working.

use super::config::ApiKind;
use snowpea_session_error::{Error, Result};

/// One known vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// Vendor name as the protocol spells it (`anthropic`, `openai`, …).
    pub vendor: &'static str,
    /// Human name for pickers.
    pub label: &'static str,
    /// Wire protocol.
    pub api: ApiKind,
    /// Default base URL (OpenAI-compatible: up to `/v1`; Anthropic: the origin; Gemini: up
    /// to `/v1beta`).
    pub base_url: &'static str,
    /// Environment variable that overrides the base URL, when the vendor has one.
    pub base_env: Option<&'static str>,
    /// Environment variables holding an API key, first found wins.
    pub key_envs: &'static [&'static str],
    /// Whether a call needs a key (remote vendors) or not (local servers).
    pub key_required: bool,
    /// Default model; `None` = the user must name one (vLLM, LM Studio).
    pub model: Option<&'static str>,
    /// The vendor's small, fast model (the `fast` model category), when it has one.
    pub fast_model: Option<&'static str>,
    /// This build's curated model list (the `curated` rung of `provider.models`).
    pub models: &'static [&'static str],
    /// `provider.list` `authMethods`: `api_key` plus the `provider.loginWeb` methods.
    pub auth_methods: &'static [&'static str],
    /// Whether the vendor takes a reasoning-effort setting.
    pub supports_effort: bool,
    /// Listed by `provider.list` (false for the legacy local names).
    pub listed: bool,
}

/// One variant of the `local` vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalVariant {
    /// Variant name (`vllm`, `ollama`, `lmstudio`).
    pub name: &'static str,
    /// Its default base URL.
    pub base_url: &'static str,
    /// Its default model, when the server has a conventional one.
    pub model: Option<&'static str>,
}

/// The variants of `local`, in catalog order.
pub const LOCAL_VARIANTS: &[LocalVariant] = &[
    LocalVariant {
        name: "vllm",
        base_url: "http://127.0.0.1:8000/v1",
        model: None,
    },
    LocalVariant {
        name: "ollama",
        base_url: "http://127.0.0.1:11434/v1",
        model: Some("llama3.2"),
    },
    LocalVariant {
        name: "lmstudio",
        base_url: "http://127.0.0.1:1234/v1",
        model: None,
    },
];

/// The variant `local` uses when `providers.local.variant` names none.
pub const DEFAULT_LOCAL_VARIANT: &str = "ollama";

/// A remote vendor with a key; `models[0]` is its default model and `fast` its small one.
const fn remote(
    vendor: &'static str,
    label: &'static str,
    api: ApiKind,
    base_url: &'static str,
    (key_envs, models, fast): (
        &'static [&'static str],
        &'static [&'static str],
        &'static str,
    ),
) -> Preset {
    Preset {
        vendor,
        label,
        api,
        base_url,
        base_env: None,
        key_envs,
        key_required: true,
        model: Some(models[0]),
        fast_model: Some(fast),
        models,
        auth_methods: &["api_key"],
        supports_effort: false,
        listed: true,
    }
}

const fn local(
    vendor: &'static str,
    base_url: &'static str,
    model: Option<&'static str>,
) -> Preset {
    Preset {
        vendor,
        label: vendor,
        api: ApiKind::OpenAi,
        base_url,
        base_env: None,
        key_envs: &[],
        key_required: false,
        model,
        fast_model: None,
        models: &[],
        auth_methods: &[],
        supports_effort: false,
        listed: false,
    }
}

/// Every preset; the listed ones in `provider.list` order (anthropic, the default vendor,
/// first).
pub const PRESETS: &[Preset] = &[
    Preset {
        base_env: Some("ANTHROPIC_BASE_URL"),
        supports_effort: true,
        ..remote(
            "anthropic",
            "Anthropic",
            ApiKind::Anthropic,
            "https://api.anthropic.com",
            (
                &["ANTHROPIC_API_KEY"],
                &["claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"],
                "claude-haiku-4-5",
            ),
        )
    },
    Preset {
        base_env: Some("OPENAI_BASE_URL"),
        auth_methods: &["api_key", "browser_pkce", "device_code"],
        supports_effort: true,
        ..remote(
            "openai",
            "OpenAI",
            ApiKind::OpenAi,
            "https://api.openai.com/v1",
            (
                &["OPENAI_API_KEY"],
                &["gpt-4o-mini", "gpt-5", "gpt-5-mini", "gpt-4.1", "gpt-4o"],
                "gpt-4o-mini",
            ),
        )
    },
    Preset {
        auth_methods: &["api_key", "oauth_pkce"],
        ..remote(
            "openrouter",
            "OpenRouter",
            ApiKind::OpenAi,
            "https://openrouter.ai/api/v1",
            (
                &["OPENROUTER_API_KEY"],
                &[
                    "openai/gpt-4o-mini",
                    "anthropic/claude-sonnet-4.5",
                    "google/gemini-2.5-flash",
                ],
                "openai/gpt-4o-mini",
            ),
        )
    },
    Preset {
        auth_methods: &["api_key", "google_oauth"],
        ..remote(
            "gemini",
            "Google Gemini",
            ApiKind::Gemini,
            "https://generativelanguage.googleapis.com/v1beta",
            (
                &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
                &[
                    "gemini-2.5-flash",
                    "gemini-2.5-pro",
                    "gemini-2.5-flash-lite",
                ],
                "gemini-2.5-flash-lite",
            ),
        )
    },
    remote(
        "xai",
        "xAI Grok",
        ApiKind::OpenAi,
        "https://api.x.ai/v1",
        (
            &["XAI_API_KEY"],
            &["grok-4", "grok-3", "grok-3-mini"],
            "grok-3-mini",
        ),
    ),
    remote(
        "glm",
        "Zhipu GLM",
        ApiKind::OpenAi,
        "https://api.z.ai/api/paas/v4",
        (
            &["ZAI_API_KEY", "GLM_API_KEY"],
            &["glm-4.6", "glm-4.5", "glm-4.5-air"],
            "glm-4.5-air",
        ),
    ),
    remote(
        "minimax",
        "MiniMax",
        ApiKind::OpenAi,
        "https://api.minimax.io/v1",
        (&["MINIMAX_API_KEY"], &["MiniMax-M2"], "MiniMax-M2"),
    ),
    remote(
        "kimi",
        "Moonshot Kimi",
        ApiKind::OpenAi,
        "https://api.moonshot.ai/v1",
        (
            &["MOONSHOT_API_KEY", "KIMI_API_KEY"],
            &["kimi-k2-0905-preview", "kimi-k2-turbo-preview"],
            "kimi-k2-turbo-preview",
        ),
    ),
    remote(
        "qwen",
        "Alibaba Qwen",
        ApiKind::OpenAi,
        "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
        (
            &["DASHSCOPE_API_KEY", "QWEN_API_KEY"],
            &["qwen-plus", "qwen3-coder-plus", "qwen-max", "qwen-flash"],
            "qwen-flash",
        ),
    ),
    remote(
        "deepseek",
        "DeepSeek",
        ApiKind::OpenAi,
        "https://api.deepseek.com/v1",
        (
            &["DEEPSEEK_API_KEY"],
            &["deepseek-chat", "deepseek-reasoner"],
            "deepseek-chat",
        ),
    ),
    Preset {
        label: "Local server (vLLM, Ollama, LM Studio)",
        listed: true,
        ..local("local", "http://127.0.0.1:11434/v1", Some("llama3.2"))
    },
    Preset {
        base_env: Some("OLLAMA_HOST"),
        ..local("ollama", "http://127.0.0.1:11434/v1", Some("llama3.2"))
    },
    local("lmstudio", "http://127.0.0.1:1234/v1", None),
    local("llamacpp", "http://127.0.0.1:8080/v1", Some("default")),
    local("vllm", "http://127.0.0.1:8000/v1", None),
];

/// The preset of `vendor` (lower case), if it is a known vendor.
pub fn preset(vendor: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.vendor == vendor)
}

/// The `local` variant named `name`.
pub fn local_variant(name: &str) -> Option<&'static LocalVariant> {
    LOCAL_VARIANTS.iter().find(|v| v.name == name)
}

/// Names of the local variants, for messages.
pub fn local_variant_names() -> String {
    LOCAL_VARIANTS
        .iter()
        .map(|v| v.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a vendor name (the parameter `field`, e.g. `params.vendor`): 1–64 characters of `a-z0-9._-` starting with a
/// letter or digit (case-folded), not `default` or `fake`.
pub(crate) fn vendor_name(raw: &str, field: &str) -> Result<String> {
    let v = raw.trim().to_lowercase();
    if v.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if v == "default" {
        return Err(Error::invalid(
            field,
            "\"default\" is not a provider (it is the settings key naming the default one)",
        ));
    }
    if v == "fake" {
        return Err(Error::invalid(
            field,
            "\"fake\" is the scripted test provider (SNOWPEA_PROVIDER=fake:<script>); it is not configured",
        ));
    }
    let ok = v.len() <= 64
        && v.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && v.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    if !ok {
        return Err(Error::invalid(
            field,
            "must be 1-64 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit",
        ));
    }
    Ok(v)
}

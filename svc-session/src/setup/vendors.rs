//! The LLM vendor presets of `setup.catalog` `vendors` (reference behaviour §2: Anthropic,
//! OpenAI, OpenRouter, Gemini, xAI, GLM, MiniMax, Kimi, Qwen, DeepSeek, `local`) and the
//! user's named local servers. The `provider.*` component may replace [`VENDORS`] with its
//! own preset registry.

use serde_json::Value;
use snowpea_proto::session::v1::CatalogItem;

use super::catalog::{single_choice, KeyNeed, Row, Tier};

/// An LLM vendor preset (`provider.*` owns configuring them).
#[derive(Debug, Clone, Copy)]
pub struct Vendor {
    /// Vendor id (`providers.<id>`).
    pub id: &'static str,
    /// Display name.
    pub label: &'static str,
    /// Model used when none is configured.
    pub default_model: &'static str,
    /// Environment variables that hold its API key.
    pub key_env: &'static [&'static str],
    /// Web logins besides an API key (`provider.loginWeb`).
    pub logins: &'static [&'static str],
}

/// The vendor presets, in the reference's order; `local` is any OpenAI-compatible server
/// the user runs (vLLM :8000, Ollama :11434, LM Studio :1234).
pub const VENDORS: &[Vendor] = &[
    Vendor {
        id: "anthropic",
        label: "Anthropic",
        default_model: "claude-sonnet-4-5",
        key_env: &["ANTHROPIC_API_KEY"],
        logins: &[],
    },
    Vendor {
        id: "openai",
        label: "OpenAI",
        default_model: "gpt-4o-mini",
        key_env: &["OPENAI_API_KEY"],
        logins: &["browser (PKCE)", "device code"],
    },
    Vendor {
        id: "openrouter",
        label: "OpenRouter",
        default_model: "openai/gpt-4o-mini",
        key_env: &["OPENROUTER_API_KEY"],
        logins: &["browser (PKCE)"],
    },
    Vendor {
        id: "gemini",
        label: "Google Gemini",
        default_model: "gemini-2.5-flash",
        key_env: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        logins: &["Google OAuth", "gcloud ADC"],
    },
    Vendor {
        id: "xai",
        label: "xAI Grok",
        default_model: "grok-4",
        key_env: &["XAI_API_KEY"],
        logins: &[],
    },
    Vendor {
        id: "glm",
        label: "Z.ai GLM",
        default_model: "glm-4.6",
        key_env: &["ZAI_API_KEY", "GLM_API_KEY"],
        logins: &[],
    },
    Vendor {
        id: "minimax",
        label: "MiniMax",
        default_model: "MiniMax-M2",
        key_env: &["MINIMAX_API_KEY"],
        logins: &[],
    },
    Vendor {
        id: "kimi",
        label: "Moonshot Kimi",
        default_model: "kimi-k2-0905-preview",
        key_env: &["MOONSHOT_API_KEY", "KIMI_API_KEY"],
        logins: &[],
    },
    Vendor {
        id: "qwen",
        label: "Alibaba Qwen",
        default_model: "qwen3-coder-plus",
        key_env: &["DASHSCOPE_API_KEY"],
        logins: &[],
    },
    Vendor {
        id: "deepseek",
        label: "DeepSeek",
        default_model: "deepseek-chat",
        key_env: &["DEEPSEEK_API_KEY"],
        logins: &[],
    },
    Vendor {
        id: "local",
        label: "Local server (vLLM, Ollama, LM Studio)",
        default_model: "",
        key_env: &[],
        logins: &[],
    },
];

/// The vendor a session uses when none is named: `providers.default`, else anthropic.
pub fn default_vendor(settings: &Value) -> String {
    settings
        .pointer("/providers/default")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .unwrap_or("anthropic")
        .to_owned()
}

/// `vendors`: the presets plus the user's named local servers (`providers.<name>.preset:
/// "local"` or a `baseUrl` on an unknown name); `active` = configured.
pub fn vendors(settings: &Value, configured: &[String]) -> Vec<CatalogItem> {
    let model_of = |id: &str, preset: &str| -> Option<(String, &'static str)> {
        match settings
            .pointer(&format!("/providers/{id}/model"))
            .and_then(Value::as_str)
            .filter(|m| !m.trim().is_empty())
        {
            Some(m) => Some((m.to_owned(), "settings")),
            None if !preset.is_empty() => Some((preset.to_owned(), "preset")),
            None => None,
        }
    };
    let mut rows: Vec<Row> = VENDORS
        .iter()
        .map(|v| {
            let (tier, key) = if v.id == "local" {
                (Tier::Free, KeyNeed::SelfHosted)
            } else {
                (Tier::Paid, KeyNeed::KeyRequired)
            };
            let mut description = if v.default_model.is_empty() {
                "an OpenAI-compatible server you run; no key".to_owned()
            } else {
                v.default_model.to_owned()
            };
            if !v.logins.is_empty() {
                description.push_str(&format!("  (web login: {})", v.logins.join(", ")));
            }
            let mut row = Row::new(v.id, v.label, tier, key, &description);
            row.active = configured.iter().any(|c| c == v.id);
            row.default_model = model_of(v.id, v.default_model);
            row
        })
        .collect();
    for name in super::providers::named_local_servers(settings) {
        let mut row = Row::new(
            &name,
            &name,
            Tier::Free,
            KeyNeed::SelfHosted,
            "your OpenAI-compatible server",
        );
        row.active = configured.contains(&name);
        row.default_model = model_of(&name, "");
        rows.push(row);
    }
    single_choice(rows, &default_vendor(settings))
}

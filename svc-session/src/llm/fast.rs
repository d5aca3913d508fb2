//! Which model `llm.sample{modelCategory: "fast"}` uses (spec "llm.sample"): the setting
//! `browser.fastModel`, then `models.categories.fast`, then the vendor's small model, then
//! the session's own model. A setting is `"vendor:model"` or a bare model id of the
//! session's vendor.

use serde_json::Value;

/// The small, cheap model of a vendor, when it has one known here.
pub fn small_model(vendor: &str) -> Option<&'static str> {
    Some(match vendor {
        "anthropic" => "claude-3-5-haiku-latest",
        "openai" => "gpt-4o-mini",
        "openrouter" => "openai/gpt-4o-mini",
        "gemini" => "gemini-2.0-flash",
        "xai" => "grok-3-mini",
        "deepseek" => "deepseek-chat",
        "qwen" => "qwen-turbo",
        "glm" => "glm-4-flash",
        _ => return None,
    })
}

/// `(vendor, model)` for a fast sample of a session running `vendor` / `model`; `None` parts
/// fall back to the provider selection's defaults.
pub fn choose(
    settings: &Value,
    vendor: Option<&str>,
    model: Option<&str>,
) -> (Option<String>, Option<String>) {
    let configured = ["/browser/fastModel", "/models/categories/fast"]
        .iter()
        .filter_map(|p| settings.pointer(p).and_then(Value::as_str))
        .map(str::trim)
        .find(|s| !s.is_empty());
    if let Some(s) = configured {
        return match s.split_once(':') {
            Some((v, m)) if !v.is_empty() && !m.is_empty() && !v.contains('/') => {
                (Some(v.to_owned()), Some(m.to_owned()))
            }
            _ => (vendor.map(str::to_owned), Some(s.to_owned())),
        };
    }
    let session_vendor = vendor.map(str::to_owned).or_else(|| {
        settings
            .pointer("/providers/default")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    match session_vendor.as_deref().and_then(small_model) {
        Some(m) => (session_vendor, Some(m.to_owned())),
        None => (vendor.map(str::to_owned), model.map(str::to_owned)),
    }
}

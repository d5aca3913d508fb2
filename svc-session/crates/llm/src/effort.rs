//! Reasoning effort (spec `session.setEffort`, `model.changed`; CORE-effort): which tiers a
//! model offers, which rule decides a session's effort, clamping, and what each tier means
//! on a vendor's wire.
//!
//! * Tiers, weakest first: `low`, `medium`, `high`, `max`.
//! * Offered tiers ([`offered`]): `settings.providers.<vendor>.efforts` when set, else a
//!   table of well-known models — Claude models with extended thinking (Claude 3.7 and the
//!   4 family) offer all four, OpenAI reasoning models (`o1`, `o3`, `o4-*`, `gpt-5*`) offer
//!   low/medium/high, the scripted provider's own model `fake` offers all four (serving a
//!   named model, it offers what that model would), anything else none.
//! * The rule ([`resolve`]): the session pin (`session`), else `agent.effortBy["v:m"]`
//!   (`model`), else `agent.effortBy["v"]` (`vendor`), else `agent.effort` or `medium`
//!   (`default`); then clamped to the offered tiers (the strongest offered tier not above it,
//!   else the weakest offered); none when the model offers none.
//! * On the wire ([`anthropic_thinking_budget`], [`openai_reasoning_effort`]).

use serde_json::Value;

/// The tiers, weakest first.
pub const TIERS: [&str; 4] = ["low", "medium", "high", "max"];
/// The effort when no rule gives one.
pub const DEFAULT_EFFORT: &str = "medium";

fn rank(tier: &str) -> Option<usize> {
    TIERS.iter().position(|t| *t == tier)
}

/// `Some(tier)` when `s` is one of [`TIERS`].
pub fn parse(s: &str) -> Option<&'static str> {
    TIERS.iter().copied().find(|t| *t == s.trim())
}

/// The tiers `vendor`'s `model` offers, weakest first (module doc).
pub fn offered(settings: &Value, vendor: &str, model: &str) -> Vec<&'static str> {
    if let Some(list) = settings
        .pointer(&format!("/providers/{vendor}/efforts"))
        .and_then(Value::as_array)
    {
        let mut tiers: Vec<&'static str> = list
            .iter()
            .filter_map(Value::as_str)
            .filter_map(parse)
            .collect();
        tiers.sort_by_key(|t| rank(t));
        tiers.dedup();
        return tiers;
    }
    let m = model.to_ascii_lowercase();
    let m = m.rsplit('/').next().unwrap_or(&m);
    let claude_thinking = m.contains("claude")
        && ["3-7", "3.7", "claude-4", "sonnet-4", "opus-4", "haiku-4"]
            .iter()
            .any(|k| m.contains(k));
    let openai_reasoning = ["o1", "o3", "o4", "gpt-5"].iter().any(|p| m.starts_with(p));
    if (vendor == "fake" && m == "fake") || claude_thinking {
        TIERS.to_vec()
    } else if openai_reasoning {
        vec!["low", "medium", "high"]
    } else {
        Vec::new()
    }
}

/// `want` clamped to `offered`: itself when offered, else the strongest offered tier below
/// it, else the weakest offered; `None` when nothing is offered.
pub fn clamp(want: &str, offered: &[&'static str]) -> Option<&'static str> {
    let w = rank(want)?;
    offered
        .iter()
        .copied()
        .filter(|t| rank(t).is_some_and(|r| r <= w))
        .max_by_key(|t| rank(t))
        .or_else(|| offered.first().copied())
}

/// A session's effective effort and how it was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effort {
    /// The effective tier; `None` when the model offers none.
    pub effort: Option<&'static str>,
    /// `session`, `model`, `vendor` or `default`.
    pub source: &'static str,
    /// The tiers the model offers, weakest first.
    pub efforts: Vec<&'static str>,
    /// The session's own pin.
    pub pinned: Option<&'static str>,
}

/// The effort of a session pinned to `pin` running `vendor`'s `model` (module doc).
pub fn resolve(settings: &Value, pin: Option<&str>, vendor: &str, model: &str) -> Effort {
    let by = |key: &str| {
        settings
            .pointer("/agent/effortBy")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .and_then(parse)
    };
    let pinned = pin.and_then(parse);
    let (want, source) = if let Some(p) = pinned {
        (p, "session")
    } else if let Some(e) = by(&format!("{vendor}:{model}")) {
        (e, "model")
    } else if let Some(e) = by(vendor) {
        (e, "vendor")
    } else {
        let d = snowpea_common::settings::get(settings, "agent.effort")
            .and_then(Value::as_str)
            .and_then(parse)
            .unwrap_or(DEFAULT_EFFORT);
        (d, "default")
    };
    let efforts = offered(settings, vendor, model);
    Effort {
        effort: clamp(want, &efforts),
        source,
        efforts,
        pinned,
    }
}

/// Anthropic extended thinking: `budget_tokens` per tier.
pub fn anthropic_thinking_budget(effort: &str) -> Option<u32> {
    Some(match effort {
        "low" => 2_048,
        "medium" => 8_192,
        "high" => 16_384,
        "max" => 32_768,
        _ => return None,
    })
}

/// OpenAI `reasoning_effort` per tier (`max` is the API's strongest, `high`).
pub fn openai_reasoning_effort(effort: &str) -> Option<&'static str> {
    Some(match effort {
        "low" => "low",
        "medium" => "medium",
        "high" | "max" => "high",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_rule_source_and_clamping() {
        let s = json!({"agent": {"effort": "low", "effortBy": {"openai:o3": "max", "anthropic": "high"}}});
        let e = resolve(&s, None, "openai", "o3");
        assert_eq!((e.effort, e.source), (Some("high"), "model"), "max clamped");
        assert_eq!(e.efforts, ["low", "medium", "high"]);
        let e = resolve(&s, None, "anthropic", "claude-sonnet-4-5");
        assert_eq!((e.effort, e.source), (Some("high"), "vendor"));
        let e = resolve(&s, Some("max"), "anthropic", "claude-sonnet-4-5");
        assert_eq!(
            (e.effort, e.source, e.pinned),
            (Some("max"), "session", Some("max"))
        );
        let e = resolve(&s, None, "openai", "o4-mini");
        assert_eq!((e.effort, e.source), (Some("low"), "default"));
        let e = resolve(&json!({}), Some("high"), "openai", "gpt-4o");
        assert_eq!((e.effort, e.efforts.len()), (None, 0), "no effort setting");
        let custom = json!({"providers": {"qwen": {"efforts": ["high", "low", "bogus"]}}});
        let e = resolve(&custom, Some("medium"), "qwen", "q");
        assert_eq!(e.efforts, ["low", "high"]);
        assert_eq!(e.effort, Some("low"));
        assert_eq!(clamp("low", &["medium", "high"]), Some("medium"));
    }
}

//! Which model a session's next model call uses (spec `session.setModel`; upstream
//! `config/model_routing.py`): one precedence function, [`route`], over the five places a
//! choice can come from — an explicit override (a call that names its own model), the
//! agent definition's assignment, the session pin (`session.setModel`, `session.create
//! {provider, model}`), the project's `models.default`, the global `models.default`. The first
//! one set wins; with none, the provider rules of [`crate::provider::select_provider`]
//! decide (`providers.default`, the environment).
//!
//! A reference ([`parse_ref`]) is a `models.profiles` id (`{"provider": "…", "model": "…"}`),
//! a `vendor:model` pair or a bare vendor; one that names no configured vendor is refused.

use serde_json::Value;

/// A model choice: the vendor and/or the model (either may be left to the defaults).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelRef {
    /// Vendor, e.g. `anthropic`.
    pub vendor: Option<String>,
    /// Model id, e.g. `claude-sonnet-4-5`.
    pub model: Option<String>,
}

impl ModelRef {
    /// True when it chooses nothing.
    pub fn is_empty(&self) -> bool {
        self.vendor.is_none() && self.model.is_none()
    }
}

/// Where a routed choice came from, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteSource {
    /// The call named its model.
    Override,
    /// The agent definition the session runs as.
    Agent,
    /// The session pin.
    Session,
    /// The project's `models.default`.
    Project,
    /// The global `models.default`.
    Global,
}

/// The candidate choices of one model call, each already a [`ModelRef`].
#[derive(Debug, Clone, Default)]
pub struct RouteInputs {
    /// An explicit override.
    pub explicit: Option<ModelRef>,
    /// The agent's assignment.
    pub agent: Option<ModelRef>,
    /// The session pin.
    pub session: Option<ModelRef>,
    /// The project's `models.default`.
    pub project: Option<ModelRef>,
    /// The global `models.default`.
    pub global: Option<ModelRef>,
}

/// The precedence: explicit override → agent assignment → session pin → project default →
/// global default; `None` when none is set (the provider defaults decide).
pub fn route(inputs: &RouteInputs) -> Option<(RouteSource, &ModelRef)> {
    [
        (RouteSource::Override, &inputs.explicit),
        (RouteSource::Agent, &inputs.agent),
        (RouteSource::Session, &inputs.session),
        (RouteSource::Project, &inputs.project),
        (RouteSource::Global, &inputs.global),
    ]
    .into_iter()
    .find_map(|(src, r)| r.as_ref().filter(|r| !r.is_empty()).map(|r| (src, r)))
}

/// Parses a reference against `settings` (module doc); `is_vendor` says whether a vendor is
/// configured. The error says why, for an `invalid_params` message.
pub fn parse_ref(
    settings: &Value,
    reference: &str,
    is_vendor: &dyn Fn(&str) -> bool,
) -> Result<ModelRef, String> {
    let r = reference.trim();
    if let Some(profile) = settings
        .pointer("/models/profiles")
        .and_then(|p| p.get(r))
        .filter(|p| p.is_object())
    {
        let field = |k: &str| {
            profile
                .get(k)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let vendor = field("provider").or_else(|| field("vendor"));
        if let Some(v) = &vendor {
            if !is_vendor(v) {
                return Err(format!(
                    "profile {r:?} names vendor {v:?}, which is not configured"
                ));
            }
        }
        return Ok(ModelRef {
            vendor: vendor.map(|v| v.to_lowercase()),
            model: field("model"),
        });
    }
    if let Some((vendor, model)) = r.split_once(':') {
        let (vendor, model) = (vendor.trim(), model.trim());
        if vendor.is_empty() || model.is_empty() {
            return Err(format!("{r:?} is not a vendor:model pair"));
        }
        if !is_vendor(vendor) {
            return Err(format!("{vendor:?} is not a configured vendor"));
        }
        return Ok(ModelRef {
            vendor: Some(vendor.to_lowercase()),
            model: Some(model.to_owned()),
        });
    }
    if is_vendor(r) {
        return Ok(ModelRef {
            vendor: Some(r.to_lowercase()),
            model: None,
        });
    }
    Err(format!(
        "{r:?} is neither a models.profiles id, a vendor:model pair nor a configured vendor"
    ))
}

/// Checks a `session.create{provider, model}` pair the way `session.setModel` checks a
/// reference: a provider must be a configured vendor (`params.provider`); without one, a
/// model that is a profile id or a `vendor:model` pair is parsed as a reference
/// (`params.model`), any other model id is kept as given. Returns the pin to store.
pub fn check_create(
    settings: &Value,
    provider: Option<String>,
    model: Option<String>,
    is_vendor: &dyn Fn(&str) -> bool,
) -> snowpea_session_error::Result<ModelRef> {
    use snowpea_session_error::Error;
    if let Some(v) = &provider {
        if !is_vendor(v) {
            return Err(Error::invalid(
                "params.provider",
                format!("{v:?} is not a configured vendor"),
            ));
        }
    }
    let vendor = provider.map(|v| v.trim().to_lowercase());
    let Some(m) = model else {
        return Ok(ModelRef {
            vendor,
            model: None,
        });
    };
    if vendor.is_none() {
        let profile = settings
            .pointer("/models/profiles")
            .and_then(|p| p.get(m.trim()))
            .is_some();
        if profile || m.contains(':') {
            return parse_ref(settings, &m, is_vendor)
                .map_err(|e| Error::invalid("params.model", e));
        }
    }
    Ok(ModelRef {
        vendor,
        model: Some(m),
    })
}

/// True for a `session.setModel{model}` that clears the pin: null, empty or `inherit`.
pub fn clears_pin(model: Option<&str>) -> bool {
    match model.map(str::trim) {
        None | Some("") => true,
        Some(m) => m.eq_ignore_ascii_case("inherit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(v: &str, m: &str) -> Option<ModelRef> {
        Some(ModelRef {
            vendor: Some(v.into()),
            model: Some(m.into()),
        })
    }

    #[test]
    fn precedence_table() {
        let all = RouteInputs {
            explicit: r("e", "1"),
            agent: r("a", "2"),
            session: r("s", "3"),
            project: r("p", "4"),
            global: r("g", "5"),
        };
        // Remove the winner level by level: each row names the next winner.
        type Row = (fn(&mut RouteInputs), Option<RouteSource>, &'static str);
        let rows: [Row; 5] = [
            (|_| {}, Some(RouteSource::Override), "e"),
            (|i| i.explicit = None, Some(RouteSource::Agent), "a"),
            (|i| i.agent = None, Some(RouteSource::Session), "s"),
            (
                |i| i.session = Some(ModelRef::default()),
                Some(RouteSource::Project),
                "p",
            ),
            (|i| i.project = None, Some(RouteSource::Global), "g"),
        ];
        let mut inputs = all;
        for (change, source, vendor) in rows {
            change(&mut inputs);
            let (src, chosen) = route(&inputs).unwrap();
            assert_eq!(Some(src), source);
            assert_eq!(chosen.vendor.as_deref(), Some(vendor));
        }
        inputs.global = None;
        assert!(route(&inputs).is_none());
    }

    #[test]
    fn references() {
        let s = json!({"models": {"profiles": {
            "fast": {"provider": "openai", "model": "gpt-4o-mini"},
            "bad": {"provider": "nope", "model": "x"}
        }}});
        let is_vendor =
            |v: &str| ["openai", "anthropic", "ollama"].contains(&v.to_lowercase().as_str());
        assert_eq!(
            parse_ref(&s, "fast", &is_vendor).unwrap(),
            r("openai", "gpt-4o-mini").unwrap()
        );
        assert_eq!(
            parse_ref(&s, "ollama:llama3.2:8b", &is_vendor).unwrap(),
            r("ollama", "llama3.2:8b").unwrap()
        );
        assert_eq!(
            parse_ref(&s, "Anthropic", &is_vendor).unwrap(),
            ModelRef {
                vendor: Some("anthropic".into()),
                model: None
            }
        );
        for bad in ["bad", "nope:x", "gpt-4o", "openai:", ":x"] {
            assert!(parse_ref(&s, bad, &is_vendor).is_err(), "{bad}");
        }
        assert!(clears_pin(None) && clears_pin(Some(" ")) && clears_pin(Some("Inherit")));
        assert!(!clears_pin(Some("openai")));
    }
}

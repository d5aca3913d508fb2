//! "Is a provider configured?" for `setup.status` and the `setup.catalog` vendors — one
//! small function ([`configured_providers`]) the `provider.*` component may replace with
//! its own registry. A vendor counts as configured when the home holds something usable
//! for it, or its key is in the environment:
//! * settings `providers.<vendor>` with a non-empty secret field (`apiKey`, `api_key`,
//!   `key`, `token`, `accessToken`, …) or an endpoint (`baseUrl`/`base_url`, or
//!   `preset: "local"`);
//! * `$SNOWPEA_HOME/credentials.json` with a non-empty object for the vendor, at the top
//!   level or under `providers`;
//! * one of the vendor's key variables ([`super::vendors::VENDORS`] `key_env`) set and
//!   non-empty.
//!
//! The scripted test provider (`SNOWPEA_PROVIDER=fake:…`) is not a configured provider.

use serde_json::Value;
use snowpea_common::home::Home;

use super::vendors::VENDORS;

/// Vendors with a local endpoint but no preset: `providers.<name>` objects that say
/// `preset: "local"` or give a `baseUrl`, for names that are not presets.
pub fn named_local_servers(settings: &Value) -> Vec<String> {
    let Some(providers) = settings.get("providers").and_then(Value::as_object) else {
        return vec![];
    };
    providers
        .iter()
        .filter(|(name, v)| {
            name.as_str() != "default"
                && !VENDORS.iter().any(|p| p.id == name.as_str())
                && (v.get("preset").and_then(Value::as_str) == Some("local") || has_endpoint(v))
        })
        .map(|(name, _)| name.clone())
        .collect()
}

fn non_empty(v: Option<&Value>) -> bool {
    v.and_then(Value::as_str)
        .is_some_and(|s| !s.trim().is_empty())
}

fn has_endpoint(v: &Value) -> bool {
    non_empty(v.get("baseUrl")) || non_empty(v.get("base_url"))
}

fn has_secret(v: &Value) -> bool {
    v.as_object().is_some_and(|o| {
        o.iter().any(|(k, x)| {
            (k == "key" || snowpea_common::settings::is_secret_field(k)) && non_empty(Some(x))
        })
    })
}

/// `$SNOWPEA_HOME/credentials.json` (missing or unreadable: none).
pub fn credentials_path(home: &Home) -> std::path::PathBuf {
    home.root().join("credentials.json")
}

/// Vendors with credentials or an endpoint stored in this home (settings or
/// credentials.json), in preset order then by name — what "an earlier setup" left.
pub fn stored_providers(home: &Home, settings: &Value) -> Vec<String> {
    let creds = snowpea_common::settings::load_file(&credentials_path(home)).unwrap_or_default();
    let in_creds = |name: &str| {
        [
            creds.get(name),
            creds.pointer(&format!("/providers/{name}")),
        ]
        .into_iter()
        .flatten()
        .any(|v| v.as_object().is_some_and(|o| !o.is_empty()))
    };
    let in_settings = |name: &str| {
        settings
            .pointer(&format!("/providers/{name}"))
            .is_some_and(|v| has_secret(v) || has_endpoint(v) || (name == "local" && v.is_object()))
    };
    let mut out: Vec<String> = VENDORS
        .iter()
        .map(|v| v.id.to_owned())
        .chain(named_local_servers(settings))
        .filter(|name| in_settings(name) || in_creds(name))
        .collect();
    out.dedup();
    out
}

/// Every configured vendor: [`stored_providers`] plus vendors whose key variable is set.
pub fn configured_providers(
    home: &Home,
    settings: &Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let stored = stored_providers(home, settings);
    let mut out = Vec::new();
    for v in VENDORS {
        let from_env = v
            .key_env
            .iter()
            .any(|k| env(k).is_some_and(|x| !x.trim().is_empty()));
        if from_env || stored.iter().any(|s| s == v.id) {
            out.push(v.id.to_owned());
        }
    }
    out.extend(
        stored
            .into_iter()
            .filter(|s| !VENDORS.iter().any(|v| v.id == s)),
    );
    out
}

/// True when `provider.test` succeeded once in this home (`providerTested` in
/// `$SNOWPEA_HOME/setup-state.json` is set and not `false`).
pub fn provider_tested(home: &Home) -> bool {
    let state = snowpea_common::settings::load_file(&super::state_path(home)).unwrap_or_default();
    !matches!(
        state.get("providerTested"),
        None | Some(Value::Null) | Some(Value::Bool(false))
    )
}

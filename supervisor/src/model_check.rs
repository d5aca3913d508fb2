//! What `snowpea supervisor start`, `run` and `chat` say about the suite's model before the
//! first turn (issue 39 item 1): that the running suite has other model settings than the
//! caller's shell ([`mismatch`], with the restart command that applies them), and that the
//! suite has no usable model at all ([`no_model`], with the commands that give it one).

use std::path::Path;

use serde_json::Value;
use snowpea_common::home::Home;
use snowpea_sdk::Client;

use crate::model_env::{mismatch_message, ModelEnv};

/// How long the `provider.list` of [`no_model`] may take.
const LIST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// When the caller's model variables differ from those the running suite of `home` was
/// started with: what differs and the restart command (see [`crate::model_env`]). `None`
/// when they agree, the caller set none, or the suite left no record.
pub fn mismatch(home: &Home, home_arg: Option<&Path>) -> Option<String> {
    let suite = ModelEnv::read(home)?;
    let caller = ModelEnv::of_process(home);
    let differences = caller.differences(&suite);
    (!differences.is_empty()).then(|| mismatch_message(&differences, &caller, home_arg))
}

/// Whether the suite can pick a model: `Some(false)` only when it is sure there is none —
/// no `SNOWPEA_PROVIDER` at its start (`suite`), no configured or logged-in provider in
/// `provider.list` (`providers`), no `providers.default` in the global settings
/// (`settings`). `None` (unknown) without a record of the suite's start.
pub fn usable(suite: Option<&ModelEnv>, providers: &Value, settings: &Value) -> Option<bool> {
    let suite = suite?;
    if suite.provider().is_some() {
        return Some(true);
    }
    let listed = providers
        .get("providers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|p| p["configured"] == Value::Bool(true) || p["authStatus"] == "active");
    let default = settings
        .pointer("/providers/default")
        .and_then(Value::as_str)
        .is_some_and(|v| !v.trim().is_empty());
    Some(listed || default)
}

/// The short message for a suite without a usable model: two or three lines naming the
/// commands that give it one. `caller` is the shell's model variables (when it has some, the
/// restart command carries them).
pub fn no_model_message(caller: &ModelEnv, home_arg: Option<&Path>) -> String {
    if caller.is_empty() {
        let home = home_arg
            .map(|h| format!(" --home {}", h.display()))
            .unwrap_or_default();
        format!(
            "the suite has no model: it was started without an API key or SNOWPEA_PROVIDER.\n\
             Restart it with one:  snowpea supervisor stop{home} && ANTHROPIC_API_KEY=… snowpea supervisor start{home}\n\
             (or OPENAI_API_KEY=…; the demo model: SNOWPEA_PROVIDER=fake:$PWD/examples/demo.json)"
        )
    } else {
        format!(
            "the suite has no model: it was started without this shell's model settings.\n\
             Restart it with them:  {}",
            caller.restart_command(home_arg)
        )
    }
}

/// The [`no_model_message`] when the suite behind `client` has no usable model; `None`
/// when it has one or that cannot be told (the calls failed, no record).
pub async fn no_model(client: &Client, home: &Home, home_arg: Option<&Path>) -> Option<String> {
    let suite = ModelEnv::read(home)?;
    let providers = tokio::time::timeout(
        LIST_TIMEOUT,
        client.call("provider.list", serde_json::json!({})),
    )
    .await
    .ok()?
    .ok()?;
    let settings = snowpea_common::settings::load_file(&home.settings_path()).unwrap_or_default();
    match usable(Some(&suite), &providers, &settings)? {
        true => None,
        false => Some(no_model_message(&ModelEnv::of_process(home), home_arg)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> ModelEnv {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        ModelEnv::capture(
            &move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()),
            "t",
        )
    }

    #[test]
    fn a_suite_without_provider_keys_or_settings_has_no_usable_model() {
        let none = json!({"providers": [{"vendor": "anthropic", "configured": false, "authStatus": "unconfigured"}]});
        assert_eq!(usable(Some(&env(&[])), &none, &json!({})), Some(false));
        // Each source makes one usable.
        assert_eq!(
            usable(
                Some(&env(&[("SNOWPEA_PROVIDER", "fake:/x.json")])),
                &none,
                &json!({})
            ),
            Some(true)
        );
        let keyed = json!({"providers": [{"vendor": "openai", "configured": true}]});
        assert_eq!(usable(Some(&env(&[])), &keyed, &json!({})), Some(true));
        let logged_in = json!({"providers": [{"vendor": "openai", "authStatus": "active"}]});
        assert_eq!(usable(Some(&env(&[])), &logged_in, &json!({})), Some(true));
        assert_eq!(
            usable(
                Some(&env(&[])),
                &none,
                &json!({"providers": {"default": "local"}})
            ),
            Some(true)
        );
        // No record of the suite's start: unknown, so nothing is claimed.
        assert_eq!(usable(None, &none, &json!({})), None);
    }

    #[test]
    fn the_no_model_message_is_short_and_names_commands_to_type() {
        let m = no_model_message(&ModelEnv::default(), None);
        assert!(m.lines().count() <= 3, "{m}");
        assert!(m.len() < 300, "{} chars: {m}", m.len());
        assert!(
            m.contains("snowpea supervisor stop && ANTHROPIC_API_KEY=… snowpea supervisor start"),
            "{m}"
        );
        assert!(
            m.contains("SNOWPEA_PROVIDER=fake:$PWD/examples/demo.json"),
            "{m}"
        );
        assert!(!m.contains("provider.configure"), "{m}");
        let with = no_model_message(&env(&[("SNOWPEA_PROVIDER", "fake:/d.json")]), None);
        assert!(
            with.contains(
                "snowpea supervisor stop && SNOWPEA_PROVIDER=fake:/d.json snowpea supervisor start"
            ),
            "{with}"
        );
    }
}

//! `Setup`: the setup wizard's methods — `setup.catalog`, `setup.status{profile}` and
//! `setup.applyDefaults{profile}` (protocol 1.25.0; reference behaviour §2). No tables; it
//! writes settings only through [`Settings`] (so a change is announced like any other) and
//! keeps its own notes in `$SNOWPEA_HOME/setup-state.json` (0600): `defaultsApplied` (the
//! keys `setup.applyDefaults` filled in) and `providerTested` (written by `provider.test`).
//!
//! * `required` is the model provider: any configured vendor ([`providers`]) for the
//!   `default` profile, a provider that passed `provider.test` for `browser`.
//! * `optional`: search, memory and scheduler (which have defaults), gateways and mode
//!   (which have none, `defaultApplied: null`).
//! * `setup.applyDefaults` sets `search.provider: "ddgs"`, `memory.enabled: true` and
//!   `scheduler.enabled: true` only where the global settings hold no value (absent or
//!   `null`), never `browser.provider` nor anything under `gateway`; a second call applies
//!   nothing.

pub mod catalog;
pub mod providers;
pub mod vendors;

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;

use crate::app::EnvFn;
use crate::settings::{Scope, Settings};
use snowpea_session_error::{Error, Result};

/// The defaults `setup.applyDefaults` fills in: dotted key and value.
pub fn profile_defaults() -> [(&'static str, Value); 3] {
    [
        ("search.provider", json!("ddgs")),
        ("memory.enabled", json!(true)),
        ("scheduler.enabled", json!(true)),
    ]
}

/// `$SNOWPEA_HOME/setup-state.json`.
pub fn state_path(home: &Home) -> PathBuf {
    home.root().join("setup-state.json")
}

/// The setup component (see the module docs).
pub struct Setup {
    home: Home,
    settings: Arc<Settings>,
    env: EnvFn,
}

impl std::fmt::Debug for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup").field("home", &self.home).finish()
    }
}

/// `"default"` (or unset) or `"browser"`.
fn profile_of(profile: &str) -> Result<bool> {
    match profile {
        "" | "default" => Ok(false),
        "browser" => Ok(true),
        other => Err(Error::invalid(
            "params.profile",
            format!("{other:?} is not \"default\" or \"browser\""),
        )),
    }
}

fn is_set(settings: &Value, key: &str) -> bool {
    !matches!(
        snowpea_common::settings::get(settings, key),
        None | Some(Value::Null)
    )
}

impl Setup {
    /// The component over the settings owner; `env` finds provider keys in the environment.
    pub fn new(home: Home, settings: Arc<Settings>, env: EnvFn) -> Self {
        Setup {
            home,
            settings,
            env,
        }
    }

    /// `setup.catalog`.
    pub async fn catalog(&self, _p: ()) -> Result<pb::SetupCatalogResult> {
        let settings = self.settings.global();
        let configured = providers::configured_providers(&self.home, &settings, &*self.env);
        let (stt, tts) = crate::clients::audio::usable_engines(&self.home).await;
        Ok(pb::SetupCatalogResult {
            vendors: vendors::vendors(&settings, &configured),
            search: catalog::search(),
            browser: catalog::browser(),
            tools: catalog::tools(),
            gateway: catalog::gateway(),
            stt: catalog::stt(&stt),
            tts: catalog::tts(&tts),
        })
    }

    /// `setup.status{profile}`.
    pub async fn status(&self, p: pb::SetupStatusParams) -> Result<pb::SetupStatus> {
        let browser = profile_of(&p.profile)?;
        Ok(self.status_of(browser))
    }

    fn status_of(&self, browser: bool) -> pb::SetupStatus {
        let settings = self.settings.global();
        let configured = providers::configured_providers(&self.home, &settings, &*self.env);
        let state =
            snowpea_common::settings::load_file(&state_path(&self.home)).unwrap_or_default();
        let applied_before = |key: &str| {
            state
                .get("defaultsApplied")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|k| k.as_str() == Some(key)))
        };
        let with_default = |id: &str, title: &str, key: &str| {
            let default = profile_defaults()
                .into_iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v);
            let value = snowpea_common::settings::get(&settings, key);
            pb::SetupItem {
                id: id.into(),
                title: title.into(),
                done: is_set(&settings, key),
                default_applied: Some(applied_before(key) && value == default.as_ref()),
            }
        };
        let gateways_done = settings
            .get("gateway")
            .and_then(Value::as_object)
            .is_some_and(|g| {
                g.values()
                    .any(|p| p.get("enabled").and_then(Value::as_bool) == Some(true))
            });
        let provider = if browser {
            pb::SetupItem {
                id: "provider".into(),
                title: "Test a model provider".into(),
                done: providers::provider_tested(&self.home),
                default_applied: None,
            }
        } else {
            pb::SetupItem {
                id: "provider".into(),
                title: "Configure a model provider".into(),
                done: !configured.is_empty(),
                default_applied: None,
            }
        };
        pb::SetupStatus {
            existing_install: !providers::stored_providers(&self.home, &settings).is_empty(),
            configured_providers: configured,
            required: vec![provider],
            optional: vec![
                with_default("search", "Web search provider", "search.provider"),
                with_default("memory", "Long-term memory", "memory.enabled"),
                with_default("scheduler", "Scheduled jobs", "scheduler.enabled"),
                pb::SetupItem {
                    id: "gateways".into(),
                    title: "Chat gateways".into(),
                    done: gateways_done,
                    default_applied: None,
                },
                pb::SetupItem {
                    id: "mode".into(),
                    title: "Default permission mode".into(),
                    done: is_set(&settings, "permissions.defaultMode"),
                    default_applied: None,
                },
            ],
        }
    }

    /// `setup.applyDefaults{profile}`.
    pub async fn apply_defaults(
        &self,
        p: pb::SetupApplyDefaultsParams,
    ) -> Result<pb::SetupApplyDefaultsResult> {
        let browser = profile_of(&p.profile)?;
        // Read the file itself: a hand edit not reloaded yet must not be overwritten.
        let current = snowpea_common::settings::load_file(&self.home.settings_path())
            .map_err(|e| Error::Unavailable(format!("{e:#}; fix or remove the file first — Snowpea never overwrites a settings file it cannot read")))?;
        let mut patch = Value::Object(Default::default());
        let (mut applied, mut skipped) = (Vec::new(), Vec::new());
        for (key, value) in profile_defaults() {
            if is_set(&current, key) {
                skipped.push(key.to_owned());
                continue;
            }
            let mut node = &mut patch;
            let parts: Vec<&str> = key.split('.').collect();
            for part in &parts[..parts.len() - 1] {
                node = node
                    .as_object_mut()
                    .expect("patch nodes are objects")
                    .entry(*part)
                    .or_insert_with(|| Value::Object(Default::default()));
            }
            node[parts[parts.len() - 1]] = value;
            applied.push(key.to_owned());
        }
        if !applied.is_empty() {
            self.settings.patch(&Scope::Global, &patch).await?;
            let keys = applied.clone();
            snowpea_common::settings::update_file_blocking(state_path(&self.home), move |state| {
                let list = state
                    .as_object_mut()
                    .expect("settings documents are objects")
                    .entry("defaultsApplied")
                    .or_insert_with(|| json!([]));
                if !list.is_array() {
                    *list = json!([]);
                }
                let list = list.as_array_mut().expect("just made an array");
                for k in keys {
                    if !list.iter().any(|x| x.as_str() == Some(k.as_str())) {
                        list.push(json!(k));
                    }
                }
                Ok(())
            })
            .await
            .map_err(Error::Internal)?;
        }
        Ok(pb::SetupApplyDefaultsResult {
            applied,
            skipped,
            status: Some(self.status_of(browser)),
        })
    }
}

#[cfg(test)]
#[path = "setup_tests.rs"]
mod tests;

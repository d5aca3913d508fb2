//! `provider.list`, `provider.configure` and `provider.remove` (upstream-behaviour §2
//! "Providers"): the presets and user-named servers with what is configured, and the
//! writes of a vendor's settings (`settings.providers.<vendor>`, never a secret) and
//! credentials (`credentials.json`).
//!
//! `provider.configure{vendor, config}` accepts only these `config` keys (snake_case
//! spellings too): secrets `apiKey`, `accessToken`, `refreshToken` (+ `expiresAt`, unix
//! seconds or RFC 3339, and `authMethod` `api_key`|`oauth`) go to `credentials.json`;
//! `baseUrl` (http/https URL), `model`, `variant` (`local` only), `api`
//! (`openai`|`anthropic`|`gemini`), `models` (string list), `contextWindow` (positive
//! integer) and `label` go to the settings. A `null` value forgets that key; a config whose
//! every value is `null` and that names a secret (`{"apiKey": null, …}`) forgets the vendor
//! (clearing only optional settings, e.g. `{"model": null}`, keeps the vendor and its key).
//! `models` holds at most [`MAX_MODELS`] ids, each checked like any other string.
//! `"***"` (the mask) in a secret, an unknown key, a wrong type,
//! an empty config, or a name that is neither a preset (the legacy local names `ollama`,
//! `vllm`, `lmstudio`, `llamacpp` included) nor given a `baseUrl` are
//! `invalid_params` naming the field (`params.config.baseUrl`). The first configured
//! vendor becomes `providers.default`. A change is announced as
//! `settings.changed{scope:"global", keys:["providers"]}`.

use serde_json::{json, Map, Value};
use snowpea_proto::session::v1 as pb;

use super::component::Providers;
use super::credentials::{Credential, CredentialMap};
use super::presets::{self, vendor_name, Preset};
use super::select::SettingsView;
use snowpea_session_error::{Error, Result};

/// The mask `settings.get` shows for a secret; never accepted as a value.
const MASK: &str = "***";
/// Longest accepted string value (keys, URLs, model ids).
const MAX_VALUE_CHARS: usize = 8192;
/// Most model ids one `models` list may hold.
const MAX_MODELS: usize = 1000;

/// Settings keys `provider.configure` writes (camelCase; the snake_case spelling is accepted
/// on input).
const SETTING_KEYS: &[&str] = &[
    "baseUrl",
    "model",
    "variant",
    "api",
    "models",
    "contextWindow",
    "label",
];
/// Secret keys, stored in `credentials.json`.
const SECRET_KEYS: &[&str] = &["apiKey", "accessToken", "refreshToken"];
/// Non-secret credential keys.
const CREDENTIAL_KEYS: &[&str] = &["expiresAt", "authMethod"];

fn canonical_key(key: &str) -> Option<&'static str> {
    Some(match key {
        "apiKey" | "api_key" | "key" => "apiKey",
        "accessToken" | "access_token" => "accessToken",
        "refreshToken" | "refresh_token" => "refreshToken",
        "expiresAt" | "expires_at" => "expiresAt",
        "authMethod" | "auth_method" => "authMethod",
        "baseUrl" | "base_url" => "baseUrl",
        "model" => "model",
        "variant" => "variant",
        "api" => "api",
        "models" => "models",
        "contextWindow" | "context_window" => "contextWindow",
        "label" => "label",
        _ => return None,
    })
}

/// A validated `provider.configure` config: canonical key → value (`Null` = forget).
#[derive(Debug, Default)]
struct Patch {
    settings: Map<String, Value>,
    credentials: Map<String, Value>,
}

impl Patch {
    fn parse(vendor: &str, config: &Value) -> Result<Patch> {
        let Value::Object(map) = config else {
            return Err(Error::invalid("params.config", "must be an object"));
        };
        let mut patch = Patch::default();
        for (raw_key, value) in map {
            let field = format!("params.config.{raw_key}");
            let key = canonical_key(raw_key).ok_or_else(|| {
                Error::invalid(
                    &field,
                    format!(
                        "unknown provider setting; accepted: {}",
                        SECRET_KEYS
                            .iter()
                            .chain(CREDENTIAL_KEYS)
                            .chain(SETTING_KEYS)
                            .copied()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?;
            let value = check_value(vendor, key, value, &field)?;
            let target = if SETTING_KEYS.contains(&key) {
                &mut patch.settings
            } else {
                &mut patch.credentials
            };
            if target.insert(key.to_string(), value).is_some() {
                return Err(Error::invalid(
                    &field,
                    format!("given twice (as {key} and another spelling)"),
                ));
            }
        }
        if patch.settings.is_empty() && patch.credentials.is_empty() {
            return Err(Error::invalid(
                "params.config",
                "nothing to configure: give apiKey, baseUrl or model (or every value null to forget the vendor)",
            ));
        }
        Ok(patch)
    }

    /// Every value null and a secret among them: the "forget this vendor" form. Nulls of
    /// optional settings alone only clear those settings.
    fn forgets_everything(&self) -> bool {
        self.settings
            .values()
            .chain(self.credentials.values())
            .all(Value::is_null)
            && self
                .credentials
                .keys()
                .any(|k| SECRET_KEYS.contains(&k.as_str()))
    }
}

fn check_value(vendor: &str, key: &str, value: &Value, field: &str) -> Result<Value> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    let string = || checked_string(value, field);
    Ok(match key {
        "apiKey" | "accessToken" | "refreshToken" => {
            let s = string()?;
            if s == MASK || s.chars().all(|c| c == '*') {
                return Err(Error::invalid(
                    field,
                    "is the mask \"***\", not a secret: send the real value, or leave the key out to keep the stored one",
                ));
            }
            if s.chars().any(char::is_whitespace) {
                return Err(Error::invalid(field, "must not contain spaces"));
            }
            Value::String(s)
        }
        "expiresAt" => match value {
            Value::Number(n) => {
                json!(n.as_i64().filter(|n| *n > 0).ok_or_else(|| Error::invalid(
                    field,
                    "must be unix seconds (a positive integer)"
                ))?)
            }
            Value::String(s) => json!(s
                .trim()
                .parse::<jiff::Timestamp>()
                .map_err(|_| Error::invalid(field, "must be unix seconds or an RFC 3339 time"))?
                .as_second()),
            _ => {
                return Err(Error::invalid(
                    field,
                    "must be unix seconds or an RFC 3339 time",
                ))
            }
        },
        "authMethod" => {
            let s = string()?;
            if !matches!(s.as_str(), "api_key" | "oauth") {
                return Err(Error::invalid(field, "must be \"api_key\" or \"oauth\""));
            }
            Value::String(s)
        }
        "baseUrl" => {
            let s = string()?;
            let url = reqwest::Url::parse(&s)
                .map_err(|e| Error::invalid(field, format!("not a URL: {e}")))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(Error::invalid(
                    field,
                    "must be an http:// or https:// URL with a host",
                ));
            }
            if !url.username().is_empty() || url.password().is_some() {
                return Err(Error::invalid(
                    field,
                    "must not carry credentials; give them as apiKey",
                ));
            }
            Value::String(s.trim_end_matches('/').to_string())
        }
        "model" | "label" => Value::String(string()?),
        "variant" => {
            if vendor != "local" {
                return Err(Error::invalid(
                    field,
                    "only the \"local\" provider has variants",
                ));
            }
            let s = string()?;
            if presets::local_variant(&s).is_none() {
                return Err(Error::invalid(
                    field,
                    format!("unknown variant; one of {}", presets::local_variant_names()),
                ));
            }
            Value::String(s)
        }
        "api" => {
            let s = string()?;
            if super::config::ApiKind::parse(&s).is_none() {
                return Err(Error::invalid(
                    field,
                    "must be \"openai\", \"anthropic\" or \"gemini\"",
                ));
            }
            Value::String(s)
        }
        "models" => {
            let list = value
                .as_array()
                .ok_or_else(|| Error::invalid(field, "must be a list of model ids"))?;
            if list.len() > MAX_MODELS {
                return Err(Error::invalid(
                    field,
                    format!("at most {MAX_MODELS} model ids"),
                ));
            }
            let ids = list
                .iter()
                .enumerate()
                .map(|(i, m)| checked_string(m, &format!("{field}[{i}]")).map(Value::String))
                .collect::<Result<Vec<_>>>()?;
            Value::Array(ids)
        }
        "contextWindow" => json!(value
            .as_u64()
            .filter(|n| *n > 0)
            .ok_or_else(|| Error::invalid(field, "must be a positive integer (tokens)"))?),
        _ => unreachable!("canonical keys only"),
    })
}

/// A trimmed string value of `field`: non-empty, at most [`MAX_VALUE_CHARS`] characters, no
/// control characters.
fn checked_string(value: &Value, field: &str) -> Result<String> {
    let s = value
        .as_str()
        .ok_or_else(|| Error::invalid(field, "must be a string"))?
        .trim();
    if s.is_empty() {
        return Err(Error::invalid(
            field,
            "must not be empty (send null to forget it)",
        ));
    }
    if s.chars().count() > MAX_VALUE_CHARS {
        return Err(Error::invalid(
            field,
            format!("at most {MAX_VALUE_CHARS} characters"),
        ));
    }
    if s.chars().any(char::is_control) {
        return Err(Error::invalid(field, "must not contain control characters"));
    }
    Ok(s.to_string())
}

impl Providers {
    /// `provider.list`: the listed presets in catalog order, then the user-named servers of
    /// the settings (sorted), each with what is configured. Never shows a secret.
    pub async fn list(&self) -> Result<pb::ProviderListResult> {
        let settings = self.global_settings()?;
        let credentials = self.credentials()?;
        let now = jiff::Timestamp::now().as_second();
        let providers = self.with_view(&settings, |view| {
            let default = view
                .default_vendor(&credentials)
                .unwrap_or_else(|| "anthropic".to_string());
            let mut out: Vec<_> = presets::PRESETS
                .iter()
                .filter(|p| p.listed)
                .map(|p| entry(view, &credentials, p.vendor, Some(p), &default, now))
                .collect();
            out.extend(custom_vendors(&settings).into_iter().map(|v| {
                let legacy = presets::preset(&v);
                entry(view, &credentials, &v, legacy, &default, now)
            }));
            out
        });
        Ok(pb::ProviderListResult { providers })
    }

    /// The vendors with credentials or a local endpoint, in `provider.list` order (what
    /// `setup.status` reports as `configuredProviders`).
    pub async fn configured_vendors(&self) -> Result<Vec<String>> {
        Ok(self
            .list()
            .await?
            .providers
            .into_iter()
            .filter(|p| p.configured)
            .map(|p| p.vendor)
            .collect())
    }

    /// `provider.configure` (see the module doc).
    pub async fn configure(
        &self,
        p: pb::ProviderConfigureParams,
    ) -> Result<snowpea_proto::rpc::v1::OkResult> {
        let vendor = vendor_name(&p.vendor, "params.vendor")?;
        let config = p
            .config
            .as_ref()
            .map(snowpea_proto::wkt::from_struct)
            .unwrap_or_else(|| Value::Object(Map::new()));
        let patch = Patch::parse(&vendor, &config)?;
        if patch.forgets_everything() {
            self.forget(&vendor).await?;
            return Ok(snowpea_proto::rpc::v1::OkResult { ok: true });
        }
        let known = presets::preset(&vendor).is_some();
        let preset = presets::preset(&vendor).filter(|p| p.listed);
        let settings_path = self.inner.home.settings_path();
        let store = self.inner.credentials.clone();
        let edited = vendor.clone();
        snowpea_common::settings::update_file_blocking(settings_path, move |doc| {
            let vendor = edited;
            let known_base = doc
                .pointer(&format!("/providers/{vendor}/baseUrl"))
                .and_then(Value::as_str)
                .is_some();
            let new_base = patch.settings.get("baseUrl");
            if !known && (new_base.is_some_and(Value::is_null) || (!known_base && new_base.is_none())) {
                return Err(anyhow::Error::new(Error::invalid(
                    "params.config.baseUrl",
                    format!(
                        "{vendor:?} is not a known provider: a user-named server needs the baseUrl of its \
                         OpenAI-compatible endpoint (known: {})",
                        listed_names()
                    ),
                )));
            }
            apply_settings(doc, &vendor, preset, &patch)?;
            if !patch.credentials.is_empty() {
                store.update(|map| {
                    apply_credentials(map, &vendor, &patch.credentials);
                    Ok(())
                })?;
            }
            Ok(())
        })
        .await
        .map_err(write_error)?;
        self.inner.models.forget(&vendor).await;
        self.announce_change();
        tracing::info!(vendor, "provider configured");
        Ok(snowpea_proto::rpc::v1::OkResult { ok: true })
    }

    /// `provider.remove`: forgets a vendor's credentials and settings (and
    /// `providers.default` when it named it), ends a login in progress. `invalid_params` for
    /// an empty name or `default`; `not_found` when nothing of it is stored.
    pub async fn remove(
        &self,
        p: pb::ProviderRemoveParams,
    ) -> Result<snowpea_proto::rpc::v1::OkResult> {
        let vendor = vendor_name(&p.vendor, "params.vendor")?;
        let settings = self.global_settings()?;
        let credentials = self.credentials()?;
        let stored = settings.pointer(&format!("/providers/{vendor}")).is_some()
            || credentials.contains_key(&vendor);
        if !stored {
            let from_env = presets::preset(&vendor)
                .into_iter()
                .flat_map(|p| p.key_envs.iter())
                .find(|k| self.env()(k).is_some_and(|v| !v.trim().is_empty()));
            return Err(Error::NotFound(match from_env {
                Some(var) => format!(
                    "provider {vendor} has nothing stored to forget; its key comes from the environment ({var}), unset it there"
                ),
                None => format!("provider {vendor} is not configured"),
            }));
        }
        self.forget(&vendor).await?;
        Ok(snowpea_proto::rpc::v1::OkResult { ok: true })
    }

    /// Removes everything stored for `vendor` (settings section, default, credentials, a
    /// running login, cached listing) and announces the change.
    async fn forget(&self, vendor: &str) -> Result<()> {
        if let Some(login) = self
            .inner
            .logins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(vendor)
        {
            login.abort();
        }
        let store = self.inner.credentials.clone();
        let gone = vendor.to_owned();
        snowpea_common::settings::update_file_blocking(
            self.inner.home.settings_path(),
            move |doc| {
                let vendor = gone.as_str();
                if let Some(providers) = doc.get_mut("providers").and_then(Value::as_object_mut) {
                    providers.remove(vendor);
                    if providers.get("default").and_then(Value::as_str) == Some(vendor) {
                        providers.remove("default");
                    }
                }
                store.update(|map| {
                    map.remove(vendor);
                    Ok(())
                })
            },
        )
        .await
        .map_err(write_error)?;
        self.inner.models.forget(vendor).await;
        self.announce_change();
        tracing::info!(vendor, "provider removed");
        Ok(())
    }

    /// `settings.changed{scope:"global", keys:["providers"]}` to every client.
    pub(crate) fn announce_change(&self) {
        self.inner.hub.publish(
            &pb::SettingsChangedNotification {
                scope: "global".into(),
                keys: vec!["providers".into()],
            },
            vec![],
        );
    }
}

/// An error of a settings/credentials write: a validation error raised inside the edit
/// stays itself; anything else (a malformed file, the disk) is `unavailable` naming the file.
fn write_error(e: anyhow::Error) -> Error {
    match e.downcast::<Error>() {
        Ok(err) => err,
        Err(e) => Error::Unavailable(format!("cannot store the provider: {e:#}")),
    }
}

fn listed_names() -> String {
    presets::PRESETS
        .iter()
        .filter(|p| p.listed)
        .map(|p| p.vendor)
        .collect::<Vec<_>>()
        .join(", ")
}

fn apply_settings(
    doc: &mut Value,
    vendor: &str,
    preset: Option<&Preset>,
    patch: &Patch,
) -> anyhow::Result<()> {
    let sets_something = patch
        .settings
        .values()
        .chain(patch.credentials.values())
        .any(|v| !v.is_null());
    // Only nulls for a vendor without a section: nothing to clear, nothing to create.
    if !sets_something && doc.pointer(&format!("/providers/{vendor}")).is_none() {
        return Ok(());
    }
    let root = doc
        .as_object_mut()
        .ok_or_else(|| anyhow::anyhow!("settings must be a JSON object"))?;
    let providers = root
        .entry("providers")
        .or_insert_with(|| Value::Object(Map::new()));
    if !providers.is_object() {
        anyhow::bail!("settings providers is not an object; fix the file by hand first");
    }
    let providers = providers.as_object_mut().expect("checked");
    let section = providers
        .entry(vendor.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !section.is_object() {
        *section = Value::Object(Map::new());
    }
    let section = section.as_object_mut().expect("checked");
    for (k, v) in &patch.settings {
        if v.is_null() {
            section.remove(k);
        } else {
            section.insert(k.clone(), v.clone());
        }
    }
    // A key now lives in credentials.json; an old copy in the settings would shadow nothing
    // but still be a secret on disk in the wrong file.
    if patch.credentials.contains_key("apiKey") {
        section.remove("apiKey");
        section.remove("api_key");
    }
    if preset.is_none() {
        section
            .entry("preset")
            .or_insert_with(|| Value::String("local".into()));
    }
    if sets_something
        && providers
            .get("default")
            .and_then(Value::as_str)
            .is_none_or(|d| d.trim().is_empty())
    {
        providers.insert("default".into(), Value::String(vendor.to_string()));
    }
    Ok(())
}

fn apply_credentials(map: &mut CredentialMap, vendor: &str, patch: &Map<String, Value>) {
    let c = map.entry(vendor.to_string()).or_default();
    let text = |v: &Value| v.as_str().map(String::from);
    for (k, v) in patch {
        match k.as_str() {
            "apiKey" => c.api_key = text(v),
            "accessToken" => c.access_token = text(v),
            "refreshToken" => c.refresh_token = text(v),
            "expiresAt" => c.expires_at = v.as_i64(),
            "authMethod" => c.auth_method = text(v),
            _ => {}
        }
    }
    // A newly given key without an explicit method means the key is what to use.
    if patch.get("apiKey").is_some_and(|v| !v.is_null()) && !patch.contains_key("authMethod") {
        c.auth_method = Some("api_key".into());
    }
    if patch.get("accessToken").is_some_and(|v| !v.is_null()) && !patch.contains_key("authMethod") {
        c.auth_method = Some("oauth".into());
    }
    if c.is_empty() {
        *c = Credential::default();
    }
}

/// Names of the user-named servers: settings sections that are objects and not listed
/// presets (a legacy local name such as `ollama` shows once it has a section).
fn custom_vendors(settings: &Value) -> Vec<String> {
    let mut names: Vec<String> = settings
        .get("providers")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| m.iter())
        .filter(|(k, v)| {
            v.is_object() && k.as_str() != "default" && presets::preset(k).is_none_or(|p| !p.listed)
        })
        .map(|(k, _)| k.clone())
        .collect();
    names.sort();
    names
}

fn entry(
    view: &SettingsView<'_>,
    credentials: &CredentialMap,
    vendor: &str,
    preset: Option<&Preset>,
    default: &str,
    now: i64,
) -> pb::provider_list_result::Provider {
    let stored = credentials.get(vendor);
    let has_secret =
        stored.is_some_and(|c| c.secret().is_some()) || view.key(vendor, preset).is_some();
    let key_required = preset.is_some_and(|p| p.key_required);
    let section = view.section(vendor).is_some();
    let configured = has_secret || (!key_required && section);
    let auth_status = if stored.is_some_and(|c| c.is_expired(now)) {
        "expired"
    } else if configured {
        "active"
    } else {
        "unconfigured"
    };
    let models = view
        .section(vendor)
        .and_then(|s| s.get("models"))
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_else(|| {
            preset
                .map(|p| p.models.iter().map(|m| m.to_string()).collect())
                .unwrap_or_default()
        });
    // User-named servers and the legacy local names are "custom" (not catalog entries).
    let custom = preset.is_none_or(|p| !p.listed);
    pb::provider_list_result::Provider {
        auth_methods: match preset {
            Some(p) if p.listed => p.auth_methods.iter().map(|m| m.to_string()).collect(),
            _ => vec!["api_key".into()],
        },
        auth_status: auth_status.into(),
        base_url: view.base_url(vendor, preset).unwrap_or_default(),
        configured,
        custom,
        default: vendor == default,
        default_base_url: view
            .default_base_url(vendor, preset)
            .or_else(|| view.string(vendor, "baseUrl"))
            .unwrap_or_default(),
        default_model: view
            .string(vendor, "model")
            .or_else(|| view.default_model(vendor, preset))
            .unwrap_or_default(),
        label: view
            .string(vendor, "label")
            .or_else(|| preset.map(|p| p.label.to_string()))
            .unwrap_or_else(|| vendor.to_string()),
        models,
        preset: if custom {
            view.string(vendor, "preset")
                .unwrap_or_else(|| "local".into())
        } else if vendor == "local" {
            "local".into()
        } else {
            String::new()
        },
        supports_effort: preset.is_some_and(|p| p.supports_effort),
        variant: view
            .local_variant(vendor)
            .map(|v| v.name.to_string())
            .unwrap_or_default(),
        vendor: vendor.to_string(),
    }
}

#[cfg(test)]
#[path = "manage_tests.rs"]
mod tests;

//! The `Providers` component (`provider.*`): picks the model provider of a turn and answers
//! `provider.list/configure/remove` ([`super::manage`]), `provider.models`
//! ([`super::models`]), `provider.test` ([`super::probe`]) and `provider.loginWeb`
//! ([`super::login`]). It owns `$SNOWPEA_HOME/credentials.json` ([`super::credentials`])
//! and the `providers` section of the global settings (written through
//! `snowpea_common::settings::update_file`); it has no table.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use snowpea_common::bus::BusHub;
use snowpea_common::home::Home;

use super::cache::ModelCache;
use super::credentials::{CredentialMap, CredentialStore};
use super::interface::{ProviderError, SharedProvider};
use super::select::{select_with, SettingsView};
use crate::EnvFn;
use snowpea_session_error::{Error, Result};

/// Deadline of every provider-management HTTP call except `provider.test`'s completion
/// (`provider.models`' listing, OAuth endpoints): 5 s.
pub const MANAGEMENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The `Providers` component. Cheap to clone (shared state behind an `Arc`).
#[derive(Clone)]
pub struct Providers {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub home: Home,
    pub env: EnvFn,
    pub hub: Arc<BusHub>,
    pub credentials: CredentialStore,
    pub models: ModelCache,
    /// Running `provider.loginWeb` flows by vendor (a new login of a vendor ends the old
    /// and waits until it is gone, so its redirect port is free again).
    pub logins: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// HTTP client of listings and OAuth endpoints ([`MANAGEMENT_TIMEOUT`] per request).
    pub http: reqwest::Client,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers")
            .field("home", &self.inner.home)
            .finish_non_exhaustive()
    }
}

impl Providers {
    /// Providers of `home`, reading the environment through `env` and publishing
    /// `provider.loginProgress` / `settings.changed` through `hub`.
    pub fn new(home: Home, env: EnvFn, hub: Arc<BusHub>) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(MANAGEMENT_TIMEOUT)
            .timeout(MANAGEMENT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(3))
            .user_agent(concat!("snowpea/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("a reqwest client with rustls builds");
        Providers {
            inner: Arc::new(Inner {
                credentials: CredentialStore::new(home.root().join("credentials.json")),
                models: ModelCache::new(home.root().join("models-cache.json")),
                home,
                env,
                hub,
                logins: Mutex::new(HashMap::new()),
                http,
            }),
        }
    }

    /// The provider for a session asking for `vendor` / `model` (see
    /// [`super::select::select_provider`]) with the stored credentials; the error names where to
    /// configure one.
    pub fn select(
        &self,
        settings: &Value,
        vendor: Option<&str>,
        model: Option<&str>,
    ) -> Result<SharedProvider, (ProviderError, String)> {
        let env = self.inner.env.clone();
        let credentials = self
            .inner
            .credentials
            .load()
            .map_err(|e| ProviderError::Config(format!("cannot read credentials: {e:#}")));
        credentials
            .and_then(|c| select_with(settings, &c, vendor, model, &|k| env(k)))
            .map_err(|e| {
                // Short, on three lines, naming commands a person can type (issue 39
                // item 2); clients configure one with provider.configure.
                let message = format!(
                    "no usable model provider: {e}.\n\
                     The daemon reads API keys when it starts: snowpea supervisor stop && \
                     ANTHROPIC_API_KEY=… snowpea supervisor start\n\
                     (or OPENAI_API_KEY=…; demo model: SNOWPEA_PROVIDER=fake:$PWD/examples/demo.json; \
                     settings: providers.<vendor> in {})",
                    self.inner.home.settings_path().display()
                );
                (e, message)
            })
    }

    /// True when `vendor` is one this daemon can use: a built-in or configured vendor
    /// ([`super::select::is_configured_vendor`]) or one with stored credentials
    /// (`session.create{provider}`, `session.setModel`).
    pub fn is_configured(&self, settings: &Value, vendor: &str) -> bool {
        let env = self.inner.env.clone();
        super::select::is_configured_vendor(settings, vendor, &|k| env(k))
            || self
                .inner
                .credentials
                .load()
                .is_ok_and(|c| c.contains_key(vendor.trim()))
    }

    /// The global settings document (`$SNOWPEA_HOME/settings.json`); a malformed file is
    /// `unavailable` naming it (provider calls never rewrite it).
    pub(crate) fn global_settings(&self) -> Result<Value> {
        snowpea_common::settings::load_file(&self.inner.home.settings_path())
            .map_err(|e| Error::Unavailable(format!("cannot read settings: {e:#}")))
    }

    /// The stored credentials; a malformed file is `unavailable` naming it.
    pub(crate) fn credentials(&self) -> Result<CredentialMap> {
        self.inner
            .credentials
            .load()
            .map_err(|e| Error::Unavailable(format!("cannot read credentials: {e:#}")))
    }

    /// The environment lookup.
    pub(crate) fn env(&self) -> &EnvFn {
        &self.inner.env
    }

    /// A [`SettingsView`] of `settings` with this component's environment.
    pub(crate) fn with_view<T>(
        &self,
        settings: &Value,
        f: impl FnOnce(&SettingsView<'_>) -> T,
    ) -> T {
        let env = self.inner.env.clone();
        let lookup = move |k: &str| env(k);
        f(&SettingsView {
            settings,
            env: &lookup,
        })
    }
}

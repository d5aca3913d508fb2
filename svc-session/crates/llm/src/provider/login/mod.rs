//! `provider.loginWeb` and its `provider.loginProgress` notifications: OAuth logins that
//! end with a credential in `credentials.json`.
//!
//! Flows (the spec's method names):
//! * `device_code` ([`device`], RFC 8628) — openai: the daemon asks for a device code,
//!   answers `{status:"await_user", userCode, verificationUri…}` at once and polls the token
//!   endpoint in the background (at the server's `interval`, `slow_down` adds 5 s) until
//!   the user approved, denied or the code expired;
//! * `browser_pkce` (openai), `oauth_pkce` (openrouter), `google_oauth` (gemini)
//!   ([`pkce`], RFC 7636 S256): the daemon listens on a loopback port for the redirect,
//!   answers with the authorization URL as `verificationUri`, and exchanges the code (an
//!   OpenRouter code becomes an API key through its `auth/keys` endpoint);
//! * `web` or an empty method picks `device_code` when the vendor has it (it works
//!   whichever machine the browser is on), else the vendor's PKCE flow;
//! * anything else, and every other vendor, is `login_unsupported` (also `google_adc`: this
//!   build does not read gcloud's application-default credentials).
//!
//! An expiring OAuth token is renewed with its refresh token before a turn or a test uses it
//! (`refresh.rs`).
//!
//! Phases, in order: `started`, `await_user`, `polling`, then `done` or `failed` (with a
//! one-line `message`). A new login of a vendor ends the one in progress (and waits for it
//! to let go of its redirect port);
//! `provider.remove` ends it too. The endpoints are the vendors' unless
//! `settings.providers.<vendor>.oauth.{clientId, clientSecret, deviceAuthorizationUrl,
//! authorizationUrl, tokenUrl, scope, redirectPort}` overrides them (how the tests point a
//! login at a local fake authorization server). No token, code or verifier is ever logged,
//! published or returned.

pub mod device;
pub mod pkce;
mod refresh;

use std::time::Duration;

use serde_json::Value;
use snowpea_proto::session::v1 as pb;

use super::component::Providers;
use super::credentials::Credential;
use snowpea_session_error::{Error, Result};

/// Longest a login may wait for the user (a server's `expires_in` is capped to this).
pub const MAX_LOGIN_WAIT: Duration = Duration::from_secs(30 * 60);
/// Wait for the browser redirect of a PKCE login.
pub const PKCE_WAIT: Duration = Duration::from_secs(10 * 60);
/// Longest wait for a replaced login to end.
const LOGIN_END_WAIT: Duration = Duration::from_secs(5);

/// How a PKCE login turns the code into a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exchange {
    /// RFC 6749 `authorization_code` grant (form-encoded), giving an access token.
    Standard,
    /// OpenRouter: JSON `{code, code_verifier, code_challenge_method}` to `auth/keys`,
    /// giving an API key.
    OpenRouterKey,
}

/// The OAuth endpoints of one vendor's flow (defaults, then the settings overrides).
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// The flow (`device_code`, `browser_pkce`, `oauth_pkce`, `google_oauth`).
    pub method: &'static str,
    /// OAuth client id.
    pub client_id: Option<String>,
    /// OAuth client secret (Google's installed-app clients have one).
    pub client_secret: Option<String>,
    /// RFC 8628 device authorization endpoint.
    pub device_authorization_url: Option<String>,
    /// Authorization endpoint the browser opens.
    pub authorization_url: Option<String>,
    /// Token endpoint.
    pub token_url: Option<String>,
    /// Scopes, space separated.
    pub scope: Option<String>,
    /// Loopback port of the redirect (`0` = any free port).
    pub redirect_port: u16,
    /// Host name in the redirect URI (`localhost` where the vendor registered that).
    pub redirect_host: &'static str,
    /// Path of the redirect URI.
    pub redirect_path: &'static str,
    /// Code exchange style.
    pub exchange: Exchange,
}

impl std::fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoints")
            .field("method", &self.method)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "***"))
            .field("device_authorization_url", &self.device_authorization_url)
            .field("authorization_url", &self.authorization_url)
            .field("token_url", &self.token_url)
            .finish_non_exhaustive()
    }
}

/// OpenAI's public OAuth client (the one its own command-line tools use).
const OPENAI_CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";

/// The built-in endpoints of `vendor`'s `method`, or `None` when the vendor has no such
/// flow.
fn defaults(vendor: &str, method: &str) -> Option<Endpoints> {
    let base = Endpoints {
        method: "",
        client_id: None,
        client_secret: None,
        device_authorization_url: None,
        authorization_url: None,
        token_url: None,
        scope: None,
        redirect_port: 0,
        redirect_host: "127.0.0.1",
        redirect_path: "/callback",
        exchange: Exchange::Standard,
    };
    let s = |v: &str| Some(v.to_string());
    Some(match (vendor, method) {
        ("openai", "device_code") => Endpoints {
            method: "device_code",
            client_id: s(OPENAI_CLIENT_ID),
            device_authorization_url: s("https://auth.openai.com/oauth/device/code"),
            token_url: s("https://auth.openai.com/oauth/token"),
            scope: s("openid profile email offline_access"),
            ..base
        },
        ("openai", "browser_pkce") => Endpoints {
            method: "browser_pkce",
            client_id: s(OPENAI_CLIENT_ID),
            authorization_url: s("https://auth.openai.com/oauth/authorize"),
            token_url: s("https://auth.openai.com/oauth/token"),
            scope: s("openid profile email offline_access"),
            redirect_port: 1455,
            redirect_host: "localhost",
            redirect_path: "/auth/callback",
            ..base
        },
        ("openrouter", "oauth_pkce") => Endpoints {
            method: "oauth_pkce",
            authorization_url: s("https://openrouter.ai/auth"),
            token_url: s("https://openrouter.ai/api/v1/auth/keys"),
            exchange: Exchange::OpenRouterKey,
            ..base
        },
        ("gemini", "google_oauth") => Endpoints {
            method: "google_oauth",
            authorization_url: s("https://accounts.google.com/o/oauth2/v2/auth"),
            token_url: s("https://oauth2.googleapis.com/token"),
            scope: s("https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/generative-language.retriever"),
            ..base
        },
        _ => return None,
    })
}

/// The flow `web` / an empty method picks for `vendor`.
fn best_method(vendor: &str) -> Option<&'static str> {
    match vendor {
        "openai" => Some("device_code"),
        "openrouter" => Some("oauth_pkce"),
        "gemini" => Some("google_oauth"),
        _ => None,
    }
}

/// Applies `settings.providers.<vendor>.oauth` to `ep`; a malformed override is
/// `invalid_params`-free (settings are the user's) but reported as `unavailable` naming it.
fn with_overrides(mut ep: Endpoints, vendor: &str, settings: &Value) -> Result<Endpoints> {
    let Some(o) = settings
        .pointer(&format!("/providers/{vendor}/oauth"))
        .filter(|o| o.is_object())
    else {
        return Ok(ep);
    };
    let text = |k: &str| -> Result<Option<String>> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
            Some(_) => Err(Error::Unavailable(format!(
                "settings providers.{vendor}.oauth.{k} must be a non-empty string"
            ))),
        }
    };
    let url = |k: &str| -> Result<Option<String>> {
        let v = text(k)?;
        if let Some(u) = &v {
            let parsed = reqwest::Url::parse(u).map_err(|e| {
                Error::Unavailable(format!(
                    "settings providers.{vendor}.oauth.{k}: not a URL: {e}"
                ))
            })?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(Error::Unavailable(format!(
                    "settings providers.{vendor}.oauth.{k} must be an http(s) URL"
                )));
            }
        }
        Ok(v)
    };
    if let Some(v) = text("clientId")? {
        ep.client_id = Some(v);
    }
    if let Some(v) = text("clientSecret")? {
        ep.client_secret = Some(v);
    }
    if let Some(v) = url("deviceAuthorizationUrl")? {
        ep.device_authorization_url = Some(v);
    }
    if let Some(v) = url("authorizationUrl")? {
        ep.authorization_url = Some(v);
    }
    if let Some(v) = url("tokenUrl")? {
        ep.token_url = Some(v);
    }
    if let Some(v) = text("scope")? {
        ep.scope = Some(v);
    }
    match o.get("redirectPort") {
        None | Some(Value::Null) => {}
        Some(v) => {
            ep.redirect_port = v.as_u64().and_then(|p| u16::try_from(p).ok()).ok_or_else(|| {
                Error::Unavailable(format!(
                    "settings providers.{vendor}.oauth.redirectPort must be a port number (0 = any free port)"
                ))
            })?
        }
    }
    Ok(ep)
}

/// What a started flow hands back for the `provider.loginWeb` answer.
#[derive(Debug, Clone, Default)]
pub struct Started {
    /// Device-code flows: the code the user types.
    pub user_code: Option<String>,
    /// The page to open.
    pub verification_uri: Option<String>,
    /// The page with the code embedded.
    pub verification_uri_complete: Option<String>,
    /// Seconds the code or session stays valid.
    pub expires_in_sec: Option<i64>,
}

impl Providers {
    /// `provider.loginWeb` (see the module doc).
    pub async fn login_web(
        &self,
        p: pb::ProviderLoginWebParams,
    ) -> Result<pb::ProviderLoginWebResult> {
        let vendor = crate::provider::presets::vendor_name(&p.vendor, "params.vendor")?;
        let asked = p.method.trim();
        let method = match asked {
            "" | "web" => best_method(&vendor).ok_or_else(|| {
                Error::LoginUnsupported(format!(
                    "{vendor} has no web login; configure an API key with provider.configure"
                ))
            })?,
            m => m,
        };
        let ep = defaults(&vendor, method).ok_or_else(|| {
            let offered: Vec<&str> = ["device_code", "browser_pkce", "oauth_pkce", "google_oauth"]
                .into_iter()
                .filter(|m| defaults(&vendor, m).is_some())
                .collect();
            Error::LoginUnsupported(if offered.is_empty() {
                format!("{vendor} has no web login; configure an API key with provider.configure")
            } else {
                format!(
                    "{vendor} does not support the login method {method:?}; it offers {}",
                    offered.join(", ")
                )
            })
        })?;
        let settings = self.global_settings()?;
        let ep = with_overrides(ep, &vendor, &settings)?;
        if ep.client_id.is_none() && ep.exchange == Exchange::Standard {
            return Err(Error::LoginUnsupported(format!(
                "{vendor} {method} needs an OAuth client: set settings providers.{vendor}.oauth.clientId"
            )));
        }
        // End a login of this vendor still in progress first: a PKCE flow holds the
        // redirect port, which a vendor registers as one fixed port (openai: 1455).
        let running = self
            .inner
            .logins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&vendor);
        if let Some(old) = running {
            old.abort();
            // Resolves once the old task (and its listener) is dropped.
            let _ = tokio::time::timeout(LOGIN_END_WAIT, old).await;
        }
        self.progress(&vendor, ep.method, "started", None, &Started::default());
        let method = ep.method;
        let begun: Result<(Started, futures::future::BoxFuture<'static, ()>)> = match method {
            "device_code" => device::start(self.clone(), vendor.clone(), ep)
                .await
                .map(|(s, t)| (s, Box::pin(t) as _)),
            _ => pkce::start(self.clone(), vendor.clone(), ep)
                .await
                .map(|(s, t)| (s, Box::pin(t) as _)),
        };
        let (started, task) = match begun {
            Ok(b) => b,
            Err(e) => {
                self.progress(
                    &vendor,
                    method,
                    "failed",
                    Some(e.to_string()),
                    &Started::default(),
                );
                return Err(e);
            }
        };
        let handle = tokio::spawn(task);
        if let Some(old) = self
            .inner
            .logins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(vendor.clone(), handle)
        {
            old.abort();
        }
        self.progress(&vendor, method, "await_user", None, &started);
        Ok(pb::ProviderLoginWebResult {
            expires_in_sec: started.expires_in_sec,
            ok: true,
            status: "await_user".into(),
            user_code: started.user_code,
            verification_uri: started.verification_uri,
            verification_uri_complete: started.verification_uri_complete,
        })
    }

    /// Publishes one `provider.loginProgress` to every client.
    pub(crate) fn progress(
        &self,
        vendor: &str,
        method: &str,
        phase: &str,
        message: Option<String>,
        s: &Started,
    ) {
        self.inner.hub.publish(
            &pb::ProviderLoginProgressNotification {
                expires_in_sec: s.expires_in_sec,
                message,
                method: method.to_string(),
                phase: phase.to_string(),
                user_code: s.user_code.clone(),
                vendor: vendor.to_string(),
                verification_uri: s.verification_uri.clone(),
                verification_uri_complete: s.verification_uri_complete.clone(),
            },
            vec![],
        );
    }

    /// Ends a login: stores `credential` (ok) and publishes `done`, or publishes `failed`
    /// with the reason. Drops the vendor's entry of the running logins.
    pub(crate) async fn finish_login(
        &self,
        vendor: &str,
        method: &str,
        outcome: std::result::Result<Credential, String>,
    ) {
        let result = match outcome {
            Ok(credential) => self
                .store_login(vendor, credential)
                .await
                .map_err(|e| format!("cannot store the login: {e:#}")),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => {
                tracing::info!(vendor, method, "provider login done");
                self.progress(
                    vendor,
                    method,
                    "done",
                    Some(format!("logged in to {vendor}")),
                    &Started::default(),
                );
                self.announce_change();
            }
            Err(reason) => {
                tracing::info!(vendor, method, reason, "provider login failed");
                self.progress(vendor, method, "failed", Some(reason), &Started::default());
            }
        }
        self.inner
            .logins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(vendor);
    }

    async fn store_login(&self, vendor: &str, credential: Credential) -> anyhow::Result<()> {
        let store = self.inner.credentials.clone();
        let owned = vendor.to_owned();
        snowpea_common::settings::update_file_blocking(
            self.inner.home.settings_path(),
            move |doc| {
                let vendor = owned.as_str();
                let root = doc
                    .as_object_mut()
                    .ok_or_else(|| anyhow::anyhow!("settings must be a JSON object"))?;
                let providers = root
                    .entry("providers")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Some(p) = providers.as_object_mut() {
                    if p.get("default")
                        .and_then(Value::as_str)
                        .is_none_or(|d| d.trim().is_empty())
                    {
                        p.insert("default".into(), Value::String(vendor.to_string()));
                    }
                }
                store.update(|map| {
                    let entry = map.entry(vendor.to_string()).or_default();
                    let api_key = credential.api_key.clone().or_else(|| entry.api_key.clone());
                    *entry = Credential {
                        api_key,
                        ..credential
                    };
                    Ok(())
                })
            },
        )
        .await?;
        self.inner.models.forget(vendor).await;
        Ok(())
    }
}

/// The JSON body of an OAuth endpoint's answer, or a one-line reason (`error` /
/// `error_description`, else the status). Never includes the request.
pub(crate) async fn oauth_json(
    resp: std::result::Result<reqwest::Response, reqwest::Error>,
) -> std::result::Result<(u16, Value), String> {
    let resp = resp.map_err(|e| {
        if e.is_timeout() {
            "the authorization server did not answer in time".to_string()
        } else {
            "cannot reach the authorization server".to_string()
        }
    })?;
    let status = resp.status().as_u16();
    let body = resp
        .text()
        .await
        .map_err(|_| "the authorization server's answer broke off".to_string())?;
    let json: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    Ok((status, json))
}

/// `error: error_description` of an OAuth error answer.
pub(crate) fn oauth_error(status: u16, body: &Value) -> String {
    match (
        body.get("error").and_then(Value::as_str),
        body.get("error_description").and_then(Value::as_str),
    ) {
        (Some(e), Some(d)) => format!("{e}: {d}"),
        (Some(e), None) => e.to_string(),
        _ => format!("the authorization server answered HTTP {status}"),
    }
}

/// A credential from a token endpoint's success answer (`access_token`,
/// `refresh_token`, `expires_in`).
pub(crate) fn token_credential(
    body: &Value,
    method: &str,
) -> std::result::Result<Credential, String> {
    let access = body
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or("the token answer has no access_token")?;
    let expires_at = body
        .get("expires_in")
        .and_then(Value::as_i64)
        .map(|s| jiff::Timestamp::now().as_second().saturating_add(s));
    Ok(Credential {
        api_key: None,
        access_token: Some(access.to_string()),
        refresh_token: body
            .get("refresh_token")
            .and_then(Value::as_str)
            .map(String::from),
        expires_at,
        auth_method: Some("oauth".into()),
        login_method: Some(method.to_string()),
    })
}

#[cfg(test)]
#[path = "login_tests.rs"]
mod tests;

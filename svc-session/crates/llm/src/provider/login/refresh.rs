//! Renewal of an OAuth login: before a turn or `provider.test` uses a vendor whose access
//! token is within [`EXPIRY_MARGIN_SECS`](crate::provider::credentials::EXPIRY_MARGIN_SECS)
//! of expiry, its refresh token is exchanged (RFC 6749 §6, `grant_type=refresh_token`) at
//! the token endpoint of the flow that logged in (settings overrides applied). A failure is
//! logged without any secret and leaves the credential as it was, so the call then reports
//! the expired login.

use serde_json::Value;

use super::{defaults, oauth_error, oauth_json, with_overrides};
use crate::provider::component::Providers;

impl Providers {
    /// Renews `vendor`'s (else the default vendor's) OAuth token when it is expiring and a
    /// refresh token is stored. Never fails: problems are logged.
    pub async fn refresh_if_expiring(&self, vendor: Option<&str>) {
        let (Ok(settings), Ok(credentials)) = (self.global_settings(), self.credentials()) else {
            return;
        };
        let vendor = match vendor
            .map(|v| v.trim().to_lowercase())
            .filter(|v| !v.is_empty())
        {
            Some(v) => v,
            None => match self.with_view(&settings, |view| view.default_vendor(&credentials)) {
                Some(v) => v,
                None => return,
            },
        };
        let now = jiff::Timestamp::now().as_second();
        let Some(stored) = credentials.get(&vendor).filter(|c| c.is_expired(now)) else {
            return;
        };
        let Some(refresh_token) = stored.refresh_token.clone() else {
            return;
        };
        let method = stored.login_method.as_deref().unwrap_or("device_code");
        let Some(ep) =
            defaults(&vendor, method).and_then(|ep| with_overrides(ep, &vendor, &settings).ok())
        else {
            return;
        };
        let Some(token_url) = ep.token_url.clone() else {
            return;
        };
        let mut form = vec![
            ("grant_type", "refresh_token".to_string()),
            ("refresh_token", refresh_token),
            ("client_id", ep.client_id.clone().unwrap_or_default()),
        ];
        if let Some(secret) = &ep.client_secret {
            form.push(("client_secret", secret.clone()));
        }
        let answer = oauth_json(self.inner.http.post(&token_url).form(&form).send().await).await;
        let body = match answer {
            Ok((status, body)) if (200..300).contains(&status) => body,
            Ok((status, body)) => {
                tracing::warn!(
                    vendor,
                    reason = oauth_error(status, &body),
                    "the login could not be renewed"
                );
                return;
            }
            Err(reason) => {
                tracing::warn!(vendor, reason, "the login could not be renewed");
                return;
            }
        };
        let Some(access) = body
            .get("access_token")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        else {
            tracing::warn!(vendor, "the renewal answer has no access_token");
            return;
        };
        let expires_at = body
            .get("expires_in")
            .and_then(Value::as_i64)
            .map(|s| jiff::Timestamp::now().as_second().saturating_add(s));
        let new_refresh = body
            .get("refresh_token")
            .and_then(Value::as_str)
            .map(String::from);
        let store = self.inner.credentials.clone();
        let (owned, access) = (vendor.to_string(), access.to_string());
        let stored = tokio::task::spawn_blocking(move || {
            store.update(|map| {
                if let Some(c) = map.get_mut(&owned) {
                    c.access_token = Some(access);
                    c.expires_at = expires_at;
                    if new_refresh.is_some() {
                        c.refresh_token = new_refresh;
                    }
                }
                Ok(())
            })
        })
        .await
        .unwrap_or_else(|e| Err(anyhow::anyhow!("the credentials write did not finish: {e}")));
        match stored {
            Ok(()) => tracing::info!(vendor, "login renewed"),
            Err(e) => {
                tracing::warn!(vendor, error = %format!("{e:#}"), "cannot store the renewed login")
            }
        }
    }
}

//! The RFC 8628 device authorization grant of `provider.loginWeb{method:"device_code"}`:
//! one request for a device code (answered to the caller), then background polling of the
//! token endpoint until the user approved (`done`), denied or the code expired (`failed`).

use std::future::Future;
use std::time::Duration;

use serde_json::Value;

use super::{oauth_error, oauth_json, token_credential, Endpoints, Started, MAX_LOGIN_WAIT};
use crate::provider::component::Providers;
use snowpea_session_error::{Error, Result};

/// Poll interval when the server names none (RFC 8628 §3.2).
const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
/// Shortest poll interval honoured.
const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Added to the interval on `slow_down` (RFC 8628 §3.5).
const SLOW_DOWN: Duration = Duration::from_secs(5);

/// Asks for a device code; returns what the user needs and the polling task.
pub async fn start(
    providers: Providers,
    vendor: String,
    ep: Endpoints,
) -> Result<(Started, impl Future<Output = ()> + Send + 'static)> {
    let url = ep.device_authorization_url.clone().ok_or_else(|| {
        Error::LoginUnsupported(format!("{vendor} has no device authorization endpoint"))
    })?;
    let client_id = ep.client_id.clone().unwrap_or_default();
    let mut form = vec![("client_id", client_id.clone())];
    if let Some(scope) = &ep.scope {
        form.push(("scope", scope.clone()));
    }
    let answer = oauth_json(providers.inner.http.post(&url).form(&form).send().await).await;
    let body = match answer {
        Ok((status, body)) if (200..300).contains(&status) => body,
        Ok((status, body)) => {
            return Err(Error::Unavailable(format!(
                "the {vendor} device login could not start: {}",
                oauth_error(status, &body)
            )))
        }
        Err(reason) => {
            return Err(Error::Unavailable(format!(
                "the {vendor} device login could not start: {reason}"
            )))
        }
    };
    let text = |k: &str| body.get(k).and_then(Value::as_str).map(String::from);
    let (Some(device_code), Some(user_code), Some(verification_uri)) = (
        text("device_code"),
        text("user_code"),
        text("verification_uri").or_else(|| text("verification_url")),
    ) else {
        return Err(Error::Unavailable(format!(
            "the {vendor} device login could not start: the answer lacks device_code, user_code or verification_uri"
        )));
    };
    let expires_in = body
        .get("expires_in")
        .and_then(Value::as_u64)
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(900))
        .min(MAX_LOGIN_WAIT);
    let interval = body
        .get("interval")
        .and_then(Value::as_u64)
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_INTERVAL)
        .max(MIN_INTERVAL);
    let started = Started {
        user_code: Some(user_code),
        verification_uri: Some(verification_uri),
        verification_uri_complete: text("verification_uri_complete"),
        expires_in_sec: Some(expires_in.as_secs() as i64),
    };
    let method = ep.method;
    let token_url = ep.token_url.clone().unwrap_or_default();
    let task = async move {
        let outcome = poll(
            &providers,
            &vendor,
            &token_url,
            &client_id,
            &ep,
            &device_code,
            interval,
            expires_in,
        )
        .await;
        providers.finish_login(&vendor, method, outcome).await;
    };
    Ok((started, task))
}

#[allow(clippy::too_many_arguments)]
async fn poll(
    providers: &Providers,
    vendor: &str,
    token_url: &str,
    client_id: &str,
    ep: &Endpoints,
    device_code: &str,
    mut interval: Duration,
    expires_in: Duration,
) -> std::result::Result<crate::provider::credentials::Credential, String> {
    let deadline = tokio::time::Instant::now() + expires_in;
    let mut announced = false;
    loop {
        tokio::time::sleep(interval).await;
        if tokio::time::Instant::now() >= deadline {
            return Err(
                "the code expired before the login was approved; start the login again".into(),
            );
        }
        if !announced {
            providers.progress(
                vendor,
                ep.method,
                "polling",
                Some("waiting for the login to be approved".into()),
                &Started::default(),
            );
            announced = true;
        }
        let mut form = vec![
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:device_code".to_string(),
            ),
            ("device_code", device_code.to_string()),
            ("client_id", client_id.to_string()),
        ];
        if let Some(secret) = &ep.client_secret {
            form.push(("client_secret", secret.clone()));
        }
        let answer = oauth_json(
            providers
                .inner
                .http
                .post(token_url)
                .form(&form)
                .send()
                .await,
        )
        .await;
        match answer {
            Ok((status, body)) if (200..300).contains(&status) => {
                return token_credential(&body, ep.method);
            }
            Ok((status, body)) => match body.get("error").and_then(Value::as_str) {
                Some("authorization_pending") => {}
                Some("slow_down") => interval += SLOW_DOWN,
                Some("access_denied") => return Err("the login was denied".into()),
                Some("expired_token") => {
                    return Err(
                        "the code expired before the login was approved; start the login again"
                            .into(),
                    )
                }
                _ => return Err(oauth_error(status, &body)),
            },
            // A network hiccup while polling: keep polling until the code expires.
            Err(reason) => tracing::warn!(vendor, reason, "device login poll failed; polling on"),
        }
    }
}

//! The browser logins of `provider.loginWeb` (`browser_pkce`, `oauth_pkce`,
//! `google_oauth`): authorization code with PKCE (RFC 7636, S256). The daemon listens on
//! `127.0.0.1:<redirectPort>` for the browser's redirect, answers `verificationUri` = the
//! authorization URL, then in the background takes the first redirect carrying the code
//! (and the matching `state`, where the vendor echoes one), shows the browser a short page
//! and exchanges the code with the verifier.

use std::future::Future;

use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::{oauth_error, oauth_json, token_credential, Endpoints, Exchange, Started, PKCE_WAIT};
use crate::provider::component::Providers;
use crate::provider::credentials::Credential;
use snowpea_session_error::{Error, Result};

/// Longest request head read from the browser.
const MAX_HEAD: usize = 16 * 1024;
/// Time a browser connection gets to send its request.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A PKCE verifier (RFC 7636 §4.1: 43–128 unreserved characters): 64 hex characters from
/// two random UUIDs (244 random bits).
pub(crate) fn verifier() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The S256 challenge of `verifier`: base64url without padding of its SHA-256.
pub(crate) fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Binds the redirect listener and builds the authorization URL; returns what the user
/// opens and the task that waits for the redirect and exchanges the code.
pub async fn start(
    providers: Providers,
    vendor: String,
    ep: Endpoints,
) -> Result<(Started, impl Future<Output = ()> + Send + 'static)> {
    let auth_url = ep.authorization_url.clone().ok_or_else(|| {
        Error::LoginUnsupported(format!("{vendor} has no authorization endpoint"))
    })?;
    let listener = TcpListener::bind(("127.0.0.1", ep.redirect_port))
        .await
        .map_err(|e| {
            Error::Unavailable(format!(
                "cannot listen on 127.0.0.1:{} for the login redirect: {e}",
                ep.redirect_port
            ))
        })?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::Unavailable(format!("login redirect listener: {e}")))?
        .port();
    let redirect_uri = format!("http://{}:{port}{}", ep.redirect_host, ep.redirect_path);
    let verifier = verifier();
    let state = uuid::Uuid::new_v4().simple().to_string();
    let mut url = reqwest::Url::parse(&auth_url)
        .map_err(|e| Error::Unavailable(format!("{vendor} authorization URL: {e}")))?;
    {
        let mut q = url.query_pairs_mut();
        match ep.exchange {
            Exchange::OpenRouterKey => {
                q.append_pair("callback_url", &redirect_uri);
            }
            Exchange::Standard => {
                q.append_pair("response_type", "code");
                q.append_pair("client_id", ep.client_id.as_deref().unwrap_or_default());
                q.append_pair("redirect_uri", &redirect_uri);
                if let Some(scope) = &ep.scope {
                    q.append_pair("scope", scope);
                }
                q.append_pair("state", &state);
            }
        }
        q.append_pair("code_challenge", &challenge(&verifier));
        q.append_pair("code_challenge_method", "S256");
    }
    let started = Started {
        user_code: None,
        verification_uri: Some(url.to_string()),
        verification_uri_complete: Some(url.to_string()),
        expires_in_sec: Some(PKCE_WAIT.as_secs() as i64),
    };
    let method = ep.method;
    let task = async move {
        let outcome = async {
            let code = tokio::time::timeout(
                PKCE_WAIT,
                wait_for_code(
                    &listener,
                    ep.redirect_path,
                    (ep.exchange == Exchange::Standard).then_some(state.as_str()),
                ),
            )
            .await
            .map_err(|_| {
                "nobody completed the login in the browser in time; start it again".to_string()
            })??;
            drop(listener);
            providers.progress(
                &vendor,
                method,
                "polling",
                Some("exchanging the authorization code".into()),
                &Started::default(),
            );
            exchange(&providers, &ep, &code, &verifier, &redirect_uri).await
        }
        .await;
        providers.finish_login(&vendor, method, outcome).await;
    };
    Ok((started, task))
}

/// Serves the loopback listener until a request to `path` brings a `code` (and `state`
/// when one is expected). A redirect with `error` ends the login.
async fn wait_for_code(
    listener: &TcpListener,
    path: &str,
    state: Option<&str>,
) -> std::result::Result<String, String> {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            continue;
        };
        let Ok(Some(target)) = tokio::time::timeout(READ_TIMEOUT, read_target(&mut sock)).await
        else {
            continue;
        };
        let Ok(url) = reqwest::Url::parse(&format!("http://localhost{target}")) else {
            let _ = respond(&mut sock, 400, "Bad request.").await;
            continue;
        };
        if url.path() != path {
            let _ = respond(&mut sock, 404, "Not found.").await;
            continue;
        }
        let param = |k: &str| {
            url.query_pairs()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.into_owned())
        };
        if let Some(err) = param("error") {
            let _ = respond(
                &mut sock,
                200,
                "The login was not completed. You can close this tab.",
            )
            .await;
            let detail = param("error_description").unwrap_or_default();
            return Err(
                format!("the authorization server refused the login: {err} {detail}")
                    .trim()
                    .to_string(),
            );
        }
        if state.is_some() && param("state").as_deref() != state {
            let _ = respond(
                &mut sock,
                400,
                "This login link is stale; start the login again.",
            )
            .await;
            continue;
        }
        match param("code").filter(|c| !c.is_empty()) {
            Some(code) => {
                let _ = respond(
                    &mut sock,
                    200,
                    "Snowpea is logged in. You can close this tab.",
                )
                .await;
                return Ok(code);
            }
            None => {
                let _ = respond(&mut sock, 400, "The redirect carries no code.").await;
            }
        }
    }
}

/// The request target of a `GET <target> HTTP/1.1` head.
async fn read_target(sock: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_HEAD {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.lines().next()?.split_whitespace();
    (parts.next()? == "GET").then_some(())?;
    parts
        .next()
        .filter(|t| t.starts_with('/'))
        .map(String::from)
}

async fn respond(sock: &mut tokio::net::TcpStream, status: u16, text: &str) -> std::io::Result<()> {
    let body =
        format!("<!doctype html><meta charset=\"utf-8\"><title>Snowpea login</title><p>{text}</p>");
    let reason = if status == 200 {
        "OK"
    } else if status == 404 {
        "Not Found"
    } else {
        "Bad Request"
    };
    let msg = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(msg.as_bytes()).await?;
    sock.shutdown().await
}

async fn exchange(
    providers: &Providers,
    ep: &Endpoints,
    code: &str,
    verifier: &str,
    redirect_uri: &str,
) -> std::result::Result<Credential, String> {
    let token_url = ep.token_url.as_deref().ok_or("no token endpoint")?;
    let http = &providers.inner.http;
    let sent = match ep.exchange {
        Exchange::OpenRouterKey => http
            .post(token_url)
            .json(
                &json!({"code": code, "code_verifier": verifier, "code_challenge_method": "S256"}),
            )
            .send()
            .await,
        Exchange::Standard => {
            let mut form = vec![
                ("grant_type", "authorization_code".to_string()),
                ("code", code.to_string()),
                ("redirect_uri", redirect_uri.to_string()),
                ("client_id", ep.client_id.clone().unwrap_or_default()),
                ("code_verifier", verifier.to_string()),
            ];
            if let Some(secret) = &ep.client_secret {
                form.push(("client_secret", secret.clone()));
            }
            http.post(token_url).form(&form).send().await
        }
    };
    let (status, body) = oauth_json(sent).await?;
    if !(200..300).contains(&status) {
        return Err(oauth_error(status, &body));
    }
    match ep.exchange {
        Exchange::Standard => token_credential(&body, ep.method),
        Exchange::OpenRouterKey => {
            let key = body
                .get("key")
                .and_then(Value::as_str)
                .filter(|k| !k.is_empty())
                .ok_or("the answer has no key")?;
            Ok(Credential {
                api_key: Some(key.to_string()),
                auth_method: Some("api_key".into()),
                login_method: Some(ep.method.to_string()),
                ..Default::default()
            })
        }
    }
}

//! One HTTP call to a platform API with rate limits honoured: a 429 waits the platform's
//! `retry-after` (header, or `parameters.retry_after` (Telegram) / `retry_after` (Discord,
//! Slack) in the body; at most [`MAX_RETRY_AFTER`]) and retries, at most [`MAX_429_RETRIES`]
//! times. Bodies are decoded lossily (invalid UTF-8 never fails a call). URLs carrying a
//! token are never logged.

use std::time::Duration;

use serde_json::Value;

/// Longest 429 wait honoured, per attempt.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// How many 429s in a row one call waits out before failing.
pub const MAX_429_RETRIES: u32 = 5;

/// Why a platform call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The credential was refused (401/403): the connection stays down until rebound.
    #[error("{0}: the platform refused the credential (HTTP {1})")]
    Unauthorized(&'static str, u16),
    /// Network failure, timeout, 5xx or repeated 429: try again later.
    #[error("{0}: {1}")]
    Transient(&'static str, String),
    /// The platform refused the request (other 4xx, `ok: false`).
    #[error("{0}: {1}")]
    Refused(&'static str, String),
}

/// The retry-after of a 429, from the header or the body.
pub fn retry_after(headers: &reqwest::header::HeaderMap, body: &Value) -> Duration {
    let header = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok());
    let body = body
        .get("parameters")
        .and_then(|p| p.get("retry_after"))
        .or_else(|| body.get("retry_after"))
        .and_then(Value::as_f64);
    let secs = header
        .or(body)
        .unwrap_or(1.0)
        .clamp(0.0, MAX_RETRY_AFTER.as_secs_f64());
    Duration::from_secs_f64(secs)
}

/// Sends the request `build` makes (again after each 429) and returns the JSON body of a
/// 2xx answer (`Value::Null` for an empty one). `what` names the call in errors (never the
/// URL: it may hold a token).
pub async fn call(
    what: &'static str,
    build: impl Fn() -> reqwest::RequestBuilder,
) -> Result<Value, CallError> {
    let mut limited = 0;
    loop {
        let resp = build()
            .send()
            .await
            .map_err(|e| CallError::Transient(what, chain(e)))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| CallError::Transient(what, chain(e)))?;
        let body = parse_lossy(&bytes);
        if status.as_u16() == 429 {
            limited += 1;
            if limited > MAX_429_RETRIES {
                return Err(CallError::Transient(what, "rate limited (429)".into()));
            }
            let wait = retry_after(&headers, &body);
            tracing::info!(
                call = what,
                wait_ms = wait.as_millis() as u64,
                "rate limited"
            );
            tokio::time::sleep(wait).await;
            continue;
        }
        if status.as_u16() == 401 || status.as_u16() == 403 {
            return Err(CallError::Unauthorized(what, status.as_u16()));
        }
        if status.is_server_error() {
            return Err(CallError::Transient(what, format!("HTTP {status}")));
        }
        if !status.is_success() {
            return Err(CallError::Refused(what, describe(status.as_u16(), &body)));
        }
        return Ok(body);
    }
}

/// A reqwest error with its causes ("error sending request: … Connection refused"), without
/// the URL (it may hold a token).
fn chain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut out = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out.push_str(": ");
            out.push_str(&s_text);
        }
        source = s.source();
    }
    out.chars().take(300).collect()
}

/// A JSON body from bytes that may not be UTF-8 (replaced) or not JSON (`Value::Null`).
pub fn parse_lossy(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(_) => serde_json::from_str(&String::from_utf8_lossy(bytes)).unwrap_or(Value::Null),
    }
}

fn describe(status: u16, body: &Value) -> String {
    let msg = body
        .get("description")
        .or_else(|| body.get("message"))
        .or_else(|| body.get("error"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let msg: String = msg.chars().take(200).collect();
    format!("HTTP {status} {msg}").trim().to_owned()
}

/// A reqwest client for platform calls: `timeout` per request, no proxies from the
/// environment beyond reqwest's defaults, rustls.
pub fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("snowpea-svc-chat/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("reqwest client builds")
}

/// Downloads `url` (with `auth` as the Authorization header, when given), failing past `cap`
/// bytes without reading further.
pub async fn download(
    client: &reqwest::Client,
    url: &str,
    auth: Option<&str>,
    cap: u64,
) -> anyhow::Result<Vec<u8>> {
    let mut req = client.get(url);
    if let Some(a) = auth {
        req = req.header(reqwest::header::AUTHORIZATION, a);
    }
    let mut resp = req
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("download failed: {}", e.without_url()))?;
    if !resp.status().is_success() {
        anyhow::bail!("download failed: HTTP {}", resp.status());
    }
    if resp.content_length().is_some_and(|l| l > cap) {
        anyhow::bail!("larger than {cap} bytes");
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| anyhow::anyhow!("download failed: {}", e.without_url()))?
    {
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > cap {
            anyhow::bail!("larger than {cap} bytes");
        }
    }
    Ok(bytes)
}

/// The JSON keys of one platform's file objects (Discord `attachments[]`, Slack `files[]`).
#[derive(Debug, Clone, Copy)]
pub struct FileKeys {
    /// The file name (`"file"` when missing).
    pub name: &'static str,
    /// The download URL.
    pub url: &'static str,
    /// The announced size in bytes, when the platform gives one.
    pub size: &'static str,
    /// The MIME type.
    pub mime: &'static str,
    /// Why a file whose URL is not trusted is left out.
    pub untrusted: &'static str,
}

/// Downloads the first 10 `files` of an inbound message: each at most `cap` bytes, with
/// `auth` as the Authorization header, only from URLs `trusted` accepts. Answers the
/// attachments and one `"<name>: <why>"` line per file left out (too large, untrusted URL,
/// a failed download); a file without a URL is ignored.
pub async fn attachments(
    client: &reqwest::Client,
    files: Option<&serde_json::Value>,
    keys: FileKeys,
    cap: u64,
    auth: Option<&str>,
    trusted: impl Fn(&str) -> bool,
) -> (Vec<super::Attachment>, Vec<String>) {
    use serde_json::Value;
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for f in files
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(10)
    {
        let name = f
            .get(keys.name)
            .and_then(Value::as_str)
            .unwrap_or("file")
            .to_owned();
        let Some(url) = f.get(keys.url).and_then(Value::as_str) else {
            continue;
        };
        if f.get(keys.size)
            .and_then(Value::as_u64)
            .is_some_and(|s| s > cap)
        {
            skipped.push(format!("{name}: larger than {cap} bytes"));
            continue;
        }
        if !trusted(url) {
            skipped.push(format!("{name}: {}", keys.untrusted));
            continue;
        }
        match download(client, url, auth, cap).await {
            Ok(bytes) => out.push(super::Attachment {
                name,
                mime: f.get(keys.mime).and_then(Value::as_str).map(str::to_owned),
                bytes,
            }),
            Err(e) => skipped.push(format!("{name}: {e}")),
        }
    }
    (out, skipped)
}

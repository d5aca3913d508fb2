//! HTTP plumbing shared by the remote providers ([`super::openai`], [`super::anthropic`]):
//! the HTTP client and per-provider state ([`Remote`]), the retry policy for 429 / 5xx
//! answers, vendor error-message extraction, API-key redaction, the SSE event stream over
//! a `reqwest` response and the streaming call that feeds it to a vendor's decoder.

use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use serde_json::Value;

use super::config::ProviderConfig;
use super::interface::{EventStream, ProviderError, StreamEvent};

/// Connect timeout of provider HTTP clients.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest silence tolerated inside a streaming answer.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(300);

/// Builds the HTTP client the remote providers use (rustls, connect/read timeouts).
pub(crate) fn http_client() -> Result<reqwest::Client, ProviderError> {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .user_agent(concat!("snowpea/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ProviderError::Config(format!("cannot build HTTP client: {e}")))
}

/// What a remote provider holds: its configuration, retry policy and HTTP client.
pub(crate) struct Remote {
    pub(crate) config: ProviderConfig,
    pub(crate) retry: RetryPolicy,
    client: reqwest::Client,
}

impl Remote {
    /// The state of a provider for `config` retrying per `retry`.
    pub(crate) fn new(config: ProviderConfig, retry: RetryPolicy) -> Result<Self, ProviderError> {
        Ok(Remote {
            config,
            retry,
            client: http_client()?,
        })
    }

    /// `Debug` of the provider named `name` (ProviderConfig's Debug masks the key).
    pub(crate) fn fmt_debug(
        &self,
        name: &str,
        f: &mut std::fmt::Formatter<'_>,
    ) -> std::fmt::Result {
        f.debug_struct(name)
            .field("config", &self.config)
            .field("retry", &self.retry)
            .finish()
    }
}

/// A vendor's decoder of SSE events into [`StreamEvent`]s.
pub(crate) trait SseDecoder: Send + 'static {
    /// The items one SSE event yields; an `Err` ends the call.
    fn on_sse(&mut self, event: &Event) -> Vec<Result<StreamEvent, ProviderError>>;
    /// Whether the vendor marked the answer complete (no further event is read).
    fn done(&self) -> bool;
    /// The items owed at the end of the stream (usage, `Done`, or an error).
    fn finish(self) -> Vec<Result<StreamEvent, ProviderError>>;
}

/// A streaming call: POSTs `body` as JSON to `url` with `Accept: text/event-stream`, the
/// vendor's headers added by `headers` (given the API key, if any), retrying per the
/// policy; then feeds the SSE events to `decoder` until an error, its end mark or the end
/// of the body.
pub(crate) fn stream_sse<D: SseDecoder>(
    remote: Arc<Remote>,
    url: String,
    body: Value,
    headers: impl Fn(reqwest::RequestBuilder, Option<&str>) -> reqwest::RequestBuilder
        + Send
        + Sync
        + 'static,
    mut decoder: D,
) -> EventStream {
    Box::pin(async_stream::stream! {
        let cfg = &remote.config;
        let key = cfg.api_key.as_deref();
        let sent = send_with_retry(&cfg.vendor, key, &remote.retry, || {
            let rb = remote
                .client
                .post(&url)
                .header(reqwest::header::ACCEPT, "text/event-stream")
                .json(&body);
            headers(rb, key)
        })
        .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                yield Err(e);
                return;
            }
        };
        let mut events = std::pin::pin!(sse_events(cfg.vendor.clone(), cfg.api_key.clone(), resp));
        while let Some(ev) = events.next().await {
            let out = match ev {
                Ok(ev) => decoder.on_sse(&ev),
                Err(e) => vec![Err(e)],
            };
            for item in out {
                let failed = item.is_err();
                yield item;
                if failed {
                    return;
                }
            }
            if decoder.done() {
                break;
            }
        }
        for item in decoder.finish() {
            yield item;
        }
    })
}

/// How a remote provider retries a call the vendor refused with 429 (rate limited),
/// 529 (overloaded) or 5xx before any byte of the body was streamed, and connection
/// failures. Errors after the stream started are never retried (the turn already showed
/// part of the answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = no retry).
    pub max_retries: u32,
    /// Wait before the first retry; doubles on each further retry.
    pub initial_backoff: Duration,
    /// Upper bound of any single wait, also of a vendor's `Retry-After`.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// 3 retries, 0.5 s doubling (0.5, 1, 2 s), waits capped at 20 s.
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (0-based): the vendor's `Retry-After` when
    /// given, else exponential backoff; both capped at `max_backoff`.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let backoff = self
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(retry.min(30)));
        retry_after.unwrap_or(backoff).min(self.max_backoff)
    }
}

/// Whether an HTTP status is worth retrying: 408, 409 (OpenAI's lock timeout), 429, 5xx
/// (including Anthropic's 529 "overloaded").
pub(crate) fn is_retryable(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

/// Parses a `Retry-After` header given in (possibly fractional) seconds. HTTP dates are
/// ignored (the exponential backoff applies).
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let raw = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    let secs: f64 = raw.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// Replaces every occurrence of the API key in `text` (vendors sometimes echo it).
pub(crate) fn redact(text: &str, api_key: Option<&str>) -> String {
    match api_key {
        Some(key) if key.len() >= 4 && text.contains(key) => text.replace(key, "***"),
        _ => text.to_string(),
    }
}

/// The human message of a vendor error body: `{"error":{"message":…}}` (OpenAI,
/// Anthropic, OpenRouter, vLLM), `{"error":"…"}` (Ollama) or `{"message":…}`; else the
/// trimmed body, cut to 1000 characters.
pub(crate) fn error_message(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        let msg = v
            .pointer("/error/message")
            .and_then(Value::as_str)
            .or_else(|| v.get("error").and_then(Value::as_str))
            .or_else(|| v.get("message").and_then(Value::as_str))
            .or_else(|| v.get("detail").and_then(Value::as_str));
        if let Some(msg) = msg {
            return msg.trim().to_string();
        }
    }
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return "(empty response body)".to_string();
    }
    trimmed.chars().take(1000).collect()
}

/// Sends the request built by `build` (called once per attempt), retrying per `policy`.
/// Returns the successful response with its body not yet read. A non-retryable status,
/// or a retryable one after the last retry, becomes [`ProviderError::Http`] with the
/// vendor's message (API key redacted).
pub(crate) async fn send_with_retry(
    vendor: &str,
    api_key: Option<&str>,
    policy: &RetryPolicy,
    build: impl Fn() -> reqwest::RequestBuilder,
) -> Result<reqwest::Response, ProviderError> {
    let mut retry = 0u32;
    loop {
        match build().send().await {
            Ok(resp) if resp.status().is_success() => return Ok(resp),
            Ok(resp) => {
                let status = resp.status().as_u16();
                if is_retryable(status) && retry < policy.max_retries {
                    let wait = policy.delay(retry, retry_after(resp.headers()));
                    tracing::warn!(
                        vendor,
                        status,
                        retry = retry + 1,
                        wait_ms = wait.as_millis() as u64,
                        "provider call refused; retrying"
                    );
                    drop(resp);
                    tokio::time::sleep(wait).await;
                    retry += 1;
                    continue;
                }
                let body = resp.text().await.unwrap_or_default();
                return Err(ProviderError::Http {
                    vendor: vendor.to_string(),
                    status,
                    message: redact(&error_message(&body), api_key),
                });
            }
            Err(err) if (err.is_connect() || err.is_timeout()) && retry < policy.max_retries => {
                let wait = policy.delay(retry, None);
                tracing::warn!(
                    vendor,
                    retry = retry + 1,
                    wait_ms = wait.as_millis() as u64,
                    "provider connection failed; retrying"
                );
                tokio::time::sleep(wait).await;
                retry += 1;
            }
            Err(err) => return Err(network_error(vendor, api_key, &err)),
        }
    }
}

/// A [`ProviderError::Network`] from a reqwest error, without URL query or key.
pub(crate) fn network_error(
    vendor: &str,
    api_key: Option<&str>,
    err: &reqwest::Error,
) -> ProviderError {
    // Walk the source chain: reqwest's own Display is often just "error sending request".
    let mut message = describe(err);
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    ProviderError::Network {
        vendor: vendor.to_string(),
        message: redact(&message, api_key),
    }
}

/// A short description of a reqwest error: its kind and the server's origin (never the
/// path or query).
fn describe(err: &reqwest::Error) -> String {
    {
        let mut desc = if err.is_timeout() {
            "timed out".to_string()
        } else if err.is_connect() {
            "connection failed".to_string()
        } else if err.is_body() || err.is_decode() {
            "response body broke off".to_string()
        } else {
            "request failed".to_string()
        };
        if let Some(url) = err.url() {
            desc.push_str(&format!(
                " ({}://{}{})",
                url.scheme(),
                url.host_str().unwrap_or(""),
                url.port().map(|p| format!(":{p}")).unwrap_or_default()
            ));
        }
        desc
    }
}

/// The SSE events of a streaming response body. Transport errors become
/// [`ProviderError::Network`], malformed SSE [`ProviderError::Protocol`].
pub(crate) fn sse_events(
    vendor: String,
    api_key: Option<String>,
    resp: reqwest::Response,
) -> impl Stream<Item = Result<Event, ProviderError>> + Send {
    resp.bytes_stream().eventsource().map(move |item| {
        item.map_err(|e| match e {
            EventStreamError::Transport(err) => network_error(&vendor, api_key.as_deref(), &err),
            EventStreamError::Utf8(err) => ProviderError::Protocol {
                vendor: vendor.clone(),
                message: format!("invalid UTF-8 in stream: {err}"),
            },
            EventStreamError::Parser(err) => ProviderError::Protocol {
                vendor: vendor.clone(),
                message: format!("invalid SSE: {err}"),
            },
        })
    })
}

/// The model of a call: the request's, else the configured default.
pub(crate) fn model<'a>(
    config: &'a ProviderConfig,
    request: &'a super::interface::ModelRequest,
) -> &'a str {
    if request.model.is_empty() {
        config.model.as_str()
    } else {
        request.model.as_str()
    }
}

/// Rough token estimate (≈ 4 characters per token), used when a vendor reports no usage.
pub(crate) fn estimate_tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

/// Character count of a request's input (system prompt, messages, tool calls, tools).
pub(crate) fn request_chars(request: &super::interface::ModelRequest) -> usize {
    let mut n = request.system.chars().count();
    for m in &request.messages {
        n += m.content.chars().count();
        // Images are priced by pixels, not by their base64 length.
        n += m.images.len() * 4 * super::interface::ToolImage::ESTIMATED_TOKENS as usize;
        for c in &m.tool_calls {
            n += c.name.len() + c.arguments.to_string().len();
        }
    }
    for t in &request.tools {
        n += t.name.len() + t.description.chars().count() + t.parameters.to_string().len();
    }
    n
}

/// Parses a complete tool-call argument string. Empty → `{}`; a JSON object → itself;
/// anything else (invalid JSON, or JSON that is not an object) → `{"_raw": "<text>"}` so
/// the tool's argument validation reports the problem to the model instead of the call
/// vanishing.
pub(crate) fn parse_arguments(raw: &str) -> Value {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Value::Object(Default::default());
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v @ Value::Object(_)) => v,
        _ => serde_json::json!({ "_raw": raw }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = RetryPolicy {
            max_retries: 5,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(3),
        };
        assert_eq!(p.delay(0, None), Duration::from_millis(500));
        assert_eq!(p.delay(1, None), Duration::from_secs(1));
        assert_eq!(p.delay(2, None), Duration::from_secs(2));
        assert_eq!(p.delay(3, None), Duration::from_secs(3));
        assert_eq!(
            p.delay(1, Some(Duration::from_millis(1500))),
            Duration::from_millis(1500)
        );
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(60))),
            Duration::from_secs(3)
        );
    }

    #[test]
    fn retry_after_seconds_parsed() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert(reqwest::header::RETRY_AFTER, "0.25".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        h.insert(
            reqwest::header::RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn error_message_shapes() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad model","type":"invalid_request_error"}}"#),
            "bad model"
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "Overloaded"
        );
        assert_eq!(
            error_message(r#"{"error":"model 'x' not found"}"#),
            "model 'x' not found"
        );
        assert_eq!(error_message("  upstream exploded \n"), "upstream exploded");
        assert_eq!(error_message(""), "(empty response body)");
    }

    #[test]
    fn redacts_key() {
        assert_eq!(
            redact("bad key sk-secret-123 given", Some("sk-secret-123")),
            "bad key *** given"
        );
        assert_eq!(
            redact("nothing here", Some("sk-secret-123")),
            "nothing here"
        );
        assert_eq!(redact("x", None), "x");
    }

    #[test]
    fn arguments_parsing() {
        assert_eq!(parse_arguments(""), serde_json::json!({}));
        assert_eq!(
            parse_arguments(r#"{"path":"a"}"#),
            serde_json::json!({"path":"a"})
        );
        assert_eq!(
            parse_arguments(r#"{"path":"a""#),
            serde_json::json!({"_raw":"{\"path\":\"a\""})
        );
        assert_eq!(parse_arguments("[1]"), serde_json::json!({"_raw":"[1]"}));
    }

    #[test]
    fn retryable_statuses() {
        for s in [408, 409, 429, 500, 502, 503, 529] {
            assert!(is_retryable(s), "{s}");
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(!is_retryable(s), "{s}");
        }
    }
}

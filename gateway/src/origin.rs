//! Who may talk to the gateway (DESIGN.md §4).
//!
//! * `Host` must name the loopback interface (`127.0.0.1`, `localhost`, `[::1]`, any
//!   port) on every request: a page that rebinds its own DNS name to 127.0.0.1
//!   (DNS rebinding) still sends its own name as Host and is refused.
//! * A WebSocket upgrade that carries an `Origin` (browsers always do, other clients do
//!   not) must name an origin listed in settings `gateway.allowedOrigins`; the settings
//!   file is re-read on each upgrade, so a change needs no restart. `"*"` allows any.

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use snowpea_common::home::Home;

/// True when a Host header value names the loopback interface.
pub fn host_allowed(host: &str) -> bool {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [::1] or [::1]:port
        match rest.split_once(']') {
            Some((ip, tail)) if tail.is_empty() || valid_port(tail) => ip,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if valid_port(&format!(":{port}")) => name,
            Some(_) => return false,
            None => host,
        }
    };
    name.eq_ignore_ascii_case("localhost") || name == "127.0.0.1" || name == "::1"
}

fn valid_port(tail: &str) -> bool {
    tail.strip_prefix(':')
        .is_some_and(|p| !p.is_empty() && p.parse::<u16>().is_ok())
}

/// Middleware: 403 for a request whose Host is not loopback.
pub async fn host_guard(req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    match host {
        Some(h) if host_allowed(&h) => next.run(req).await,
        _ => {
            tracing::debug!(host = ?host, "refused: Host is not loopback");
            (
                StatusCode::FORBIDDEN,
                "forbidden: Host must be 127.0.0.1, localhost or [::1]\n",
            )
                .into_response()
        }
    }
}

/// Checks a WebSocket upgrade's `Origin` against settings `gateway.allowedOrigins`.
/// `Err` carries the reason for the 403.
pub fn check_origin(home: &Home, origin: Option<&HeaderValue>) -> Result<(), String> {
    let Some(origin) = origin else {
        return Ok(());
    };
    let Ok(origin) = origin.to_str() else {
        return Err("forbidden: Origin is not valid text".into());
    };
    let settings = match snowpea_common::settings::load_file(&home.settings_path()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "settings unreadable; refusing browser origins");
            serde_json::Value::Null
        }
    };
    let allowed = snowpea_common::settings::get(&settings, "gateway.allowedOrigins")
        .and_then(|v| v.as_array())
        .map(|list| {
            list.iter()
                .filter_map(|v| v.as_str())
                .any(|a| a == "*" || normalize(a) == normalize(origin))
        })
        .unwrap_or(false);
    if allowed {
        Ok(())
    } else {
        tracing::debug!(%origin, "refused: origin not allowed");
        Err(format!(
            "forbidden: origin {origin} is not allowed; add it to gateway.allowedOrigins in settings.json\n"
        ))
    }
}

/// Origins compare case-insensitively and without a trailing slash.
fn normalize(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_pass_others_do_not() {
        for ok in [
            "127.0.0.1",
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]",
            "[::1]:9",
        ] {
            assert!(host_allowed(ok), "{ok}");
        }
        for bad in [
            "evil.com",
            "evil.com:80",
            "127.0.0.1.evil.com",
            "localhost.evil.com",
            "[::2]:1",
            "127.0.0.1:x",
            "",
            "0.0.0.0",
        ] {
            assert!(!host_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn origins_come_from_settings() {
        let t = tempfile::tempdir().unwrap();
        let home = Home::new(t.path());
        let o = HeaderValue::from_static("http://localhost:5173");
        assert!(
            check_origin(&home, None).is_ok(),
            "no Origin: not a browser"
        );
        assert!(
            check_origin(&home, Some(&o)).is_err(),
            "no settings: refused"
        );
        std::fs::write(
            home.settings_path(),
            r#"{"gateway":{"allowedOrigins":["HTTP://localhost:5173/"]}}"#,
        )
        .unwrap();
        assert!(check_origin(&home, Some(&o)).is_ok());
        let other = HeaderValue::from_static("https://evil.example");
        assert!(check_origin(&home, Some(&other))
            .unwrap_err()
            .contains("evil.example"));
    }
}

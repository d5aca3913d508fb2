//! `system.checkUpdate{force}`: is a strictly newer `snowpea` published?
//!
//! The source is the crates.io sparse index file of the package
//! (`https://index.crates.io/sn/ow/snowpea`, one JSON object per published version with
//! `vers` and `yanked`), or the URL in the setting `updates.indexUrl` (same format; tests
//! point it at a local server) or in `SNOWPEA_UPDATE_INDEX_URL`. Yanked versions are ignored, and so are pre-releases unless
//! the running version is one. The answer's `channel` is `"pypi"`: the spec's name for
//! "the package registry" (here crates.io), as opposed to `"git"` tags.
//!
//! A successful answer is cached for 24 h in `$SNOWPEA_HOME/update-check.json` (0600) and
//! reused (`cached: true`) unless `force`, the running version or the index URL changed.
//! Nothing here is an RPC error: an unreachable or unreadable index answers
//! `{available: false, latest: current, error}` (and is not cached).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use snowpea_common::home::Home;
use snowpea_proto::system::v1::SystemCheckUpdateResult;

/// The crates.io sparse index file of the `snowpea` package.
pub const DEFAULT_INDEX: &str = "https://index.crates.io/sn/ow/snowpea";
/// How long a successful check is reused.
pub const CACHE_FOR: Duration = Duration::from_secs(24 * 3600);
/// Longest the index request may take.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Largest index file read.
const BODY_MAX: usize = 8 * 1024 * 1024;
const CHANNEL: &str = "pypi";

/// `$SNOWPEA_HOME/update-check.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Cached {
    checked_at: String,
    current: String,
    latest: String,
    index_url: String,
    release_url: Option<String>,
}

fn cache_path(home: &Home) -> std::path::PathBuf {
    home.root().join("update-check.json")
}

/// Environment variable naming the index URL when the settings do not (the suite harness
/// points it at a closed local port so no test asks the real registry).
pub const INDEX_ENV: &str = "SNOWPEA_UPDATE_INDEX_URL";

/// The index URL: the setting `updates.indexUrl`, else [`INDEX_ENV`], else
/// [`DEFAULT_INDEX`].
pub fn index_url(settings: &Value) -> String {
    let nonempty = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
    settings
        .pointer("/updates/indexUrl")
        .and_then(Value::as_str)
        .and_then(nonempty)
        .or_else(|| std::env::var(INDEX_ENV).ok().as_deref().and_then(nonempty))
        .unwrap_or_else(|| DEFAULT_INDEX.to_owned())
}

/// Answers `system.checkUpdate` for the running version `current`.
pub async fn check(home: &Home, current: &str, force: bool) -> SystemCheckUpdateResult {
    let settings = snowpea_common::settings::load_effective(home, None).unwrap_or(Value::Null);
    let url = index_url(&settings);
    if !force {
        if let Some(c) = read_cache(home, current, &url) {
            return answer(current, &c.latest, c.checked_at, true, None);
        }
    }
    let now = snowpea_common::time::now_iso();
    match newest(&url, current).await {
        Ok(latest) => {
            let c = Cached {
                checked_at: now.clone(),
                current: current.to_owned(),
                latest: latest.clone(),
                index_url: url,
                release_url: None,
            };
            if let Ok(bytes) = serde_json::to_vec_pretty(&c) {
                if let Err(e) = snowpea_common::home::write_private(&cache_path(home), &bytes) {
                    tracing::warn!(error = %e, "cannot write update-check.json");
                }
            }
            answer(current, &latest, now, false, None)
        }
        Err(e) => answer(current, current, now, false, Some(e)),
    }
}

fn answer(
    current: &str,
    latest: &str,
    checked_at: String,
    cached: bool,
    error: Option<String>,
) -> SystemCheckUpdateResult {
    let available = error.is_none() && newer(latest, current);
    SystemCheckUpdateResult {
        available,
        cached,
        channel: CHANNEL.into(),
        checked_at,
        current: current.to_owned(),
        release_url: (error.is_none() && latest != current)
            .then(|| format!("https://crates.io/crates/snowpea/{latest}")),
        error,
        latest: latest.to_owned(),
        source: format!("snowpea@{latest}"),
    }
}

/// True when `latest` is a strictly greater semver than `current`.
pub fn newer(latest: &str, current: &str) -> bool {
    match (
        semver::Version::parse(latest),
        semver::Version::parse(current),
    ) {
        (Ok(l), Ok(c)) => l > c,
        _ => false,
    }
}

fn read_cache(home: &Home, current: &str, url: &str) -> Option<Cached> {
    let bytes = std::fs::read(cache_path(home)).ok()?;
    let c: Cached = serde_json::from_slice(&bytes).ok()?;
    let at: jiff::Timestamp = c.checked_at.parse().ok()?;
    let age = jiff::Timestamp::now().duration_since(at);
    let fresh = !age.is_negative() && age.unsigned_abs() < CACHE_FOR;
    (fresh && c.current == current && c.index_url == url).then_some(c)
}

/// The newest usable version in the index at `url`.
async fn newest(url: &str, current: &str) -> Result<String, String> {
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .connect_timeout(TIMEOUT)
        .user_agent(concat!("snowpea/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("http client: {e}"))?;
    let mut response = client.get(url).send().await.map_err(|e| {
        if e.is_timeout() {
            format!(
                "the release index did not answer within {}s",
                TIMEOUT.as_secs()
            )
        } else {
            format!("cannot reach the release index: {}", e.without_url())
        }
    })?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        return Err("no published release of snowpea in the index".into());
    }
    if !status.is_success() {
        return Err(format!(
            "the release index answered HTTP {}",
            status.as_u16()
        ));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("reading the release index: {}", e.without_url()))?
    {
        if body.len() + chunk.len() > BODY_MAX {
            return Err("the release index is too large".into());
        }
        body.extend_from_slice(&chunk);
    }
    newest_in(&String::from_utf8_lossy(&body), current)
        .ok_or_else(|| "no usable version in the release index".into())
}

/// The newest non-yanked version of a sparse index file (pre-releases only when `current`
/// is one).
pub fn newest_in(index: &str, current: &str) -> Option<String> {
    let pre_ok = semver::Version::parse(current).is_ok_and(|v| !v.pre.is_empty());
    index
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| !v.get("yanked").and_then(Value::as_bool).unwrap_or(false))
        .filter_map(|v| {
            v.get("vers")
                .and_then(Value::as_str)
                .and_then(|s| semver::Version::parse(s).ok())
        })
        .filter(|v| pre_ok || v.pre.is_empty())
        .max()
        .map(|v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_usable_version_and_strictly_newer() {
        let index = [
            r#"{"name":"snowpea","vers":"0.1.0","yanked":false}"#,
            r#"{"name":"snowpea","vers":"0.3.0","yanked":true}"#,
            r#"{"name":"snowpea","vers":"0.2.1","yanked":false}"#,
            r#"{"name":"snowpea","vers":"0.4.0-beta.1","yanked":false}"#,
            "not json",
        ]
        .join("\n");
        assert_eq!(newest_in(&index, "0.1.0").as_deref(), Some("0.2.1"));
        assert_eq!(
            newest_in(&index, "0.2.0-alpha").as_deref(),
            Some("0.4.0-beta.1")
        );
        assert_eq!(newest_in("", "0.1.0"), None);
        assert!(newer("0.2.1", "0.1.0"));
        assert!(!newer("0.1.0", "0.1.0"));
        assert!(!newer("0.0.9", "0.1.0"));
        assert!(!newer("garbage", "0.1.0"));
    }
}

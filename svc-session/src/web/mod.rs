//! The `WebSearch` component: `web.search` (spec "web.search", 1.11.0; issue 15) — the web
//! search provider chain ([`chain`]) for a browser host's own fallback when its search page
//! is blocked, and the chain a `web_search` agent tool uses.
//!
//! * Callable by browser host clients only: the caller must have said `clientKind:
//!   "browser"` and a `clientId` in `system.hello`; anyone else gets `unauthorized`.
//! * `num` is 1–20 (default 10).
//! * Providers are tried in the chain's order (the preferred `search.provider`, then the
//!   fallbacks), each with its own timeout; the first with results answers. When none can,
//!   the answer is `unavailable` with `details.reason` (`no_provider`: nothing usable is
//!   configured; `all_failed`: every provider failed) and `details.attempts`
//!   (`[{provider, error}]`).
//! * Results are untrusted web content: titles and snippets are reduced to plain text (tags
//!   and control characters removed, entities decoded, lengths capped) and URLs must be
//!   http(s); nothing from them is ever interpreted by the daemon.

use serde_json::json;
use snowpea_common::context::CallContext;
use snowpea_common::home::Home;
use snowpea_proto::session::v1 as pb;

use snowpea_session_error::{Error, Result};

pub mod chain;
pub mod html;
pub mod providers;

pub use chain::{Attempt, SearchHit, Searched};

/// Results when `num` is not given.
pub const DEFAULT_NUM: i64 = 10;
/// Most results one search returns.
pub const MAX_NUM: i64 = 20;

/// `web.search`, over the settings of the home.
#[derive(Clone)]
pub struct WebSearch {
    home: Home,
    env: crate::app::EnvFn,
}

impl std::fmt::Debug for WebSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSearch")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

impl WebSearch {
    /// The component: settings from `home` (`search.*`), API keys also from `env`.
    pub fn new(home: Home, env: crate::app::EnvFn) -> Self {
        WebSearch { home, env }
    }

    /// `web.search{query, num}` for the caller `ctx`. Errors: `unauthorized` (not a
    /// browser host client), `invalid_params` naming `params.query` (empty) or `params.num`
    /// (outside 1–20), `unavailable` with `details.reason` when no provider answered.
    pub async fn search(
        &self,
        ctx: &CallContext,
        p: pb::WebSearchParams,
    ) -> Result<pb::WebSearchResult> {
        let browser = ctx.client_kind.as_deref() == Some("browser");
        if !browser || ctx.client_id.as_deref().is_none_or(str::is_empty) {
            return Err(Error::Unauthorized(
                "web.search is for browser host clients (system.hello with clientKind \"browser\" and a clientId)".into(),
            ));
        }
        let query = p.query.trim();
        if query.is_empty() {
            return Err(Error::invalid("params.query", "must not be empty"));
        }
        let num = match p.num {
            0 => DEFAULT_NUM,
            n if (1..=MAX_NUM).contains(&n) => n,
            n => {
                return Err(Error::invalid(
                    "params.num",
                    format!("must be between 1 and {MAX_NUM}, got {n}"),
                ))
            }
        };
        let found = self.find(query, num as usize).await?;
        Ok(pb::WebSearchResult {
            provider: found.provider,
            results: found
                .hits
                .into_iter()
                .map(|h| pb::web_search_result::Result {
                    snippet: h.snippet,
                    title: h.title,
                    url: h.url,
                })
                .collect(),
        })
    }

    /// The chain's answer for `query` (at most `num` results): what `web.search` and the
    /// `web_search` agent tool ([`crate::tools::web_search`]) both ask, over the global
    /// `search.*` settings. Errors: `unavailable` with `details.reason` (`no_provider` /
    /// `all_failed`) and `details.attempts` when no provider answered, or when the settings
    /// cannot be read.
    pub async fn find(&self, query: &str, num: usize) -> Result<Searched> {
        let settings = snowpea_common::settings::load_effective(&self.home, None)
            .map_err(|e| Error::Unavailable(format!("cannot read settings: {e:#}")))?;
        let env = self.env.clone();
        let chain = chain::Chain::from_settings(&settings, &|k| env(k));
        match chain.search(query, num).await {
            Ok(found) => Ok(found),
            Err(attempts) => {
                let none = chain.ready.is_empty();
                let reason = if none { "no_provider" } else { "all_failed" };
                let message = if none && attempts.is_empty() {
                    "no web search provider is configured (search.provider)".to_owned()
                } else {
                    format!(
                        "no web search provider answered: {}",
                        attempts
                            .iter()
                            .map(|a| format!("{}: {}", a.provider, a.error))
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                };
                Err(Error::UnavailableWith {
                    message,
                    details: json!({
                        "reason": reason,
                        "attempts": attempts.iter().map(|a| json!({"provider": a.provider, "error": a.error})).collect::<Vec<_>>(),
                    }),
                })
            }
        }
    }
}

#[cfg(test)]
#[path = "web_tests.rs"]
mod tests;

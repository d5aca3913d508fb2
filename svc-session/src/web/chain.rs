//! The web search provider chain (spec "web.search": the `web_search` tool's chain;
//! upstream-behaviour §2): which providers are tried, in which order, with which endpoint,
//! key and timeout, read from settings:
//!
//! | setting | meaning | default |
//! |---|---|---|
//! | `search.provider` | the preferred provider, tried first | `ddgs` |
//! | `search.fallback` | try the fallback order after it | `true` |
//! | `search.timeoutSec` | per-provider timeout, 1–60 s | 8 |
//! | `search.<id>.url` | the provider's endpoint (see [`Kind`]) | the vendor's |
//! | `search.<id>.apiKey` | its key (also the `env` variable of [`known`]) | — |
//! | `search.xai_grok.model` | the Grok model that searches | [`GROK_MODEL`] |
//!
//! Providers: `ddgs`, `searxng`, `brave_free`/`brave`, `tavily`, `exa_free`/`exa`,
//! `firecrawl_selfhost`/`firecrawl`, `keenable_free` (keyless) / `keenable`, `parallel`,
//! `xai_grok`. `parallel_free` (Parallel's keyless MCP server) is not supported: choosing it
//! is reported as an unsupported provider and the fallbacks answer.
//!
//! Fallback order after the preferred one: `ddgs`, `searxng`, `brave_free`, `tavily`,
//! `firecrawl_selfhost`, `firecrawl`. A provider that needs a key or a URL it does not have
//! is skipped (named in the attempts only when it was the preferred one). The first
//! provider with results answers; one that answered with none counts as an answer only when
//! nothing else has results.

use std::time::Duration;

use serde_json::Value;

use super::providers;

/// The wire a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// DuckDuckGo's HTML endpoint (`url` is the full endpoint), keyless.
    Ddgs,
    /// A SearXNG instance's JSON API (`url` is the instance root; `/search` is appended).
    Searxng,
    /// Brave Search API (`url` is the full endpoint; key in `X-Subscription-Token`).
    Brave,
    /// Tavily search API (`url` is the full endpoint; bearer key).
    Tavily,
    /// Exa search API (`url` is the full endpoint; `x-api-key`).
    Exa,
    /// Firecrawl search (`url` is the server root; `/v1/search` is appended; bearer key,
    /// optional when self-hosted).
    Firecrawl,
    /// Keenable search (`url` is the full endpoint: `/v1/search/public` keyless, `/v1/search`
    /// with the key in `X-API-Key`); `POST {"query"}`, answer `results[{title, url, snippet,
    /// description}]`.
    Keenable,
    /// Parallel Search API (`url` is the full endpoint; `x-api-key`); `POST {objective,
    /// search_queries, advanced_settings.max_results}`, answer `results[{url, title,
    /// excerpts[]}]`.
    Parallel,
    /// xAI Grok's server-side web search through the Responses API (`url` is the full
    /// endpoint; bearer key; model `search.xai_grok.model`, default [`GROK_MODEL`]). Grok
    /// answers in prose; the results are its `url_citation` annotations (title and the cited
    /// passage as snippet), else its `citations` URLs.
    XaiGrok,
}

/// The Grok model asked by `xai_grok` when `search.xai_grok.model` is not set.
pub const GROK_MODEL: &str = "grok-4-fast";

/// A provider id of the protocol and how it is reached.
#[derive(Debug, Clone, Copy)]
pub struct Known {
    /// Id, e.g. `brave_free`.
    pub id: &'static str,
    /// Wire.
    pub kind: Kind,
    /// Default endpoint; `None` when the user must give `search.<id>.url`.
    pub url: Option<&'static str>,
    /// Environment variables holding its key; empty when it needs none.
    pub env: &'static [&'static str],
    /// True when a key is required.
    pub needs_key: bool,
}

const KNOWN: &[Known] = &[
    Known {
        id: "ddgs",
        kind: Kind::Ddgs,
        url: Some("https://html.duckduckgo.com/html/"),
        env: &[],
        needs_key: false,
    },
    Known {
        id: "searxng",
        kind: Kind::Searxng,
        url: None,
        env: &[],
        needs_key: false,
    },
    Known {
        id: "brave_free",
        kind: Kind::Brave,
        url: Some("https://api.search.brave.com/res/v1/web/search"),
        env: &["BRAVE_API_KEY", "BRAVE_SEARCH_API_KEY"],
        needs_key: true,
    },
    Known {
        id: "brave",
        kind: Kind::Brave,
        url: Some("https://api.search.brave.com/res/v1/web/search"),
        env: &["BRAVE_API_KEY", "BRAVE_SEARCH_API_KEY"],
        needs_key: true,
    },
    Known {
        id: "tavily",
        kind: Kind::Tavily,
        url: Some("https://api.tavily.com/search"),
        env: &["TAVILY_API_KEY"],
        needs_key: true,
    },
    Known {
        id: "exa_free",
        kind: Kind::Exa,
        url: Some("https://api.exa.ai/search"),
        env: &["EXA_API_KEY"],
        needs_key: true,
    },
    Known {
        id: "exa",
        kind: Kind::Exa,
        url: Some("https://api.exa.ai/search"),
        env: &["EXA_API_KEY"],
        needs_key: true,
    },
    Known {
        id: "firecrawl_selfhost",
        kind: Kind::Firecrawl,
        url: None,
        env: &[],
        needs_key: false,
    },
    Known {
        id: "firecrawl",
        kind: Kind::Firecrawl,
        url: Some("https://api.firecrawl.dev"),
        env: &["FIRECRAWL_API_KEY"],
        needs_key: true,
    },
    Known {
        id: "keenable_free",
        kind: Kind::Keenable,
        url: Some("https://api.keenable.ai/v1/search/public"),
        env: &[],
        needs_key: false,
    },
    Known {
        id: "keenable",
        kind: Kind::Keenable,
        url: Some("https://api.keenable.ai/v1/search"),
        env: &["KEENABLE_API_KEY"],
        needs_key: true,
    },
    Known {
        id: "parallel",
        kind: Kind::Parallel,
        url: Some("https://api.parallel.ai/v1/search"),
        env: &["PARALLEL_API_KEY"],
        needs_key: true,
    },
    Known {
        id: "xai_grok",
        kind: Kind::XaiGrok,
        url: Some("https://api.x.ai/v1/responses"),
        env: &["XAI_API_KEY"],
        needs_key: true,
    },
];

/// The providers tried after the preferred one, in order.
pub const FALLBACK: &[&str] = &[
    "ddgs",
    "searxng",
    "brave_free",
    "tavily",
    "firecrawl_selfhost",
    "firecrawl",
];

/// Per-provider timeout when `search.timeoutSec` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(8);

/// The known provider `id`.
pub fn known(id: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|k| k.id == id)
}

/// One provider ready to ask.
#[derive(Clone)]
pub struct Ready {
    /// Its id.
    pub id: String,
    /// Its wire.
    pub kind: Kind,
    /// Endpoint.
    pub url: String,
    /// Key, when it has one.
    pub key: Option<String>,
    /// Model asked, for a provider that is a model (`xai_grok`: `search.<id>.model`).
    pub model: Option<String>,
}

impl std::fmt::Debug for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ready")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("key", &self.key.as_ref().map(|_| "***"))
            .finish()
    }
}

/// One result, already plain text (see [`super::html::plain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    /// Title.
    pub title: String,
    /// `http(s)` URL.
    pub url: String,
    /// Snippet (may be empty).
    pub snippet: String,
}

/// A provider that could not answer, and why (never contains a key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Provider id.
    pub provider: String,
    /// What went wrong.
    pub error: String,
}

/// A successful search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Searched {
    /// The provider that answered.
    pub provider: String,
    /// Its results, at most the number asked for.
    pub hits: Vec<SearchHit>,
    /// Providers tried before it that failed.
    pub failed: Vec<Attempt>,
}

/// The chain of one search.
#[derive(Debug, Clone)]
pub struct Chain {
    /// Providers to try, in order.
    pub ready: Vec<Ready>,
    /// Providers left out before trying (the preferred one unconfigured or unknown).
    pub skipped: Vec<Attempt>,
    /// Per-provider timeout.
    pub timeout: Duration,
}

impl Chain {
    /// The chain the settings describe; keys also come from `env`.
    pub fn from_settings(settings: &Value, env: &dyn Fn(&str) -> Option<String>) -> Chain {
        let search = settings.get("search").cloned().unwrap_or(Value::Null);
        let preferred = search
            .get("provider")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or("ddgs")
            .to_owned();
        let fallback = search
            .get("fallback")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let timeout = search
            .get("timeoutSec")
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(|s| Duration::from_secs_f64(s.clamp(1.0, 60.0)))
            .unwrap_or(DEFAULT_TIMEOUT);
        let mut order = vec![preferred.clone()];
        if fallback {
            order.extend(FALLBACK.iter().map(|s| s.to_string()));
        }
        let mut seen = std::collections::HashSet::new();
        let mut chain = Chain {
            ready: vec![],
            skipped: vec![],
            timeout,
        };
        for id in order {
            if !seen.insert(id.clone()) {
                continue;
            }
            let is_preferred = id == preferred;
            match ready(&id, &search, env) {
                Ok(r) => chain.ready.push(r),
                Err(why) if is_preferred => chain.skipped.push(Attempt {
                    provider: id,
                    error: why,
                }),
                Err(_) => {}
            }
        }
        chain
    }

    /// Asks the providers in order; the first with results answers. `Err` lists every
    /// attempt when none answered (empty: nothing was configured).
    pub async fn search(&self, query: &str, num: usize) -> Result<Searched, Vec<Attempt>> {
        let mut failed = self.skipped.clone();
        let mut empty: Option<String> = None;
        let client = match reqwest::Client::builder()
            .timeout(self.timeout)
            .connect_timeout(self.timeout)
            .user_agent(concat!(
                "Mozilla/5.0 (compatible; snowpea/",
                env!("CARGO_PKG_VERSION"),
                ")"
            ))
            .build()
        {
            Ok(c) => c,
            Err(e) => {
                failed.push(Attempt {
                    provider: "http".into(),
                    error: e.to_string(),
                });
                return Err(failed);
            }
        };
        for p in &self.ready {
            let asked =
                tokio::time::timeout(self.timeout, providers::ask(&client, p, query, num)).await;
            match asked {
                Ok(Ok(hits)) if !hits.is_empty() => {
                    let mut hits = hits;
                    hits.truncate(num);
                    return Ok(Searched {
                        provider: p.id.clone(),
                        hits,
                        failed,
                    });
                }
                Ok(Ok(_)) => {
                    empty.get_or_insert_with(|| p.id.clone());
                }
                Ok(Err(e)) => failed.push(Attempt {
                    provider: p.id.clone(),
                    error: e,
                }),
                Err(_) => failed.push(Attempt {
                    provider: p.id.clone(),
                    error: format!("timed out after {}s", self.timeout.as_secs_f64()),
                }),
            }
        }
        match empty {
            Some(provider) => Ok(Searched {
                provider,
                hits: vec![],
                failed,
            }),
            None => Err(failed),
        }
    }
}

fn ready(id: &str, search: &Value, env: &dyn Fn(&str) -> Option<String>) -> Result<Ready, String> {
    let Some(k) = known(id) else {
        return Err(format!("unknown or unsupported search provider {id:?}"));
    };
    let setting = |key: &str| {
        search
            .get(id)
            .and_then(|s| s.get(key))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let url = setting("url")
        .or_else(|| k.url.map(str::to_owned))
        .ok_or_else(|| format!("not configured: set search.{id}.url"))?;
    let key = setting("apiKey")
        .or_else(|| setting("api_key"))
        .or_else(|| {
            k.env.iter().find_map(|v| {
                env(v)
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
            })
        });
    if k.needs_key && key.is_none() {
        let envs = if k.env.is_empty() {
            String::new()
        } else {
            format!(" or {}", k.env.join("/"))
        };
        return Err(format!("no API key: set search.{id}.apiKey{envs}"));
    }
    let model = match k.kind {
        Kind::XaiGrok => Some(setting("model").unwrap_or_else(|| GROK_MODEL.to_owned())),
        _ => None,
    };
    Ok(Ready {
        id: id.to_owned(),
        kind: k.kind,
        url,
        key,
        model,
    })
}

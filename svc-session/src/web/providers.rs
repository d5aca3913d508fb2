//! One adapter per search wire ([`Kind`]): build the request, read the answer into
//! [`SearchHit`]s (plain text, `http(s)` URLs only). Errors are one line naming the status
//! or the failure; they never contain a key (keys travel in headers, never in URLs).

use serde_json::{json, Value};

use super::chain::{Kind, Ready, SearchHit};
use super::html;

/// Longest title kept, in characters.
pub const TITLE_MAX: usize = 300;
/// Longest snippet kept, in characters.
pub const SNIPPET_MAX: usize = 600;
/// Largest answer body read, in bytes.
pub const BODY_MAX: usize = 4 * 1024 * 1024;

/// Asks provider `p` for `num` results of `query`.
pub async fn ask(
    client: &reqwest::Client,
    p: &Ready,
    query: &str,
    num: usize,
) -> Result<Vec<SearchHit>, String> {
    let key = p.key.clone().unwrap_or_default();
    let request = match p.kind {
        Kind::Ddgs => client.get(&p.url).query(&[("q", query)]),
        Kind::Searxng => client
            .get(format!("{}/search", p.url.trim_end_matches('/')))
            .query(&[("q", query), ("format", "json")]),
        Kind::Brave => client
            .get(&p.url)
            .query(&[("q", query), ("count", &num.to_string())])
            .header("Accept", "application/json")
            .header("X-Subscription-Token", key),
        Kind::Tavily => client
            .post(&p.url)
            .bearer_auth(key)
            .json(&json!({"query": query, "max_results": num})),
        Kind::Exa => client
            .post(&p.url)
            .header("x-api-key", key)
            .json(&json!({"query": query, "numResults": num, "contents": {"text": {"maxCharacters": SNIPPET_MAX}}})),
        Kind::Firecrawl => {
            let r = client
                .post(format!("{}/v1/search", p.url.trim_end_matches('/')))
                .json(&json!({"query": query, "limit": num}));
            if key.is_empty() {
                r
            } else {
                r.bearer_auth(key)
            }
        }
        Kind::Keenable => {
            let r = client
                .post(&p.url)
                .header("Accept", "application/json")
                .json(&json!({"query": query}));
            if key.is_empty() {
                r
            } else {
                r.header("X-API-Key", key)
            }
        }
        Kind::Parallel => client.post(&p.url).header("x-api-key", key).json(&json!({
            "objective": query,
            "search_queries": [query],
            "advanced_settings": {"max_results": num},
        })),
        Kind::XaiGrok => client.post(&p.url).bearer_auth(key).json(&json!({
            "model": p.model.as_deref().unwrap_or(super::chain::GROK_MODEL),
            "input": [{"role": "user", "content": format!(
                "Search the web for: {query}\nList the {num} most relevant sources."
            )}],
            "tools": [{"type": "web_search"}],
            "store": false,
        })),
    };
    let response = request.send().await.map_err(describe)?;
    let status = response.status();
    let body = read_capped(response).await?;
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body);
        return Err(format!(
            "HTTP {}: {}",
            status.as_u16(),
            html::plain(&text, 200)
        ));
    }
    if p.kind == Kind::Ddgs {
        return Ok(html::ddg_results(&String::from_utf8_lossy(&body))
            .into_iter()
            .filter_map(|(href, title, snippet)| hit(&html::ddg_target(&href)?, &title, &snippet))
            .take(num)
            .collect());
    }
    let v: Value = serde_json::from_slice(&body).map_err(|e| format!("answer is not JSON: {e}"))?;
    match p.kind {
        Kind::XaiGrok => return Ok(grok_hits(&v, num)),
        Kind::Parallel => {
            let list = v
                .get("results")
                .and_then(Value::as_array)
                .ok_or_else(|| "answer has no result list".to_owned())?;
            return Ok(list
                .iter()
                .filter_map(|r| {
                    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
                    let excerpts: Vec<&str> = r
                        .get("excerpts")
                        .and_then(Value::as_array)
                        .map(|e| e.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    hit(s("url"), s("title"), &excerpts.join(" … "))
                })
                .take(num)
                .collect());
        }
        Kind::Keenable => {
            let list = v
                .get("results")
                .and_then(Value::as_array)
                .ok_or_else(|| "answer has no result list".to_owned())?;
            return Ok(list
                .iter()
                .filter_map(|r| {
                    let s = |k: &str| {
                        r.get(k)
                            .and_then(Value::as_str)
                            .map(str::trim)
                            .unwrap_or_default()
                    };
                    // `snippet` is the page text; `description` its meta description.
                    let snippet = if s("snippet").is_empty() {
                        s("description")
                    } else {
                        s("snippet")
                    };
                    hit(s("url"), s("title"), snippet)
                })
                .take(num)
                .collect());
        }
        _ => {}
    }
    let (list, snippet_key) = match p.kind {
        Kind::Searxng => (v.get("results"), "content"),
        Kind::Brave => (v.pointer("/web/results"), "description"),
        Kind::Tavily => (v.get("results"), "content"),
        Kind::Exa => (v.get("results"), "text"),
        Kind::Firecrawl => (
            v.get("data").and_then(|d| d.get("web").or(Some(d))),
            "description",
        ),
        Kind::Ddgs | Kind::XaiGrok | Kind::Parallel | Kind::Keenable => {
            unreachable!("answered above")
        }
    };
    let list = list
        .and_then(Value::as_array)
        .ok_or_else(|| "answer has no result list".to_owned())?;
    Ok(list
        .iter()
        .filter_map(|r| {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
            hit(s("url"), s("title"), s(snippet_key))
        })
        .take(num)
        .collect())
}

/// The sources of a Grok Responses answer: every `url_citation` annotation of its output
/// messages (its title, and the passage of the answer it supports as snippet), then the
/// top-level `citations` URLs; each URL once, in order.
fn grok_hits(v: &Value, num: usize) -> Vec<SearchHit> {
    let mut out: Vec<SearchHit> = Vec::new();
    let mut push = |h: Option<SearchHit>| {
        if let Some(h) = h {
            if !out.iter().any(|o| o.url == h.url) {
                out.push(h);
            }
        }
    };
    let items = v.get("output").and_then(Value::as_array);
    for item in items.into_iter().flatten() {
        let parts = item.get("content").and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            let text = part.get("text").and_then(Value::as_str).unwrap_or_default();
            let notes = part.get("annotations").and_then(Value::as_array);
            for a in notes.into_iter().flatten() {
                if a.get("type").and_then(Value::as_str) != Some("url_citation") {
                    continue;
                }
                let s = |k: &str| a.get(k).and_then(Value::as_str).unwrap_or_default();
                let idx = |k: &str| a.get(k).and_then(Value::as_u64).map(|n| n as usize);
                let passage = match (idx("start_index"), idx("end_index")) {
                    (Some(start), Some(end)) if start < end => text
                        .chars()
                        .skip(start)
                        .take(end - start)
                        .collect::<String>(),
                    _ => String::new(),
                };
                push(hit(s("url"), s("title"), &passage));
            }
        }
    }
    let cited = v.get("citations").and_then(Value::as_array);
    for c in cited.into_iter().flatten() {
        let url = c
            .as_str()
            .or_else(|| c.get("url").and_then(Value::as_str))
            .unwrap_or_default();
        push(hit(url, "", ""));
    }
    out.truncate(num);
    out
}

fn hit(url: &str, title: &str, snippet: &str) -> Option<SearchHit> {
    let parsed = url::Url::parse(url.trim()).ok()?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.as_str().len() > 2048 {
        return None;
    }
    let title = html::plain(title, TITLE_MAX);
    Some(SearchHit {
        title: if title.is_empty() {
            parsed.as_str().to_owned()
        } else {
            title
        },
        url: parsed.into(),
        snippet: html::plain(snippet, SNIPPET_MAX),
    })
}

fn describe(e: reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "cannot connect".into()
    } else {
        format!("request failed: {}", e.without_url())
    }
}

async fn read_capped(mut r: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(chunk) = r.chunk().await.map_err(describe)? {
        if out.len() + chunk.len() > BODY_MAX {
            return Err(format!("answer larger than {BODY_MAX} bytes"));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

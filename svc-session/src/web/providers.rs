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
    let (list, snippet_key) = match p.kind {
        Kind::Searxng => (v.get("results"), "content"),
        Kind::Brave => (v.pointer("/web/results"), "description"),
        Kind::Tavily => (v.get("results"), "content"),
        Kind::Exa => (v.get("results"), "text"),
        Kind::Firecrawl => (
            v.get("data").and_then(|d| d.get("web").or(Some(d))),
            "description",
        ),
        Kind::Ddgs => unreachable!("answered above"),
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

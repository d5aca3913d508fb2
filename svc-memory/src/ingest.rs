//! Browsing memories (spec `memory.ingest`, `memory.delete{source:"browser"}`): visited
//! pages are stored in the `browser` namespace once per (url, text) — a repeat is counted
//! in `skipped` — and forgotten by page, by whole site (a url without a path), by visit
//! time, or all at once.

use sha1::{Digest, Sha1};
use snowpea_proto::memory::v1::memory_ingest_params::Item;

use crate::error::{Error, Result};
use crate::namespace::Namespace;
use crate::store::memories::{self, BrowserFilter, NewMemory};
use crate::store::Store;

/// Largest page text stored, in bytes (longer text is cut at a character boundary).
pub const MAX_PAGE_TEXT: usize = 64 * 1024;
/// Most pages in one `memory.ingest` call.
pub const MAX_ITEMS: usize = 1000;

/// Outcome of one ingest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ingested {
    /// Pages stored.
    pub added: u64,
    /// Pages already stored (same url and text).
    pub skipped: u64,
}

/// A page URL without its fragment; `None` when it is not an absolute URL.
pub fn normalize_url(url: &str) -> Option<url::Url> {
    let mut u = url::Url::parse(url.trim()).ok()?;
    u.set_fragment(None);
    Some(u)
}

fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut i = max;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[..i]
}

/// Parses a UTC ISO-8601 time into ms since the epoch; `invalid_params` naming `field`.
pub fn parse_time(s: &str, field: &str) -> Result<i64> {
    s.trim()
        .parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .map_err(|_| {
            Error::invalid(
                field,
                "must be a UTC ISO-8601 time, e.g. 2026-01-31T12:00:00Z",
            )
        })
}

/// `memory.ingest`: validates every item first (nothing is stored when one is bad), then
/// stores them in one transaction.
pub fn ingest(store: &Store, items: &[Item], session_id: Option<&str>) -> Result<Ingested> {
    if items.len() > MAX_ITEMS {
        return Err(Error::invalid(
            "params.items",
            format!("at most {MAX_ITEMS} pages per call"),
        ));
    }
    let now_ms = snowpea_common::time::now_ms();
    let mut rows = Vec::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        let u = normalize_url(&it.url)
            .filter(|u| u.has_host())
            .ok_or_else(|| {
                Error::invalid(format!("params.items[{i}].url"), "must be an absolute URL")
            })?;
        let created_ms = match it.visited_at.as_deref().filter(|s| !s.is_empty()) {
            Some(s) => parse_time(s, &format!("params.items[{i}].visitedAt"))?,
            None => now_ms,
        };
        let text = cut(&it.text, MAX_PAGE_TEXT).to_owned();
        if text.trim().is_empty() && it.title.trim().is_empty() {
            return Err(Error::invalid(
                format!("params.items[{i}].text"),
                "a page needs text or a title",
            ));
        }
        let mut h = Sha1::new();
        h.update(u.as_str().as_bytes());
        h.update([0u8]);
        h.update(it.text.as_bytes());
        let created_at = jiff::Timestamp::from_millisecond(created_ms)
            .map(|t| format!("{t:.3}"))
            .unwrap_or_else(|_| snowpea_common::time::now_iso());
        rows.push(NewMemory {
            id: snowpea_common::ids::new_id("mem"),
            namespace: Namespace::Browser.key(),
            text,
            tags: Vec::new(),
            title: cut(&it.title, 1024).to_owned(),
            created_ms,
            created_at,
            url: Some(u.to_string()),
            origin: Some(u.origin().ascii_serialization()),
            content_hash: Some(hex::encode(h.finalize())),
            session_id: session_id.map(str::to_owned),
        });
    }
    store.write(|tx| {
        let mut out = Ingested::default();
        for r in &rows {
            if memories::insert(tx, r)? {
                out.added += 1;
            } else {
                out.skipped += 1;
            }
        }
        Ok(out)
    })
}

/// The filter of `memory.delete{source:"browser", url?, before?}`: a url with a path (or
/// query) is one page, a url without one is the whole site; neither = every page.
pub fn browser_filter(url: Option<&str>, before: Option<&str>) -> Result<BrowserFilter> {
    let mut f = BrowserFilter::default();
    if let Some(url) = url.map(str::trim).filter(|s| !s.is_empty()) {
        let u = normalize_url(url).filter(|u| u.has_host()).ok_or_else(|| {
            Error::invalid(
                "params.url",
                "must be an absolute URL (a page, or a site without a path)",
            )
        })?;
        if u.path() == "/" && u.query().is_none() {
            f.origin = Some(u.origin().ascii_serialization());
        } else {
            f.page = Some(u.to_string());
        }
    }
    if let Some(b) = before.map(str::trim).filter(|s| !s.is_empty()) {
        f.before_ms = Some(parse_time(b, "params.before")?);
    }
    Ok(f)
}

/// `memory.delete{source:"browser"}`: returns how many pages were forgotten.
pub fn forget(store: &Store, f: &BrowserFilter) -> Result<u64> {
    store.write(|tx| memories::delete_browser(tx, f))
}

#[cfg(test)]
#[path = "ingest_tests.rs"]
mod tests;

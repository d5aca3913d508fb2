//! Plain text from untrusted web markup, and the result list of DuckDuckGo's HTML page.
//! Only what `web.search` needs: results are shown to people and models as text, so tags go,
//! entities are decoded, control characters and runs of white space collapse, and lengths
//! are capped.

use std::sync::LazyLock;

use regex::Regex;

static TAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)<\s*/?\s*([a-zA-Z0-9]*)[^>]*>").expect("tag regex"));

static CODE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?is)<(script|style|noscript)\b[^>]*>.*?</(script|style|noscript)\s*>")
        .expect("code regex")
});

/// Tags that sit inside a word's flow; every other tag separates text with a space.
const INLINE: &[&str] = &[
    "a", "b", "i", "em", "strong", "span", "code", "mark", "u", "small", "sub", "sup", "abbr",
    "wbr",
];
static ENTITY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});").expect("entity regex")
});
static RESULT_A: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?s)<a\b([^>]*\bclass="[^"]*\bresult__a\b[^"]*"[^>]*)>(.*?)</a>"#)
        .expect("result regex")
});
static SNIPPET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?s)<(a|div|td)\b[^>]*\bclass="[^"]*\bresult__snippet\b[^"]*"[^>]*>(.*?)</(?:a|div|td)>"#)
        .expect("snippet regex")
});
static HREF: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"\bhref="([^"]*)""#).expect("href regex"));

/// Decodes the common named entities and every numeric one.
pub fn decode_entities(s: &str) -> String {
    ENTITY
        .replace_all(s, |c: &regex::Captures<'_>| {
            let e = &c[1];
            let ch = if let Some(hex) = e.strip_prefix("#x").or_else(|| e.strip_prefix("#X")) {
                u32::from_str_radix(hex, 16).ok().and_then(char::from_u32)
            } else if let Some(dec) = e.strip_prefix('#') {
                dec.parse().ok().and_then(char::from_u32)
            } else {
                match e {
                    "amp" => Some('&'),
                    "lt" => Some('<'),
                    "gt" => Some('>'),
                    "quot" => Some('"'),
                    "apos" => Some('\''),
                    "nbsp" => Some(' '),
                    "hellip" => Some('…'),
                    "mdash" => Some('—'),
                    "ndash" => Some('–'),
                    _ => None,
                }
            };
            ch.map(String::from).unwrap_or_else(|| c[0].to_owned())
        })
        .into_owned()
}

/// Plain text of `s`: tags removed, entities decoded, control characters dropped, white
/// space collapsed, at most `max` characters (an ellipsis marks a cut).
pub fn plain(s: &str, max: usize) -> String {
    let s = CODE.replace_all(s, " ");
    let text = TAG.replace_all(&s, |c: &regex::Captures<'_>| {
        if INLINE.contains(&c[1].to_ascii_lowercase().as_str()) {
            ""
        } else {
            " "
        }
    });
    let text = decode_entities(&text);
    let mut out = String::with_capacity(text.len().min(max * 4));
    let mut count = 0;
    let mut space = false;
    for ch in text.chars() {
        if ch.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if ch.is_control()
            || matches!(ch, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        {
            continue;
        }
        if space {
            if count + 1 >= max {
                break;
            }
            out.push(' ');
            count += 1;
            space = false;
        }
        if count >= max {
            out.push('…');
            return out;
        }
        out.push(ch);
        count += 1;
    }
    out
}

/// `(href, title html, snippet html)` of each organic result of DuckDuckGo's HTML page, in
/// page order (a result without a snippet gets `""`).
pub fn ddg_results(page: &str) -> Vec<(String, String, String)> {
    let titles: Vec<_> = RESULT_A.captures_iter(page).collect();
    let snippets: Vec<_> = SNIPPET.captures_iter(page).collect();
    let mut out = Vec::new();
    for (i, t) in titles.iter().enumerate() {
        let start = t.get(0).map(|m| m.end()).unwrap_or(0);
        let end = titles
            .get(i + 1)
            .and_then(|n| n.get(0))
            .map(|m| m.start())
            .unwrap_or(page.len());
        let snippet = snippets
            .iter()
            .find(|s| {
                s.get(0)
                    .is_some_and(|m| m.start() >= start && m.start() < end)
            })
            .map(|s| s[2].to_owned())
            .unwrap_or_default();
        let Some(href) = HREF.captures(&t[1]).map(|h| decode_entities(&h[1])) else {
            continue;
        };
        out.push((href, t[2].to_owned(), snippet));
    }
    out
}

/// The target of a DuckDuckGo result link: the `uddg` parameter of its redirect, or the
/// link itself; `None` for an ad (`/y.js`) or anything that is not a URL.
pub fn ddg_target(href: &str) -> Option<String> {
    let absolute = if href.starts_with("//") {
        format!("https:{href}")
    } else {
        href.to_owned()
    };
    let url = url::Url::parse(&absolute).ok()?;
    let on_ddg = url
        .host_str()
        .is_some_and(|h| h.ends_with("duckduckgo.com"));
    if on_ddg {
        if url.path().starts_with("/y.js") {
            return None;
        }
        return url
            .query_pairs()
            .find(|(k, _)| k == "uddg")
            .map(|(_, v)| v.into_owned());
    }
    Some(url.into())
}

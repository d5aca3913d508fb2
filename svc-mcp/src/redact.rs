//! Credentials in server URLs (issue 6): `http://user:pw@host/x?token=…` carries secrets in
//! its userinfo password and its query values. Every text that shows a URL — `mcp.list`,
//! error texts, `mcp.changed`, `mcp.test`, logs — goes through [`url`] or [`scrub`].

/// Shown in place of a secret.
pub const MASK: &str = "***";

/// `raw` with its password and every query parameter value replaced by [`MASK`] (names are
/// kept). A text that is not a URL is returned as is.
pub fn url(raw: &str) -> String {
    let Ok(mut u) = url::Url::parse(raw) else {
        return raw.to_owned();
    };
    if u.password().is_some() {
        let _ = u.set_password(Some(MASK));
    }
    if u.query().is_some() {
        let pairs: Vec<String> = u
            .query()
            .unwrap_or_default()
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, v)) if !v.is_empty() => format!("{k}={MASK}"),
                _ => p.to_owned(),
            })
            .collect();
        u.set_query(Some(&pairs.join("&")));
    }
    u.to_string()
}

/// The secret parts of `raw` (its password and query values, raw and percent-decoded), the
/// texts [`scrub`] hides.
fn secrets(raw: &str) -> Vec<String> {
    let Ok(u) = url::Url::parse(raw) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(p) = u.password() {
        out.push(p.to_owned());
        out.push(percent_decode(p));
    }
    for p in u.query().unwrap_or_default().split('&') {
        if let Some((_, v)) = p.split_once('=') {
            out.push(v.to_owned());
        }
    }
    out.extend(u.query_pairs().map(|(_, v)| v.into_owned()));
    // Very short values would mask unrelated words; longest first so no part is left over.
    out.retain(|s| s.chars().count() >= 3);
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={s}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// `text` (an error or log text about the server at `raw`) with the URL shown redacted and
/// any remaining secret of it (password, query values) replaced by [`MASK`].
pub fn scrub(text: &str, raw: &str) -> String {
    if raw.is_empty() {
        return text.to_owned();
    }
    let redacted = url(raw);
    let mut out = text.replace(raw, &redacted);
    if let Ok(normal) = url::Url::parse(raw) {
        out = out.replace(normal.as_str(), &redacted);
    }
    for s in secrets(raw) {
        out = out.replace(&s, MASK);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_masks_password_and_query_values() {
        assert_eq!(
            url("http://user:supersecretpw@127.0.0.1:9/x"),
            "http://user:***@127.0.0.1:9/x"
        );
        assert_eq!(
            url("https://h.example/mcp?token=querysecret789&mode=fast&flag"),
            "https://h.example/mcp?token=***&mode=***&flag"
        );
        assert_eq!(url("http://127.0.0.1:9/x"), "http://127.0.0.1:9/x");
        assert_eq!(url("not a url"), "not a url");
    }

    #[test]
    fn scrub_hides_the_url_secrets_in_any_text() {
        let raw = "http://user:super%40secretpw@127.0.0.1:9/x?token=querysecret789";
        let text = format!(
            "cannot reach {raw}: error sending request for url (http://user:super%40secretpw@127.0.0.1:9/x?token=querysecret789); pw super@secretpw"
        );
        let s = scrub(&text, raw);
        assert!(!s.contains("secretpw"), "{s}");
        assert!(!s.contains("querysecret789"), "{s}");
        assert!(
            s.starts_with("cannot reach http://user:***@127.0.0.1:9/x?token=***: "),
            "{s}"
        );
        assert_eq!(scrub("plain", ""), "plain");
    }
}

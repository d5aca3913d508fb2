//! Origins and `urlPattern`s of site memory.
//!
//! An origin is normalised to `scheme://host[:port]` (lowercase, default port dropped).
//! A `urlPattern` is a path on the origin starting with `/`: `*` matches any run of
//! characters (including `/`), a `:name` segment matches one path segment, everything else
//! is literal. A pattern without `?` is matched against the path alone (the query is
//! ignored); one with `?` against path and query. Specificity — which entry `site.get`
//! returns first — is the number of literal characters, then fewer wildcards
//! (`*` before `:name`).

use std::cmp::Ordering;

use regex::Regex;

/// Normalises an origin (`https://Example.com:443/` → `https://example.com`). `None` when
/// it is not an http(s) origin or carries a path, query or fragment.
pub fn normalize_origin(origin: &str) -> Option<String> {
    let u = url::Url::parse(origin.trim()).ok()?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return None;
    }
    if u.path() != "/" || u.query().is_some() || u.fragment().is_some() {
        return None;
    }
    if !u.username().is_empty() || u.password().is_some() {
        return None;
    }
    Some(u.origin().ascii_serialization())
}

/// Checks a `urlPattern`; `Err` says what is wrong.
pub fn check_pattern(pattern: &str) -> Result<(), &'static str> {
    if !pattern.starts_with('/') {
        return Err("must be a path on the origin starting with '/'");
    }
    if pattern.len() > 1024 {
        return Err("longer than 1024 bytes");
    }
    if pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain whitespace");
    }
    compile(pattern).map(|_| ()).ok_or("not a valid pattern")
}

fn compile(pattern: &str) -> Option<Regex> {
    let mut re = String::from("^");
    let mut chars = pattern.chars().peekable();
    let mut prev = '\0';
    while let Some(c) = chars.next() {
        match c {
            '*' => re.push_str(".*"),
            ':' if prev == '/' && chars.peek().is_some_and(|n| n.is_ascii_alphabetic()) => {
                while chars
                    .peek()
                    .is_some_and(|n| n.is_ascii_alphanumeric() || *n == '_')
                {
                    chars.next();
                }
                re.push_str("[^/?#]+");
            }
            _ => re.push_str(&regex::escape(&c.to_string())),
        }
        prev = c;
    }
    re.push('$');
    Regex::new(&re).ok()
}

/// True when `pattern` matches `path` (path and optional query on the origin).
pub fn matches(pattern: &str, path: &str) -> bool {
    let path = if path.is_empty() { "/" } else { path };
    let path = path.split('#').next().unwrap_or(path);
    let subject = if pattern.contains('?') {
        path
    } else {
        path.split('?').next().unwrap_or(path)
    };
    compile(pattern).is_some_and(|re| re.is_match(subject))
}

/// (literal characters, `*` wildcards, `:name` segments) of a pattern.
fn weight(pattern: &str) -> (usize, usize, usize) {
    let mut literal = 0;
    let mut wild = 0;
    let mut params = 0;
    let mut chars = pattern.chars().peekable();
    let mut prev = '\0';
    while let Some(c) = chars.next() {
        match c {
            '*' => wild += 1,
            ':' if prev == '/' && chars.peek().is_some_and(|n| n.is_ascii_alphabetic()) => {
                while chars
                    .peek()
                    .is_some_and(|n| n.is_ascii_alphanumeric() || *n == '_')
                {
                    chars.next();
                }
                params += 1;
            }
            _ => literal += 1,
        }
        prev = c;
    }
    (literal, wild, params)
}

/// Orders patterns most specific first: more literal characters, then fewer `*` (which
/// match anything), then fewer `:name` segments (which match one segment), then the
/// pattern text (for a stable order).
pub fn most_specific_first(a: &str, b: &str) -> Ordering {
    let (la, wa, pa) = weight(a);
    let (lb, wb, pb) = weight(b);
    lb.cmp(&la)
        .then(wa.cmp(&wb))
        .then(pa.cmp(&pb))
        .then(a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_normalise() {
        assert_eq!(
            normalize_origin("HTTPS://WWW.Example.com:443/").as_deref(),
            Some("https://www.example.com")
        );
        assert_eq!(
            normalize_origin("http://localhost:8080").as_deref(),
            Some("http://localhost:8080")
        );
        for bad in [
            "example.com",
            "https://x.com/path",
            "file:///etc",
            "https://x.com/?q=1",
            "ftp://x.com",
            "https://u:p@x.com",
        ] {
            assert_eq!(normalize_origin(bad), None, "{bad}");
        }
    }

    #[test]
    fn patterns_match() {
        assert!(matches("/products/*", "/products/42"));
        assert!(!matches("/products/*", "/product"));
        assert!(matches("/users/:id/edit", "/users/7/edit"));
        assert!(!matches("/users/:id/edit", "/users/7/8/edit"));
        assert!(
            matches("/search", "/search?q=shoes"),
            "query ignored without '?'"
        );
        assert!(matches("/search?q=*", "/search?q=shoes"));
        assert!(!matches("/search?q=*", "/search"));
        assert!(matches("/", ""));
        assert!(
            matches("/a.b", "/a.b") && !matches("/a.b", "/axb"),
            "dots are literal"
        );
    }

    #[test]
    fn most_specific_sorts_first() {
        let mut v = vec![
            "/*",
            "/products/*",
            "/products/:id",
            "/products/42",
            "/products/*/reviews",
        ];
        v.sort_by(|a, b| most_specific_first(a, b));
        assert_eq!(
            v,
            vec![
                "/products/*/reviews",
                "/products/42",
                "/products/:id",
                "/products/*",
                "/*"
            ]
        );
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert!(check_pattern("products/*").is_err());
        assert!(check_pattern("/a b").is_err());
        assert!(check_pattern("/a/*").is_ok());
    }
}

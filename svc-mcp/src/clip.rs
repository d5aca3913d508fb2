//! Bounded text for log fields (issue 6: a client string is never logged unbounded — a 1 MB
//! workdir once grew `mcp.log` by a megabyte per call).

use std::borrow::Cow;

/// Longest value of a log field, in characters.
pub const LOG_FIELD_MAX: usize = 200;

/// `s` cut to [`LOG_FIELD_MAX`] characters, with `…(N bytes)` saying how long it was.
pub fn clip(s: &str) -> Cow<'_, str> {
    clip_to(s, LOG_FIELD_MAX)
}

/// `s` cut to `max` characters, with `…(N bytes)` saying how long it was.
pub fn clip_to(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some((cut, _)) => Cow::Owned(format!("{}…({} bytes)", &s[..cut], s.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_and_long_text_is_cut_on_a_char_boundary() {
        assert_eq!(clip("abc"), "abc");
        let exact = "x".repeat(LOG_FIELD_MAX);
        assert_eq!(clip(&exact), exact.as_str());
        let long = "é".repeat(1_000_000);
        let c = clip(&long);
        assert!(c.len() < 500, "{}", c.len());
        assert!(c.ends_with("…(2000000 bytes)"), "{c}");
        assert_eq!(clip_to("abcdef", 3), "abc…(6 bytes)");
    }
}

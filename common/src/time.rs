//! Time helpers: the protocol writes times as UTC ISO-8601 strings.

/// Now as UTC ISO-8601 with millisecond precision, e.g. `2026-11-29T20:15:43.123Z`.
pub fn now_iso() -> String {
    let ts = jiff::Timestamp::now();
    format!("{:.3}", ts)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

#[cfg(test)]
mod tests {
    #[test]
    fn iso_is_utc_with_z() {
        let s = super::now_iso();
        assert!(s.ends_with('Z'), "{s}");
        assert!(s.parse::<jiff::Timestamp>().is_ok());
    }
}

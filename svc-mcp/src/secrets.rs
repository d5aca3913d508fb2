//! What counts as a secret (issue 6: `env` and `headers` values are never returned by any
//! method nor logged). Entries are shown with `envKeys`/`headerKeys` only; query keys and
//! flags that look like credentials are flagged by [`crate::validate`].

/// True for a key whose value is a credential (`token`, `apiKey`, `secret`, `password`, …).
pub fn is_secret_key(key: &str) -> bool {
    snowpea_common::settings::is_secret_key(key) || {
        let k = key.to_ascii_lowercase();
        ["key", "auth", "pat", "passwd", "sig", "signature"]
            .iter()
            .any(|s| k == *s || k.ends_with(&format!("_{s}")) || k.ends_with(&format!("-{s}")))
    }
}

//! Identifiers: random hex secrets and sortable prefixed ids (`s_…` sessions, `t_…`
//! turns, `ap_…` approvals).

/// `n` random bytes from the OS CSPRNG, hex-encoded (2·n characters).
pub fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).expect("OS random source");
    hex::encode(buf)
}

/// A time-sortable unique id with a prefix, e.g. `new_id("s")` → `s_0192…` (UUIDv7, simple form).
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_unique_and_prefixed() {
        let a = super::new_id("s");
        let b = super::new_id("s");
        assert!(a.starts_with("s_") && a != b);
        assert_eq!(super::random_hex(4).len(), 8);
    }
}

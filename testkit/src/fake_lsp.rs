//! A small fake language server over stdio (`testkit/fixtures/fake_lsp.py`, run by
//! `python3`) for the LSP tests of issue 23: `normal` publishes an error per line holding
//! `ERR` and a warning per line holding `WARN`; `crash` exits on the first `didChange`;
//! `silent` never answers.

use std::path::PathBuf;

/// The script's path.
pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/fake_lsp.py")
}

/// The argv of a fake server in `mode` (`normal`, `crash`, `silent`).
pub fn command(mode: &str) -> Vec<String> {
    vec![
        "python3".into(),
        script().display().to_string(),
        "--mode".into(),
        mode.into(),
    ]
}

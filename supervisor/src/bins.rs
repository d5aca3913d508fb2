//! Where the suite's binaries are (DESIGN.md §2): next to the running executable, or in
//! `SNOWPEA_BIN_DIR` when set (tests point it at fakes; packagers at a libexec dir).

use std::path::PathBuf;

use anyhow::Context;

/// Environment variable overriding the binary directory.
pub const BIN_DIR_ENV: &str = "SNOWPEA_BIN_DIR";

/// The directory holding `snowpea-gateway` and `snowpea-svc-*`.
pub fn bin_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(BIN_DIR_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let exe = std::env::current_exe().context("locate the running executable")?;
    Ok(exe
        .parent()
        .context("the running executable has no directory")?
        .to_path_buf())
}

/// Full path of the binary `name`.
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    Ok(bin_dir()?.join(name))
}

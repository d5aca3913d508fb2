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

/// The error text of a suite binary that is not where the supervisor looks: its name, the
/// directory looked in and why there (next to `snowpea`, or `SNOWPEA_BIN_DIR`), and how to
/// fix it (issue 25 item 1).
pub fn missing_binary(program: &std::path::Path) -> String {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| program.display().to_string());
    let dir = program
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let why = if std::env::var_os(BIN_DIR_ENV).is_some_and(|d| !d.is_empty()) {
        format!("{BIN_DIR_ENV} is set to {dir}")
    } else {
        format!("the directory of the running snowpea; set {BIN_DIR_ENV} to look elsewhere")
    };
    format!(
        "{name} not found in {dir} ({why}). The services must sit beside snowpea: install \
         every binary of the suite together with scripts/install.sh, or point {BIN_DIR_ENV} at \
         the directory that holds them (e.g. target/release)"
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_binary_names_itself_the_directory_and_the_variable() {
        let text = super::missing_binary(std::path::Path::new("/opt/x/bin/snowpea-svc-session"));
        assert!(
            text.starts_with("snowpea-svc-session not found in /opt/x/bin"),
            "{text}"
        );
        assert!(text.contains("SNOWPEA_BIN_DIR"), "{text}");
        assert!(text.contains("scripts/install.sh"), "{text}");
    }
}

//! Test prerequisites outside Cargo (espeak-ng, pocketsphinx, node MCP servers, the `mcp`
//! PyPI package, grpcurl, tmux, sshd, a Docker Engine; the list and how to install them:
//! `scripts/test-deps.sh`). A test whose prerequisite is missing skips with a `SKIP:` line on
//! a developer machine, but fails when `SNOWPEA_REQUIRE_TEST_DEPS` is set — `.ci/run` sets
//! it after installing them all, so CI never passes by skipping.
//!
//! A skip must be seen: the `SKIP:` line goes straight to the process's stderr (the test
//! harness captures `eprintln!`, so a skipped test would otherwise just report `ok`), and is
//! appended to the file [`SKIP_LOG_ENV`] names, from which `scripts/test.sh` prints a summary.

use std::io::Write;

/// Environment variable that turns a missing test prerequisite into a failure.
pub const REQUIRE_ENV: &str = "SNOWPEA_REQUIRE_TEST_DEPS";

/// Environment variable naming a file each skip appends one line to
/// (`<test name>: <reason>`); `scripts/test.sh` sets it and prints the lines at the end.
pub const SKIP_LOG_ENV: &str = "SNOWPEA_TEST_SKIP_LOG";

/// Reports that `what` is missing (`how` says how to get it): prints a `SKIP:` line, or
/// panics when [`REQUIRE_ENV`] is set to anything but `0`/empty.
pub fn missing(what: &str, how: &str) {
    let required = std::env::var(REQUIRE_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
    if required {
        panic!("test prerequisite missing: {what} ({how}); {REQUIRE_ENV} is set, so this fails instead of skipping");
    }
    skip(&format!("{what} is missing ({how})"));
}

/// Environment variable `.ci/run` sets (to the engine's own error) when a Docker Engine
/// cannot start in the machine's sandbox (issue 23: "if no engine can run here, … say exactly
/// why"); the docker tests then skip with that reason even under [`REQUIRE_ENV`].
pub const DOCKER_UNAVAILABLE_ENV: &str = "SNOWPEA_TEST_DOCKER_UNAVAILABLE";

/// Reports a missing Docker Engine: skips with the recorded reason when
/// [`DOCKER_UNAVAILABLE_ENV`] says the engine cannot run on this machine, else as [`missing`].
pub fn missing_docker(how: &str) {
    match std::env::var(DOCKER_UNAVAILABLE_ENV) {
        Ok(why) if !why.is_empty() => skip(&format!(
            "a Docker Engine cannot run on this machine ({why})"
        )),
        _ => missing("a Docker Engine with the test image", how),
    }
}

/// The skip line for `reason` in the test named by the current thread (libtest names each
/// test's thread after the test).
fn skip_line(reason: &str) -> String {
    let test = std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .map(|n| format!("{n}: "))
        .unwrap_or_default();
    format!("SKIP: {test}{reason}")
}

/// Prints the skip line past the harness's capture and appends it to the skip log.
fn skip(reason: &str) {
    let line = skip_line(reason);
    // `std::io::stderr()` written directly is not captured by libtest (only the print
    // macros are), so the line shows in `cargo test`'s output.
    let _ = writeln!(std::io::stderr(), "{line}");
    if let Some(path) = std::env::var_os(SKIP_LOG_ENV).filter(|p| !p.is_empty()) {
        append(std::path::Path::new(&path), &line);
    }
}

/// Appends `line` to the skip log at `path` (errors ignored: a skip never fails a test).
fn append(path: &std::path::Path, line: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        // One write per line, so lines of parallel tests do not interleave.
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_skip_line_names_the_test_it_skips() {
        let line = std::thread::Builder::new()
            .name("suite::chat::the_test".into())
            .spawn(|| super::skip_line("tmux is missing (apt-get install tmux)"))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(
            line,
            "SKIP: suite::chat::the_test: tmux is missing (apt-get install tmux)"
        );
    }

    #[test]
    fn skips_are_appended_to_the_skip_log_one_line_each() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips");
        super::append(&log, "SKIP: a: x is missing");
        super::append(&log, "SKIP: b: y is missing");
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "SKIP: a: x is missing\nSKIP: b: y is missing\n"
        );
    }
}

//! Test prerequisites outside Cargo (espeak-ng, pocketsphinx, node MCP servers, the `mcp`
//! PyPI package, grpcurl). A test whose prerequisite is missing skips with a `SKIP:` line on
//! a developer machine, but fails when `SNOWPEA_REQUIRE_TEST_DEPS` is set — `.ci/run` sets
//! it after installing them all, so CI never passes by skipping.

/// Environment variable that turns a missing test prerequisite into a failure.
pub const REQUIRE_ENV: &str = "SNOWPEA_REQUIRE_TEST_DEPS";

/// Reports that `what` is missing (`how` says how to get it): prints a `SKIP:` line, or
/// panics when [`REQUIRE_ENV`] is set to anything but `0`/empty.
pub fn missing(what: &str, how: &str) {
    let required = std::env::var(REQUIRE_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
    if required {
        panic!("test prerequisite missing: {what} ({how}); {REQUIRE_ENV} is set, so this fails instead of skipping");
    }
    eprintln!("SKIP: {what} is missing ({how})");
}

/// Environment variable `.ci/run` sets (to the engine's own error) when a Docker Engine
/// cannot start in the machine's sandbox (issue 23: "if no engine can run here, … say exactly
/// why"); the docker tests then skip with that reason even under [`REQUIRE_ENV`].
pub const DOCKER_UNAVAILABLE_ENV: &str = "SNOWPEA_TEST_DOCKER_UNAVAILABLE";

/// Reports a missing Docker Engine: skips with the recorded reason when
/// [`DOCKER_UNAVAILABLE_ENV`] says the engine cannot run on this machine, else as [`missing`].
pub fn missing_docker(how: &str) {
    match std::env::var(DOCKER_UNAVAILABLE_ENV) {
        Ok(why) if !why.is_empty() => {
            eprintln!("SKIP: a Docker Engine cannot run on this machine ({why})")
        }
        _ => missing("a Docker Engine with the test image", how),
    }
}

//! Issue 40 §4 in CI: one minute of `snowpea-bench fuzz` (seeded, two connections) against
//! the real suite. It fails when a process's peak RSS passes 2 × idle + 64 MB, when a
//! request gets no answer, more than one or an ill-formed one, or when a service restarts;
//! the ten-minute run and its figures are in docs/PERFORMANCE.md "Fuzz with memory".

use std::time::Duration;

use snowpea_e2e::bin_dir;

/// The fuzz's own time, its drain, the suite's start and stop, with room to spare on a
/// loaded machine; past it the run is killed and the test fails.
const BOUND: Duration = Duration::from_secs(600);

#[tokio::test]
async fn a_minute_of_fuzz_keeps_every_process_within_its_memory_budget() {
    let bench = bin_dir().join("snowpea-bench");
    assert!(
        bench.exists(),
        "{} is not built; run `cargo build --workspace --bins` first",
        bench.display()
    );
    let child = tokio::process::Command::new(&bench)
        .args([
            "fuzz",
            "--seconds",
            "60",
            "--seed",
            "40",
            "--connections",
            "2",
            "--drain",
            "120",
            "--settle",
            "5",
        ])
        .env("SNOWPEA_BIN_DIR", bin_dir())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start snowpea-bench fuzz");
    let out = tokio::time::timeout(BOUND, child.wait_with_output())
        .await
        .expect("snowpea-bench fuzz finished within the bound")
        .expect("snowpea-bench fuzz ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "snowpea-bench fuzz failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // The table names every process (a run that sampled nothing would pass silently).
    for name in ["gateway", "session", "memory", "supervisor"] {
        assert!(
            stdout.contains(&format!("| {name} |")),
            "no memory row for {name}:\n{stdout}"
        );
    }
    assert!(stdout.contains("PASS"), "{stdout}");
}

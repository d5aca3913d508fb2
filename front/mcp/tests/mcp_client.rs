//! `snowpea mcp serve` driven by the official MCP Python SDK (PyPI `mcp`: `stdio_client` and
//! `ClientSession`, `tests/mcp-client/run.py`) against a real suite on a temp home with the
//! scripted provider (issue 38): initialize and list tools/resources/prompts; a turn with
//! progress, a tool call and the answer; a follow-up in the same session; cancellation
//! interrupting the turn; an approval answered through elicitation and one answered by a
//! second native client (this test's); memory write then search; resources read; argument
//! errors naming the field.
//!
//! Needs the workspace binaries (`cargo build --workspace --bins`) and the `mcp` Python
//! package (`scripts/test-deps.sh`); without it the test skips, or fails under
//! `SNOWPEA_REQUIRE_TEST_DEPS=1`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_testkit::suite::bin_dir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// Bound of the whole client run (each of its waits has its own 60 s bound).
const RUN_LIMIT: Duration = Duration::from_secs(300);

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-client/run.py")
}

/// True when `python3` can import the MCP SDK's stdio client; otherwise reports it missing.
fn python_mcp_available() -> bool {
    let found = std::process::Command::new("python3")
        .args(["-c", "import mcp.client.stdio"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        snowpea_common::test_deps::missing(
            "the `mcp` Python package (the official MCP SDK)",
            "pip install mcp, or scripts/test-deps.sh",
        );
    }
    found
}

#[tokio::test]
async fn official_python_mcp_client_drives_snowpea() {
    if !python_mcp_available() {
        return;
    }
    let suite = common::suite().await;
    let native = Arc::new(suite.client().await);
    let (answerer, answered) = common::answer_native_approvals(native.clone());
    let workdir = std::fs::canonicalize(suite.workdir.path()).unwrap();

    let mut python = Command::new("python3")
        .arg(client_script())
        .env("SNOWPEA_BIN", bin_dir().join("snowpea"))
        .env("SNOWPEA_TEST_HOME", suite.home())
        .env("WORKDIR", &workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 on PATH");
    let mut lines = BufReader::new(python.stdout.take().unwrap()).lines();

    let run = async {
        let mut session = None;
        let mut interrupted = false;
        let mut done = false;
        while let Some(line) = lines.next_line().await.unwrap() {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                eprintln!("client: {line}");
                continue;
            };
            match message["event"].as_str() {
                Some("session") => {
                    // The MCP host's session is an ordinary one: a native client lists it.
                    let id = message["sessionId"].as_str().unwrap().to_owned();
                    let listed = native.call("session.list", json!({})).await.unwrap();
                    let entry = listed["sessions"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|s| s["sessionId"] == id.as_str())
                        .cloned()
                        .unwrap_or_else(|| panic!("{id} not in session.list: {listed}"));
                    assert_eq!(entry["workdir"], workdir.display().to_string());
                    session = Some(id);
                }
                Some("interrupted") => {
                    // The native view agrees: the cancelled turn ended `interrupted`.
                    let id = message["sessionId"].as_str().unwrap();
                    let events = native.resume(id, 0).await.unwrap();
                    let last_done = events.iter().rev().find(|e| e.kind == "turn.done").unwrap();
                    assert_eq!(last_done.payload["reason"], "interrupted");
                    interrupted = true;
                }
                Some("done") => done = true,
                _ => {}
            }
        }
        (session, interrupted, done)
    };
    let (session, interrupted, done) = tokio::time::timeout(RUN_LIMIT, run)
        .await
        .expect("the MCP client run timed out");
    let status = tokio::time::timeout(Duration::from_secs(20), python.wait())
        .await
        .expect("python exit")
        .unwrap();
    assert!(session.is_some(), "the client never reported its session");
    assert!(
        interrupted,
        "the client never reported the interrupted turn"
    );
    assert!(
        status.success() && done,
        "the MCP client failed (see its stderr above): {status}"
    );
    assert_eq!(
        answered.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the second native client answered one approval"
    );
    answerer.abort();
    native.close().await;
}

//! `snowpea acp` driven by the official ACP client library (npm `@agentclientprotocol/sdk`,
//! `tests/acp-client/run.mjs`) against a real suite on a temp home with the scripted provider
//! (issue 33). The Rust side starts the suite, runs the node client, and checks from a
//! native client that the editor's session is listed while the editor uses it, and kills the
//! gateway mid-session (the supervisor restarts it; the editor's next prompt still works).
//!
//! Needs the workspace binaries (`cargo build --workspace --bins`) and the client's npm
//! packages (`npm ci --prefix front/acp/tests/acp-client`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_testkit::suite::{bin_dir, Suite, SuiteOptions};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

/// Bound of the whole client run (each of its waits has its own 30 s bound).
const RUN_LIMIT: Duration = Duration::from_secs(180);

fn client_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp-client")
}

fn script() -> Value {
    json!({"steps": [
        {"match": "write the file", "reasoning": "thinking about it",
         "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hello acp\n"}}]},
        {"after_tool": "write_file", "match": "write the file", "text": "Wrote a.txt."},
        {"match": "run twice", "tool_calls": [{"name": "shell", "arguments": {"command": "echo one > one.txt"}}]},
        {"after_tool": "shell", "match": "run twice",
         "tool_calls": [{"name": "shell", "arguments": {"command": "echo two > two.txt"}}]},
        {"after_tool": "shell", "match": "run twice", "text": "Both asked."},
        {"match": "slow one", "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 60"}}]},
        {"after_tool": "shell", "match": "slow one", "text": "should not be reached"}
    ], "default": {"text": "ok"}})
}

#[tokio::test]
async fn official_acp_client_drives_a_session_end_to_end() {
    let modules = client_dir().join("node_modules/@agentclientprotocol/sdk");
    assert!(
        modules.exists(),
        "the ACP client's packages are missing; run `npm ci --prefix front/acp/tests/acp-client`"
    );
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script()),
        ..Default::default()
    })
    .await;
    let native = suite.client().await;
    let workdir = std::fs::canonicalize(suite.workdir.path()).unwrap();

    let mut node = Command::new("node")
        .arg(client_dir().join("run.mjs"))
        .env("SNOWPEA_BIN", bin_dir().join("snowpea"))
        .env("SNOWPEA_TEST_HOME", suite.home())
        .env("WORKDIR", &workdir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("node (Node.js 20+) on PATH");
    let mut stdin = node.stdin.take().unwrap();
    let mut lines = BufReader::new(node.stdout.take().unwrap()).lines();

    let run = async {
        let mut seen_session = false;
        let mut done = false;
        while let Some(line) = lines.next_line().await.unwrap() {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                eprintln!("client: {line}");
                continue;
            };
            match message["event"].as_str() {
                Some("session") => {
                    let id = message["sessionId"].as_str().unwrap().to_owned();
                    let listed = native
                        .call("session.list", json!({}))
                        .await
                        .expect("session.list");
                    let entry = listed["sessions"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|s| s["sessionId"] == id.as_str())
                        .cloned();
                    let entry =
                        entry.unwrap_or_else(|| panic!("{id} not in session.list: {listed}"));
                    assert_eq!(entry["workdir"], workdir.display().to_string());
                    seen_session = true;
                    stdin.write_all(b"continue\n").await.unwrap();
                    stdin.flush().await.unwrap();
                }
                Some("restart") => {
                    let old = suite.kill9("gateway");
                    suite.wait_restarted("gateway", old).await;
                    stdin.write_all(b"continue\n").await.unwrap();
                    stdin.flush().await.unwrap();
                }
                Some("done") => done = true,
                _ => {}
            }
        }
        (seen_session, done)
    };
    let (seen_session, done) = tokio::time::timeout(RUN_LIMIT, run)
        .await
        .expect("the ACP client run timed out");
    let status = tokio::time::timeout(Duration::from_secs(20), node.wait())
        .await
        .expect("node exit")
        .unwrap();
    assert!(seen_session, "the client never reported its session");
    assert!(
        status.success() && done,
        "the ACP client failed (see its stderr above): {status}"
    );
    native.close().await;
}

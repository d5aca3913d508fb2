//! MCP through the real suite (issue 6): `mcp.add` over WebSocket, `mcp.changed` fan-out, a
//! turn that calls an MCP tool end to end with approval, and kill -9 of svc-mcp mid-call
//! (the session survives; the next call works once svc-mcp is back).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::Client;

fn faulty() -> Option<PathBuf> {
    let p =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../svc-mcp/tests/mcp-servers/faulty.py");
    let python = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join("python3").is_file()));
    if python && p.exists() {
        Some(std::fs::canonicalize(p).unwrap())
    } else {
        snowpea_common::test_deps::missing("python3", "needed for the MCP test server");
        None
    }
}

async fn call(c: &Client, method: &str, params: Value) -> Value {
    tokio::time::timeout(Duration::from_secs(30), c.call(method, params.clone()))
        .await
        .expect("call timed out")
        .unwrap_or_else(|e| panic!("{method} {params}: {e:?}"))
}

async fn wait_ready(c: &Client, name: &str) {
    for _ in 0..300 {
        if let Ok(Ok(list)) =
            tokio::time::timeout(Duration::from_secs(5), c.call("mcp.list", json!({}))).await
        {
            let ready = list["servers"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|s| s["name"] == name && s["state"] == "ready");
            if ready {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("MCP server {name} never became ready");
}

#[tokio::test]
async fn a_turn_calls_an_mcp_tool_with_approval_and_survives_svc_mcp_kill() {
    let Some(faulty) = faulty() else { return };
    // The sleep tool creates this file when the call has reached the MCP server.
    let marks = tempfile::tempdir().unwrap();
    let marker = marks.path().join("sleeping");
    let script = json!({"steps": [
        {"match": "echo", "repeat": true, "tool_calls": [{"name": "mcp__f__echo", "arguments": {"text": "from mcp"}}]},
        {"match": "sleep", "tool_calls": [{"name": "mcp__f__sleep", "arguments": {"seconds": 30, "marker": marker}}]},
        {"after_tool": "mcp__f__echo", "repeat": true, "text": "echoed"},
        {"after_tool": "mcp__f__sleep", "text": "slept"}
    ], "default": {"text": "ok"}});
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let mut notes = client.subscribe();
    let approvals = Arc::new(AtomicUsize::new(0));
    let seen = approvals.clone();
    client.on_request("approval.request", move |p: Value| {
        let seen = seen.clone();
        async move {
            assert!(
                p.to_string().contains("mcp__f__"),
                "approval names the MCP tool: {p}"
            );
            seen.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"decision": "allow"}))
        }
    });

    let added = call(
        &client,
        "mcp.add",
        json!({
            "name": "f",
            "command": "python3",
            "args": [faulty.display().to_string(), "ok"],
            "permission": "network",
            "test": true
        }),
    )
    .await;
    assert_eq!(added["ok"], true, "{added}");
    assert_eq!(added["tools"].as_array().unwrap().len(), 4);
    wait_ready(&client, "f").await;
    let changed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let n = notes.recv().await.unwrap();
            if n.method == "mcp.changed" && n.params["name"] == "f" && n.params["state"] == "ready"
            {
                return n.params;
            }
        }
    })
    .await
    .expect("mcp.changed reaches the client");
    assert_eq!(changed["toolCount"], 4);

    let listed = call(&client, "tool.list", json!({})).await;
    let echo = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__f__echo")
        .cloned()
        .expect("tool.list shows MCP tools");
    assert_eq!(echo["source"], "mcp");
    assert_eq!(echo["server"], "f");
    assert_eq!(echo["permissionTag"], "network");

    // A turn calls the tool through the approval path.
    let sid = client
        .create_session(suite.workdir.path(), Some("accept"))
        .await
        .unwrap();
    let out = client
        .prompt_and_collect(&sid, "echo please", Duration::from_secs(60))
        .await
        .unwrap();
    let result = out
        .events
        .iter()
        .find(|e| e.kind == "tool.result")
        .expect("tool.result");
    assert_eq!(result.payload["ok"], true, "{}", result.payload);
    assert_eq!(result.payload["output"], "from mcp");
    assert_eq!(out.text(), "echoed");
    assert!(
        approvals.load(Ordering::SeqCst) >= 1,
        "network tools ask in accept mode"
    );

    // kill -9 of svc-mcp mid-call: the call fails, the session and the turn go on.
    let mut events = client.events(&sid);
    let turn = client.prompt(&sid, "sleep please").await.unwrap();
    snowpea_testkit::assert_eventually!(
        within = Duration::from_secs(30),
        marker.exists(),
        "the sleep call never reached the MCP server"
    );
    let old = suite.kill9("mcp");
    let done = events
        .wait_for_turn_done(&turn, Duration::from_secs(60))
        .await
        .unwrap();
    let failed = done
        .events
        .iter()
        .rev()
        .find(|e| e.kind == "tool.result")
        .expect("tool.result");
    assert_eq!(failed.payload["ok"], false, "{}", failed.payload);
    suite.wait_restarted("mcp", old).await;
    wait_ready(&client, "f").await;
    let again = client
        .prompt_and_collect(&sid, "echo again", Duration::from_secs(60))
        .await
        .unwrap();
    let result = again
        .events
        .iter()
        .rev()
        .find(|e| e.kind == "tool.result")
        .expect("tool.result");
    assert_eq!(result.payload["ok"], true, "{}", result.payload);
    assert_eq!(result.payload["output"], "from mcp");
}

fn everything() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../svc-mcp/tests/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    let node = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join("node").is_file()));
    if node && p.exists() {
        Some(std::fs::canonicalize(p).unwrap())
    } else {
        snowpea_common::test_deps::missing(
            "@modelcontextprotocol/server-everything",
            "run `npm ci --prefix svc-mcp/tests/mcp-servers`; .ci/run does",
        );
        None
    }
}

fn allow_everything(client: &Client) {
    client.on_request("approval.request", |_p: Value| async move {
        Ok(json!({"decision": "allow"}))
    });
}

/// A suite running the scripted model `script` (with extra `env`), a client that allows
/// every approval and listens to notifications, the MCP server `add` (`mcp.add` params)
/// ready, and an `accept` session in the suite's workdir.
struct WithServer {
    /// Keep it bound (`suite: _suite`): dropping it stops the suite.
    suite: Suite,
    client: Client,
    notes: tokio::sync::broadcast::Receiver<snowpea_sdk::Notification>,
    sid: String,
}

async fn with_server(script: Value, env: Vec<(String, String)>, add: Value) -> WithServer {
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        env,
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    allow_everything(&client);
    let notes = client.subscribe();
    let name = add["name"].as_str().expect("mcp.add name").to_owned();
    call(&client, "mcp.add", add).await;
    wait_ready(&client, &name).await;
    let sid = client
        .create_session(suite.workdir.path(), Some("accept"))
        .await
        .unwrap();
    WithServer {
        suite,
        client,
        notes,
        sid,
    }
}

/// The first `tool.result` event of a turn.
fn first_result(out: &snowpea_sdk::TurnOutcome) -> &snowpea_sdk::SessionEvent {
    out.events
        .iter()
        .find(|e| e.kind == "tool.result")
        .expect("tool.result")
}

#[tokio::test]
async fn an_mcp_image_result_reaches_the_model() {
    let Some(everything) = everything() else {
        return;
    };
    let script = json!({"steps": [
        {"match": "image", "tool_calls": [{"name": "mcp__ev__get-tiny-image", "arguments": {}}]},
        {"after_tool": "mcp__ev__get-tiny-image", "text": "I see it.", "describeImages": true}
    ], "default": {"text": "ok"}});
    let WithServer {
        client,
        sid,
        suite: _suite,
        ..
    } = with_server(
        script,
        vec![],
        json!({"name": "ev", "command": "node", "args": [everything.display().to_string()]}),
    )
    .await;
    let out = client
        .prompt_and_collect(&sid, "show me the image", Duration::from_secs(60))
        .await
        .unwrap();
    let result = first_result(&out);
    assert_eq!(result.payload["ok"], true, "{}", result.payload);
    let image = &result.payload["meta"]["images"][0];
    assert_eq!(image["mimeType"], "image/png", "{}", result.payload);
    let len = image["data"].as_str().unwrap().len();
    assert!(len > 100, "the real PNG: {len}");
    // The scripted model describes what the tool result it was given carried.
    assert_eq!(
        out.text(),
        format!(
            "I see it.\n[image image/png, {len} base64 characters, from mcp__ev__get-tiny-image]"
        )
    );
}

#[tokio::test]
async fn a_hung_mcp_server_is_restarted_and_the_session_goes_on() {
    let Some(faulty) = faulty() else { return };
    let script = json!({"steps": [
        {"match": "hang", "tool_calls": [{"name": "mcp__f__sleep", "arguments": {"seconds": 0, "hang": "now"}}]},
        {"match": "echo", "tool_calls": [{"name": "mcp__f__echo", "arguments": {"text": "alive"}}]},
        {"after_tool": "mcp__f__sleep", "text": "it hung"},
        {"after_tool": "mcp__f__echo", "text": "echoed"}
    ], "default": {"text": "ok"}});
    let WithServer {
        client,
        mut notes,
        sid,
        suite: _suite,
    } = with_server(
        script,
        vec![
            ("SNOWPEA_MCP_PING_INTERVAL_MS".into(), "300".into()),
            ("SNOWPEA_MCP_PING_TIMEOUT_MS".into(), "500".into()),
        ],
        json!({
            "name": "f",
            "command": "python3",
            "args": [faulty.display().to_string(), "ok"],
            "toolTimeoutSec": 2
        }),
    )
    .await;
    let out = client
        .prompt_and_collect(&sid, "hang please", Duration::from_secs(60))
        .await
        .unwrap();
    let result = first_result(&out);
    assert_eq!(result.payload["ok"], false, "{}", result.payload);
    assert!(
        result.payload["output"]
            .as_str()
            .unwrap_or_default()
            .contains("toolTimeoutSec"),
        "{}",
        result.payload
    );
    assert_eq!(out.text(), "it hung");
    // svc-mcp finds the server not responding, says so, kills and restarts it.
    let error = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let n = notes.recv().await.unwrap();
            if n.method == "mcp.changed" && n.params["name"] == "f" && n.params["state"] == "error"
            {
                return n.params;
            }
        }
    })
    .await
    .expect("mcp.changed error reaches the client");
    assert!(
        error["error"]
            .as_str()
            .unwrap_or_default()
            .contains("not responding"),
        "{error}"
    );
    wait_ready(&client, "f").await;
    let again = client
        .prompt_and_collect(&sid, "echo please", Duration::from_secs(60))
        .await
        .unwrap();
    let result = first_result(&again);
    assert_eq!(result.payload["ok"], true, "{}", result.payload);
    assert_eq!(result.payload["output"], "alive");
    assert_eq!(again.text(), "echoed");
}

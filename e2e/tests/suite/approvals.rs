//! Approvals through the real suite: timeout, approval.respond from any surface (the shared queue),
//! approval.pending / approval.resolved broadcast.
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};

fn shell_script() -> Value {
    json!({"steps": [
        {"match": "go", "tool_calls": [{"name": "shell", "arguments": {"command": "touch ran.txt"}}]},
        {"after_tool": "shell", "text": "finished"}
    ]})
}

#[tokio::test]
async fn unanswered_approval_times_out_and_denies() {
    let suite = Suite::start_with(SuiteOptions {
        script: Some(shell_script()),
        settings: Some(json!({"approvals": {"timeoutSec": 1}})),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    // A client that never answers.
    client.on_request("approval.request", |_p: Value| async {
        tokio::time::sleep(Duration::from_secs(120)).await;
        Ok(json!({"decision": "allow"}))
    });
    let sid = client
        .create_session(suite.workdir.path(), Some("accept"))
        .await
        .unwrap();
    let out = client
        .prompt_and_collect(&sid, "go", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(!suite.workdir.path().join("ran.txt").exists());
    let err = out
        .events
        .iter()
        .find(|e| e.kind == "error")
        .expect("error event");
    assert_eq!(err.payload["code"], "approval_timeout", "{}", err.payload);
    let res = out
        .events
        .iter()
        .find(|e| e.kind == "tool.result")
        .expect("tool.result");
    assert_eq!(res.payload["ok"], false);
}

#[tokio::test]
async fn respond_from_the_shared_queue_and_pending_is_broadcast() {
    let suite = Suite::start_with(SuiteOptions {
        script: Some(shell_script()),
        ..Default::default()
    })
    .await;
    let origin = suite.client().await;
    let other = suite
        .client_with(|o| o.with_client_id("other-client"))
        .await;
    let mut other_notes = other.subscribe();
    // The origin does not answer the request itself; it answers with approval.respond.
    origin.on_request("approval.request", |_p: Value| async {
        tokio::time::sleep(Duration::from_secs(120)).await;
        Ok(json!({"decision": "deny"}))
    });
    let sid = origin
        .create_session(suite.workdir.path(), Some("accept"))
        .await
        .unwrap();
    let mut events = origin.events(&sid);
    let turn = origin.prompt(&sid, "go").await.unwrap();
    // The other connection sees approval.pending.
    let pending = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let n = other_notes.recv().await.unwrap();
            if n.method == "approval.pending" {
                return n.params;
            }
        }
    })
    .await
    .expect("approval.pending broadcast");
    let request_id = pending["request"]["requestId"].as_str().unwrap().to_owned();
    assert_eq!(pending["request"]["sessionId"], sid.as_str());
    let listed = origin
        .call("approval.list", json!({"sessionId": sid}))
        .await
        .unwrap();
    assert_eq!(listed["requests"][0]["requestId"], request_id.as_str());
    // Any surface answers a session without a host (the spec's shared queue; one rule with
    // question.respond, issue 32 item 10).
    other
        .call(
            "approval.respond",
            json!({"requestId": request_id, "decision": "allow", "scope": "once"}),
        )
        .await
        .unwrap();
    let out = events
        .wait_for_turn_done(&turn, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
    assert!(suite.workdir.path().join("ran.txt").exists());
    let resolved = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let n = other_notes.recv().await.unwrap();
            if n.method == "approval.resolved" {
                return n.params;
            }
        }
    })
    .await
    .expect("approval.resolved broadcast");
    assert_eq!(resolved["requestId"], request_id.as_str());
    assert_eq!(resolved["decision"], "allow");
    // Answering again: not found.
    let e = origin
        .call(
            "approval.respond",
            json!({"requestId": request_id, "decision": "allow"}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code_str(), Some("not_found"));
}

/// Free-form JSON keeps integers past 2^53 exactly on every path a client reads it from:
/// `approval.request`, `approval.list` and the events `session.resume` replays.
#[tokio::test]
async fn free_form_integers_past_2_pow_53_survive_approval_list_and_session_resume() {
    const BIG: u64 = 1 << 60;
    let script = json!({"steps": [
        {"match": "go", "tool_calls": [{"name": "shell", "arguments": {"command": "true", "n": BIG}}]},
        {"after_tool": "shell", "text": "finished"}
    ]});
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let (asked_tx, mut asked) = tokio::sync::mpsc::unbounded_channel();
    // The client does not answer the request itself; it answers with approval.respond.
    client.on_request("approval.request", move |p: Value| {
        let asked_tx = asked_tx.clone();
        async move {
            let _ = asked_tx.send(p);
            tokio::time::sleep(Duration::from_secs(120)).await;
            Ok(json!({"decision": "deny"}))
        }
    });
    let sid = client
        .create_session(suite.workdir.path(), Some("accept"))
        .await
        .unwrap();
    let mut events = client.events(&sid);
    let turn = client.prompt(&sid, "go").await.unwrap();
    let request =
        snowpea_testkit::within(Duration::from_secs(20), "approval.request", asked.recv())
            .await
            .expect("approval.request");
    assert_eq!(request["args"]["n"].as_u64(), Some(BIG), "{request}");

    let listed = client
        .call("approval.list", json!({"sessionId": sid}))
        .await
        .unwrap();
    assert_eq!(
        listed["requests"][0]["args"]["n"].as_u64(),
        Some(BIG),
        "{listed}"
    );
    client
        .call(
            "approval.respond",
            json!({"requestId": request["requestId"], "decision": "allow", "scope": "once"}),
        )
        .await
        .unwrap();
    events
        .wait_for_turn_done(&turn, Duration::from_secs(30))
        .await
        .unwrap();

    let replayed = client.resume(&sid, 0).await.unwrap();
    let call = replayed
        .iter()
        .find(|e| e.kind == "tool.call")
        .expect("tool.call replayed");
    assert_eq!(
        call.payload["args"]["n"].as_u64(),
        Some(BIG),
        "{}",
        call.payload
    );
}

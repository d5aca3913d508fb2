//! A full turn through the real suite with the scripted provider: streaming, write_file
//! with a diff, a shell call approved once and one denied (which ends the turn `denied`),
//! event order, queueing and interrupt of a long shell.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::SessionEvent;

const TURN: Duration = Duration::from_secs(30);

fn kinds(events: &[SessionEvent]) -> Vec<&str> {
    events.iter().map(|e| e.kind.as_str()).collect()
}

#[tokio::test]
async fn full_turn_with_diff_and_approved_and_denied_shell() {
    let script = json!({"steps": [
        {"match": "build", "text": "Writing the file.", "tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]},
        {"after_tool": "write_file", "tool_calls": [{"name": "shell", "arguments": {"command": "cat hello.txt > copy1.txt"}}]},
        {"after_tool": "shell", "tool_calls": [{"name": "shell", "arguments": {"command": "cat hello.txt > copy2.txt"}}]},
        {"after_tool": "shell", "text": "All done, the file is written."}
    ]});
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let asked = Arc::new(AtomicUsize::new(0));
    let a2 = asked.clone();
    client.on_request("approval.request", move |params: Value| {
        let n = a2.fetch_add(1, Ordering::SeqCst);
        async move {
            assert_eq!(params["tool"], "shell");
            assert!(params["requestId"].is_string());
            Ok(if n == 0 {
                json!({"decision": "allow", "scope": "once"})
            } else {
                json!({"decision": "deny", "scope": "once"})
            })
        }
    });
    let sid = client
        .create_session(suite.workdir.path(), Some("accept"))
        .await
        .unwrap();
    let outcome = client
        .prompt_and_collect(&sid, "build it", TURN)
        .await
        .unwrap();
    // A person's deny ends the turn (spec approval.respond; issue 25 item 7).
    assert_eq!(
        outcome.reason.as_deref(),
        Some("denied"),
        "{:?}",
        kinds(&outcome.events)
    );
    let ev = &outcome.events;
    let k = kinds(ev);
    assert_eq!(&k[..2], &["turn.started", "message.user"], "{k:?}");
    assert_eq!(
        &k[k.len() - 3..],
        &["message.done", "context", "turn.done"],
        "{k:?}"
    );
    assert!(
        k.contains(&"message.delta") && k.contains(&"usage"),
        "{k:?}"
    );
    // seq is contiguous.
    for w in ev.windows(2) {
        assert_eq!(w[1].seq, w[0].seq + 1, "{k:?}");
    }
    // write_file produced a diff of hello.txt.
    let diff = ev.iter().find(|e| e.kind == "diff").expect("diff event");
    assert_eq!(diff.payload["path"], "hello.txt");
    assert!(
        diff.payload["patch"].as_str().unwrap().contains("+hi"),
        "{}",
        diff.payload
    );
    // First shell approved and ran, second denied and never ran.
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    assert!(suite.workdir.path().join("copy1.txt").exists());
    assert!(
        !suite.workdir.path().join("copy2.txt").exists(),
        "a denied tool must not run"
    );
    let results: Vec<&SessionEvent> = ev.iter().filter(|e| e.kind == "tool.result").collect();
    assert_eq!(results.len(), 3, "{k:?}");
    assert_eq!(results[0].payload["ok"], true);
    assert_eq!(results[1].payload["ok"], true);
    assert_eq!(results[2].payload["ok"], false);
    assert!(
        ev.iter().any(|e| e.kind == "error"),
        "a denial emits an error event: {k:?}"
    );
    assert!(
        !outcome.text().contains("All done"),
        "the model is not called after a person's deny: {}",
        outcome.text()
    );
    // approval.resolved was broadcast for both.
    drop(client);
}

#[tokio::test]
async fn a_prompt_during_a_turn_is_queued() {
    let script = json!({"steps": [
        {"match": "first", "delaySec": 1.5, "text": "one"},
        {"match": "second", "text": "two"}
    ]});
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let sid = client
        .create_session(suite.workdir.path(), Some("plan"))
        .await
        .unwrap();
    let mut events = client.events(&sid);
    let t1 = client.prompt(&sid, "first").await.unwrap();
    // Queued explicitly: the agent.busy default (steer) would fold it into the first turn.
    let t2 = client
        .call(
            "session.prompt",
            json!({"sessionId": sid, "text": "second", "whenBusy": "queue"}),
        )
        .await
        .unwrap()["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(t1, t2);
    let out1 = events.wait_for_turn_done(&t1, TURN).await.unwrap();
    assert_eq!(out1.reason.as_deref(), Some("complete"));
    let out2 = events.wait_for_turn_done(&t2, TURN).await.unwrap();
    assert_eq!(out2.reason.as_deref(), Some("complete"));
    let all: Vec<SessionEvent> = out1
        .events
        .iter()
        .chain(out2.events.iter())
        .cloned()
        .collect();
    let queued = all
        .iter()
        .find(|e| e.kind == "turn.queued")
        .expect("turn.queued");
    assert_eq!(queued.payload["turnId"], t2.as_str());
    assert_eq!(queued.payload["position"], 1);
    let dq = all
        .iter()
        .find(|e| e.kind == "turn.dequeued")
        .expect("turn.dequeued");
    assert_eq!(dq.payload["reason"], "started");
    let started2 = all
        .iter()
        .find(|e| e.kind == "turn.started" && e.payload["turnId"] == t2.as_str())
        .unwrap();
    assert_eq!(started2.payload["queued"], true);
    assert!(dq.seq < started2.seq);
    assert!(out2.text().contains("two"));
}

#[tokio::test]
async fn interrupt_kills_a_long_shell() {
    let script = json!({"steps": [
        {"match": "sleep", "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 30; touch late.txt"}}]},
        {"after_tool": "shell", "text": "stopped"}
    ]});
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let sid = client
        .create_session(suite.workdir.path(), Some("auto"))
        .await
        .unwrap();
    let mut events = client.events(&sid);
    let turn = client.prompt(&sid, "sleep please").await.unwrap();
    loop {
        let e = events.next(TURN).await.unwrap();
        if e.kind == "tool.call" {
            break;
        }
    }
    client.interrupt(&sid).await.unwrap();
    let out = events
        .wait_for_turn_done(&turn, Duration::from_secs(15))
        .await
        .expect("turn ends promptly after interrupt");
    assert_eq!(out.reason.as_deref(), Some("interrupted"));
    assert!(!suite.workdir.path().join("late.txt").exists());
}

#[tokio::test]
async fn provider_error_ends_the_turn_with_error() {
    let script = json!({"steps": [{"match": "boom", "error": {"status": 400, "message": "bad request from vendor"}}]});
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let sid = client
        .create_session(suite.workdir.path(), None)
        .await
        .unwrap();
    let out = client.prompt_and_collect(&sid, "boom", TURN).await.unwrap();
    assert_eq!(out.reason.as_deref(), Some("error"));
    let err = out
        .events
        .iter()
        .find(|e| e.kind == "error")
        .expect("error event");
    assert!(
        err.payload["message"]
            .as_str()
            .unwrap()
            .contains("bad request"),
        "{}",
        err.payload
    );
}

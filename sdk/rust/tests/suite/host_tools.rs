//! Contract of `Client::register_tools` (issue 21): registers the tools, answers
//! `tool.invoke` with the handler's `ToolResult`, sends `tool.progress`, honours
//! `tool.cancel`, and registers again after a reconnect.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_sdk::{Client, HostTool, ToolResult};

use super::fake_server::{fast_reconnect, within, FakeServer};

async fn ask(client: &Client, method: &str, params: Value) -> Value {
    let got = within(client.call("ask", json!({ "method": method, "params": params })))
        .await
        .expect("ask");
    got["response"].clone()
}

#[tokio::test]
async fn registers_answers_invoke_and_sends_progress() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(server.options()))
        .await
        .expect("connect");
    let tools = vec![
        HostTool::new("page_read", "Read the tab.", "read")
            .with_timeout(Duration::from_secs(5))
            .parallel_safe(),
        HostTool::new("zebra", "Deferred one.", "send").deferred(),
    ];
    let names = within(client.register_tools(tools, |call| async move {
        call.progress("working").await.expect("progress");
        ToolResult::ok(format!("{} got {}", call.name, call.args["tab"]))
            .with_meta(json!({"pages": 1}))
            .with_image("image/png", "iVBORw0KGgo=")
    }))
    .await
    .expect("register");
    assert_eq!(names, ["page_read", "zebra"]);
    let sent = &server.registers()[0]["tools"];
    assert_eq!(sent[0]["timeoutMs"], 5000);
    assert_eq!(sent[0]["parallel"], "safe");
    assert_eq!(sent[0]["inputSchema"], json!({"type": "object"}));
    assert_eq!(sent[1]["deferred"], true);
    assert!(sent[0].get("deferred").is_none());

    let response = ask(
        &client,
        "tool.invoke",
        json!({"callId": "c1", "name": "page_read", "sessionId": "s1", "args": {"tab": 3}}),
    )
    .await;
    let result = &response["result"];
    assert_eq!(result["ok"], true);
    assert_eq!(result["output"], "page_read got 3");
    assert_eq!(result["meta"], json!({"pages": 1}));
    assert_eq!(
        result["content"][0],
        json!({"type": "image", "data": "iVBORw0KGgo=", "mediaType": "image/png"})
    );
    let notes = server.notes();
    assert!(
        notes.contains(
            &json!({"method": "tool.progress", "params": {"callId": "c1", "message": "working"}})
        ),
        "{notes:?}"
    );
    within(client.close()).await;
}

#[tokio::test]
async fn tool_cancel_cancels_the_running_call() {
    let server = FakeServer::bind().await;
    let client = Arc::new(
        within(Client::connect(server.options()))
            .await
            .expect("connect"),
    );
    let saw_cancel = Arc::new(AtomicBool::new(false));
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let seen = saw_cancel.clone();
    within(client.register_tools(
        vec![HostTool::new("slow", "Never ends.", "read")],
        move |call| {
            let (seen, started_tx) = (seen.clone(), started_tx.clone());
            async move {
                let _ = started_tx.send(call.call_id.clone());
                call.cancelled.cancelled().await;
                seen.store(true, Ordering::SeqCst);
                ToolResult::error("unreachable: the helper answers a cancelled call itself")
            }
        },
    ))
    .await
    .expect("register");
    let asking = {
        let client = client.clone();
        tokio::spawn(async move {
            ask(
                &client,
                "tool.invoke",
                json!({"callId": "c9", "name": "slow", "sessionId": "s1"}),
            )
            .await
        })
    };
    assert_eq!(within(started.recv()).await.as_deref(), Some("c9"));
    within(client.call(
        "push",
        json!({"method": "tool.cancel", "params": {"sessionId": "s1", "callId": "c9"}}),
    ))
    .await
    .expect("push");
    let response = within(asking).await.expect("ask task");
    assert_eq!(response["error"]["data"]["code"], "cancelled", "{response}");
    assert!(
        saw_cancel.load(Ordering::SeqCst),
        "the handler saw its token cancelled"
    );
    within(client.close()).await;
}

#[tokio::test]
async fn tools_are_registered_again_after_a_reconnect() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(
        server.options().with_reconnect(fast_reconnect()),
    ))
    .await
    .expect("connect");
    within(
        client.register_tools(vec![HostTool::new("t", "A tool.", "read")], |_| async {
            ToolResult::ok("x")
        }),
    )
    .await
    .expect("register");
    server.kill_all();
    snowpea_testkit::assert_eventually!(server.registers().len() == 2);
    assert_eq!(server.registers()[1], server.registers()[0]);
    within(client.close()).await;
}

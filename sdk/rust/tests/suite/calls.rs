//! Calls: concurrency with out-of-order answers, timeouts, error objects, notifications.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use snowpea_sdk::{Client, Error};

use super::fake_server::{within, FakeServer};

#[tokio::test]
async fn concurrent_calls_match_out_of_order_answers() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(server.options()))
        .await
        .expect("connect");
    let order = Arc::new(Mutex::new(Vec::new()));
    let call = |ms: u64, value: &'static str| {
        let order = order.clone();
        let client = &client;
        async move {
            let got = client
                .call("sleep", json!({ "ms": ms, "value": value }))
                .await;
            order.lock().unwrap().push(value);
            got
        }
    };
    let (slow, fast, echo) = within(async {
        tokio::join!(
            call(300, "slow"),
            call(10, "fast"),
            client.call("echo", json!({ "x": 1 }))
        )
    })
    .await;
    assert_eq!(slow.expect("slow"), "slow");
    assert_eq!(fast.expect("fast"), "fast");
    assert_eq!(echo.expect("echo"), json!({ "x": 1 }));
    assert_eq!(*order.lock().unwrap(), ["fast", "slow"]);
    within(client.close()).await;
}

#[tokio::test]
async fn call_timeout_then_connection_still_usable() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(server.options()))
        .await
        .expect("connect");
    let err = within(client.call_with_timeout("never", json!({}), Duration::from_millis(100)))
        .await
        .expect_err("no answer");
    assert!(matches!(err, Error::Timeout), "{err:?}");
    let ok = within(client.call("echo", json!("still here")))
        .await
        .expect("echo");
    assert_eq!(ok, "still here");
    within(client.close()).await;
}

#[tokio::test]
async fn rpc_errors_carry_numeric_and_string_codes() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(server.options()))
        .await
        .expect("connect");
    let err = within(client.call("fail", json!({ "code": "not_found" })))
        .await
        .expect_err("fails");
    assert_eq!(err.code_str(), Some("not_found"));
    let rpc = err.rpc().expect("rpc error");
    assert_eq!(rpc.code, -32004);
    assert_eq!(rpc.data.as_deref(), Some(&json!({ "code": "not_found" })));
    let missing = within(client.call("no.such", json!({})))
        .await
        .expect_err("fails");
    assert_eq!(
        missing.rpc().map(|e| e.code),
        Some(snowpea_sdk::METHOD_NOT_FOUND)
    );
    within(client.close()).await;
}

#[tokio::test]
async fn client_notifications_reach_the_server() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(server.options()))
        .await
        .expect("connect");
    within(client.notify("client.note", json!({ "n": 7 })))
        .await
        .expect("notify");
    snowpea_testkit::assert_eventually!(
        within = super::fake_server::T,
        !server.notes().is_empty(),
        "note arrives"
    );
    assert_eq!(
        server.notes()[0],
        json!({ "method": "client.note", "params": { "n": 7 } })
    );
    within(client.close()).await;
}

#[tokio::test]
async fn prompt_and_collect_returns_the_turn() {
    let server = FakeServer::bind().await;
    let client = within(Client::connect(server.options()))
        .await
        .expect("connect");
    let sid = within(client.create_session("/tmp".as_ref(), Some("plan")))
        .await
        .expect("create");
    let turn = within(client.prompt_and_collect(&sid, "hi", Duration::from_secs(5)))
        .await
        .expect("turn");
    assert_eq!(turn.reason.as_deref(), Some("complete"));
    assert_eq!(turn.text(), "abc");
    let kinds: Vec<&str> = turn.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "turn.started",
            "message.delta",
            "message.delta",
            "message.delta",
            "turn.done"
        ]
    );
    assert_eq!(client.last_seq(&sid), Some(5));
    let replay = within(client.resume(&sid, 3)).await.expect("resume");
    assert_eq!(replay.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 5]);
    within(client.close()).await;
}

//! The generic router: forwarding with the call context, params validation naming the
//! field, error mapping, not_implemented, unavailable, concurrency.

use std::time::Duration;

use serde_json::json;

use super::fake::FakeService;
use super::harness::{GatewayProc, Opts, TestHome, T};
use snowpea_testkit::eventually;

#[tokio::test]
async fn calls_reach_the_service_with_the_connection_context() {
    let home = TestHome::new();
    let fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    let r = c.ok("session.list", json!({})).await;
    let s = &r["sessions"][0];
    assert_eq!(s["sessionId"], "s1");
    assert_eq!(s["title"], "test-client", "clientId travels as metadata");
    assert_eq!(s["contextUsed"], 42, "64-bit integers are JSON numbers");
    let conn_id = s["workdir"].as_str().unwrap().to_owned();
    let live = fake
        .hub
        .connection(&conn_id)
        .expect("hello announced the connection");
    assert_eq!(live.client_kind.as_deref(), Some("test"));
}

#[tokio::test]
async fn invalid_params_name_the_field() {
    let home = TestHome::new();
    let _fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    for (params, field) in [
        (json!({}), "params.workdir"),
        (json!({"workdir": "/tmp", "mode": "yolo"}), "params.mode"),
        (json!({"workdir": 5}), "params.workdir"),
        (json!({"workdir": "/tmp", "nope": true}), "params.nope"),
    ] {
        let e = c.err("session.create", params.clone()).await;
        assert_eq!(e["code"], -32602, "{params}: {e}");
        assert_eq!(e["data"]["code"], "invalid_params");
        assert_eq!(e["data"]["details"]["field"], field, "{params}");
        assert!(e["message"].as_str().unwrap().contains(field));
    }
    let e = c.err("session.list", json!([1, 2])).await;
    assert_eq!(e["data"]["details"]["field"], "params");
}

#[tokio::test]
async fn service_errors_keep_their_code_and_details() {
    let home = TestHome::new();
    let _fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    let e = c
        .err("session.rename", json!({"sessionId": "s9", "title": "x"}))
        .await;
    assert_eq!(e["code"], -32004);
    assert_eq!(e["data"]["code"], "not_found");
    assert_eq!(e["data"]["details"]["sessionId"], "s9");
    assert_eq!(e["message"], "no session s9");
}

#[tokio::test]
async fn a_method_the_service_lacks_is_not_implemented() {
    let home = TestHome::new();
    let _fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    let e = c
        .err("session.prompt", json!({"sessionId": "s1", "text": "hi"}))
        .await;
    assert_eq!(e["code"], -32000, "{e}");
    assert_eq!(e["data"]["code"], "not_implemented");
}

#[tokio::test]
async fn a_service_outside_the_suite_is_not_implemented() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    let e = c.err("memory.search", json!({"query": "x"})).await;
    assert_eq!(e["data"]["code"], "not_implemented", "{e}");
    assert_eq!(e["data"]["details"]["service"], "memory");
}

#[tokio::test]
async fn a_service_that_is_down_is_unavailable_after_the_wait() {
    let home = TestHome::new();
    let gw = GatewayProc::start(
        &home,
        Opts {
            env: vec![("SNOWPEA_UNAVAILABLE_WAIT_MS", "300".into())],
            ..Default::default()
        },
    );
    let mut c = gw.authed().await;
    let started = std::time::Instant::now();
    let e = c.err("session.list", json!({})).await;
    assert_eq!(e["code"], -32000, "{e}");
    assert_eq!(e["data"]["code"], "unavailable");
    assert_eq!(e["data"]["details"]["service"], "session");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "it waited for a restart first"
    );
}

#[tokio::test]
async fn a_call_waits_for_a_service_that_comes_back() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "session.list", "params": {}}))
        .await;
    // The service is "restarting" for a moment (not a readiness wait: the point is
    // that the call is already waiting when the service appears).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _fake = FakeService::start(&home.home);
    let r = c.response_to(&json!(1)).await;
    assert_eq!(r["result"]["sessions"][0]["sessionId"], "s1", "{r}");
}

#[tokio::test]
async fn concurrent_requests_answer_out_of_order() {
    let home = TestHome::new();
    let _fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    c.send(&json!({"jsonrpc": "2.0", "id": "slow", "method": "session.close", "params": {"sessionId": "slow-1000"}}))
        .await;
    c.send(&json!({"jsonrpc": "2.0", "id": "fast", "method": "session.close", "params": {"sessionId": "s1"}}))
        .await;
    let first = c.recv().await;
    assert_eq!(
        first["id"], "fast",
        "the fast call is not held up by the slow one"
    );
    let second = c.recv().await;
    assert_eq!(second["id"], "slow");
    assert_eq!(second["result"]["ok"], true);
}

#[tokio::test]
async fn client_notifications_are_forwarded_and_not_answered() {
    let home = TestHome::new();
    let fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    c.send(&json!({"jsonrpc": "2.0", "method": "tool.progress", "params": {"callId": "call-7", "message": "50%"}}))
        .await;
    eventually(T, "tool.progress reached the service", || async {
        fake.progress
            .lock()
            .unwrap()
            .contains(&"call-7".to_string())
            .then_some(())
    })
    .await;
    c.assert_quiet().await;
}

#[tokio::test]
async fn a_connection_over_its_own_queue_is_told_busy_while_another_is_served() {
    // Issue 24 §1: a connection's requests beyond its running slots wait in its own queue;
    // only its own overflow is refused `busy`, and another connection is served meanwhile.
    let home = TestHome::new();
    let _fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    let mut flood = gw.authed().await;
    let mut polite = gw.authed().await;
    let info = polite.ok("system.info", json!({})).await;
    assert_eq!(info["counters"]["busy"], 0);
    // Calls that hold their slot for ten minutes (the test ends long before): the running
    // slots, then the whole queue, are taken.
    let (running, queued) = (4, 1024);
    for i in 0..running + queued {
        flood
            .send(&json!({"jsonrpc": "2.0", "id": i, "method": "session.close", "params": {"sessionId": "slow-600000"}}))
            .await;
    }
    flood
        .send(&json!({"jsonrpc": "2.0", "id": "over", "method": "session.close", "params": {"sessionId": "s1"}}))
        .await;
    let busy = flood.recv().await;
    assert_eq!(busy["id"], "over", "{busy}");
    assert_eq!(busy["error"]["code"], -32000);
    assert_eq!(busy["error"]["data"]["code"], "unavailable");
    assert_eq!(busy["error"]["data"]["details"]["reason"], "busy");
    assert!(busy["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("busy"));
    // The other connection's calls are not queued behind the flood.
    let r = polite.ok("session.list", json!({})).await;
    assert_eq!(r["sessions"][0]["sessionId"], "s1");
    let info = polite.ok("system.info", json!({})).await;
    assert_eq!(info["counters"]["busy"], 1);
}

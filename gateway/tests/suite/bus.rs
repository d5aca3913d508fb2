//! The service bus as clients see it: notification fan-out, server→client requests
//! answered (or not) through ServiceBus.Reply, connection announcements, re-subscribing
//! after a service restart, and the bounded outbound queue.

use std::time::Duration;

use serde_json::json;
use snowpea_common::bus::RequestError;
use snowpea_proto::session::v1::{ApprovalRequest, QuestionRequest};

use super::client::Client;
use super::fake::FakeService;
use super::harness::{GatewayProc, Opts, TestHome, T};
use snowpea_testkit::eventually;

/// The connection id of an authenticated client, as the service sees it.
async fn conn_id(c: &mut Client) -> String {
    let r = c.ok("session.list", json!({})).await;
    r["sessions"][0]["workdir"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn notifications_fan_out_to_authenticated_connections() {
    let home = TestHome::new();
    let mut fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    fake.wait_subscribed(1).await;
    let mut a = gw.authed().await;
    let mut b = gw.authed().await;
    let mut stranger = gw.connect().await;
    let a_id = conn_id(&mut a).await;

    fake.hub.notify_json(
        "sessions.changed",
        json!({"reason": "created", "n": 3}).to_string(),
        vec![],
    );
    for c in [&mut a, &mut b] {
        let n = c.next_named("sessions.changed").await;
        assert_eq!(n["params"], json!({"reason": "created", "n": 3}));
        assert!(n.get("id").is_none(), "a notification has no id");
    }
    // Targeted: only A.
    fake.hub
        .notify_json("approval.pending", json!({"x": 1}).to_string(), vec![a_id]);
    assert_eq!(a.next_named("approval.pending").await["params"]["x"], 1);
    b.assert_quiet().await;
    // Never to a connection that has not said hello.
    let e = stranger.err("system.health", json!({})).await;
    assert_eq!(
        e["data"]["code"], "unauthorized",
        "and nothing arrived before it"
    );
}

#[tokio::test]
async fn server_to_client_requests_are_answered_through_reply() {
    let home = TestHome::new();
    let mut fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    fake.wait_subscribed(1).await;
    let mut c = gw.authed().await;
    let id = conn_id(&mut c).await;

    let hub = fake.hub.clone();
    let cid = id.clone();
    let asked = tokio::spawn(async move {
        let params = ApprovalRequest {
            tool: "shell".into(),
            ..Default::default()
        };
        hub.request(&cid, &params, &[], Duration::from_secs(10))
            .await
    });
    let req = c.next_named("approval.request").await;
    assert_eq!(req["params"]["tool"], "shell");
    let rid = req["id"].as_str().expect("string id").to_owned();
    assert!(rid.starts_with("srv-"), "{rid}");
    c.send(&json!({"jsonrpc": "2.0", "id": rid, "result": {"decision": "allow"}}))
        .await;
    let answer = tokio::time::timeout(Duration::from_secs(10), asked)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer.unwrap()["decision"], "allow");

    // An error answer travels back too.
    let hub = fake.hub.clone();
    let asked = tokio::spawn(async move {
        hub.request(
            &id,
            &QuestionRequest::default(),
            &[],
            Duration::from_secs(10),
        )
        .await
    });
    let req = c.next_named("question.request").await;
    c.send(&json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32000, "message": "declined"}}))
        .await;
    let answer = tokio::time::timeout(Duration::from_secs(10), asked)
        .await
        .unwrap()
        .unwrap();
    match answer {
        Err(RequestError::Answered(e)) => assert_eq!(e["message"], "declined"),
        other => panic!("expected the client's error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_client_that_disconnects_answers_connection_gone() {
    let home = TestHome::new();
    let mut fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    fake.wait_subscribed(1).await;
    let mut c = gw.authed().await;
    let id = conn_id(&mut c).await;
    let hub = fake.hub.clone();
    let cid = id.clone();
    let asked = tokio::spawn(async move {
        hub.request(
            &cid,
            &ApprovalRequest::default(),
            &[],
            Duration::from_secs(30),
        )
        .await
    });
    c.next_named("approval.request").await;
    c.close().await;
    let answer = tokio::time::timeout(Duration::from_secs(10), asked)
        .await
        .expect("connection_gone well before the service's own timeout")
        .unwrap();
    assert_eq!(answer, Err(RequestError::ConnectionGone));
    eventually(T, "the service learns the connection closed", || async {
        (!fake.hub.is_live(&id)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn answers_with_unknown_ids_are_ignored() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    c.send(&json!({"jsonrpc": "2.0", "id": "srv-999", "result": {}}))
        .await;
    c.send(&json!({"jsonrpc": "2.0", "id": 5, "error": {"code": 1, "message": "x"}}))
        .await;
    c.assert_quiet().await;
}

#[tokio::test]
async fn a_restarted_service_relearns_connections_and_delivers_again() {
    let home = TestHome::new();
    let mut fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    fake.wait_subscribed(1).await;
    let mut c = gw.authed().await;
    let id = conn_id(&mut c).await;
    fake.kill();

    let mut fake = FakeService::start(&home.home);
    fake.wait_subscribed(1).await;
    eventually(
        T,
        "full connection set re-sent after re-subscribe",
        || async { fake.hub.is_live(&id).then_some(()) },
    )
    .await;
    fake.hub.notify_json(
        "sessions.changed",
        json!({"after": "restart"}).to_string(),
        vec![],
    );
    assert_eq!(
        c.next_named("sessions.changed").await["params"]["after"],
        "restart"
    );
    assert_eq!(conn_id(&mut c).await, id, "calls work again too");
}

#[tokio::test]
async fn a_client_that_cannot_keep_up_is_closed_with_a_reason() {
    let home = TestHome::new();
    let mut fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(
        &home,
        Opts {
            env: vec![("SNOWPEA_GATEWAY_QUEUE", "4".into())],
            ..Default::default()
        },
    );
    fake.wait_subscribed(1).await;
    let mut slow = gw.authed().await;
    let slow_id = conn_id(&mut slow).await;
    let mut observer = gw.authed().await;
    // The slow client reads nothing while the daemon pushes it far more than the socket
    // buffers hold; another connection watches the counter.
    overflow(&fake, &mut observer, &slow_id, 200).await;
    expect_overflow_close(&mut slow).await;
}

/// Pushes 16 KiB `session.event`s to `slow_id` in bursts of `burst`, one `system.info`
/// round trip on `observer` between bursts, until the gateway counts a queue overflow.
async fn overflow(fake: &FakeService, observer: &mut Client, slow_id: &str, burst: usize) {
    let payload = json!({"chunk": "x".repeat(16 * 1024)}).to_string();
    let deadline = tokio::time::Instant::now() + T;
    loop {
        for _ in 0..burst {
            fake.hub
                .notify_json("session.event", payload.clone(), vec![slow_id.to_owned()]);
        }
        let info = observer.ok("system.info", json!({})).await;
        if info["counters"]["queueOverflows"].as_u64() >= Some(1) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no overflow: {info}"
        );
    }
}

/// Reads `slow` until its close frame: 1008 with the reason that says to resume.
async fn expect_overflow_close(slow: &mut Client) {
    let frame = slow
        .expect_close()
        .await
        .expect("a close frame with a reason");
    assert_eq!(u16::from(frame.code), 1008);
    assert!(
        frame.reason.contains("outbound queue full") && frame.reason.contains("session.resume"),
        "{}",
        frame.reason
    );
}

#[tokio::test]
async fn a_client_paused_past_the_gateway_letting_go_still_gets_the_close_frame() {
    // Issue 24 §3: the slow client reads nothing until the gateway has closed it AND let the
    // socket go (the bounded wait is over); the close frame with its reason must still be
    // waiting behind the frames the kernel already holds — not a bare EOF.
    let home = TestHome::new();
    let mut fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(
        &home,
        Opts {
            env: vec![("SNOWPEA_GATEWAY_QUEUE", "64".into())],
            ..Default::default()
        },
    );
    fake.wait_subscribed(1).await;
    let mut slow = gw.authed().await;
    let slow_id = conn_id(&mut slow).await;
    let mut observer = gw.authed().await;
    // Small bursts (half the queue) with a round trip between them, so the queue overflows
    // only once the socket buffers are full — a client paused for long, not a burst.
    overflow(&fake, &mut observer, &slow_id, 32).await;
    // The gateway counts a connection until it has let its socket go.
    snowpea_testkit::assert_eventually!(
        within = T,
        observer.ok("system.info", json!({})).await["counters"]["connections"] == 1,
        "the gateway still holds the slow socket"
    );
    expect_overflow_close(&mut slow).await;
}

//! Spec "Handshake": nothing before a successful system.hello, constant-time token,
//! protocol major check, capabilities from the running services.

use serde_json::{json, Value};

use super::fake::FakeService;
use super::harness::{GatewayProc, Opts, TestHome, T};
use snowpea_testkit::eventually;

fn hello_params(token: &str, protocol: &str) -> Value {
    json!({"token": token, "clientVersion": "t", "protocolVersion": protocol})
}

#[tokio::test]
async fn every_method_before_hello_is_unauthorized() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.connect().await;
    for method in [
        "session.list",
        "system.health",
        "no.such.method",
        "approval.request",
    ] {
        let e = c.err(method, json!({})).await;
        assert_eq!(e["code"], -32000, "{method}: {e}");
        assert_eq!(e["data"]["code"], "unauthorized", "{method}");
    }
    // Notifications before hello are dropped, not answered.
    c.send(&json!({"jsonrpc": "2.0", "method": "tool.progress", "params": {"callId": "x"}}))
        .await;
    let e = c.err("system.info", json!({})).await;
    assert_eq!(e["data"]["code"], "unauthorized");
}

#[tokio::test]
async fn a_wrong_token_is_unauthorized_and_stays_so() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.connect().await;
    let e = c
        .err(
            "system.hello",
            hello_params("not-the-token", snowpea_proto::PROTOCOL_VERSION),
        )
        .await;
    assert_eq!(e["data"]["code"], "unauthorized");
    assert!(!e.to_string().contains(&home.token), "token leaked");
    let e = c.err("system.health", json!({})).await;
    assert_eq!(e["data"]["code"], "unauthorized");
}

#[tokio::test]
async fn a_different_protocol_major_is_incompatible_and_names_both_versions() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.connect().await;
    let e = c
        .err("system.hello", hello_params(&home.token, "2.0.0"))
        .await;
    assert_eq!(e["code"], -32000);
    assert_eq!(e["data"]["code"], "protocol_incompatible");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("2.0.0") && msg.contains(snowpea_proto::PROTOCOL_VERSION),
        "{msg}"
    );
    // Same major, other minor: fine.
    c.ok("system.hello", hello_params(&home.token, "1.0.0"))
        .await;
}

#[tokio::test]
async fn hello_params_are_validated_like_any_other_method() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.connect().await;
    let e = c
        .err(
            "system.hello",
            json!({"clientVersion": "t", "protocolVersion": "1.25.0"}),
        )
        .await;
    assert_eq!(e["code"], -32602);
    assert_eq!(e["data"]["details"]["field"], "params.token");
    let mut p = hello_params(&home.token, "1.25.0");
    p["bogus"] = json!(1);
    let e = c.err("system.hello", p).await;
    assert_eq!(e["data"]["details"]["field"], "params.bogus");
}

#[tokio::test]
async fn hello_reports_versions_and_only_what_running_services_implement() {
    let home = TestHome::new();
    let mut fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    fake.wait_subscribed(1).await;
    let caps = eventually(T, "capabilities learned from the service", || async {
        let mut c = gw.connect().await;
        let r = c.hello(&home.token).await;
        assert_eq!(r["protocolVersion"], snowpea_proto::PROTOCOL_VERSION);
        assert!(r["serverVersion"].is_string());
        let caps = r["capabilities"].clone();
        let learned = caps
            .as_array()
            .is_some_and(|a| a.iter().any(|c| c == "sessions"));
        learned.then_some(caps)
    })
    .await;
    // The service's own, and `update` (system.checkUpdate / system.update: the gateway's).
    assert_eq!(caps, json!(["approvals", "sessions", "update"]));
}

#[tokio::test]
async fn a_failed_second_hello_deauthenticates() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    c.ok("system.health", json!({})).await;
    let e = c.err("system.hello", hello_params("wrong", "1.25.0")).await;
    assert_eq!(e["data"]["code"], "unauthorized");
    let e = c.err("system.health", json!({})).await;
    assert_eq!(e["data"]["code"], "unauthorized");
}

//! system.info's per-service call counters (from each service's `ServiceBus.CallStats`)
//! and the request id every forwarded call carries (issue 13 §3).

use serde_json::json;

use super::fake::FakeService;
use super::harness::{GatewayProc, Opts, TestHome};

#[tokio::test]
async fn system_info_counts_each_running_services_calls() {
    let home = TestHome::new();
    let mut fake = FakeService::start(&home.home);
    // memory has no socket: it is down, and left out.
    let gw = GatewayProc::start(
        &home,
        Opts {
            services: "session,memory",
            ..Opts::default()
        },
    );
    fake.wait_subscribed(1).await;
    let mut c = gw.authed().await;
    c.ok("session.list", json!({})).await;
    c.ok("session.list", json!({})).await;
    c.err("session.rename", json!({"sessionId": "s9", "title": "x"}))
        .await;
    let info = c.ok("system.info", json!({})).await;
    let counters = info["counters"].as_object().expect("counters object");
    assert_eq!(counters["calls.session.session.list.count"], 2);
    assert_eq!(counters["calls.session.session.list.errors"], 0);
    assert_eq!(counters["calls.session.session.rename.count"], 1);
    assert_eq!(counters["calls.session.session.rename.errors"], 1);
    assert_eq!(counters["calls.session.session.rename.error.not_found"], 1);
    for q in ["p50Us", "p99Us"] {
        assert!(
            counters[&format!("calls.session.session.list.{q}")].is_u64(),
            "{q}: {counters:?}"
        );
    }
    assert!(
        !counters.keys().any(|k| k.starts_with("calls.memory.")),
        "a service that is down is left out: {counters:?}"
    );
    assert_eq!(
        counters["connections"], 1,
        "the gateway's own counters stay"
    );
    assert!(counters["requests"].as_u64() >= Some(4));
}

#[tokio::test]
async fn every_forwarded_call_carries_its_own_request_id() {
    let home = TestHome::new();
    let fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    c.ok("session.list", json!({})).await;
    c.ok("session.list", json!({})).await;
    let ids: Vec<String> = fake
        .calls
        .lock()
        .unwrap()
        .iter()
        .map(|a| a.request_id.clone().expect("snowpea-request-id metadata"))
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.iter().all(|id| id.starts_with("r_")), "{ids:?}");
    assert_ne!(ids[0], ids[1]);
}

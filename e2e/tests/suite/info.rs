//! system.info across the suite: per-service call counters from every running service's
//! `ServiceBus.CallStats` (issue 13 §3), next to the gateway's own counters.
use serde_json::json;
use snowpea_e2e::Suite;

#[tokio::test]
async fn system_info_counts_the_calls_of_each_service() {
    let suite = Suite::start().await;
    let mut ws = suite.raw_hello().await;
    for _ in 0..2 {
        let r = ws.call("session.list", json!({})).await;
        assert!(r.get("result").is_some(), "{r}");
    }
    let r = ws
        .call(
            "session.rename",
            json!({"sessionId": "s_nope", "title": "x"}),
        )
        .await;
    assert!(r.get("error").is_some(), "{r}");
    let r = ws.call("system.info", json!({})).await;
    let counters = &r["result"]["counters"];
    assert!(counters.is_object(), "counters: {r}");
    assert_eq!(counters["calls.session.session.list.count"], 2, "{r}");
    assert_eq!(counters["calls.session.session.list.errors"], 0, "{r}");
    assert_eq!(counters["calls.session.session.rename.count"], 1, "{r}");
    assert_eq!(counters["calls.session.session.rename.errors"], 1, "{r}");
    assert_eq!(
        counters["calls.session.session.rename.error.not_found"], 1,
        "{r}"
    );
    for q in ["p50Us", "p99Us"] {
        assert!(
            counters[format!("calls.session.session.list.{q}")].is_u64(),
            "{q}: {r}"
        );
    }
    assert!(counters["requests"].as_u64() >= Some(4), "{r}");
}

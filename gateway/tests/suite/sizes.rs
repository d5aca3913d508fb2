//! Issue 24 §2: every request the gateway accepts either reaches its service or is refused
//! `invalid_params` naming the field and its limit — never a transport `internal` — and
//! big results travel back (the limits of every hop are `snowpea_proto::limits`).

use serde_json::json;
use snowpea_proto::limits::STRING_PARAM;

use super::fake::{FakeService, RESUME_EVENTS};
use super::harness::{GatewayProc, Opts, TestHome};

#[tokio::test]
async fn oversized_params_are_invalid_params_naming_the_field_and_big_ones_reach_the_service() {
    let home = TestHome::new();
    let _fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;

    // An 8 MiB prompt and a (nearly) 16 MiB search: over the string limit, named.
    let cases = [
        (
            "session.prompt",
            json!({"sessionId": "s1", "text": "p".repeat(8 << 20)}),
            "params.text",
        ),
        (
            "memory.search",
            json!({"query": "q".repeat((16 << 20) - 256)}),
            "params.query",
        ),
    ];
    for (method, params, field) in cases {
        let e = c.err(method, params).await;
        assert_eq!(e["code"], -32602, "{method}: {e}");
        assert_eq!(e["data"]["code"], "invalid_params", "{method}");
        assert_eq!(e["data"]["details"]["field"], field, "{method}");
        assert_eq!(
            e["message"],
            format!("{field}: at most {STRING_PARAM} bytes"),
            "{method}"
        );
    }

    // At the limit, the params reach the service (the fake answers rename `not_found`),
    // through gRPC's decode limit on the service side.
    let e = c
        .err(
            "session.rename",
            json!({"sessionId": "s_x", "title": "t".repeat(STRING_PARAM)}),
        )
        .await;
    assert_eq!(e["data"]["code"], "not_found", "reached the service: {e}");

    // A result far above tonic's 4 MiB default travels back whole.
    let r = c.ok("session.resume", json!({"sessionId": "s1"})).await;
    let events = r["events"].as_array().expect("events");
    assert_eq!(events.len(), RESUME_EVENTS);
    assert_eq!(events[RESUME_EVENTS - 1]["seq"], RESUME_EVENTS);
}

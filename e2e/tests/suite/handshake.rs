//! system.hello: token, protocol major, calls before hello.
use serde_json::json;
use snowpea_e2e::{raw::RawWs, Suite};

#[tokio::test]
async fn calls_before_hello_are_unauthorized() {
    let suite = Suite::start().await;
    let mut ws = suite.raw().await;
    let r = ws.call("session.list", json!({})).await;
    assert_eq!(RawWs::code(&r), "unauthorized", "{r}");
    assert_eq!(r["error"]["code"], -32000);
    let r = ws.call("system.health", json!({})).await;
    assert_eq!(RawWs::code(&r), "unauthorized", "{r}");
}

#[tokio::test]
async fn bad_token_is_unauthorized_and_good_token_works() {
    let suite = Suite::start().await;
    let mut ws = suite.raw().await;
    let r = ws
        .call(
            "system.hello",
            json!({"token": "nope", "clientVersion": "t", "protocolVersion": "1.25.0"}),
        )
        .await;
    assert_eq!(RawWs::code(&r), "unauthorized", "{r}");
    let r = ws
        .call(
            "system.hello",
            json!({"token": suite.token, "clientVersion": "t", "protocolVersion": "1.25.0"}),
        )
        .await;
    assert_eq!(r["result"]["protocolVersion"], "1.25.0", "{r}");
    let caps = r["result"]["capabilities"]
        .as_array()
        .expect("capabilities");
    assert!(caps.iter().any(|c| c == "sessions"), "{r}");
    assert!(caps.iter().any(|c| c == "checkpoints"), "issue 20: {r}");
    assert!(caps.iter().any(|c| c == "sessionContinue"), "issue 16: {r}");
    // Only what running services implement: never the spec's whole list (`standingOrders`
    // names a feature no service has).
    assert!(
        !caps.iter().any(|c| c == "standingOrders"),
        "not implemented here: {r}"
    );
}

#[tokio::test]
async fn other_major_is_protocol_incompatible() {
    let suite = Suite::start().await;
    let mut ws = suite.raw().await;
    let r = ws
        .call(
            "system.hello",
            json!({"token": suite.token, "clientVersion": "t", "protocolVersion": "2.0.0"}),
        )
        .await;
    assert_eq!(RawWs::code(&r), "protocol_incompatible", "{r}");
    // A different minor of the same major is fine.
    let r = ws
        .call(
            "system.hello",
            json!({"token": suite.token, "clientVersion": "t", "protocolVersion": "1.2.0"}),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
}

#[tokio::test]
async fn hello_without_token_names_the_field() {
    let suite = Suite::start().await;
    let mut ws = suite.raw().await;
    let r = ws
        .call(
            "system.hello",
            json!({"clientVersion": "t", "protocolVersion": "1.25.0"}),
        )
        .await;
    assert_eq!(RawWs::code(&r), "invalid_params", "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("token"),
        "{r}"
    );
}

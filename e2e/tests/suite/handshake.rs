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

/// The capabilities docs/protocol.md says this daemon advertises: every entry of the
/// Handshake list except those marked "Not advertised:".
fn documented_capabilities() -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/protocol.md");
    let doc = std::fs::read_to_string(&path).expect("docs/protocol.md");
    let start = doc.find("## Handshake").expect("Handshake section");
    let end = doc[start..].find("## Method index").expect("Method index") + start;
    let mut caps: Vec<String> = doc[start..end]
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .filter_map(|l| l.split_once(": "))
        .filter(|(_, what)| !what.starts_with(snowpea_proto::schema::NOT_ADVERTISED))
        .map(|(name, _)| name.to_owned())
        .collect();
    caps.sort();
    caps
}

/// Issue 32 item 8: `system.hello` advertises exactly the capabilities docs/protocol.md
/// claims — every one the spec ties to a behaviour, `audio` whether or not a speech engine
/// is installed — and none of those documented as not advertised.
#[tokio::test]
async fn hello_advertises_exactly_the_documented_capabilities() {
    let documented = documented_capabilities();
    assert!(documented.len() >= 28, "{documented:?}");
    let suite = Suite::start().await;
    let advertised = snowpea_testkit::eventually(
        std::time::Duration::from_secs(30),
        "every service's capabilities in system.hello",
        || async {
            let mut ws = suite.raw().await;
            let r = ws
                .call(
                    "system.hello",
                    json!({"token": suite.token, "clientVersion": "t", "protocolVersion": "1.25.0"}),
                )
                .await;
            let mut caps: Vec<String> = r["result"]["capabilities"]
                .as_array()?
                .iter()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect();
            caps.sort();
            (caps == documented).then_some(caps)
        },
    )
    .await;
    assert_eq!(advertised, documented);
}

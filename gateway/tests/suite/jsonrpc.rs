//! JSON-RPC 2.0 exactly: parse errors, invalid requests, batches, notifications, id echo,
//! method_not_found.

use serde_json::{json, Value};

use super::harness::{GatewayProc, Opts, TestHome};

#[tokio::test]
async fn malformed_json_is_a_parse_error_with_a_null_id() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.connect().await;
    c.send_raw("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ")
        .await;
    let r = c.recv().await;
    assert_eq!(r["error"]["code"], -32700);
    assert_eq!(r["id"], Value::Null);
    // The connection survives.
    c.hello(&home.token).await;
}

#[tokio::test]
async fn invalid_requests_are_minus_32600() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    for (raw, id) in [
        ("42", Value::Null),
        ("\"hello\"", Value::Null),
        (
            r#"{"jsonrpc":"1.0","id":3,"method":"system.health"}"#,
            json!(3),
        ),
        (r#"{"id":4,"method":"system.health"}"#, json!(4)),
        (
            r#"{"jsonrpc":"2.0","id":[1],"method":"system.health"}"#,
            Value::Null,
        ),
        ("[]", Value::Null),
    ] {
        c.send_raw(raw).await;
        let r = c.recv().await;
        assert_eq!(r["error"]["code"], -32600, "{raw}: {r}");
        assert_eq!(r["id"], id, "{raw}");
    }
}

#[tokio::test]
async fn batches_answer_requests_in_one_array_and_skip_notifications() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    c.send(&json!([
        {"jsonrpc": "2.0", "id": 1, "method": "system.health"},
        {"jsonrpc": "2.0", "method": "system.health"},
        {"jsonrpc": "2.0", "id": "b", "method": "no.such"},
        7
    ]))
    .await;
    let r = c.recv().await;
    let items = r.as_array().expect("batch answer is an array");
    assert_eq!(items.len(), 3, "{r}");
    assert_eq!(items[0]["id"], 1);
    assert_eq!(items[0]["result"]["status"], "ok");
    assert_eq!(items[1]["id"], "b");
    assert_eq!(items[1]["error"]["code"], -32601);
    assert_eq!(items[2]["error"]["code"], -32600);
}

#[tokio::test]
async fn notifications_and_all_notification_batches_get_no_answer() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    c.send(&json!({"jsonrpc": "2.0", "method": "system.health"}))
        .await;
    c.send(&json!([
        {"jsonrpc": "2.0", "method": "system.health"},
        {"jsonrpc": "2.0", "method": "no.such"}
    ]))
    .await;
    c.assert_quiet().await;
}

#[tokio::test]
async fn ids_are_echoed_exactly() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    for id in [json!("abc"), json!(12345678901i64), json!(1.5), Value::Null] {
        c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "system.health"}))
            .await;
        let r = c.recv().await;
        assert_eq!(r["id"], id);
        assert_eq!(r["result"]["status"], "ok");
    }
    // An id that would come back as a different number is refused, not corrupted.
    c.send_raw(r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"system.health"}"#)
        .await;
    let r = c.recv().await;
    assert_eq!(r["id"], Value::Null);
    assert_eq!(r["error"]["code"], -32600, "{r}");
}

#[tokio::test]
async fn unknown_and_server_to_client_methods_are_method_not_found() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    for m in ["no.such.method", "approval.request", "tool.invoke"] {
        let e = c.err(m, json!({})).await;
        assert_eq!(e["code"], -32601, "{m}");
        assert_eq!(e["data"]["code"], "method_not_found", "{m}");
    }
}

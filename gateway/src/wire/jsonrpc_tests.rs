use super::*;

fn err_code(v: &Value) -> i64 {
    v["error"]["code"].as_i64().unwrap()
}

#[test]
fn malformed_json_is_a_parse_error_with_null_id() {
    let Incoming::Rejected(r) = parse(b"{\"jsonrpc\":") else {
        panic!("expected a rejection")
    };
    assert_eq!(err_code(&r), PARSE_ERROR);
    assert_eq!(r["id"], Value::Null);
    assert!(r["error"].get("data").is_none());
}

#[test]
fn empty_batch_is_an_invalid_request() {
    let Incoming::Rejected(r) = parse(b"[]") else {
        panic!("expected a rejection")
    };
    assert_eq!(err_code(&r), INVALID_REQUEST);
}

#[test]
fn non_objects_and_wrong_versions_are_invalid_requests() {
    for (raw, id) in [
        ("1", Value::Null),
        ("\"x\"", Value::Null),
        (r#"{"jsonrpc":"1.0","id":7,"method":"m"}"#, json!(7)),
        (r#"{"id":7,"method":"m"}"#, json!(7)),
        (r#"{"jsonrpc":"2.0","id":{},"method":"m"}"#, Value::Null),
        (r#"{"jsonrpc":"2.0","id":1e30,"method":"m"}"#, Value::Null),
        (
            r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"m"}"#,
            Value::Null,
        ),
        (r#"{"jsonrpc":"2.0","id":"a","method":5}"#, json!("a")),
        (r#"{"jsonrpc":"2.0","id":"a"}"#, json!("a")),
        (r#"{"jsonrpc":"2.0"}"#, Value::Null),
    ] {
        let Incoming::Single(Item::Invalid(r)) = parse(raw.as_bytes()) else {
            panic!("{raw} should be invalid")
        };
        assert_eq!(err_code(&r), INVALID_REQUEST, "{raw}");
        assert_eq!(r["id"], id, "{raw}");
    }
}

#[test]
fn requests_notifications_and_null_ids() {
    let Incoming::Single(Item::Call(c)) =
        parse(br#"{"jsonrpc":"2.0","id":null,"method":"system.health"}"#)
    else {
        panic!()
    };
    assert_eq!(
        c.id,
        Some(Value::Null),
        "id null is a request, not a notification"
    );
    // The 64-bit extremes are echoed exactly.
    for id in [u64::MAX.to_string(), i64::MIN.to_string()] {
        let raw = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#);
        let Incoming::Single(Item::Call(c)) = parse(raw.as_bytes()) else {
            panic!("{raw}")
        };
        assert_eq!(c.id.unwrap().to_string(), id);
    }
    let Incoming::Single(Item::Call(n)) =
        parse(br#"{"jsonrpc":"2.0","method":"tool.progress","params":{"a":1}}"#)
    else {
        panic!()
    };
    assert_eq!(n.id, None);
    assert_eq!(n.params, json!({"a": 1}));
}

#[test]
fn batches_keep_order_and_classify_each_member() {
    let Incoming::Batch(items) = parse(
        br#"[{"jsonrpc":"2.0","id":1,"method":"a"},5,{"jsonrpc":"2.0","id":"srv-1","result":{}}]"#,
    ) else {
        panic!()
    };
    assert!(matches!(&items[0], Item::Call(c) if c.id == Some(json!(1))));
    assert!(matches!(&items[1], Item::Invalid(_)));
    assert!(matches!(&items[2], Item::Response { id, outcome: Ok(_) } if id == "srv-1"));
}

#[test]
fn client_error_answers_are_responses() {
    let Incoming::Single(Item::Response { outcome, .. }) =
        parse(br#"{"jsonrpc":"2.0","id":"srv-2","error":{"code":-1,"message":"no"}}"#)
    else {
        panic!()
    };
    assert_eq!(outcome.unwrap_err()["message"], "no");
}

#[test]
fn outgoing_frames_are_valid_json() {
    let r: Value = serde_json::from_str(&server_request("srv-1", "approval.request", "")).unwrap();
    assert_eq!(
        r,
        json!({"jsonrpc":"2.0","id":"srv-1","method":"approval.request","params":{}})
    );
    let n: Value = serde_json::from_str(&notification("a\"b", "{\"x\":1}")).unwrap();
    assert_eq!(n["method"], "a\"b");
    assert_eq!(n["params"]["x"], 1);
}

/// Issue 40: a message of more than JSON_VALUES values is refused before its tree is built
/// (naming the id of a single request), a batch of more than BATCH_MEMBERS members as a
/// whole; at the limits both pass.
#[test]
fn too_many_values_or_batch_members_are_invalid_requests() {
    use snowpea_proto::limits::{BATCH_MEMBERS, JSON_VALUES};
    let wide = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"w\",\"method\":\"m\",\"params\":[{}0]}}",
        "0,".repeat(JSON_VALUES)
    );
    let Incoming::Rejected(r) = parse(wide.as_bytes()) else {
        panic!("expected a rejection")
    };
    assert_eq!(err_code(&r), INVALID_REQUEST);
    assert_eq!(r["id"], "w");
    let member = r#"{"jsonrpc":"2.0","method":"m"}"#;
    let batch = |n: usize| format!("[{}]", vec![member; n].join(","));
    let Incoming::Rejected(r) = parse(batch(BATCH_MEMBERS + 1).as_bytes()) else {
        panic!("expected a rejection")
    };
    assert_eq!(err_code(&r), INVALID_REQUEST);
    assert_eq!(r["id"], Value::Null);
    let Incoming::Batch(items) = parse(batch(BATCH_MEMBERS).as_bytes()) else {
        panic!("a batch at the limit passes")
    };
    assert_eq!(items.len(), BATCH_MEMBERS);
    // The object, 4 keys, 3 scalars, the array: 9 values besides the array's elements.
    let at_limit = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":[{}0]}}",
        "0,".repeat(JSON_VALUES - 10)
    );
    assert!(matches!(
        parse(at_limit.as_bytes()),
        Incoming::Single(Item::Call(_))
    ));
}

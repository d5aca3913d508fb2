use super::*;
use serde_json::json;

fn desc() -> MessageDescriptor {
    crate::descriptor_pool()
        .get_message_by_name("snowpea.rpc.v1.SelfTestParams")
        .expect("selftest message")
}

fn err(j: Json) -> ParamError {
    to_message(&desc(), &j, "params").unwrap_err()
}

#[test]
fn round_trip_writes_camel_case_and_integers() {
    let input = json!({
        "sessionId": "s1", "mode": "plan", "afterSeq": 9007199254740993_i64,
        "score": 2.0, "items": [{"name": "a", "count": 3}],
        "meta": {"n": 5, "f": 1.5, "nested": {"x": [1, 2]}}, "any": 7,
        "env": {"A": "b"}, "tags": ["x"]
    });
    let msg = to_message(&desc(), &input, "params").unwrap();
    let out = to_json(&msg);
    assert_eq!(out["afterSeq"], json!(9007199254740993_i64));
    assert_eq!(out["score"], json!(2));
    assert_eq!(
        out["meta"],
        json!({"n": 5, "f": 1.5, "nested": {"x": [1, 2]}})
    );
    assert_eq!(out["any"], json!(7));
    assert_eq!(out["items"], json!([{"name": "a", "count": 3}]));
    assert_eq!(out["env"], json!({"A": "b"}));
}

#[test]
fn unset_optional_fields_are_omitted_and_defaults_written() {
    let msg = to_message(&desc(), &json!({"sessionId": "s"}), "params").unwrap();
    let out = to_json(&msg);
    assert!(out.get("mode").is_none());
    assert!(out.get("score").is_none());
    assert_eq!(out["afterSeq"], json!(0));
    assert_eq!(out["tags"], json!([]));
}

#[test]
fn missing_required_field_is_named() {
    let e = err(json!({}));
    assert_eq!(e.field, "params.sessionId");
    assert!(e.message.contains("required"));
    let e = err(json!({"sessionId": "s", "items": [{"count": 1}]}));
    assert_eq!(e.field, "params.items[0].name");
}

#[test]
fn wrong_types_are_named() {
    assert_eq!(err(json!({"sessionId": 5})).field, "params.sessionId");
    assert_eq!(
        err(json!({"sessionId": "s", "afterSeq": "x"})).field,
        "params.afterSeq"
    );
    assert_eq!(
        err(json!({"sessionId": "s", "afterSeq": 1.5})).field,
        "params.afterSeq"
    );
    assert_eq!(
        err(json!({"sessionId": "s", "meta": [1]})).field,
        "params.meta"
    );
    assert_eq!(
        err(json!({"sessionId": "s", "tags": "x"})).field,
        "params.tags"
    );
    assert_eq!(err(json!([1])).field, "params");
}

#[test]
fn disallowed_value_lists_the_allowed_ones() {
    let e = err(json!({"sessionId": "s", "mode": "yolo"}));
    assert_eq!(e.field, "params.mode");
    assert!(e.message.contains("plan, accept, auto"), "{}", e.message);
}

#[test]
fn unknown_field_is_rejected_by_name() {
    let e = err(json!({"sessionId": "s", "bogus": 1}));
    assert_eq!(e.field, "params.bogus");
}

#[test]
fn null_means_absent_for_optional_fields() {
    let msg = to_message(
        &desc(),
        &json!({"sessionId": "s", "mode": null, "items": null}),
        "params",
    )
    .unwrap();
    assert!(to_json(&msg).get("mode").is_none());
    let e = err(json!({"sessionId": null}));
    assert_eq!(e.field, "params.sessionId");
}

#[test]
fn null_params_are_an_empty_object() {
    let e = to_message(&desc(), &Json::Null, "params").unwrap_err();
    assert_eq!(e.field, "params.sessionId");
}

#[test]
fn free_form_json_is_refused_past_the_depth_a_service_can_decode() {
    use prost::Message;
    let nested = |levels: usize| {
        let mut v = json!("leaf");
        for _ in 0..levels {
            v = json!({ "k": v });
        }
        v
    };
    // The deepest accepted value survives the service's decode (prost's recursion limit).
    let ok = to_message(
        &desc(),
        &json!({"sessionId": "s", "meta": nested(MAX_JSON_DEPTH)}),
        "params",
    )
    .unwrap();
    let bytes = ok.encode_to_vec();
    DynamicMessage::decode(desc(), bytes.as_slice()).expect("decodes like a service would");

    let e = err(json!({"sessionId": "s", "meta": nested(MAX_JSON_DEPTH + 1)}));
    assert_eq!(e.field, "params.meta");
    assert!(e.message.contains("nested more than"), "{}", e.message);
    // Arrays count too.
    let mut deep_list = json!(1);
    for _ in 0..=MAX_JSON_DEPTH {
        deep_list = json!([deep_list]);
    }
    assert_eq!(
        err(json!({"sessionId": "s", "any": deep_list})).field,
        "params.any"
    );
}

#[test]
fn cleared_paths_name_the_fields_sent_empty_or_null() {
    let cleared = |j: &Json| to_request(&desc(), j, "params").unwrap().cleared;
    let input = json!({
        "sessionId": "s", "mode": null, "tags": [], "env": {}, "items": [{"name": "a"}],
        "meta": {"inner": null}
    });
    let mut paths = cleared(&input);
    paths.sort();
    assert_eq!(paths, vec!["env", "mode", "tags"]);
    assert!(cleared(&json!({"sessionId": "s"})).is_empty());
    // The same walk validates: an unknown field is refused, not skipped.
    let e = to_request(&desc(), &json!({"sessionId": "s", "bogus": null}), "params").unwrap_err();
    assert_eq!(e.field, "params.bogus");
}

#[test]
fn a_named_value_set_validates_like_a_values_list() {
    // session.setMode's `mode` names its values once: option value_set → PermissionMode.
    let m = crate::descriptor_pool()
        .get_message_by_name("snowpea.session.v1.SessionSetModeParams")
        .expect("session.setMode params");
    let ok = to_message(&m, &json!({"sessionId": "s", "mode": "auto"}), "params");
    assert!(ok.is_ok(), "{ok:?}");
    let e = to_message(&m, &json!({"sessionId": "s", "mode": "yolo"}), "params").unwrap_err();
    assert_eq!(e.field, "params.mode");
    assert!(e.message.contains("plan, accept, auto"), "{}", e.message);
}

#[test]
fn every_value_set_names_an_enum_with_wire_values() {
    let mut seen = 0;
    for m in crate::descriptor_pool().all_messages() {
        for f in m.fields() {
            let rules = crate::schema::field_rules(&f);
            if let Some(set) = &rules.value_set {
                seen += 1;
                assert!(
                    !rules.values.is_empty(),
                    "{}: value_set {set} names no enum with wire values",
                    f.full_name()
                );
            }
        }
    }
    assert!(seen >= 10, "the mode fields use value_set ({seen})");
}

/// 2^60: past 2^53, where a `google.protobuf.Struct` (doubles) would round it.
const BIG: u64 = 1 << 60;

#[test]
fn json_object_fields_keep_integers_of_any_size() {
    use prost::Message as _;
    let event = crate::session::v1::SessionEvent {
        kind: "tool.call".into(),
        payload: json!({"args": {"n": BIG, "neg": -(1_i64 << 60), "f": 2.0}}).to_string(),
        seq: 1,
        session_id: "s".into(),
        ts: "t".into(),
    };
    let result = crate::session::v1::SessionResumeResult {
        events: vec![event],
        ..Default::default()
    };
    let desc = crate::descriptor_pool()
        .get_message_by_name("snowpea.session.v1.SessionResumeResult")
        .unwrap();
    let msg = DynamicMessage::decode(desc, result.encode_to_vec().as_slice()).unwrap();
    let out = to_json(&msg);
    let payload = &out["events"][0]["payload"];
    assert_eq!(payload["args"]["n"].as_u64(), Some(BIG));
    assert_eq!(payload["args"]["neg"].as_i64(), Some(-(1_i64 << 60)));
    assert_eq!(
        payload["args"]["f"],
        json!(2.0),
        "written exactly as it was"
    );
}

#[test]
fn json_object_fields_unset_are_left_out_and_params_must_be_objects() {
    let desc = crate::descriptor_pool()
        .get_message_by_name("snowpea.session.v1.ApprovalRequest")
        .unwrap();
    let base = json!({"requestId": "r", "sessionId": "s", "tool": "shell"});
    let out = to_json(&to_message(&desc, &base, "params").unwrap());
    assert!(out.get("args").is_none(), "{out}");

    let mut with = base.clone();
    with["args"] = json!({"n": BIG});
    let msg = to_message(&desc, &with, "params").unwrap();
    assert_eq!(to_json(&msg)["args"]["n"].as_u64(), Some(BIG));

    with["args"] = json!([1]);
    let e = to_message(&desc, &with, "params").unwrap_err();
    assert_eq!(e.field, "params.args");
    assert!(e.message.contains("expected an object"), "{}", e.message);
}

#[test]
fn cleared_paths_descend_into_nested_messages_only() {
    let desc = crate::descriptor_pool()
        .get_message_by_name("snowpea.mcp.v1.McpUpdateParams")
        .expect("mcp.update params");
    let input = json!({
        "name": "fs", "scope": null,
        "patch": {"env": {}, "args": [], "url": null, "command": "x"}
    });
    let mut paths = to_request(&desc, &input, "params").unwrap().cleared;
    paths.sort();
    assert_eq!(paths, vec!["patch.args", "patch.env", "patch.url", "scope"]);
    // An empty nested message is itself cleared; nothing is looked for inside it.
    let paths = to_request(&desc, &json!({"name": "fs", "patch": {}}), "params")
        .unwrap()
        .cleared;
    assert_eq!(paths, vec!["patch"]);
}

#[test]
fn encode_request_is_the_message_encoded_once_and_refuses_past_the_limit() {
    use prost::Message as _;
    let req = to_request(
        &desc(),
        &json!({"sessionId": "s", "tags": ["a", "b"]}),
        "params",
    )
    .unwrap();
    let bytes = encode_request(&req.message, "params").unwrap();
    assert_eq!(&bytes[..], &req.message.encode_to_vec()[..]);
    // Past GRPC_REQUEST: each string within STRING_PARAM, the whole list over 64 MiB.
    let s = "x".repeat(crate::limits::STRING_PARAM);
    let many: Vec<&str> = (0..17).map(|_| s.as_str()).collect();
    let big = to_request(&desc(), &json!({"sessionId": "s", "tags": many}), "params").unwrap();
    let e = encode_request(&big.message, "params").unwrap_err();
    assert_eq!(e.field, "params.tags");
}

use std::collections::BTreeMap;

use super::*;
use crate::audio::v1::AudioInstallProgressNotification;
use crate::scheduler::v1::JobEventNotification;

/// Every message the descriptor marks with `option`, by option value.
fn declared(option: &str) -> BTreeMap<String, Vec<String>> {
    let pool = descriptor_pool();
    let ext = pool.get_extension_by_name(option).expect("option declared");
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for message in pool.all_messages() {
        let options = message.options();
        if options.has_extension(&ext) {
            let name = options
                .get_extension(&ext)
                .as_str()
                .unwrap_or("")
                .to_owned();
            out.entry(name)
                .or_default()
                .push(message.full_name().to_owned());
        }
    }
    out
}

fn check(declared: BTreeMap<String, Vec<String>>, typed: &[Constructor], what: &str) {
    assert!(!declared.is_empty(), "the descriptor declares {what}s");
    for (name, messages) in &declared {
        assert_eq!(
            messages.len(),
            1,
            "{what} {name:?} is declared by more than one message: {messages:?}"
        );
        let ctors: Vec<_> = typed.iter().filter(|c| c.name == name).collect();
        assert_eq!(
            ctors.len(),
            1,
            "{what} {name:?} must have exactly one typed constructor"
        );
        assert_eq!(ctors[0].message, messages[0], "{what} {name:?}");
        let desc = descriptor_pool()
            .get_message_by_name(ctors[0].message)
            .expect("message in descriptor");
        let Json::Object(json) = (ctors[0].encode_default)() else {
            panic!("{what} {name:?} encodes to an object");
        };
        for key in json.keys() {
            assert!(
                desc.get_field_by_json_name(key).is_some(),
                "{what} {name:?} writes {key:?}, a field its schema does not have"
            );
        }
    }
    for c in typed {
        assert!(
            declared.contains_key(c.name),
            "typed {what} {:?} is not declared in the descriptor",
            c.name
        );
    }
}

#[test]
fn every_event_kind_and_notification_has_exactly_one_typed_constructor() {
    check(
        declared("snowpea.rpc.v1.notification"),
        NOTIFICATIONS,
        "notification",
    );
    check(
        declared("snowpea.rpc.v1.event_kind"),
        EVENT_KINDS,
        "event kind",
    );
    assert_eq!(<JobEventNotification as Notification>::METHOD, "job.event");
}

#[test]
fn event_payloads_leave_out_their_kind_discriminator() {
    // `session.event` carries the kind beside the payload; no emitter writes it inside.
    for c in EVENT_KINDS {
        let desc = descriptor_pool().get_message_by_name(c.message).unwrap();
        if let Some(kind) = desc.get_field_by_name("kind") {
            assert_eq!(unset_rule(&kind), Unset::Omit, "{}.kind", c.message);
        }
        assert!(
            (c.encode_default)().get("kind").is_none(),
            "{} writes kind",
            c.message
        );
    }
}

#[test]
fn params_use_camel_case_numbers_and_presence() {
    let p = AudioInstallProgressNotification {
        engine: "piper".into(),
        percent: Some(100.0),
        step: 2,
        steps: 5,
        bytes_done: Some(300_000),
        ..Default::default()
    };
    // Non-presence fields at their default are written; unset optionals are left out; a
    // double keeps serde's `f64` form.
    assert_eq!(
        serde_json::to_string(&p.to_params()).unwrap(),
        r#"{"bytesDone":300000,"engine":"piper","line":"","percent":100.0,"stage":"","step":2,"steps":5,"voice":""}"#
    );
}

#[test]
fn free_form_payloads_keep_integral_numbers_integral() {
    let n = JobEventNotification {
        job_id: "j1".into(),
        kind: "finished".into(),
        payload: Some(crate::wkt::to_struct(
            &serde_json::json!({"exitCode": 0, "runId": "r", "x": 2.5}),
        )),
    };
    assert_eq!(
        serde_json::to_string(&n.to_params()).unwrap(),
        r#"{"jobId":"j1","kind":"finished","payload":{"exitCode":0,"runId":"r","x":2.5}}"#
    );
}

#[test]
fn json_object_fields_are_written_exactly() {
    use crate::session::v1::{ApprovalPendingNotification, ApprovalRequest};
    let big: u64 = 1 << 60;
    let n = ApprovalPendingNotification {
        host_tools_from: None,
        request: Some(ApprovalRequest {
            args: serde_json::json!({"n": big}).to_string(),
            request_id: "r".into(),
            ..Default::default()
        }),
    };
    assert_eq!(n.to_params()["request"]["args"]["n"].as_u64(), Some(big));
    let empty = ApprovalPendingNotification {
        host_tools_from: None,
        request: Some(ApprovalRequest::default()),
    };
    assert!(empty.to_params()["request"].get("args").is_none());
}

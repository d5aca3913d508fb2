//! The turn's safety nets (issue 32 items 1 and 2): an empty answer gets one nudge, then
//! the turn ends `empty_response` after an `error{code:"empty_response"}`; tool rounds that
//! repeat without progress get `loop.suspected` once and a nudge, then end `stalled`.

use serde_json::json;

use crate::testkit::{done_reason, kinds, of_kind, Harness};

/// The user messages of every model call so far, oldest call first.
fn user_texts_per_call(h: &Harness) -> Vec<Vec<String>> {
    snowpea_session_llm::provider::fake_provider(&h.script)
        .unwrap()
        .received()
        .into_iter()
        .map(|r| {
            r.messages
                .iter()
                .filter(|m| m.role == snowpea_session_llm::provider::Role::User)
                .map(|m| m.content.clone())
                .collect()
        })
        .collect()
}

/// Regression: an empty answer ended the turn `complete` after one call, with no nudge, no
/// `error{code:"empty_response"}` and no `empty_response` ending.
#[tokio::test]
async fn empty_answers_get_one_nudge_then_end_empty_response() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "say nothing", "text": ""},
            {"match": "your last answer was empty", "text": ""},
            {"match": "quiet at first", "text": ""},
            {"match": "your last answer was empty", "text": "Recovered."}
        ],
        "default": {"text": "fallback"}
    }))
    .await;
    let sid = h.create("accept").await;

    let t = h.prompt(&sid, "say nothing").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "empty_response", "{:?}", kinds(&ev));
    assert_eq!(
        of_kind(&ev, "usage").len(),
        2,
        "the first call and the nudged one"
    );
    let calls = user_texts_per_call(&h);
    assert!(
        calls[1].last().unwrap().contains(super::agent::EMPTY_NUDGE),
        "the second call carries the nudge: {:?}",
        calls[1]
    );
    let errors = of_kind(&ev, "error");
    assert_eq!(errors.len(), 1, "{ev:?}");
    assert_eq!(errors[0]["payload"]["code"], "empty_response");
    let k = kinds(&ev);
    let at = |kind: &str| k.iter().position(|x| x == kind).unwrap();
    assert!(
        at("error") < at("turn.done"),
        "error precedes turn.done: {k:?}"
    );
    assert_eq!(of_kind(&ev, "message.done")[0]["payload"]["text"], "");

    // A model that answers after the nudge completes normally.
    let t = h.prompt(&sid, "quiet at first").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "complete", "{:?}", kinds(&ev));
    assert!(of_kind(&ev, "error").is_empty());
    assert_eq!(
        of_kind(&ev, "message.done")[0]["payload"]["text"],
        "Recovered."
    );
}

/// Regression: a model calling `list_dir{path:"."}` every round ran to the tool-round
/// budget (200 calls) and ended `budget`, with no `loop.suspected` and no `stalled`.
#[tokio::test]
async fn repeated_calls_are_suspected_once_nudged_then_end_stalled() {
    let list = json!([{"name": "list_dir", "arguments": {"path": "."}}]);
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "keep listing", "tool_calls": list, "repeat": true},
            {"after_tool": "list_dir", "tool_calls": list, "repeat": true},
            {"match": "loop suspected", "tool_calls": list, "repeat": true}
        ],
        "default": {"text": "fallback"}
    }))
    .await;
    std::fs::write(h.workdir.join("a.txt"), "a").unwrap();
    let sid = h.create("auto").await;
    let t = h.prompt(&sid, "keep listing the directory").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "stalled", "{:?}", kinds(&ev));
    let suspected = of_kind(&ev, "loop.suspected");
    assert_eq!(suspected.len(), 1, "once per streak: {ev:?}");
    assert_eq!(
        suspected[0]["payload"],
        json!({"tool": "list_dir", "count": 3, "turnId": t})
    );
    let results = of_kind(&ev, "tool.result");
    assert_eq!(
        results.len(),
        1 + super::loop_guard::STALL_AFTER as usize,
        "a first call and the stale rounds"
    );
    // loop.suspected came after the third call, and the model's next call got the nudge.
    let seq = |e: &serde_json::Value| e["seq"].as_i64().unwrap();
    assert!(seq(results[2]) < seq(suspected[0]) && seq(suspected[0]) < seq(results[3]));
    let calls = user_texts_per_call(&h);
    assert!(
        calls[3].last().unwrap().contains("Loop suspected"),
        "{:?}",
        calls[3]
    );
}

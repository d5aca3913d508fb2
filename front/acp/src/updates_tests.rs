use std::path::PathBuf;

use serde_json::json;
use snowpea_sdk::SessionEvent;

use super::*;

fn event(seq: u64, kind: &str, payload: Value) -> SessionEvent {
    SessionEvent {
        session_id: "s1".into(),
        seq,
        kind: kind.into(),
        payload,
        ts: String::new(),
    }
}

fn link() -> SessionLink {
    SessionLink::new("s1".into(), PathBuf::from("/work/p"))
}

#[test]
fn a_write_becomes_a_tool_call_with_a_location_then_a_diff_then_completed() {
    let link = link();
    let call = map_event(
        &link,
        &event(
            1,
            "tool.call",
            json!({"callId": "c1", "name": "write_file", "args": {"path": "a.txt", "content": "x\n"}}),
        ),
        Replay::Live,
    );
    assert_eq!(call[0]["sessionUpdate"], "tool_call");
    assert_eq!(call[0]["kind"], "edit");
    assert_eq!(call[0]["status"], "pending");
    assert_eq!(call[0]["locations"][0]["path"], "/work/p/a.txt");
    let patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+x\n";
    let diff = map_event(
        &link,
        &event(2, "diff", json!({"path": "a.txt", "patch": patch})),
        Replay::Live,
    );
    assert_eq!(diff[0]["toolCallId"], "c1");
    assert_eq!(diff[0]["content"][0]["type"], "diff");
    assert_eq!(diff[0]["content"][0]["oldText"], "old\n");
    assert_eq!(diff[0]["content"][0]["newText"], "x\n");
    let done = map_event(
        &link,
        &event(
            3,
            "tool.result",
            json!({"callId": "c1", "name": "write_file", "ok": true, "output": "wrote"}),
        ),
        Replay::Live,
    );
    assert_eq!(done[0]["status"], "completed");
    assert!(
        done[0].get("content").is_none(),
        "the diff stays the content of an edit"
    );
    for u in call.into_iter().chain(diff).chain(done) {
        serde_json::from_value::<SessionUpdate>(u.clone()).unwrap_or_else(|e| panic!("{u}: {e}"));
    }
}

#[test]
fn own_prompt_echo_is_skipped_live_but_replayed_from_history() {
    let link = link();
    lock(&link.own_prompts).push_back("hello".into());
    let user = event(1, "message.user", json!({"text": "hello"}));
    assert!(map_event(&link, &user, Replay::Live).is_empty());
    assert_eq!(
        map_event(&link, &user, Replay::Live)[0]["sessionUpdate"],
        "user_message_chunk"
    );
    assert_eq!(
        map_event(&link, &user, Replay::History)[0]["sessionUpdate"],
        "user_message_chunk"
    );
}

#[test]
fn todos_mode_context_and_reasoning_map_to_their_updates() {
    let link = link();
    let plan = map_event(
        &link,
        &event(
            1,
            "todos.updated",
            json!({"todos": [{"id": "1", "content": "a", "status": "in_progress"}]}),
        ),
        Replay::Live,
    );
    assert_eq!(plan[0]["entries"][0]["status"], "in_progress");
    let mode = map_event(
        &link,
        &event(2, "mode.changed", json!({"mode": "plan"})),
        Replay::Live,
    );
    assert_eq!(mode[0]["currentModeId"], "plan");
    let usage = map_event(
        &link,
        &event(3, "context", json!({"used": 10, "window": 100})),
        Replay::Live,
    );
    assert_eq!(usage[0]["size"], 100);
    assert!(map_event(
        &link,
        &event(4, "context", json!({"used": 10, "window": null})),
        Replay::Live
    )
    .is_empty());
    let thought = map_event(
        &link,
        &event(5, "message.reasoning", json!({"text": "hm"})),
        Replay::Live,
    );
    assert_eq!(thought[0]["sessionUpdate"], "agent_thought_chunk");
    for u in plan.into_iter().chain(mode).chain(usage).chain(thought) {
        serde_json::from_value::<SessionUpdate>(u.clone()).unwrap_or_else(|e| panic!("{u}: {e}"));
    }
}

#[test]
fn a_new_file_diff_has_no_old_text() {
    let (old, new) = diff_texts("--- a/n.txt\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n");
    assert_eq!(old, None);
    assert_eq!(new, "a\nb\n");
}

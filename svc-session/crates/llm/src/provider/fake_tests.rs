use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;

use super::*;
use crate::provider::{ChatMessage, ModelRequest, Provider, ProviderError, StreamEvent, ToolCall};

fn provider(script: serde_json::Value) -> FakeProvider {
    FakeProvider::from_script(serde_json::from_value(script).expect("script parses"))
        .expect("valid script")
}

fn req(messages: Vec<ChatMessage>) -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system: "be brief".into(),
        messages,
        tools: vec![],
        max_tokens: None,
        effort: None,
    }
}

fn user(text: &str) -> ModelRequest {
    req(vec![ChatMessage::user(text)])
}

async fn collect(p: &FakeProvider, r: ModelRequest) -> Vec<Result<StreamEvent, ProviderError>> {
    p.stream(r).collect().await
}

fn text_of(events: &[Result<StreamEvent, ProviderError>]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::TextDelta(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

fn stop_of(events: &[Result<StreamEvent, ProviderError>]) -> String {
    match events.last() {
        Some(Ok(StreamEvent::Done { stop_reason })) => stop_reason.clone(),
        other => panic!("last event is not Done: {other:?}"),
    }
}

fn calls_of(events: &[Result<StreamEvent, ProviderError>]) -> Vec<ToolCall> {
    events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCall(c)) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn text_streams_in_several_deltas_with_usage_and_stop() {
    let p = provider(json!({"steps": [{"text": "Hello there, this is a scripted answer."}]}));
    let ev = collect(&p, user("hi")).await;
    let deltas = ev
        .iter()
        .filter(|e| matches!(e, Ok(StreamEvent::TextDelta(_))))
        .count();
    assert!(deltas >= 5, "expected several deltas, got {deltas}: {ev:?}");
    assert_eq!(text_of(&ev), "Hello there, this is a scripted answer.");
    let usage = ev.iter().find_map(|e| match e {
        Ok(StreamEvent::Usage(u)) => Some(u.clone()),
        _ => None,
    });
    let usage = usage.expect("usage reported");
    assert!(
        usage.input_tokens > 0 && usage.output_tokens >= 39 / 4,
        "{usage:?}"
    );
    // Usage comes right before Done.
    assert!(matches!(ev[ev.len() - 2], Ok(StreamEvent::Usage(_))));
    assert_eq!(stop_of(&ev), "stop");
}

#[tokio::test]
async fn match_is_case_insensitive_substring_of_last_user_message() {
    let p = provider(json!({
        "steps": [
            {"match": "WEATHER", "text": "sunny", "repeat": true},
            {"match": "time", "text": "noon", "repeat": true}
        ],
        "default": {"text": "dunno"}
    }));
    assert_eq!(
        text_of(&collect(&p, user("What's the Weather like?")).await),
        "sunny"
    );
    assert_eq!(text_of(&collect(&p, user("what TIME is it")).await), "noon");
    assert_eq!(text_of(&collect(&p, user("something else")).await), "dunno");
    // The last *user* message counts, not earlier ones.
    let r = req(vec![
        ChatMessage::user("weather?"),
        ChatMessage::assistant("sunny", vec![]),
        ChatMessage::user("and the time?"),
    ]);
    assert_eq!(text_of(&collect(&p, r).await), "noon");
}

#[tokio::test]
async fn match_is_ignored_when_last_message_is_a_tool_result_and_after_tool_applies() {
    let p = provider(json!({
        "steps": [
            {"match": "file", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}], "repeat": true},
            {"after_tool": "shell", "text": "shell finished"},
            {"after_tool": "read_file", "text": "file read"}
        ]
    }));
    let first = collect(&p, user("read the file please")).await;
    let calls = calls_of(&first);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "read_file");
    assert_eq!(calls[0].arguments, json!({"path": "a.txt"}));
    assert_eq!(calls[0].id, "call_1");
    assert_eq!(stop_of(&first), "tool_calls");

    // Last message is a read_file result: the repeatable `match` step must not fire again
    // (that would loop forever), the after_tool step for read_file does.
    let r = req(vec![
        ChatMessage::user("read the file please"),
        ChatMessage::assistant("", calls.clone()),
        ChatMessage::tool_result(&calls[0], "contents", false),
    ]);
    let second = collect(&p, r.clone()).await;
    assert_eq!(text_of(&second), "file read");
    assert!(calls_of(&second).is_empty());
    assert_eq!(stop_of(&second), "stop");

    // Used once: next time the default reply applies.
    assert_eq!(text_of(&collect(&p, r).await), NO_SCRIPTED_REPLY);
}

#[tokio::test]
async fn after_tool_sees_any_of_parallel_trailing_results() {
    let p = provider(json!({"steps": [{"after_tool": "glob", "text": "globbed"}]}));
    let a = ToolCall {
        id: "c1".into(),
        name: "glob".into(),
        arguments: json!({}),
    };
    let b = ToolCall {
        id: "c2".into(),
        name: "grep".into(),
        arguments: json!({}),
    };
    let r = req(vec![
        ChatMessage::user("look"),
        ChatMessage::assistant("", vec![a.clone(), b.clone()]),
        ChatMessage::tool_result(&a, "x", false),
        ChatMessage::tool_result(&b, "y", false),
    ]);
    assert_eq!(text_of(&collect(&p, r).await), "globbed");
}

#[tokio::test]
async fn steps_are_used_once_unless_repeat_and_in_order() {
    let p = provider(json!({
        "steps": [
            {"text": "first"},
            {"text": "second"},
            {"match": "again", "text": "again!", "repeat": true}
        ],
        "default": {"text": "fallback"}
    }));
    assert_eq!(text_of(&collect(&p, user("x")).await), "first");
    assert_eq!(text_of(&collect(&p, user("x")).await), "second");
    assert_eq!(text_of(&collect(&p, user("x")).await), "fallback");
    assert_eq!(text_of(&collect(&p, user("x")).await), "fallback");
    for _ in 0..3 {
        assert_eq!(text_of(&collect(&p, user("once AGAIN")).await), "again!");
    }
}

#[tokio::test]
async fn state_is_shared_across_concurrent_callers() {
    let p = std::sync::Arc::new(provider(
        json!({"steps": [{"text": "only once"}], "default": {"text": "d"}}),
    ));
    let mut handles = vec![];
    for _ in 0..8 {
        let p = p.clone();
        handles.push(tokio::spawn(async move {
            text_of(&p.stream(user("go")).collect::<Vec<_>>().await)
        }));
    }
    let mut texts = vec![];
    for h in handles {
        texts.push(h.await.unwrap());
    }
    assert_eq!(
        texts.iter().filter(|t| *t == "only once").count(),
        1,
        "{texts:?}"
    );
    assert_eq!(texts.iter().filter(|t| *t == "d").count(), 7);
}

#[tokio::test]
async fn no_default_gives_no_scripted_reply() {
    let p = provider(json!({"steps": []}));
    let ev = collect(&p, user("hello")).await;
    assert_eq!(text_of(&ev), NO_SCRIPTED_REPLY);
    assert_eq!(stop_of(&ev), "stop");
}

#[tokio::test]
async fn reasoning_precedes_text_and_stop_reason_override() {
    let p = provider(
        json!({"steps": [{"reasoning": "Let me think about it.", "text": "42", "stopReason": "Length"}]}),
    );
    let ev = collect(&p, user("q")).await;
    let first_text = ev
        .iter()
        .position(|e| matches!(e, Ok(StreamEvent::TextDelta(_))))
        .unwrap();
    let reasoning: String = ev[..first_text]
        .iter()
        .map(|e| match e {
            Ok(StreamEvent::ReasoningDelta(r)) => r.as_str(),
            other => panic!("unexpected before text: {other:?}"),
        })
        .collect();
    assert_eq!(reasoning, "Let me think about it.");
    assert_eq!(stop_of(&ev), "length");
}

#[tokio::test]
async fn tool_call_ids_count_up_and_string_arguments_are_parsed() {
    let p = provider(json!({"steps": [{
        "toolCalls": [
            {"name": "shell", "arguments": "{\"command\":\"ls\"}"},
            {"name": "list_dir"}
        ],
        "repeat": true
    }]}));
    let a = calls_of(&collect(&p, user("x")).await);
    let b = calls_of(&collect(&p, user("x")).await);
    assert_eq!(
        a.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["call_1", "call_2"]
    );
    assert_eq!(
        b.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["call_3", "call_4"]
    );
    assert_eq!(a[0].arguments, json!({"command": "ls"}));
    assert_eq!(a[1].arguments, json!({}));
}

#[tokio::test]
async fn delay_sec_waits_and_dropping_cancels() {
    let p = provider(
        json!({"steps": [{"text": "late", "delaySec": 0.2}, {"text": "never", "delaySec": 30}]}),
    );
    let t = Instant::now();
    let ev = collect(&p, user("x")).await;
    assert!(
        t.elapsed() >= Duration::from_millis(200),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(text_of(&ev), "late");

    let mut s = p.stream(user("x"));
    let first = tokio::time::timeout(Duration::from_millis(100), s.next()).await;
    assert!(first.is_err(), "the 30 s step must still be sleeping");
    drop(s); // cancels the sleep; the test would hang otherwise only if we awaited it
}

#[tokio::test]
async fn error_step_fails_with_http_error() {
    let p = provider(
        json!({"steps": [{"match": "fail", "error": {"status": 503, "message": "scripted outage"}}], "default": {"text": "ok"}}),
    );
    let ev = collect(&p, user("please FAIL")).await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(
        ev[0],
        Err(ProviderError::Http {
            vendor: "fake".into(),
            status: 503,
            message: "scripted outage".into()
        })
    );
    // Consumed: the next call gets the default.
    assert_eq!(text_of(&collect(&p, user("please fail")).await), "ok");
}

#[tokio::test]
async fn loads_from_file_and_reports_bad_files_with_path() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("script.json");
    std::fs::write(
        &good,
        r#"{"steps":[{"match":"hi","text":"hello from file"}],"default":{"text":"d"}}"#,
    )
    .unwrap();
    let p = FakeProvider::from_path(&good).unwrap();
    assert_eq!(text_of(&collect(&p, user("hi")).await), "hello from file");

    let missing = dir.path().join("missing.json");
    match FakeProvider::from_path(&missing) {
        Err(ProviderError::Config(msg)) => assert!(msg.contains("missing.json"), "{msg}"),
        other => panic!("{other:?}"),
    }
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"steps":[{"text": 3}]}"#).unwrap();
    match FakeProvider::from_path(&bad) {
        Err(ProviderError::Config(msg)) => assert!(
            msg.contains("bad.json") && msg.contains("malformed"),
            "{msg}"
        ),
        other => panic!("{other:?}"),
    }
    let typo = dir.path().join("typo.json");
    std::fs::write(&typo, r#"{"steps":[{"mtach": "x", "text": "y"}]}"#).unwrap();
    assert!(matches!(
        FakeProvider::from_path(&typo),
        Err(ProviderError::Config(_))
    ));
}

#[test]
fn split_deltas_keeps_text_and_cuts_words() {
    let text = "Hello  world,\nthis is supercalifragilisticexpialidocious!";
    let parts = split_deltas(text);
    assert_eq!(parts.concat(), text);
    assert_eq!(parts[0], "Hello  ");
    assert!(
        parts.iter().all(|p| p.trim_end().chars().count() <= 16),
        "{parts:?}"
    );
    assert!(split_deltas("").is_empty());
}

#[test]
fn fake_spec_parsing() {
    assert_eq!(
        fake_script_path("fake:/tmp/s.json"),
        Some(std::path::PathBuf::from("/tmp/s.json"))
    );
    assert_eq!(fake_script_path("fake:"), None);
    assert_eq!(fake_script_path("openai"), None);
}

#[tokio::test]
async fn the_model_sees_tool_result_images_described_and_recorded() {
    let p = provider(json!({"steps": [
        {"after_tool": "mcp__ev__get-tiny-image", "text": "Got it.", "describeImages": true},
        {"after_tool": "read_file", "describe_images": true}
    ]}));
    let a = ToolCall {
        id: "c1".into(),
        name: "mcp__ev__get-tiny-image".into(),
        arguments: json!({}),
    };
    let img = crate::provider::ToolImage {
        mime_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
    };
    let r = req(vec![
        ChatMessage::user("show me"),
        ChatMessage::assistant("", vec![a.clone()]),
        ChatMessage::tool_result(&a, "Here's the image:", false).with_images(vec![img.clone()]),
    ]);
    assert_eq!(
        text_of(&collect(&p, r).await),
        "Got it.\n[image image/png, 12 base64 characters, from mcp__ev__get-tiny-image]"
    );
    let seen = p.received();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].messages[2].images, vec![img]);

    let b = ToolCall {
        id: "c2".into(),
        name: "read_file".into(),
        arguments: json!({}),
    };
    let r = req(vec![
        ChatMessage::user("read"),
        ChatMessage::assistant("", vec![b.clone()]),
        ChatMessage::tool_result(&b, "text only", false),
    ]);
    assert_eq!(text_of(&collect(&p, r).await), "[no images]");
    assert_eq!(p.received().len(), 2);
}

#[tokio::test]
async fn received_keeps_only_the_latest_requests() {
    let p = provider(json!({"default": {"text": "ok", "repeat": true}}));
    for i in 0..(RECEIVED_KEEP + 3) {
        collect(&p, user(&format!("m{i}"))).await;
    }
    let seen = p.received();
    assert_eq!(seen.len(), RECEIVED_KEEP);
    assert_eq!(
        seen.last().unwrap().messages[0].content,
        format!("m{}", RECEIVED_KEEP + 2)
    );
}

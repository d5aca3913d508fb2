use serde_json::{json, Value};
use snowpea_sdk::SessionEvent;

use super::{short_result, tool_summary, Renderer};

fn ev(seq: u64, kind: &str, payload: Value) -> SessionEvent {
    SessionEvent {
        session_id: "s_1".into(),
        seq,
        kind: kind.into(),
        payload,
        ts: "2025-01-01T00:00:00Z".into(),
    }
}

fn render(json: bool, break_lines: bool, events: &[SessionEvent]) -> (String, String) {
    let mut r = Renderer::new(json, Vec::new(), Vec::new(), break_lines);
    for e in events {
        r.event(e);
    }
    let (out, err) = r.into_inner();
    (
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

fn turn() -> Vec<SessionEvent> {
    vec![
        ev(1, "turn.started", json!({"turnId": "t_1"})),
        ev(2, "message.delta", json!({"turnId": "t_1", "text": "Hi "})),
        ev(
            3,
            "message.delta",
            json!({"turnId": "t_1", "text": "there"}),
        ),
        ev(
            4,
            "tool.call",
            json!({"callId": "c1", "name": "shell", "args": {"command": "cargo test\nls"}}),
        ),
        ev(
            5,
            "tool.result",
            json!({"callId": "c1", "name": "shell", "ok": false, "error": "exit 1"}),
        ),
        // Same message as the failed tool.result: not shown twice.
        ev(
            6,
            "error",
            json!({"code": "approval_denied", "message": "exit 1"}),
        ),
        ev(
            7,
            "error",
            json!({"code": "approval_denied", "message": "denied by user"}),
        ),
        ev(
            8,
            "message.done",
            json!({"role": "assistant", "text": "Hi there"}),
        ),
        ev(9, "turn.done", json!({"turnId": "t_1", "reason": "denied"})),
    ]
}

#[test]
fn plain_mode_streams_text_to_stdout_and_tools_to_stderr() {
    let (out, err) = render(false, false, &turn());
    assert_eq!(out, "Hi there\n");
    assert_eq!(
        err,
        "▸ shell: cargo test ⏎ ls\n✗ shell: exit 1\nerror: denied by user (approval_denied)\nturn ended: denied\n"
    );
}

#[test]
fn plain_mode_breaks_a_partial_line_before_a_diagnostic_on_a_terminal() {
    let (out, _) = render(false, true, &turn());
    assert_eq!(out, "Hi there\n");
    let events = [
        ev(1, "message.delta", json!({"text": "a"})),
        ev(
            2,
            "tool.call",
            json!({"name": "glob", "args": {"pattern": "*.rs"}}),
        ),
        ev(3, "message.delta", json!({"text": "b\n"})),
        ev(4, "turn.done", json!({"reason": "complete"})),
    ];
    let (out, err) = render(false, true, &events);
    assert_eq!(out, "a\nb\n");
    assert_eq!(err, "▸ glob: *.rs\n");
}

#[test]
fn a_message_without_deltas_is_shown_whole() {
    let events = [
        ev(
            1,
            "message.done",
            json!({"role": "assistant", "text": "whole"}),
        ),
        ev(2, "message.done", json!({"role": "user", "text": "not me"})),
        ev(3, "turn.done", json!({"reason": "complete"})),
    ];
    let (out, err) = render(false, false, &events);
    assert_eq!(out, "whole\n");
    assert_eq!(err, "");
}

#[test]
fn json_mode_writes_one_event_per_line_and_nothing_else() {
    let (out, err) = render(true, true, &turn());
    assert_eq!(err, "");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 9);
    assert_eq!(lines[1]["kind"], "message.delta");
    assert_eq!(lines[1]["sessionId"], "s_1");
    assert_eq!(lines[1]["seq"], 2);
    assert_eq!(lines[1]["payload"]["text"], "Hi ");
    assert_eq!(lines[8]["kind"], "turn.done");
    assert!(lines[8]["ts"].is_string());
}

#[test]
fn odd_payloads_do_not_panic() {
    let events = [
        ev(1, "message.delta", json!(null)),
        ev(2, "tool.call", json!({"name": 5, "args": "not an object"})),
        ev(3, "tool.result", json!([])),
        ev(4, "error", json!("x")),
        ev(5, "turn.done", json!({"reason": 3})),
        ev(6, "something.new", json!({})),
    ];
    let (out, err) = render(false, true, &events);
    assert_eq!(out, "");
    assert!(err.contains("▸ : \"not an object\""), "{err}");
}

#[test]
fn tool_summary_picks_the_telling_argument_and_truncates() {
    assert_eq!(
        tool_summary("read_file", &json!({"path": "src/a.rs"})),
        "src/a.rs"
    );
    assert_eq!(
        tool_summary("grep", &json!({"pattern": "fn main", "glob": "*.rs"})),
        "fn main"
    );
    assert_eq!(tool_summary("mcp.x", &json!({"a": 1})), "{\"a\":1}");
    assert_eq!(tool_summary("list_dir", &json!({})), "");
    let long = "x".repeat(500);
    let s = tool_summary("shell", &json!({ "command": long }));
    assert_eq!(s.chars().count(), 120);
    assert!(s.ends_with('…'));
}

#[test]
fn a_tool_result_gets_a_short_line_and_verbose_shows_all_of_it_and_the_reasoning() {
    let events = [
        ev(1, "message.reasoning", json!({"text": "I should list "})),
        ev(2, "message.reasoning", json!({"text": "the folder."})),
        ev(
            3,
            "tool.call",
            json!({"name": "list_dir", "args": {"path": "."}}),
        ),
        ev(
            4,
            "tool.result",
            json!({"name": "list_dir", "ok": true, "output": "a.txt\nb.txt\nc/\n"}),
        ),
        ev(5, "turn.done", json!({"reason": "complete"})),
    ];
    let (_, err) = render(false, false, &events);
    assert_eq!(err, "▸ list_dir: .\n✓ list_dir: a.txt (+2 lines)\n");
    let mut r = Renderer::new(false, Vec::new(), Vec::new(), false).with_verbose(true);
    for e in &events {
        r.event(e);
    }
    let (_, err) = r.into_inner();
    assert_eq!(
        String::from_utf8(err).unwrap(),
        "… I should list the folder.\n▸ list_dir: .\n✓ list_dir: a.txt (+2 lines)\n  │ a.txt\n  │ b.txt\n  │ c/\n"
    );
    assert_eq!(short_result(""), "");
    assert_eq!(short_result("\n ok \n"), "ok");
}

#[test]
fn the_spinner_shows_while_the_model_thinks_and_is_cleared_before_output() {
    let mut r = Renderer::new(false, Vec::new(), Vec::new(), false).with_spinner(true);
    r.tick(); // nothing is running yet
    r.event(&ev(1, "turn.started", json!({"turnId": "t"})));
    r.tick();
    r.event(&ev(2, "message.delta", json!({"text": "hi"})));
    r.tick(); // streaming: no spinner
    r.event(&ev(3, "turn.done", json!({"reason": "complete"})));
    let (out, err) = r.into_inner();
    assert_eq!(String::from_utf8(out).unwrap(), "hi\n");
    let err = String::from_utf8(err).unwrap();
    assert!(err.starts_with("\r⠙ thinking "), "{err:?}");
    assert!(err.ends_with("s\x1b[K\r\x1b[K"), "{err:?}");
    assert_eq!(err.matches("thinking").count(), 1, "{err:?}");

    // --json never spins.
    let mut r = Renderer::new(true, Vec::new(), Vec::new(), false).with_spinner(true);
    r.event(&ev(1, "turn.started", json!({})));
    r.tick();
    assert_eq!(r.into_inner().1, Vec::<u8>::new());
}

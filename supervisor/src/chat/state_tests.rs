//! Unit tests of the chat state machine: streaming, steer/queue, the approval and question
//! modals, reconnect and resume without duplicates or gaps, commands, and the view on a
//! test backend (no terminal, no daemon).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::{json, Value};
use snowpea_sdk::SessionEvent;

use super::state::{
    update, Block, CallError, Effect, Link, Modal, Msg, Purpose, State, ThemeKind, ToolStatus,
};
use super::view;

const SID: &str = "s_1";

fn ev(seq: u64, kind: &str, payload: Value) -> SessionEvent {
    SessionEvent {
        session_id: SID.into(),
        seq,
        kind: kind.into(),
        payload,
        ts: String::new(),
    }
}

fn key(code: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn ctrl(c: char) -> Msg {
    Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}

fn typed(state: &mut State, text: &str) {
    for c in text.chars() {
        update(state, key(KeyCode::Char(c)));
    }
}

/// A state with session `s_1` open and its (empty) history applied.
fn opened() -> State {
    let mut s = State::new("/w", None, ThemeKind::Dark, false);
    let fx = s.start(None);
    assert!(matches!(
        &fx[0],
        Effect::Call {
            method: "session.list",
            ..
        }
    ));
    let fx = update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::StartupList,
            result: Ok(json!({ "sessions": [] })),
        },
    );
    assert!(
        matches!(
            &fx[0],
            Effect::Call {
                method: "session.create",
                ..
            }
        ),
        "{fx:?}"
    );
    let fx = update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Create,
            result: Ok(json!({ "sessionId": SID })),
        },
    );
    assert!(
        fx.iter().any(|f| matches!(
            f,
            Effect::Call {
                method: "session.resume",
                ..
            }
        )),
        "{fx:?}"
    );
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Resume(SID.into()),
            result: Ok(json!({ "sessionId": SID, "events": [], "mode": "accept" })),
        },
    );
    assert_eq!(s.mode, "accept");
    s
}

fn feed(s: &mut State, events: Vec<SessionEvent>) -> Vec<Effect> {
    events
        .into_iter()
        .flat_map(|e| update(s, Msg::Event(e)))
        .collect()
}

fn assistant_texts(s: &State) -> Vec<String> {
    s.blocks
        .iter()
        .filter_map(|e| match &e.block {
            Block::Assistant { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn user_texts(s: &State) -> Vec<String> {
    s.blocks
        .iter()
        .filter_map(|e| match &e.block {
            Block::User { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn turn(start: u64, turn: &str, words: &[&str]) -> Vec<SessionEvent> {
    let mut out = vec![
        ev(start, "turn.started", json!({ "turnId": turn })),
        ev(
            start + 1,
            "message.user",
            json!({ "turnId": turn, "text": "hi" }),
        ),
    ];
    let mut seq = start + 2;
    for w in words {
        out.push(ev(
            seq,
            "message.delta",
            json!({ "turnId": turn, "text": w }),
        ));
        seq += 1;
    }
    out.push(ev(
        seq,
        "message.done",
        json!({ "turnId": turn, "text": words.concat(), "role": "assistant" }),
    ));
    out.push(ev(
        seq + 1,
        "turn.done",
        json!({ "turnId": turn, "reason": "complete" }),
    ));
    out
}

#[test]
fn deltas_stream_into_one_answer_and_turn_done_ends_the_turn() {
    let mut s = opened();
    let events = turn(1, "t1", &["Hel", "lo ", "**world**"]);
    let (head, tail) = events.split_at(4);
    feed(&mut s, head.to_vec());
    assert!(s.busy());
    assert_eq!(assistant_texts(&s), ["Hello "]);
    feed(&mut s, tail.to_vec());
    assert!(!s.busy());
    assert_eq!(
        assistant_texts(&s),
        ["Hello **world**"],
        "message.done adds no copy"
    );
    assert_eq!(user_texts(&s), ["hi"]);
    assert_eq!(s.last_seq, 7);
}

#[test]
fn a_multi_round_turn_keeps_each_round_once_with_its_tool_line_and_diff() {
    let mut s = opened();
    feed(
        &mut s,
        vec![
            ev(1, "turn.started", json!({ "turnId": "t1" })),
            ev(2, "message.delta", json!({ "text": "Writing." })),
            ev(
                3,
                "tool.call",
                json!({ "callId": "c1", "name": "write_file", "args": { "path": "a.txt" } }),
            ),
            ev(
                4,
                "tool.result",
                json!({ "callId": "c1", "name": "write_file", "ok": true, "output": "Created a.txt" }),
            ),
            ev(
                5,
                "diff",
                json!({ "path": "a.txt", "patch": "@@ -0,0 +1 @@\n+hi\n" }),
            ),
            ev(6, "message.delta", json!({ "text": "Done." })),
            ev(
                7,
                "message.done",
                json!({ "text": "Writing.Done.", "role": "assistant" }),
            ),
            ev(
                8,
                "usage",
                json!({ "inputTokens": 100, "outputTokens": 7, "model": "m1" }),
            ),
            ev(9, "context", json!({ "percent": 12.5 })),
            ev(
                10,
                "turn.done",
                json!({ "turnId": "t1", "reason": "complete" }),
            ),
        ],
    );
    assert_eq!(assistant_texts(&s), ["Writing.", "Done."]);
    let tool = s.blocks.iter().find_map(|e| match &e.block {
        Block::Tool {
            name,
            summary,
            status,
            ..
        } => Some((name.clone(), summary.clone(), status.clone())),
        _ => None,
    });
    assert_eq!(
        tool,
        Some((
            "write_file".into(),
            "a.txt".into(),
            ToolStatus::Ok("Created a.txt".into())
        ))
    );
    assert!(s
        .blocks
        .iter()
        .any(|e| matches!(&e.block, Block::Diff { path, .. } if path == "a.txt")));
    assert_eq!(s.tokens, (100, 7));
    assert_eq!(s.model, "m1");
    assert_eq!(s.context_percent, Some(12.5));
}

#[test]
fn duplicates_are_dropped_and_a_gap_is_filled_by_resume_in_order() {
    let mut s = opened();
    let events = turn(1, "t1", &["a", "b", "c", "d"]);
    // 1..3 arrive, then 3 again (duplicate), then 6 (4 and 5 missing).
    assert!(feed(&mut s, events[..3].to_vec()).is_empty());
    assert!(feed(&mut s, vec![events[2].clone()]).is_empty());
    assert_eq!(assistant_texts(&s), ["a"]);
    let fx = feed(&mut s, vec![events[5].clone()]);
    assert_eq!(
        fx,
        vec![Effect::Call {
            method: "session.resume",
            params: json!({ "sessionId": SID, "afterSeq": 3 }),
            purpose: Purpose::Resume(SID.into()),
        }]
    );
    // Live events keep coming while the resume runs; they are held back.
    feed(&mut s, vec![events[6].clone()]);
    assert_eq!(assistant_texts(&s), ["a"]);
    // The resume answers 4..7 (overlapping what was held).
    let replay: Vec<Value> = events[3..7]
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let fx = update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Resume(SID.into()),
            result: Ok(json!({ "sessionId": SID, "events": replay })),
        },
    );
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!(assistant_texts(&s), ["abcd"]);
    feed(&mut s, events[7..].to_vec());
    assert_eq!(s.last_seq, 8);
    assert!(!s.busy());
    assert_eq!(assistant_texts(&s), ["abcd"]);
}

#[test]
fn opening_a_session_replays_history_and_merges_live_events_once() {
    let mut s = State::new("/w", None, ThemeKind::Dark, false);
    let fx = s.start(Some(SID.into()));
    assert!(matches!(
        &fx[0],
        Effect::Call {
            method: "session.attach",
            ..
        }
    ));
    let history = turn(1, "t1", &["old ", "answer"]);
    // A live event of a new turn arrives before the history does.
    let live = turn(7, "t2", &["new"]);
    feed(&mut s, live[..3].to_vec());
    assert!(s.blocks.is_empty());
    let fx = update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Attach(SID.into()),
            result: Ok(json!({})),
        },
    );
    assert!(fx.contains(&Effect::Call {
        method: "session.resume",
        params: json!({ "sessionId": SID, "afterSeq": 0 }),
        purpose: Purpose::Resume(SID.into()),
    }));
    let mut all: Vec<Value> = history
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    all.push(serde_json::to_value(&live[0]).unwrap());
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Resume(SID.into()),
            result: Ok(json!({ "sessionId": SID, "events": all, "mode": "plan" })),
        },
    );
    feed(&mut s, live[3..].to_vec());
    assert_eq!(assistant_texts(&s), ["old answer", "new"]);
    assert_eq!(user_texts(&s), ["hi", "hi"]);
    assert_eq!(s.mode, "plan");
    assert_eq!(s.last_seq, 11);
}

#[test]
fn reconnect_says_so_reattaches_and_resumes_from_the_last_seq_without_duplicates() {
    let mut s = opened();
    let events = turn(1, "t1", &["one ", "two ", "three"]);
    feed(&mut s, events[..4].to_vec());
    let fx = update(
        &mut s,
        Msg::Connection {
            connected: false,
            closed: false,
            generation: 1,
        },
    );
    assert!(fx.is_empty());
    assert_eq!(s.link, Link::Reconnecting);
    let fx = update(
        &mut s,
        Msg::Connection {
            connected: true,
            closed: false,
            generation: 2,
        },
    );
    assert_eq!(s.link, Link::Up);
    assert!(
        matches!(
            &fx[0],
            Effect::Call {
                method: "session.attach",
                ..
            }
        ),
        "{fx:?}"
    );
    assert_eq!(
        fx[1],
        Effect::Call {
            method: "session.resume",
            params: json!({ "sessionId": SID, "afterSeq": 4 }),
            purpose: Purpose::Resume(SID.into()),
        }
    );
    let notices: Vec<String> = s
        .blocks
        .iter()
        .filter_map(|e| match &e.block {
            Block::Notice { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert!(
        notices.iter().any(|n| n.contains("reconnecting")),
        "{notices:?}"
    );
    assert!(
        notices.iter().any(|n| n.contains("reconnected")),
        "{notices:?}"
    );
    // The SDK's own resume replays 3.. as notifications while ours answers 5..: each once.
    feed(&mut s, events[2..6].to_vec());
    let replay: Vec<Value> = events[4..]
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Resume(SID.into()),
            result: Ok(json!({ "events": replay })),
        },
    );
    assert_eq!(assistant_texts(&s), ["one two three"]);
    assert!(!s.busy());
}

#[test]
fn an_approval_is_a_modal_answered_with_the_chosen_scope() {
    let mut s = opened();
    update(
        &mut s,
        Msg::ApprovalRequest(json!({
            "requestId": "ap_1", "sessionId": SID, "tool": "shell",
            "args": { "command": "make" }, "risk": "high", "timeoutSec": 300
        })),
    );
    assert_eq!(s.modal, Some(Modal::Approval));
    let a = s.approvals.front().unwrap();
    assert_eq!(a.choices, ["once", "session", "project", "always", "deny"]);
    assert_eq!(a.summary, "make");
    // Typing goes to the modal, not the prompt.
    let fx = update(&mut s, key(KeyCode::Char('x')));
    assert!(fx.is_empty());
    assert_eq!(s.input_text(), "");
    let fx = update(&mut s, key(KeyCode::Char('s')));
    assert_eq!(
        fx,
        vec![Effect::Answer {
            request_id: "ap_1".into(),
            result: json!({ "decision": "allow", "scope": "session" }),
            fallback: "approval.respond",
        }]
    );
    assert_eq!(s.modal, None);
    // Arrow keys + Enter pick too; Esc denies with a reason.
    update(
        &mut s,
        Msg::ApprovalRequest(json!({ "requestId": "ap_2", "tool": "shell", "site": "https://x" })),
    );
    assert!(s.approvals[0].choices.contains(&"site"));
    update(&mut s, key(KeyCode::Right));
    update(&mut s, key(KeyCode::Right));
    let fx = update(&mut s, key(KeyCode::Enter));
    assert!(
        matches!(&fx[0], Effect::Answer { result, .. } if result["scope"] == "project"),
        "{fx:?}"
    );
    update(
        &mut s,
        Msg::ApprovalRequest(json!({ "requestId": "ap_3", "tool": "shell" })),
    );
    let fx = update(&mut s, key(KeyCode::Esc));
    assert!(
        matches!(&fx[0], Effect::Answer { result, .. } if result["decision"] == "deny"),
        "{fx:?}"
    );
}

#[test]
fn an_approval_answered_by_another_client_closes_the_prompt() {
    let mut s = opened();
    update(
        &mut s,
        Msg::ApprovalRequest(json!({ "requestId": "ap_1", "tool": "shell" })),
    );
    update(
        &mut s,
        Msg::ApprovalRequest(json!({ "requestId": "ap_2", "tool": "write_file" })),
    );
    // Another request's resolution changes nothing.
    assert!(update(
        &mut s,
        Msg::ApprovalResolved(json!({ "requestId": "zz", "by": "x", "decision": "allow" }))
    )
    .is_empty());
    let fx = update(
        &mut s,
        Msg::ApprovalResolved(json!({ "requestId": "ap_1", "by": "web", "decision": "allow" })),
    );
    assert_eq!(fx, vec![Effect::Forget("ap_1".into())]);
    // The next pending one is shown.
    assert_eq!(s.modal, Some(Modal::Approval));
    assert_eq!(s.approvals.front().unwrap().tool, "write_file");
    update(
        &mut s,
        Msg::ApprovalResolved(json!({ "requestId": "ap_2", "by": "web", "decision": "deny" })),
    );
    assert_eq!(s.modal, None);
}

#[test]
fn questions_offer_options_multi_select_and_secret_free_text() {
    let mut s = opened();
    update(
        &mut s,
        Msg::QuestionRequest(json!({
            "requestId": "q_1", "sessionId": SID,
            "questions": [
                { "question": "Which db?", "options": [{ "label": "sqlite" }, { "label": "postgres" }] },
                { "question": "Features?", "multi": true, "options": [{ "label": "a" }, { "label": "b" }, { "label": "c" }] },
                { "question": "Token?", "secret": true }
            ]
        })),
    );
    assert_eq!(s.modal, Some(Modal::Question));
    update(&mut s, key(KeyCode::Down));
    assert!(update(&mut s, key(KeyCode::Enter)).is_empty());
    // Multi: select a and c.
    update(&mut s, key(KeyCode::Char(' ')));
    update(&mut s, key(KeyCode::Down));
    update(&mut s, key(KeyCode::Down));
    update(&mut s, key(KeyCode::Char(' ')));
    update(&mut s, key(KeyCode::Enter));
    // Free text (secret): typed into the modal, never into the prompt.
    typed(&mut s, "hunter2");
    assert_eq!(s.input_text(), "");
    let mut buf = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let mut cache = view::Cache::default();
    buf.draw(|f| view::draw(f, &s, &mut cache)).unwrap();
    let screen = screen_text(&buf);
    assert!(!screen.contains("hunter2"), "secret shown:\n{screen}");
    assert!(screen.contains("•••••••"), "{screen}");
    let fx = update(&mut s, key(KeyCode::Enter));
    assert_eq!(
        fx,
        vec![Effect::Answer {
            request_id: "q_1".into(),
            result: json!({ "answers": [
                { "selected": ["postgres"], "text": null },
                { "selected": ["a", "c"], "text": null },
                { "selected": [], "text": "hunter2" }
            ]}),
            fallback: "question.respond",
        }]
    );
    assert_eq!(s.modal, None);
    // Esc declines a batch; question.resolved from elsewhere closes one.
    update(
        &mut s,
        Msg::QuestionRequest(json!({ "requestId": "q_2", "questions": [{ "question": "?" }] })),
    );
    let fx = update(&mut s, key(KeyCode::Esc));
    assert!(matches!(&fx[0], Effect::Answer { result, .. } if result == &json!({ "answers": [] })));
    update(
        &mut s,
        Msg::QuestionRequest(json!({ "requestId": "q_3", "questions": [{ "question": "?" }] })),
    );
    let fx = update(
        &mut s,
        Msg::QuestionResolved(json!({ "requestId": "q_3", "by": "web" })),
    );
    assert_eq!(fx, vec![Effect::Forget("q_3".into())]);
    assert_eq!(s.modal, None);
}

#[test]
fn while_busy_enter_queues_and_ctrl_s_steers_or_says_it_is_unavailable() {
    let mut s = opened();
    feed(
        &mut s,
        vec![ev(1, "turn.started", json!({ "turnId": "t1" }))],
    );
    typed(&mut s, "next thing");
    let fx = update(&mut s, key(KeyCode::Enter));
    assert_eq!(
        fx,
        vec![Effect::Call {
            method: "session.prompt",
            params: json!({ "sessionId": SID, "text": "next thing", "whenBusy": "queue" }),
            purpose: Purpose::Prompt("next thing".into()),
        }]
    );
    assert_eq!(s.queued.len(), 1);
    feed(
        &mut s,
        vec![ev(
            2,
            "turn.queued",
            json!({ "turnId": "t2", "position": 1, "queued": 1 }),
        )],
    );
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Prompt("next thing".into()),
            result: Ok(json!({ "turnId": "t2" })),
        },
    );
    assert_eq!(s.queued[0].turn_id.as_deref(), Some("t2"));
    // Ctrl-S steers.
    typed(&mut s, "also this");
    let fx = update(&mut s, ctrl('s'));
    assert_eq!(
        fx,
        vec![Effect::Call {
            method: "session.steer",
            params: json!({ "sessionId": SID, "text": "also this" }),
            purpose: Purpose::Steer("also this".into()),
        }]
    );
    // This daemon has no session.steer: shown as unavailable, the text comes back.
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Steer("also this".into()),
            result: Err(CallError::Unavailable("session.steer".into())),
        },
    );
    assert!(s.steer_unavailable);
    assert_eq!(s.input_text(), "also this");
    // Then Ctrl-S queues instead of pretending to steer.
    let fx = update(&mut s, ctrl('s'));
    assert!(
        matches!(&fx[0], Effect::Call { method: "session.prompt", params, .. } if params["whenBusy"] == "queue")
    );
    // The queued turn starts: it leaves the queue.
    feed(
        &mut s,
        vec![
            ev(
                3,
                "turn.done",
                json!({ "turnId": "t1", "reason": "complete" }),
            ),
            ev(
                4,
                "turn.dequeued",
                json!({ "turnId": "t2", "reason": "started" }),
            ),
            ev(5, "turn.started", json!({ "turnId": "t2", "queued": true })),
        ],
    );
    assert!(s.queued.iter().all(|q| q.turn_id.as_deref() != Some("t2")));
    // A steered message is marked as such.
    feed(
        &mut s,
        vec![ev(
            6,
            "message.user",
            json!({ "text": "x", "steered": true }),
        )],
    );
    assert!(matches!(
        &s.blocks.last().unwrap().block,
        Block::User { steered: true, .. }
    ));
}

#[test]
fn esc_interrupts_a_running_turn_and_ctrl_c_twice_quits() {
    let mut s = opened();
    assert!(
        update(&mut s, key(KeyCode::Esc)).is_empty(),
        "nothing to interrupt"
    );
    feed(
        &mut s,
        vec![ev(1, "turn.started", json!({ "turnId": "t1" }))],
    );
    let fx = update(&mut s, key(KeyCode::Esc));
    assert!(matches!(
        &fx[0],
        Effect::Call {
            method: "session.interrupt",
            ..
        }
    ));
    assert!(update(&mut s, ctrl('c')).is_empty());
    assert_eq!(update(&mut s, ctrl('c')), vec![Effect::Quit]);
}

#[test]
fn slash_commands_go_through_command_run_and_fall_back_when_unavailable() {
    let mut s = opened();
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::CommandList,
            result: Err(CallError::Unavailable("command.list".into())),
        },
    );
    typed(&mut s, "/mo");
    let names: Vec<String> = s.palette().unwrap().into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["model", "mode"]);
    typed(&mut s, "de plan");
    assert!(s.palette().is_none(), "the palette closes at the arguments");
    let fx = update(&mut s, key(KeyCode::Enter));
    assert_eq!(
        fx,
        vec![Effect::Call {
            method: "command.run",
            params: json!({ "sessionId": SID, "name": "mode", "args": "plan" }),
            purpose: Purpose::Command {
                name: "mode".into(),
                args: "plan".into()
            },
        }]
    );
    let fx = update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Command {
                name: "mode".into(),
                args: "plan".into(),
            },
            result: Err(CallError::Unavailable("command.run".into())),
        },
    );
    assert!(
        matches!(&fx[0], Effect::Call { method: "session.setMode", params, .. } if params["mode"] == "plan")
    );
    // A daemon command list, with an argument hint from argsSchema.
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::CommandList,
            result: Ok(
                json!({ "commands": [{ "name": "review", "summary": "review", "argsSchema": { "description": "<path>" } }] }),
            ),
        },
    );
    typed(&mut s, "/rev");
    let rows = s.palette().unwrap();
    assert_eq!(
        (rows[0].name.as_str(), rows[0].hint.as_str()),
        ("review", "<path>")
    );
    // Tab completes the name.
    update(&mut s, key(KeyCode::Tab));
    assert_eq!(s.input_text(), "/review ");
}

#[test]
fn at_completes_paths_or_says_file_complete_is_unavailable() {
    let mut s = opened();
    typed(&mut s, "see @sr");
    let c = s.completion.clone().unwrap();
    assert_eq!(c.query, "sr");
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Complete("sr".into()),
            result: Ok(
                json!({ "entries": [{ "path": "src", "kind": "dir" }, { "path": "src.rs", "kind": "file" }] }),
            ),
        },
    );
    update(&mut s, key(KeyCode::Tab));
    assert_eq!(s.input_text(), "see @src/ ");
    typed(&mut s, "@x");
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Complete("x".into()),
            result: Err(CallError::Unavailable("file.complete".into())),
        },
    );
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let mut cache = view::Cache::default();
    t.draw(|f| view::draw(f, &s, &mut cache)).unwrap();
    assert!(
        screen_text(&t).contains("path completion is unavailable"),
        "{}",
        screen_text(&t)
    );
}

#[test]
fn history_multiline_and_paste() {
    let mut s = opened();
    typed(&mut s, "first");
    update(&mut s, key(KeyCode::Enter));
    update(&mut s, Msg::Paste("line one\r\nline two".into()));
    update(
        &mut s,
        Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT)),
    );
    typed(&mut s, "three");
    assert_eq!(s.input_text(), "line one\nline two\nthree");
    update(&mut s, key(KeyCode::Enter));
    update(&mut s, key(KeyCode::Up));
    assert_eq!(s.input_text(), "line one\nline two\nthree");
    update(&mut s, key(KeyCode::Up));
    assert_eq!(s.input_text(), "first");
    update(&mut s, key(KeyCode::Down));
    assert_eq!(s.input_text(), "line one\nline two\nthree");
    // Down moves through the lines of a multi-line entry first, then on to the draft.
    update(&mut s, key(KeyCode::Down));
    update(&mut s, key(KeyCode::Down));
    assert_eq!(s.input_text(), "line one\nline two\nthree");
    update(&mut s, key(KeyCode::Down));
    assert_eq!(s.input_text(), "");
}

fn screen_text(t: &Terminal<TestBackend>) -> String {
    let buf = t.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

#[test]
fn the_view_fits_80x24_and_shows_answer_tool_diff_and_status() {
    let mut s = opened();
    feed(
        &mut s,
        vec![
            ev(1, "turn.started", json!({ "turnId": "t1" })),
            ev(2, "message.user", json!({ "text": "edit it" })),
            ev(
                3,
                "tool.call",
                json!({ "callId": "c1", "name": "write_file", "args": { "path": "a.txt" } }),
            ),
            ev(
                4,
                "tool.result",
                json!({ "callId": "c1", "name": "write_file", "ok": true, "output": "ok" }),
            ),
            ev(
                5,
                "diff",
                json!({ "path": "a.txt", "patch": "--- a\n+++ b\n@@ -1 +1 @@\n-old\n+new\n" }),
            ),
            ev(
                6,
                "message.delta",
                json!({ "text": "# Title\n\nDone with `a.txt`." }),
            ),
            ev(7, "context", json!({ "percent": 42.0 })),
        ],
    );
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let mut cache = view::Cache::default();
    t.draw(|f| view::draw(f, &s, &mut cache)).unwrap();
    let screen = screen_text(&t);
    for want in [
        "› edit it",
        "✓ write_file a.txt",
        "✎ a.txt",
        "-old",
        "+new",
        "# Title",
        "Done with a.txt.",
        "ctx 42%",
        "working",
    ] {
        assert!(screen.contains(want), "{want:?} missing:\n{screen}");
    }
    // Too small: says so instead of drawing a broken layout.
    let mut small = Terminal::new(TestBackend::new(60, 20)).unwrap();
    small.draw(|f| view::draw(f, &s, &mut cache)).unwrap();
    assert!(screen_text(&small).contains("at least 80×24"));
}

#[test]
fn no_color_draws_without_colours() {
    let mut s = State::new("/w", None, ThemeKind::Light, true);
    s.start(None);
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::StartupList,
            result: Ok(json!({ "sessions": [] })),
        },
    );
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Create,
            result: Ok(json!({ "sessionId": SID })),
        },
    );
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Resume(SID.into()),
            result: Ok(json!({ "events": [] })),
        },
    );
    feed(
        &mut s,
        vec![
            ev(
                1,
                "message.delta",
                json!({ "text": "```rust\nfn x() {}\n```" }),
            ),
            ev(2, "error", json!({ "code": "internal", "message": "boom" })),
        ],
    );
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let mut cache = view::Cache::default();
    t.draw(|f| view::draw(f, &s, &mut cache)).unwrap();
    let buf = t.backend().buffer();
    for cell in buf.content() {
        assert_eq!(cell.fg, ratatui::style::Color::Reset, "{cell:?}");
        assert_eq!(cell.bg, ratatui::style::Color::Reset, "{cell:?}");
    }
}

#[test]
fn the_session_picker_opens_renames_and_closes() {
    let mut s = State::new("/w", None, ThemeKind::Dark, false);
    s.start(None);
    let list = json!({ "sessions": [
        { "sessionId": "s_old", "title": "old", "lastActivityAt": "2026-01-01T00:00:00Z", "mode": "accept", "workdir": "/w", "createdAt": "" },
        { "sessionId": "s_new", "lastPrompt": "latest", "lastActivityAt": "2026-02-01T00:00:00Z", "mode": "accept", "workdir": "/w", "createdAt": "" }
    ]});
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::StartupList,
            result: Ok(list),
        },
    );
    let Some(Modal::Picker(p)) = &s.modal else {
        panic!("picker expected")
    };
    assert_eq!(p.rows[0].label, "latest", "newest first");
    update(&mut s, key(KeyCode::Char('r')));
    typed(&mut s, "Renamed");
    let fx = update(&mut s, key(KeyCode::Enter));
    assert_eq!(
        fx,
        vec![Effect::Call {
            method: "session.rename",
            params: json!({ "sessionId": "s_new", "title": "Renamed" }),
            purpose: Purpose::Other("session.rename".into()),
        }]
    );
    update(&mut s, key(KeyCode::Down));
    let fx = update(&mut s, key(KeyCode::Char('d')));
    assert!(
        matches!(&fx[0], Effect::Call { method: "session.close", params, .. } if params["sessionId"] == "s_old")
    );
    let fx = update(&mut s, key(KeyCode::Enter));
    assert!(
        matches!(&fx[0], Effect::Call { method: "session.attach", params, .. } if params["sessionId"] == "s_new")
    );
    assert_eq!(s.session_id.as_deref(), Some("s_new"));
}

#[test]
fn docs_chat_md_lists_every_key_binding() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/CHAT.md"))
        .unwrap()
        .replace('`', "");
    for (key, _) in view::KEYS {
        assert!(doc.contains(key), "docs/CHAT.md does not list {key:?}");
    }
}

#[test]
fn an_approval_that_arrives_under_the_picker_shows_once_the_picker_closes() {
    let mut s = opened();
    update(&mut s, ctrl('o'));
    update(
        &mut s,
        Msg::ApprovalRequest(json!({ "requestId": "ap_1", "tool": "shell" })),
    );
    assert!(matches!(s.modal, Some(Modal::Picker(_))));
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::PickerList,
            result: Ok(
                json!({ "sessions": [{ "sessionId": SID, "workdir": "/w", "mode": "accept", "createdAt": "" }] }),
            ),
        },
    );
    // Enter on the current session closes the picker: the approval is shown.
    update(&mut s, key(KeyCode::Down));
    update(&mut s, key(KeyCode::Enter));
    assert_eq!(s.modal, Some(Modal::Approval));
}

/// Issue 39 item 5: the palette's hint is the command's usage, an unknown command is not
/// "started", `/mode plan` is said once, `/theme` leaves a trace, `/help` lists commands.
#[test]
fn commands_show_their_usage_are_said_once_and_help_lists_them() {
    let mut s = opened();
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::CommandList,
            result: Ok(
                json!({ "commands": [{ "name": "mode", "summary": "switch the mode", "argsSchema": {
                "properties": {"subcommand": {}, "args": {}, "confirm": {}},
                "x-usage": "/mode [plan|accept|auto|status|save [--scope=global|project]]"
            } }] }),
            ),
        },
    );
    typed(&mut s, "/mod");
    let rows = s.palette().unwrap();
    let mode = rows.iter().find(|r| r.name == "mode").unwrap();
    assert_eq!(
        mode.hint,
        "[plan|accept|auto|status|save [--scope=global|project]]"
    );
    typed(&mut s, "e plan");
    update(&mut s, key(KeyCode::Enter));
    let ran = Purpose::Command {
        name: "mode".into(),
        args: "plan".into(),
    };
    update(
        &mut s,
        Msg::Reply {
            purpose: ran,
            result: Ok(json!({ "turnId": "t_1" })),
        },
    );
    assert_eq!(
        s.flash.as_ref().map(|f| f.0.as_str()),
        Some("/mode running…")
    );
    let notices_before = notices(&s).len();
    feed(
        &mut s,
        vec![
            ev(1, "turn.started", json!({ "turnId": "t_1" })),
            ev(2, "mode.changed", json!({ "mode": "plan" })),
            ev(
                3,
                "message.done",
                json!({ "role": "system", "text": "mode: accept → plan" }),
            ),
            ev(
                4,
                "turn.done",
                json!({ "turnId": "t_1", "reason": "complete" }),
            ),
        ],
    );
    assert_eq!(s.mode, "plan");
    assert!(
        !notices(&s)[notices_before..]
            .iter()
            .any(|n| n.contains("mode is now")),
        "{:?}",
        notices(&s)
    );
    // Another client's switch is still said.
    feed(
        &mut s,
        vec![ev(5, "mode.changed", json!({ "mode": "auto" }))],
    );
    assert!(notices(&s).iter().any(|n| n == "mode is now auto"));

    // An unknown command claims nothing on the status line.
    s.flash = None;
    typed(&mut s, "/frobnicate");
    update(&mut s, key(KeyCode::Enter));
    update(
        &mut s,
        Msg::Reply {
            purpose: Purpose::Command {
                name: "frobnicate".into(),
                args: String::new(),
            },
            result: Ok(json!({ "turnId": "t_2" })),
        },
    );
    assert_eq!(s.flash, None);

    typed(&mut s, "/theme light");
    update(&mut s, key(KeyCode::Enter));
    assert!(
        notices(&s).iter().any(|n| n == "theme: light"),
        "{:?}",
        notices(&s)
    );

    // /help is the daemon's list, plus a line for the client's own commands.
    typed(&mut s, "/help");
    let fx = update(&mut s, key(KeyCode::Enter));
    assert!(
        matches!(&fx[0], Effect::Call { method: "command.run", params, .. } if params["name"] == "help"),
        "{fx:?}"
    );
    assert!(notices(&s).last().unwrap().contains("/sessions /new"));
}

/// Every key docs/CHAT.md's key tables list is in the F1 popup too.
#[test]
fn the_f1_popup_lists_every_key_chat_md_lists() {
    let mut s = opened();
    update(
        &mut s,
        Msg::Key(KeyEvent::new(KeyCode::F(1), KeyModifiers::NONE)),
    );
    let mut t = Terminal::new(TestBackend::new(100, 40)).unwrap();
    let mut cache = view::Cache::default();
    t.draw(|f| view::draw(f, &s, &mut cache)).unwrap();
    let screen = screen_text(&t);
    for key in [
        "Ctrl-End", "Ctrl-L", "PgUp", "Ctrl-O", "Ctrl-R", "Ctrl-S", "w site", "a always",
    ] {
        assert!(
            screen.contains(key),
            "the F1 popup lacks {key:?}:\n{screen}"
        );
    }
}

fn notices(s: &State) -> Vec<String> {
    s.blocks
        .iter()
        .filter_map(|e| match &e.block {
            Block::Notice { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

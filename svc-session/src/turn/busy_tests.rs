//! Busy sessions (issue 16): steer, queue, interrupt dropping what waits, notices,
//! `session.continue` and slash commands, against the scripted provider.

use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;

use crate::testkit::{done_reason, kinds, of_kind, Harness, Item};

/// Waits for the next `approval.request` and returns its request id.
async fn next_approval(h: &mut Harness) -> String {
    loop {
        if let Item::Request(r) = h.next().await {
            if r.method == "approval.request" {
                return r.request_id;
            }
        }
    }
}

fn allow() -> Value {
    json!({"decision": "allow", "scope": "once"})
}

/// The user messages of the last model request.
fn last_user_texts(h: &Harness) -> Vec<String> {
    let fake = snowpea_session_llm::provider::fake_provider(&h.script).unwrap();
    let last = fake.received().pop().expect("a model call");
    last.messages
        .iter()
        .filter(|m| m.role == snowpea_session_llm::provider::Role::User)
        .map(|m| m.content.clone())
        .collect()
}

fn model_calls(h: &Harness) -> usize {
    snowpea_session_llm::provider::fake_provider(&h.script)
        .unwrap()
        .received()
        .len()
}

fn seq(events: &[Value], kind: &str, turn_id: &str) -> i64 {
    events
        .iter()
        .find(|e| e["kind"] == kind && e["payload"]["turnId"] == turn_id)
        .unwrap_or_else(|| panic!("{kind} of {turn_id} in {:?}", kinds(events)))["seq"]
        .as_i64()
        .unwrap()
}

#[tokio::test]
async fn a_busy_prompt_is_steered_into_the_running_turn_between_two_tool_rounds() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "work", "tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]},
            {"match": "also look at b", "text": "Looked at b too."}
        ],
        "default": {"text": "unexpected"}
    }))
    .await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    let t1 = h.prompt(&sid, "work please").await;
    let rid = next_approval(&mut h).await;
    // No whenBusy: the default agent.busy is steer.
    let t2 = h.prompt(&sid, "also look at b").await;
    h.reply(&rid, allow()).await;
    let ev = h.until_done(&t2, |_| None).await;
    let k = kinds(&ev);
    let queued = of_kind(&ev, "turn.queued")[0];
    assert_eq!(
        queued["payload"],
        json!({"turnId": t2, "position": 1, "queued": 1})
    );
    let steered: Vec<_> = of_kind(&ev, "message.user")
        .into_iter()
        .filter(|e| e["payload"]["steered"] == true)
        .collect();
    assert_eq!(steered.len(), 1, "{k:?}");
    assert_eq!(steered[0]["payload"]["text"], "also look at b");
    assert_eq!(steered[0]["payload"]["turnId"], t1.as_str());
    let dq = of_kind(&ev, "turn.dequeued")[0];
    assert_eq!(
        dq["payload"],
        json!({"turnId": t2, "reason": "steered", "queued": 0})
    );
    // tool.result → message.user{steered} → turn.dequeued{steered} → the next model call.
    let result = seq(&ev, "tool.result", &t1);
    let user = steered[0]["seq"].as_i64().unwrap();
    assert!(result < user && user < dq["seq"].as_i64().unwrap());
    assert!(
        !ev.iter()
            .any(|e| e["kind"] == "turn.started" && e["payload"]["turnId"] == t2.as_str()),
        "a steered prompt never gets its own turn.started"
    );
    assert!(seq(&ev, "turn.done", &t1) < seq(&ev, "turn.done", &t2));
    assert_eq!(
        of_kind(&ev, "message.done")[0]["payload"]["text"],
        "Looked at b too."
    );
    assert_eq!(
        last_user_texts(&h).last().map(String::as_str),
        Some("also look at b")
    );
    for d in of_kind(&ev, "turn.done") {
        assert_eq!(d["payload"]["reason"], "complete");
    }
    // The history of the next turn keeps the steered prompt.
    let t3 = h.prompt(&sid, "next").await;
    h.until_done(&t3, |_| None).await;
    assert_eq!(
        last_user_texts(&h),
        ["work please", "also look at b", "next"]
    );
}

#[tokio::test]
async fn agent_busy_queue_queues_and_interrupt_drops_everything_waiting() {
    let mut h = Harness::with_settings(
        json!({"steps": [{"match": "gated", "tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]}], "default": {"text": "x"}}),
        json!({"agent": {"busy": "queue"}}),
    )
    .await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    // The turn waits on an approval, so nothing waiting is folded into a model call.
    let t1 = h.prompt(&sid, "gated").await;
    next_approval(&mut h).await;
    let t2 = h.prompt(&sid, "two").await;
    let t3 = h.prompt_with(&sid, "three", "steer").await;
    let t4 = h.prompt(&sid, "four").await;
    h.app.turns.interrupt(&sid).unwrap();
    let ev = h.until_done(&t1, |_| None).await;
    let positions: Vec<_> = of_kind(&ev, "turn.queued")
        .iter()
        .map(|e| {
            (
                e["payload"]["turnId"].clone(),
                e["payload"]["position"].clone(),
                e["payload"]["queued"].clone(),
            )
        })
        .collect();
    assert_eq!(
        positions,
        [
            (json!(t2), json!(1), json!(1)),
            (json!(t3), json!(1), json!(2)),
            (json!(t4), json!(2), json!(3)),
        ]
    );
    // Dropped: the steer first, then the queue in order; each also ends interrupted.
    let dropped: Vec<_> = of_kind(&ev, "turn.dequeued")
        .iter()
        .map(|e| {
            assert_eq!(e["payload"]["reason"], "dropped");
            e["payload"]["turnId"].clone()
        })
        .collect();
    assert_eq!(dropped, [json!(t3), json!(t2), json!(t4)]);
    for t in [&t1, &t2, &t3, &t4] {
        let d = ev
            .iter()
            .find(|e| e["kind"] == "turn.done" && e["payload"]["turnId"] == t.as_str())
            .unwrap_or_else(|| panic!("turn.done of {t}"));
        assert_eq!(d["payload"]["reason"], "interrupted");
    }
    assert!(
        of_kind(&ev, "turn.started").is_empty(),
        "nothing waiting ran after the interrupt"
    );
}

#[tokio::test]
async fn a_steer_arriving_during_the_final_answer_gets_its_own_model_call() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "start", "tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]},
            {"after_tool": "shell", "delaySec": 2, "text": "first answer."},
            {"match": "and then", "text": "second answer."}
        ]
    }))
    .await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    let t1 = h.prompt(&sid, "start").await;
    let rid = next_approval(&mut h).await;
    h.reply(&rid, allow()).await;
    // Once the tool result is out, the final model call is under way (2 s).
    loop {
        if let Item::Note(m, p) = h.next().await {
            if m == "session.event" && p["kind"] == "tool.result" {
                break;
            }
        }
    }
    let r = h
        .app
        .turns
        .steer(
            &Harness::ctx("c1", Some("cli")),
            pb::SessionSteerParams {
                session_id: sid.clone(),
                text: "and then".into(),
            },
        )
        .await
        .unwrap();
    assert!(r.ok && !r.started);
    let ev = h.until_done(&t1, |_| None).await;
    assert_eq!(
        of_kind(&ev, "message.done")[0]["payload"]["text"],
        "first answer.second answer."
    );
    assert_eq!(done_reason(&ev), "complete");
}

#[tokio::test]
async fn steer_on_an_idle_session_starts_a_turn_and_empty_text_is_refused() {
    let mut h = Harness::new(json!({"default": {"text": "hi"}})).await;
    let sid = h.create("accept").await;
    let ctx = Harness::ctx("c1", Some("cli"));
    let err = h
        .app
        .turns
        .steer(
            &ctx,
            pb::SessionSteerParams {
                session_id: sid.clone(),
                text: "  ".into(),
            },
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("params.text"), "{err}");
    let r = h
        .app
        .turns
        .steer(
            &ctx,
            pb::SessionSteerParams {
                session_id: sid.clone(),
                text: "hello".into(),
            },
        )
        .await
        .unwrap();
    assert!(r.ok && r.started);
    loop {
        if let Item::Note(m, p) = h.next().await {
            if m == "session.event" && p["kind"] == "turn.done" {
                assert_eq!(p["payload"]["reason"], "complete");
                break;
            }
        }
    }
}

#[tokio::test]
async fn notices_reach_the_next_model_call_only_and_are_capped() {
    let mut h = Harness::new(json!({"default": {"text": "noted"}})).await;
    let sid = h.create("accept").await;
    let notice = |text: &str| pb::SessionNoticeParams {
        session_id: sid.clone(),
        text: text.into(),
    };
    let err = h.app.turns.notice(notice(" \n ")).unwrap_err();
    assert!(err.to_string().contains("params.text"), "{err}");
    assert!(h.app.turns.notice(notice("a  popup\n opened")).unwrap().ok);
    let long = "x".repeat(5000);
    assert!(h.app.turns.notice(notice(&long)).unwrap().ok);
    for i in 2..super::busy::NOTICE_MAX_PENDING {
        assert!(h.app.turns.notice(notice(&format!("n{i}"))).unwrap().ok);
    }
    assert!(
        !h.app.turns.notice(notice("one too many")).unwrap().ok,
        "the 21st waiting notice is dropped"
    );
    // A notice never starts a turn.
    assert_eq!(model_calls(&h), 0);
    assert!(h.app.sessions.get(&sid).unwrap().turns().running.is_none());
    let t = h.prompt(&sid, "go").await;
    h.until_done(&t, |_| None).await;
    let users = last_user_texts(&h);
    let block = users.last().unwrap();
    let lines: Vec<_> = block.lines().collect();
    assert_eq!(lines.len(), super::busy::NOTICE_MAX_PENDING);
    assert_eq!(lines[0], "[system] a popup opened");
    assert_eq!(
        lines[1].len(),
        "[system] ".len() + super::busy::NOTICE_MAX_CHARS
    );
    assert!(!block.contains("one too many"));
    // Consumed: the next call has none.
    let t = h.prompt(&sid, "again").await;
    h.until_done(&t, |_| None).await;
    assert!(!last_user_texts(&h).iter().any(|u| u.contains("[system]")));
}

#[tokio::test]
async fn an_unknown_slash_command_ends_the_turn_without_a_model_call() {
    let mut h = Harness::new(json!({"default": {"text": "never"}})).await;
    let sid = h.create("accept").await;
    let t = h.prompt(&sid, "/nosuch thing").await;
    let ev = h.until_done(&t, |_| None).await;
    // A command turn (the commands registry) has no message.user: turn.started carries it.
    assert_eq!(kinds(&ev), ["turn.started", "error", "turn.done"]);
    assert_eq!(of_kind(&ev, "error")[0]["payload"]["code"], "not_found");
    assert_eq!(done_reason(&ev), "error");
    assert_eq!(model_calls(&h), 0);
    // A path is not a command.
    let t = h.prompt(&sid, "/usr/bin/env is odd").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "complete");
}

#[tokio::test]
async fn continue_starts_a_system_turn_once_per_window_and_honours_keys() {
    let mut h = Harness::new(json!({"default": {"text": "continuing"}})).await;
    let sid = h.create("accept").await;
    let ctx = Harness::ctx("c1", Some("cli"));
    let params = |note: &str, key: Option<&str>| pb::SessionContinueParams {
        session_id: sid.clone(),
        note: note.into(),
        idempotency_key: key.map(str::to_owned),
        ..Default::default()
    };
    let err = h
        .app
        .turns
        .continue_session(&ctx, params(" ", None))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("params.note"), "{err}");
    let r = h
        .app
        .turns
        .continue_session(&ctx, params("the tab is back", Some("k1")))
        .await
        .unwrap();
    assert!(r.started);
    let tid = r.turn_id.clone().unwrap();
    let ev = h.until_done(&tid, |_| None).await;
    let started = of_kind(&ev, "turn.started")[0];
    assert_eq!(started["payload"]["initiator"], "system");
    assert_eq!(started["payload"]["reason"], "handback");
    assert!(started["payload"]["prompt"].is_null());
    assert!(of_kind(&ev, "message.user").is_empty());
    assert_eq!(last_user_texts(&h), ["[system] (handback) the tab is back"]);
    // The same key: a no-op.
    let dup = h
        .app
        .turns
        .continue_session(&ctx, params("again", Some("k1")))
        .await
        .unwrap();
    assert_eq!((dup.started, dup.duplicate), (false, Some(true)));
    // Inside the 10 s window: kept as a notice for the next model call.
    let soon = h
        .app
        .turns
        .continue_session(&ctx, params("second hand-back", Some("k2")))
        .await
        .unwrap();
    assert_eq!((soon.started, soon.queued), (false, Some(true)));
    let t = h.prompt(&sid, "next").await;
    h.until_done(&t, |_| None).await;
    let users = last_user_texts(&h);
    assert_eq!(
        users[0], "[system] (handback) the tab is back",
        "kept in history"
    );
    assert!(
        users.contains(&"[system] (handback) second hand-back".to_owned()),
        "{users:?}"
    );
    // A browser connection that did not create the session may not.
    let browser = snowpea_common::context::CallContext {
        connection_id: Some("c9".into()),
        client_id: Some("other".into()),
        client_kind: Some("browser".into()),
        ..Default::default()
    };
    let err = h
        .app
        .turns
        .continue_session(&browser, params("x", None))
        .await
        .unwrap_err();
    assert!(
        matches!(err, snowpea_session_error::Error::Unauthorized(_)),
        "{err}"
    );
}

/// Steer latency (docs/PERFORMANCE.md): from the `session.prompt` call of a steered prompt to
/// its `message.user{steered}` on the bus, while a turn loops over tool rounds of a 0.2 s
/// shell command (so the fold waits for the round in progress, as it would in real use).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: cargo test -p snowpea-svc-session --lib turn::busy_tests::measure -- --ignored --nocapture"]
async fn measure_steer_latency() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "bench", "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 0.2"}}], "repeat": true},
            {"after_tool": "shell", "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 0.2"}}], "repeat": true}
        ]
    }))
    .await;
    let sid = h.create("auto").await;
    let mut samples = Vec::new();
    let mut after_round = Vec::new();
    while samples.len() < 200 {
        let t = h.prompt(&sid, "bench loop").await;
        for i in 0..20 {
            let text = format!("bench steer {i}");
            let start = std::time::Instant::now();
            h.prompt_with(&sid, &text, "steer").await;
            let mut round_end = None;
            loop {
                if let Item::Note(m, p) = h.next().await {
                    if m == "session.event" && p["kind"] == "tool.result" {
                        round_end = Some(std::time::Instant::now());
                    }
                    if m == "session.event"
                        && p["kind"] == "message.user"
                        && p["payload"]["steered"] == true
                        && p["payload"]["text"] == text.as_str()
                    {
                        samples.push(start.elapsed());
                        if let Some(r) = round_end {
                            after_round.push(r.elapsed());
                        }
                        break;
                    }
                }
            }
        }
        h.app.turns.interrupt(&sid).unwrap();
        h.until_done(&t, |_| None).await;
    }
    samples.sort();
    after_round.sort();
    let q = |v: &[std::time::Duration], q: f64| v[((v.len() - 1) as f64 * q) as usize];
    println!(
        "steer latency over {} steers: p50 {:?}, p99 {:?}, max {:?}",
        samples.len(),
        q(&samples, 0.5),
        q(&samples, 0.99),
        samples.last().unwrap()
    );
    println!(
        "tool round end → message.user{{steered}} over {}: p50 {:?}, p99 {:?}",
        after_round.len(),
        q(&after_round, 0.5),
        q(&after_round, 0.99)
    );
}

#[tokio::test]
async fn at_references_are_listed_in_message_user_and_reach_the_model() {
    let mut h = Harness::new(json!({"default": {"text": "seen"}})).await;
    std::fs::create_dir_all(h.workdir.join("src")).unwrap();
    std::fs::write(h.workdir.join("src/a.rs"), "one\ntwo\nthree\nfour\n").unwrap();
    let sid = h.create("accept").await;
    let t = h
        .prompt(&sid, "look at @src/a.rs:2-3 and @../escape.txt")
        .await;
    let ev = h.until_done(&t, |_| None).await;
    let user = &of_kind(&ev, "message.user")[0]["payload"];
    assert_eq!(user["text"], "look at @src/a.rs:2-3 and @../escape.txt");
    assert_eq!(
        user["refs"],
        json!([
            {"path": "src/a.rs", "kind": "file", "lines": [2, 3]},
            {"path": "../escape.txt", "kind": "missing", "error": "outside the workdir"}
        ])
    );
    let got = last_user_texts(&h).pop().unwrap();
    assert!(
        got.contains("<ref path=\"src/a.rs\" kind=\"file\" lines=\"2-3\">\ntwo\nthree\n</ref>"),
        "{got}"
    );
    // The next turn's history keeps what the model was given.
    let t = h.prompt(&sid, "next").await;
    h.until_done(&t, |_| None).await;
    assert!(last_user_texts(&h)[0].contains("two\nthree"));
}

#[tokio::test]
async fn prompts_waiting_behind_a_turn_are_bounded_and_a_refusal_stores_nothing() {
    use snowpea_proto::limits::PROMPTS_WAITING;
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "work", "tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]}
        ],
        "default": {"text": "ok"}
    }))
    .await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    let t1 = h.prompt(&sid, "work please").await;
    let rid = next_approval(&mut h).await;
    for i in 0..PROMPTS_WAITING {
        h.prompt_with(
            &sid,
            &format!("later {i}"),
            if i % 2 == 0 { "queue" } else { "steer" },
        )
        .await;
    }
    let ctx = Harness::ctx("c1", Some("cli"));
    let over = pb::SessionPromptParams {
        session_id: sid.clone(),
        text: "one too many".into(),
        when_busy: Some("queue".into()),
        ..Default::default()
    };
    let e = h.app.turns.prompt(&ctx, over).await.unwrap_err();
    let rpc = e.into_rpc();
    assert_eq!(rpc.code.wire(), "session_busy", "{rpc:?}");
    assert!(
        rpc.message.contains(&PROMPTS_WAITING.to_string()),
        "{}",
        rpc.message
    );
    let steer = pb::SessionSteerParams {
        session_id: sid.clone(),
        text: "steer too many".into(),
    };
    assert_eq!(
        h.app
            .turns
            .steer(&ctx, steer)
            .await
            .unwrap_err()
            .into_rpc()
            .code
            .wire(),
        "session_busy"
    );
    // The refused prompts left no trace; the waiting ones all run once the turn goes on.
    h.reply(&rid, allow()).await;
    let ev = h.until_done(&t1, |_| None).await;
    let all = serde_json::to_string(&ev).unwrap();
    assert!(!all.contains("too many"), "a refused prompt was recorded");
    assert_eq!(of_kind(&ev, "turn.queued").len(), PROMPTS_WAITING);
}

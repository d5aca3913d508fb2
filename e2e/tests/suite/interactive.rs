//! The interactive turn through the real suite (issue 16) with the scripted provider: steer
//! folded between two tool rounds, queue order, interrupt dropping the queue, notices and
//! their cap, `session.continue`'s window and idempotency, compaction (manual and auto, never
//! splitting a tool pair), the setModel routing table and setEffort, slash commands, and bad
//! input naming its field, `@` references with a range and an escape attempt, attachments
//! (an image reaching the model as vision input), artifacts and `session.deleteSaved`. One suite for the file: each scenario uses its own session (and
//! workdir where it needs project settings) and script steps that match only its prompts.
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::{Client, SessionEvent};
use tokio::sync::{mpsc, oneshot};

const TURN: Duration = Duration::from_secs(30);

fn kinds(events: &[SessionEvent]) -> Vec<&str> {
    events.iter().map(|e| e.kind.as_str()).collect()
}

fn of<'a>(events: &'a [SessionEvent], kind: &str) -> Vec<&'a SessionEvent> {
    events.iter().filter(|e| e.kind == kind).collect()
}

fn seq(events: &[SessionEvent], kind: &str, turn_id: &str) -> u64 {
    events
        .iter()
        .find(|e| e.kind == kind && e.payload["turnId"] == turn_id)
        .unwrap_or_else(|| panic!("{kind} of {turn_id} in {:?}", kinds(events)))
        .seq
}

async fn call(client: &Client, method: &str, params: Value) -> Value {
    client
        .call(method, params)
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"))
}

/// The refusal of a call: `(error.data.code, message)`.
async fn refused(client: &Client, method: &str, params: Value) -> (String, String) {
    let e = client
        .call(method, params)
        .await
        .expect_err("the call is refused");
    let rpc = e.rpc().expect("an rpc error");
    (
        rpc.data_code.clone().unwrap_or_default(),
        rpc.message.clone(),
    )
}

async fn prompt(client: &Client, sid: &str, text: &str, when_busy: Option<&str>) -> String {
    let mut p = json!({"sessionId": sid, "text": text});
    if let Some(w) = when_busy {
        p["whenBusy"] = json!(w);
    }
    call(client, "session.prompt", p).await["turnId"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn project(dir: &Path, settings: Value) {
    std::fs::create_dir_all(dir.join(".snowpea")).unwrap();
    std::fs::write(dir.join(".snowpea/settings.json"), settings.to_string()).unwrap();
}

/// Approval requests reach the test one by one; the test answers each when it is ready.
type Gate = mpsc::UnboundedReceiver<(Value, oneshot::Sender<Value>)>;

fn gate(client: &Client) -> Gate {
    let (tx, rx) = mpsc::unbounded_channel();
    client.on_request("approval.request", move |params: Value| {
        let tx = tx.clone();
        async move {
            let (reply, answer) = oneshot::channel();
            tx.send((params, reply)).expect("the test listens");
            Ok(answer.await.expect("the test answers"))
        }
    });
    rx
}

async fn next_approval(gate: &mut Gate) -> oneshot::Sender<Value> {
    tokio::time::timeout(TURN, gate.recv())
        .await
        .expect("an approval request within the turn bound")
        .expect("gate open")
        .1
}

fn allow() -> Value {
    json!({"decision": "allow", "scope": "once"})
}

#[tokio::test]
async fn the_interactive_turn() {
    let script = json!({
        "steps": [
            {"match": "gated work", "tool_calls": [{"name": "shell", "arguments": {"command": "true"}}], "repeat": true},
            {"match": "steered in", "echoRequest": true, "text": "folded.", "repeat": true},
            {"match": "conversation to summarise", "text": "SUITE SUMMARY", "repeat": true},
            {"match": "list please", "tool_calls": [{"name": "list_dir", "arguments": {}}], "repeat": true},
            {"after_tool": "list_dir", "text": "Listed.", "repeat": true},
            {"match": "hang", "delaySec": 60, "text": "late", "repeat": true},
            {"match": "[system]", "echoRequest": true, "repeat": true},
            {"match": "echo", "echoRequest": true, "repeat": true}
        ],
        "default": {"text": "ok"}
    });
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        settings: Some(json!({"models": {"default": "openai:gpt-4o", "profiles": {"deep": {"provider": "anthropic", "model": "claude-opus-4-1"}}}})),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let mut gate = gate(&client);
    let work = suite.workdir.path();

    steer_is_folded_between_two_tool_rounds(&client, &mut gate, work).await;
    three_queued_prompts_run_in_order(&client, &mut gate, work).await;
    interrupt_drops_the_queue(&client, &mut gate, work).await;
    notices_are_capped_and_reach_the_next_call(&client, work).await;
    continue_keeps_its_window_and_keys(&client, work).await;
    compaction_keeps_tool_pairs_and_auto_fires_at_the_threshold(&client).await;
    set_model_routes_and_set_effort_reaches_the_call(&client).await;
    slash_commands_and_bad_input(&client, work).await;
    refs_and_attachments_reach_the_model(&client).await;
    delete_saved_leaves_no_file_behind(&client, &suite).await;
}

async fn steer_is_folded_between_two_tool_rounds(client: &Client, gate: &mut Gate, work: &Path) {
    let sid = client.create_session(work, Some("accept")).await.unwrap();
    let mut events = client.events(&sid);
    let t1 = prompt(client, &sid, "gated work", None).await;
    let answer = next_approval(gate).await;
    // The default agent.busy is steer.
    let t2 = prompt(client, &sid, "steered in", None).await;
    answer.send(allow()).unwrap();
    let out = events.wait_for_turn_done(&t2, TURN).await.unwrap();
    let ev = &out.events;
    assert_eq!(out.reason.as_deref(), Some("complete"), "{:?}", kinds(ev));
    let queued = of(ev, "turn.queued")[0];
    assert_eq!(
        queued.payload,
        json!({"turnId": t2, "position": 1, "queued": 1})
    );
    let steered: Vec<_> = of(ev, "message.user")
        .into_iter()
        .filter(|e| e.payload["steered"] == true)
        .collect();
    assert_eq!(steered.len(), 1);
    assert_eq!(steered[0].payload["text"], "steered in");
    let dq = of(ev, "turn.dequeued")[0];
    assert_eq!(dq.payload["reason"], "steered");
    assert!(seq(ev, "tool.result", &t1) < steered[0].seq && steered[0].seq < dq.seq);
    assert!(!ev
        .iter()
        .any(|e| e.kind == "turn.started" && e.payload["turnId"] == t2.as_str()));
    assert!(seq(ev, "turn.done", &t1) < seq(ev, "turn.done", &t2));
    let answer = of(ev, "message.done")[0].payload["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        answer.contains("[user] gated work\n[user] steered in"),
        "{answer}"
    );
}

async fn three_queued_prompts_run_in_order(client: &Client, gate: &mut Gate, work: &Path) {
    let sid = client.create_session(work, Some("accept")).await.unwrap();
    let mut events = client.events(&sid);
    let t1 = prompt(client, &sid, "gated work", None).await;
    let answer = next_approval(gate).await;
    let t2 = prompt(client, &sid, "q one", Some("queue")).await;
    let t3 = prompt(client, &sid, "q two", Some("queue")).await;
    let t4 = prompt(client, &sid, "q three", Some("queue")).await;
    answer.send(allow()).unwrap();
    let ev = events.wait_for_turn_done(&t4, TURN).await.unwrap().events;
    let positions: Vec<_> = of(&ev, "turn.queued")
        .iter()
        .map(|e| e.payload["position"].as_u64().unwrap())
        .collect();
    assert_eq!(positions, [1, 2, 3]);
    let order = [&t1, &t2, &t3, &t4];
    for w in order.windows(2) {
        assert!(seq(&ev, "turn.done", w[0]) < seq(&ev, "turn.dequeued", w[1]));
        assert!(seq(&ev, "turn.dequeued", w[1]) < seq(&ev, "turn.started", w[1]));
    }
    for t in &order[1..] {
        let started = ev
            .iter()
            .find(|e| e.kind == "turn.started" && e.payload["turnId"] == t.as_str())
            .unwrap();
        assert_eq!(started.payload["queued"], true);
        let dq = ev
            .iter()
            .find(|e| e.kind == "turn.dequeued" && e.payload["turnId"] == t.as_str())
            .unwrap();
        assert_eq!(dq.payload["reason"], "started");
    }
}

async fn interrupt_drops_the_queue(client: &Client, gate: &mut Gate, work: &Path) {
    let sid = client.create_session(work, Some("accept")).await.unwrap();
    let mut events = client.events(&sid);
    // The turn waits on an approval, so both prompts wait (none is folded into a model call).
    let t1 = prompt(client, &sid, "gated work", None).await;
    let answer = next_approval(gate).await;
    let t2 = prompt(client, &sid, "later one", Some("queue")).await;
    let t3 = prompt(client, &sid, "later two", Some("steer")).await;
    client.interrupt(&sid).await.unwrap();
    let ev = events.wait_for_turn_done(&t1, TURN).await.unwrap().events;
    // The request was withdrawn by the interrupt; the late answer changes nothing.
    let _ = answer.send(json!({"decision": "deny", "scope": "once"}));
    for t in [&t2, &t3] {
        let dq = ev
            .iter()
            .find(|e| e.kind == "turn.dequeued" && e.payload["turnId"] == t.as_str())
            .unwrap_or_else(|| panic!("dequeued {t}: {:?}", kinds(&ev)));
        assert_eq!(dq.payload["reason"], "dropped");
    }
    for t in [&t1, &t2, &t3] {
        let done = ev
            .iter()
            .find(|e| e.kind == "turn.done" && e.payload["turnId"] == t.as_str())
            .unwrap();
        assert_eq!(done.payload["reason"], "interrupted");
    }
    assert_eq!(
        of(&ev, "turn.started").len(),
        1,
        "nothing ran after the interrupt"
    );
}

async fn notices_are_capped_and_reach_the_next_call(client: &Client, work: &Path) {
    let sid = client.create_session(work, Some("accept")).await.unwrap();
    for i in 0..20 {
        let r = call(
            client,
            "session.notice",
            json!({"sessionId": sid, "text": format!("popup   {i}")}),
        )
        .await;
        assert_eq!(r["ok"], true);
    }
    let r = call(
        client,
        "session.notice",
        json!({"sessionId": sid, "text": "one too many"}),
    )
    .await;
    assert_eq!(r["ok"], false, "the 21st waiting notice is dropped");
    let (code, message) = refused(
        client,
        "session.notice",
        json!({"sessionId": sid, "text": "  "}),
    )
    .await;
    assert_eq!(code, "invalid_params");
    assert!(message.contains("params.text"), "{message}");
    let listed = call(client, "session.list", json!({})).await;
    let me = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == sid.as_str())
        .unwrap()
        .clone();
    assert_eq!(me["status"], "idle", "a notice starts no turn");
    let out = client.prompt_and_collect(&sid, "echo", TURN).await.unwrap();
    let text = out.text();
    assert!(
        text.contains("[user] echo\n[user] [system] popup 0 / [system] popup 1"),
        "{text}"
    );
    assert!(
        text.contains("[system] popup 19") && !text.contains("one too many"),
        "{text}"
    );
}

async fn continue_keeps_its_window_and_keys(client: &Client, work: &Path) {
    let sid = client.create_session(work, Some("accept")).await.unwrap();
    let mut events = client.events(&sid);
    let r = call(client, "session.continue", json!({"sessionId": sid, "note": "the tab is back", "reason": "handback", "idempotencyKey": "k1"})).await;
    assert_eq!(r["started"], true);
    let tid = r["turnId"].as_str().unwrap().to_owned();
    let ev = events.wait_for_turn_done(&tid, TURN).await.unwrap().events;
    assert_eq!(kinds(&ev)[0], "turn.started");
    let started = &ev[0].payload;
    assert_eq!(
        (started["initiator"].clone(), started["reason"].clone()),
        (json!("system"), json!("handback"))
    );
    assert!(started["prompt"].is_null());
    assert!(
        of(&ev, "message.user").is_empty(),
        "no message.user for a system turn"
    );
    let dup = call(
        client,
        "session.continue",
        json!({"sessionId": sid, "note": "x", "idempotencyKey": "k1"}),
    )
    .await;
    assert_eq!(
        (dup["started"].clone(), dup["duplicate"].clone()),
        (json!(false), json!(true))
    );
    let soon = call(
        client,
        "session.continue",
        json!({"sessionId": sid, "note": "back again", "idempotencyKey": "k2"}),
    )
    .await;
    assert_eq!(
        (soon["started"].clone(), soon["queued"].clone()),
        (json!(false), json!(true)),
        "inside the 10 s window"
    );
    let out = client.prompt_and_collect(&sid, "echo", TURN).await.unwrap();
    let text = out.text();
    assert!(
        text.contains("[user] [system] (handback) the tab is back"),
        "{text}"
    );
    assert!(
        text.contains("[user] [system] (handback) back again"),
        "{text}"
    );
    let (code, message) = refused(
        client,
        "session.continue",
        json!({"sessionId": sid, "note": ""}),
    )
    .await;
    assert_eq!(code, "invalid_params");
    assert!(message.contains("params.note"), "{message}");
}

async fn compaction_keeps_tool_pairs_and_auto_fires_at_the_threshold(client: &Client) {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path(), json!({"context": {"keepLastMessages": 2}}));
    let sid = client
        .create_session(dir.path(), Some("accept"))
        .await
        .unwrap();
    client
        .prompt_and_collect(&sid, "list please", TURN)
        .await
        .unwrap();
    client
        .prompt_and_collect(&sid, "list please again", TURN)
        .await
        .unwrap();
    let mut events = client.events(&sid);
    let r = call(
        client,
        "session.compact",
        json!({"sessionId": sid, "instructions": "keep the listing"}),
    )
    .await;
    assert!(r["after"].as_u64() < r["before"].as_u64(), "{r}");
    assert_eq!(r["summaryChars"], "SUITE SUMMARY".len());
    let mut ev = Vec::new();
    while ev.last().is_none_or(|e: &SessionEvent| e.kind != "context") {
        ev.push(events.next(TURN).await.unwrap());
    }
    assert_eq!(kinds(&ev), ["compaction.started", "compaction", "context"]);
    // keep 2 would start on a tool result: the tail moves back to its call.
    assert_eq!(ev[1].payload["kept"], 3);
    assert_eq!(ev[1].payload["auto"], false);
    let out = client.prompt_and_collect(&sid, "echo", TURN).await.unwrap();
    let text = out.text();
    assert!(
        text.contains("[user] Session summary /  / SUITE SUMMARY\n[user] echo"),
        "{text}"
    );

    // Auto: a tiny window and a 50 % threshold.
    let dir = tempfile::tempdir().unwrap();
    project(
        dir.path(),
        json!({"context": {"keepLastMessages": 1, "autoCompactPercent": 50}, "providers": {"fake": {"contextWindow": 50}}}),
    );
    let sid = client
        .create_session(dir.path(), Some("accept"))
        .await
        .unwrap();
    let first = client
        .prompt_and_collect(&sid, "hello", TURN)
        .await
        .unwrap();
    assert!(of(&first.events, "compaction").is_empty());
    let second = client.prompt_and_collect(&sid, "echo", TURN).await.unwrap();
    let k = kinds(&second.events);
    let at = k
        .iter()
        .position(|k| *k == "compaction.started")
        .expect("auto compaction");
    assert_eq!(
        &k[at..at + 3],
        ["compaction.started", "compaction", "context"]
    );
    assert_eq!(second.events[at].payload["reason"], "auto");
    assert_eq!(second.events[at + 1].payload["auto"], true);
    assert!(at < k.iter().position(|k| *k == "message.delta").unwrap());
    assert!(
        second
            .text()
            .contains("[user] Session summary /  / SUITE SUMMARY"),
        "{}",
        second.text()
    );
}

async fn set_model_routes_and_set_effort_reaches_the_call(client: &Client) {
    let dir = tempfile::tempdir().unwrap();
    let sid = client
        .create_session(dir.path(), Some("accept"))
        .await
        .unwrap();
    let model_of = |text: String| {
        text.lines()
            .find(|l| l.starts_with("[model "))
            .unwrap_or_else(|| panic!("{text}"))
            .to_owned()
    };
    // Global models.default.
    let out = client.prompt_and_collect(&sid, "echo", TURN).await.unwrap();
    assert_eq!(model_of(out.text()), "[model gpt-4o effort none]");
    // Project default over global.
    project(
        dir.path(),
        json!({"models": {"default": "anthropic:claude-sonnet-4-5"}}),
    );
    let out = client.prompt_and_collect(&sid, "echo", TURN).await.unwrap();
    assert_eq!(
        model_of(out.text()),
        "[model claude-sonnet-4-5 effort medium]"
    );
    // Session pin (a profile) over both, with model.changed.
    let mut events = client.events(&sid);
    let r = call(
        client,
        "session.setModel",
        json!({"sessionId": sid, "model": "deep"}),
    )
    .await;
    assert_eq!(
        (r["model"].clone(), r["pinned"].clone()),
        (json!("claude-opus-4-1"), json!(true))
    );
    let changed = events.next(TURN).await.unwrap();
    assert_eq!(changed.kind, "model.changed");
    assert_eq!(changed.payload["model"], "claude-opus-4-1");
    assert_eq!(
        changed.payload["efforts"],
        json!(["low", "medium", "high", "max"])
    );
    let r = call(
        client,
        "session.setEffort",
        json!({"sessionId": sid, "effort": "max"}),
    )
    .await;
    assert_eq!(
        (r["effort"].clone(), r["effortSource"].clone()),
        (json!("max"), json!("session"))
    );
    let out = client.prompt_and_collect(&sid, "echo", TURN).await.unwrap();
    assert_eq!(model_of(out.text()), "[model claude-opus-4-1 effort max]");
    // Refused references change nothing.
    let (code, message) = refused(
        client,
        "session.setModel",
        json!({"sessionId": sid, "model": "nosuch:model"}),
    )
    .await;
    assert_eq!(code, "invalid_params");
    assert!(message.contains("params.model"), "{message}");
    let (code, message) = refused(
        client,
        "session.setEffort",
        json!({"sessionId": sid, "effort": "extreme"}),
    )
    .await;
    assert_eq!(code, "invalid_params");
    assert!(message.contains("params.effort"), "{message}");
    // inherit: the project default again; the effort pin stays, clamped to the model.
    let r = call(
        client,
        "session.setModel",
        json!({"sessionId": sid, "model": "inherit"}),
    )
    .await;
    assert_eq!(
        (r["model"].clone(), r["pinned"].clone()),
        (json!("claude-sonnet-4-5"), json!(false))
    );
    let out = client.prompt_and_collect(&sid, "echo", TURN).await.unwrap();
    assert_eq!(model_of(out.text()), "[model claude-sonnet-4-5 effort max]");
}

async fn slash_commands_and_bad_input(client: &Client, work: &Path) {
    let sid = client.create_session(work, Some("accept")).await.unwrap();
    let out = client
        .prompt_and_collect(&sid, "/nosuch arg", TURN)
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("error"));
    // A command turn (the commands registry) has no message.user: turn.started carries it.
    assert_eq!(kinds(&out.events), ["turn.started", "error", "turn.done"]);
    assert_eq!(out.events[1].payload["code"], "not_found");
    let (code, message) = refused(
        client,
        "session.prompt",
        json!({"sessionId": sid, "text": "x", "whenBusy": "later"}),
    )
    .await;
    assert_eq!(code, "invalid_params");
    assert!(message.contains("params.whenBusy"), "{message}");
    let (code, message) = refused(
        client,
        "session.steer",
        json!({"sessionId": sid, "text": " "}),
    )
    .await;
    assert_eq!(code, "invalid_params");
    assert!(message.contains("params.text"), "{message}");
    let r = call(
        client,
        "session.steer",
        json!({"sessionId": sid, "text": "hello"}),
    )
    .await;
    assert_eq!(
        (r["ok"].clone(), r["started"].clone()),
        (json!(true), json!(true))
    );
    let (code, message) = refused(
        client,
        "session.setBrowserProvider",
        json!({"sessionId": sid, "provider": "remote"}),
    )
    .await;
    assert_eq!(code, "invalid_params");
    assert!(message.contains("params.provider"), "{message}");
    let r = call(
        client,
        "session.setBrowserProvider",
        json!({"sessionId": sid, "provider": "local"}),
    )
    .await;
    assert_eq!(r["browserProvider"], "local");
    let r = call(client, "session.setActive", json!({"sessionId": sid})).await;
    assert_eq!(r["ok"], true);
}

async fn refs_and_attachments_reach_the_model(client: &Client) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.rs"), "l1\nl2\nl3\nl4\n").unwrap();
    std::fs::write(
        dir.path().parent().unwrap().join("outside-secret.txt"),
        "SECRET",
    )
    .unwrap();
    let sid = client
        .create_session(dir.path(), Some("accept"))
        .await
        .unwrap();
    let mut events = client.events(&sid);
    let r = call(
        client,
        "session.prompt",
        json!({
            "sessionId": sid,
            "text": "echo @src/a.rs:2-3 and @../outside-secret.txt",
            "attachments": [
                {"kind": "image", "name": "shot.png", "mimeType": "image/png", "data": "iVBORw0KGgo="},
                {"kind": "text", "name": "paste", "text": "pasted words"}
            ]
        }),
    )
    .await;
    let tid = r["turnId"].as_str().unwrap().to_owned();
    let out = events.wait_for_turn_done(&tid, TURN).await.unwrap();
    let user = &of(&out.events, "message.user")[0].payload;
    assert_eq!(
        user["text"],
        "echo @src/a.rs:2-3 and @../outside-secret.txt"
    );
    assert_eq!(
        user["refs"],
        json!([
            {"path": "src/a.rs", "kind": "file", "lines": [2, 3]},
            {"path": "../outside-secret.txt", "kind": "missing", "error": "outside the workdir"}
        ])
    );
    assert_eq!(
        user["attachments"],
        json!([{"kind": "image", "name": "shot.png"}, {"kind": "text", "name": "paste"}])
    );
    let text = out.text();
    assert!(text.contains("l2 / l3 / </ref>"), "{text}");
    assert!(!text.contains("SECRET"), "an escape is never read: {text}");
    assert!(text.contains("pasted words"), "{text}");
    assert!(
        text.contains("[image image/png, 12 base64 characters]"),
        "vision input: {text}"
    );
    // A later turn of the same session: the earlier image reaches the model again.
    let later = call(
        client,
        "session.prompt",
        json!({"sessionId": sid, "text": "echo what did I show you"}),
    )
    .await;
    let later_tid = later["turnId"].as_str().unwrap().to_owned();
    let out = events.wait_for_turn_done(&later_tid, TURN).await.unwrap();
    let text = out.text();
    assert!(
        text.contains("[image image/png, 12 base64 characters]")
            && text.contains("[user] echo what did I show you"),
        "the earlier image is replayed: {text}"
    );
    let listed = call(client, "session.attachments", json!({"sessionId": sid})).await;
    let image = &listed["attachments"][0];
    assert_eq!(image["mime"], "image/png");
    let bytes = std::fs::read(image["path"].as_str().unwrap()).unwrap();
    assert_eq!(bytes, b"\x89PNG\r\n\x1a\n");
    let (code, message) = refused(
        client,
        "session.prompt",
        json!({"sessionId": sid, "text": "x", "attachments": [{"kind": "image", "mimeType": "image/png", "data": "***"}]}),
    )
    .await;
    assert_eq!(code, "invalid_params");
    assert!(message.contains("params.attachments[0].data"), "{message}");
}

async fn delete_saved_leaves_no_file_behind(client: &Client, suite: &Suite) {
    let dir = tempfile::tempdir().unwrap();
    let sid = client
        .create_session(dir.path(), Some("accept"))
        .await
        .unwrap();
    let out = client
        .prompt_and_collect(&sid, "list please", TURN)
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
    call(
        client,
        "session.prompt",
        json!({"sessionId": sid, "text": "x", "whenBusy": "queue", "attachments": [{"kind": "file", "name": "a.bin", "data": "AAEC"}]}),
    )
    .await;
    let created = call(client, "session.list", json!({})).await;
    let ws = created["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == sid.as_str())
        .unwrap()["workspaceDir"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(Path::new(&ws).join("artifacts/report.md"), "# report").unwrap();
    let arts = call(client, "session.artifacts", json!({"sessionId": sid})).await;
    assert_eq!(arts["artifacts"][0]["name"], "report.md");
    assert_eq!(arts["artifacts"][0]["mimeType"], "text/markdown");
    // Wait for the queued turn to end, then delete everything of the session.
    snowpea_testkit::assert_eventually!(call(client, "session.list", json!({})).await["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["sessionId"] == sid.as_str() && s["status"] == "idle"));
    let r = call(
        client,
        "session.deleteSaved",
        json!({"sessionId": sid, "deleteWorkspace": true}),
    )
    .await;
    assert_eq!(r["deleted"], 1);
    let mut left = Vec::new();
    let mut stack = vec![suite.home().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.to_string_lossy().contains(sid.as_str()) {
                left.push(p.clone());
            }
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            }
        }
    }
    assert!(left.is_empty(), "files of the session left: {left:?}");
    let (code, _) = refused(client, "session.resume", json!({"sessionId": sid})).await;
    assert_eq!(code, "not_found");
}

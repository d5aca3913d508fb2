//! Compaction against the scripted provider: manual (events, result, history of the next
//! turn, tool pairs), the fallback when the provider fails, a running turn refused, and
//! auto-compaction at the threshold.

use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;

use crate::testkit::{kinds, of_kind, Harness, Item};
use snowpea_session_llm::provider::Role;

fn requests(h: &Harness) -> Vec<snowpea_session_llm::provider::ModelRequest> {
    snowpea_session_llm::provider::fake_provider(&h.script)
        .unwrap()
        .received()
}

async fn turn(h: &mut Harness, sid: &str, text: &str) -> Vec<Value> {
    let t = h.prompt(sid, text).await;
    h.until_done(&t, |_| None).await
}

/// Session events until (and with) the next `context`.
async fn until_context(h: &mut Harness) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        if let Item::Note(m, p) = h.next().await {
            if m == "session.event" {
                let done = p["kind"] == "context";
                out.push(p);
                if done {
                    return out;
                }
            }
        }
    }
}

fn compact(sid: &str, instructions: Option<&str>) -> pb::SessionCompactParams {
    pb::SessionCompactParams {
        session_id: sid.into(),
        instructions: instructions.map(str::to_owned),
    }
}

const SCRIPT_STEPS: &str = r#"[
    {"match": "list", "tool_calls": [{"name": "list_dir", "arguments": {}}], "repeat": true},
    {"after_tool": "list_dir", "text": "Listed.", "repeat": true}
]"#;

#[tokio::test]
async fn manual_compaction_summarises_the_old_part_and_keeps_tool_pairs_whole() {
    let mut steps: Vec<Value> = serde_json::from_str(SCRIPT_STEPS).unwrap();
    steps.insert(
        0,
        json!({"match": "conversation to summarise", "text": "SUMMARY: listed twice."}),
    );
    let mut h = Harness::with_settings(
        json!({"steps": steps, "default": {"text": "fine"}}),
        json!({"context": {"keepLastMessages": 2}}),
    )
    .await;
    let sid = h.create("accept").await;
    turn(&mut h, &sid, "list one").await;
    turn(&mut h, &sid, "list two").await;
    // History: u a(call) tool a u a(call) tool a — keep 2 would start on the tool result, so
    // the tail moves back to the call: 3 kept.
    let r = h
        .app
        .turns
        .compact(compact(&sid, Some("keep the listing")))
        .await
        .unwrap();
    assert!(r.after < r.before, "{r:?}");
    assert_eq!(r.summary_chars as usize, "SUMMARY: listed twice.".len());
    let ev = until_context(&mut h).await;
    assert_eq!(kinds(&ev), ["compaction.started", "compaction", "context"]);
    assert_eq!(ev[0]["payload"]["reason"], "manual");
    let c = &ev[1]["payload"];
    assert_eq!(c["auto"], false);
    assert_eq!(c["kept"], 3);
    assert_eq!(c["before"], r.before);
    assert_eq!(c["after"], r.after);
    assert_eq!(ev[2]["payload"]["used"], r.after);
    assert_eq!(ev[2]["payload"]["estimated"], true);
    let summariser = requests(&h).pop().unwrap();
    assert!(summariser.system.contains("keep the listing"));
    assert!(summariser.tools.is_empty());
    // The next turn's history: the summary, then the kept tail from the call on.
    turn(&mut h, &sid, "what now").await;
    let last = requests(&h).pop().unwrap();
    let roles: Vec<_> = last.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::User
        ]
    );
    assert_eq!(
        last.messages[0].content,
        "Session summary\n\nSUMMARY: listed twice."
    );
    assert_eq!(last.messages[1].tool_calls[0].name, "list_dir");
}

#[tokio::test]
async fn a_failing_provider_gets_the_fallback_summary_and_a_running_turn_is_refused() {
    let mut steps: Vec<Value> = serde_json::from_str(SCRIPT_STEPS).unwrap();
    steps.insert(
        0,
        json!({"match": "conversation to summarise", "error": {"status": 500, "message": "down"}}),
    );
    steps.push(json!({"match": "slow", "delaySec": 30, "text": "late"}));
    let mut h = Harness::with_settings(
        json!({"steps": steps, "default": {"text": "fine"}}),
        json!({"context": {"keepLastMessages": 1}}),
    )
    .await;
    let sid = h.create("accept").await;
    let long = format!("list one {}", "words ".repeat(400));
    turn(&mut h, &sid, &long).await;
    let r = h.app.turns.compact(compact(&sid, None)).await.unwrap();
    assert!(r.after < r.before && r.summary_chars > 0, "{r:?}");
    let ev = until_context(&mut h).await;
    let summary = ev[1]["payload"]["summary"].as_str().unwrap().to_owned();
    assert!(
        summary.contains("summarised without the model"),
        "{summary}"
    );
    assert!(summary.contains("list_dir"), "{summary}");
    // Busy: refused, nothing changes.
    let t = h.prompt(&sid, "slow").await;
    let err = h.app.turns.compact(compact(&sid, None)).await.unwrap_err();
    assert!(
        matches!(err, snowpea_session_error::Error::SessionBusy(_)),
        "{err}"
    );
    // The message a client shows is one readable sentence (no source-indentation run).
    assert!(!err.to_string().contains("  "), "{err}");
    h.app.turns.interrupt(&sid).unwrap();
    h.until_done(&t, |_| None).await;
}

#[tokio::test]
async fn auto_compaction_fires_at_the_threshold_before_the_model_call() {
    let mut h = Harness::with_settings(
        json!({"steps": [{"match": "conversation to summarise", "text": "AUTO SUMMARY"}], "default": {"text": "fine"}}),
        json!({"context": {"keepLastMessages": 1, "autoCompactPercent": 50}, "providers": {"fake": {"contextWindow": 50}}}),
    )
    .await;
    let sid = h.create("accept").await;
    let ev = turn(&mut h, &sid, "first").await;
    assert!(
        of_kind(&ev, "compaction").is_empty(),
        "nothing old enough yet"
    );
    let ev = turn(&mut h, &sid, "second").await;
    let k = kinds(&ev);
    let at = k
        .iter()
        .position(|k| k == "compaction.started")
        .expect("auto compaction");
    assert_eq!(
        &k[at..at + 3],
        ["compaction.started", "compaction", "context"]
    );
    assert!(at < k.iter().position(|k| k == "message.delta").unwrap());
    assert_eq!(ev[at]["payload"]["reason"], "auto");
    assert_eq!(ev[at + 1]["payload"]["auto"], true);
    assert_eq!(ev[at + 2]["payload"]["window"], 50);
    let last = requests(&h).pop().unwrap();
    assert_eq!(last.messages[0].content, "Session summary\n\nAUTO SUMMARY");
    assert_eq!(last.messages.last().unwrap().content, "second");
}

#[tokio::test]
async fn auto_compaction_is_off_at_zero_and_at_a_hundred() {
    for p in [0.0, 100.0, -5.0] {
        assert_eq!(
            super::auto_threshold(&json!({"context": {"autoCompactPercent": p}})),
            None
        );
    }
    assert_eq!(super::auto_threshold(&json!({})), Some(85.0));
    let mut h = Harness::with_settings(
        json!({"default": {"text": "fine"}}),
        json!({"context": {"keepLastMessages": 1, "autoCompactPercent": 0}, "providers": {"fake": {"contextWindow": 10}}}),
    )
    .await;
    let sid = h.create("accept").await;
    turn(&mut h, &sid, "first").await;
    let ev = turn(&mut h, &sid, "second").await;
    assert!(of_kind(&ev, "compaction.started").is_empty());
    let ctx = of_kind(&ev, "context")[0];
    assert_eq!(ctx["payload"]["window"], 10);
    assert!(ctx["payload"]["percent"].as_f64().unwrap() > 100.0);
}

/// Compaction time of a 200-message history with the scripted provider (docs/PERFORMANCE.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: cargo test -p snowpea-svc-session --lib compaction::tests::measure -- --ignored --nocapture"]
async fn measure_compaction_of_200_messages() {
    use snowpea_session_llm::provider::{ChatMessage, ToolCall};
    let h = Harness::new(json!({"steps": [{"match": "conversation to summarise", "text": "A summary of the work so far, as notes.", "repeat": true}]})).await;
    let sid = h.create("accept").await;
    let session = h.app.sessions.get(&sid).unwrap();
    let mut history = Vec::new();
    for i in 0..50 {
        let call = ToolCall {
            id: format!("c{i}"),
            name: "read_file".into(),
            arguments: json!({"path": format!("src/f{i}.rs")}),
        };
        history.push(ChatMessage::user(format!(
            "step {i}: {}",
            "please look at this. ".repeat(10)
        )));
        history.push(ChatMessage::assistant("Reading.", vec![call.clone()]));
        history.push(ChatMessage::tool_result(
            &call,
            "fn main() {}\n".repeat(40),
            false,
        ));
        history.push(ChatMessage::assistant(
            format!("Done with {i}. {}", "ok ".repeat(30)),
            vec![],
        ));
    }
    assert_eq!(history.len(), 200);
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut times = Vec::new();
    for _ in 0..30 {
        let start = std::time::Instant::now();
        let call = super::CompactionCall {
            turn_id: None,
            instructions: None,
            auto: false,
            cancel: &cancel,
        };
        let done = h.app.compaction.run(&session, history.clone(), call).await;
        times.push(start.elapsed());
        assert_eq!(done.messages.len(), 1 + super::DEFAULT_KEEP);
    }
    times.sort();
    println!(
        "compaction of 200 messages: p50 {:?}, max {:?} (before/after tokens {} → {})",
        times[times.len() / 2],
        times.last().unwrap(),
        crate::turn::history::estimate_tokens(&history),
        crate::turn::history::estimate_tokens(
            &h.app
                .compaction
                .run(
                    &session,
                    history.clone(),
                    super::CompactionCall {
                        turn_id: None,
                        instructions: None,
                        auto: false,
                        cancel: &cancel
                    }
                )
                .await
                .messages
        )
    );
}

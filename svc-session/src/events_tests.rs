use std::time::Duration;

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use super::*;
use crate::testkit::{kinds, Harness, Item};
use crate::App;

#[tokio::test]
async fn every_event_is_committed_before_it_is_published_with_contiguous_seqs() {
    let mut h = Harness::new(
        json!({"default": {"text": "one two three four five six seven eight nine ten"}}),
    )
    .await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "hello").await;
    let check = rusqlite::Connection::open(h.home.database("session")).unwrap();
    let mut seqs = Vec::new();
    loop {
        let Item::Note(method, p) = h.next().await else {
            continue;
        };
        if method != "session.event" {
            continue;
        }
        let seq = p["seq"].as_i64().unwrap();
        // The notification is out: its row must already be in SQLite (another connection).
        let kind: String = check
            .query_row(
                "SELECT kind FROM events WHERE session_id = ?1 AND seq = ?2",
                rusqlite::params![sid, seq],
                |r| r.get(0),
            )
            .expect("row committed before publish");
        assert_eq!(kind, p["kind"].as_str().unwrap());
        assert_eq!(p["sessionId"], sid.as_str());
        assert!(p["ts"].as_str().unwrap().ends_with('Z'));
        seqs.push(seq);
        if p["kind"] == "turn.done" && p["payload"]["turnId"] == tid.as_str() {
            break;
        }
    }
    assert_eq!(
        seqs,
        (1..=seqs.len() as i64).collect::<Vec<_>>(),
        "contiguous from 1"
    );
}

#[tokio::test]
async fn group_commit_writes_thousands_of_events_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("s.db");
    let hub = BusHub::new();
    let log = EventLog::start(&path, hub, crate::store::Store::open(&path).unwrap()).unwrap();
    let started = std::time::Instant::now();
    for i in 0..5000 {
        log.event(
            "s_1",
            None,
            &pb::MessageDeltaEvent {
                text: format!("d{i}"),
                ..Default::default()
            },
            &[],
        );
    }
    tokio::time::timeout(Duration::from_secs(30), log.flush())
        .await
        .unwrap()
        .unwrap();
    let elapsed = started.elapsed();
    let conn = store::open(&path).unwrap();
    let rows = store::events::after(&conn, "s_1", 0).unwrap();
    assert_eq!(rows.len(), 5000);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.seq, i as i64 + 1);
        assert_eq!(
            serde_json::from_str::<Value>(&r.payload).unwrap()["text"],
            format!("d{i}")
        );
    }
    eprintln!("5000 events committed in {elapsed:?}");
}

#[tokio::test]
async fn resume_after_reopening_the_database_returns_exactly_the_missed_events() {
    let mut h = Harness::new(json!({"default": {"text": "alpha beta gamma delta"}})).await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "first").await;
    let seen = h.until_done(&tid, |_| None).await;
    let tid2 = h.prompt(&sid, "second").await;
    let all_second = h.until_done(&tid2, |_| None).await;
    let after = seen.last().unwrap()["seq"].as_i64().unwrap();
    h.app.flush().await.unwrap();

    // A new process on the same home: a fresh hub and app.
    let app2 = App::open(crate::testkit::config(&h.home, &h.script), BusHub::new())
        .await
        .unwrap();
    let r = app2
        .sessions
        .resume(pb::SessionResumeParams {
            session_id: sid.clone(),
            after_seq: Some(after),
            locale: None,
        })
        .await
        .unwrap();
    let got: Vec<(i64, String)> = r.events.iter().map(|e| (e.seq, e.kind.clone())).collect();
    let want: Vec<(i64, String)> = all_second
        .iter()
        .map(|e| {
            (
                e["seq"].as_i64().unwrap(),
                e["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(r.mode.as_deref(), Some("accept"));
    assert_eq!(r.provider.as_deref(), Some("fake"));
    let payload: Value = serde_json::from_str(&r.events.last().unwrap().payload).unwrap();
    assert_eq!(payload["turnId"], tid2.as_str());
    assert_eq!(kinds(&all_second).last().unwrap(), "turn.done");

    // The session is listed again after the "restart".
    let list = app2
        .sessions
        .list(pb::SessionListParams::default())
        .await
        .unwrap();
    assert!(list
        .sessions
        .iter()
        .any(|s| s.session_id == sid && s.seq == want.last().unwrap().0));

    let err = app2
        .sessions
        .resume(pb::SessionResumeParams {
            session_id: "s_nope".into(),
            after_seq: None,
            locale: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, snowpea_session_error::Error::NotFound(_)));
}

#[tokio::test]
async fn a_turn_of_5000_deltas_is_durable_and_complete() {
    let text = "w ".repeat(5000);
    let mut h = Harness::new(json!({"default": {"text": text}})).await;
    let sid = h.create("accept").await;
    let started = std::time::Instant::now();
    let tid = h.prompt(&sid, "stream a lot").await;
    let ev = h.until_done(&tid, |_| None).await;
    let elapsed = started.elapsed();
    let deltas = ev.iter().filter(|e| e["kind"] == "message.delta").count();
    assert_eq!(deltas, 5000);
    let last = ev.last().unwrap()["seq"].as_i64().unwrap();
    let stored = crate::testkit::read(&h.home, |c| store::events::last_seq(c, &sid));
    assert_eq!(stored, last, "everything published is stored");
    eprintln!("5000-delta turn, prompt to turn.done published: {elapsed:?}");
}

/// Validates `json` against the descriptor message `message`, unknown fields rejected
/// (the gateway's own params walker, so `wire_only` fields count as declared).
fn check_against(message: &str, json: &Value, what: &str) {
    let desc = snowpea_proto::descriptor_pool()
        .get_message_by_name(message)
        .unwrap_or_else(|| panic!("{message} is in the descriptor"));
    if let Err(e) = snowpea_proto::json::to_message(&desc, json, what) {
        panic!("{what} is not a {message}: {e}\n{json}");
    }
}

/// Issue 13 §2: every payload svc-session emits is built from its generated message. A
/// scripted turn in each mode walks every emit path of a turn (text, reasoning, usage, a
/// written file with its diff, an approved shell with progress, a refused call, the closing
/// events, a mode change, a close); each `session.event` envelope and payload, each other
/// notification and each server→client request must validate against its descriptor
/// message with unknown fields rejected, so a payload built by hand (an extra or misspelt
/// field) fails here.
#[tokio::test]
async fn every_emitted_payload_validates_against_its_schema_message() {
    use futures::StreamExt;
    use snowpea_proto::typed::{EVENT_KINDS, NOTIFICATIONS};
    let mut items = Vec::new();
    for mode in ["accept", "plan"] {
        // Scripted steps are used once: one harness per mode.
        let mut h = Harness::new(json!({
            "steps": [
                {"match": "make", "reasoning": "A file, then a command.", "text": "Writing it.",
                 "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi\n"}}]},
                {"after_tool": "write_file",
                 "tool_calls": [{"name": "shell", "arguments": {"command": "echo hello", "big": 9007199254740993_u64}}]},
                {"after_tool": "shell", "text": "All done."}
            ]
        }))
        .await;
        h.connect("c1", Some("cli")).await;
        let sid = h.create(mode).await;
        let tid = h.prompt(&sid, "make things").await;
        // A refusal in plan mode: a failed tool.result and an error event with its callId.
        let decision = if mode == "plan" { "deny" } else { "allow" };
        h.until_done(&tid, |item| {
            items.push(item.clone());
            match item {
                Item::Request(r) if r.method == "approval.request" => {
                    Some((r.request_id.clone(), json!({ "decision": decision })))
                }
                _ => None,
            }
        })
        .await;
        let other = if mode == "plan" { "accept" } else { "plan" };
        h.app
            .sessions
            .set_mode(&sid, other)
            .await
            .expect("session.setMode");
        h.app.sessions.close(&sid).await.expect("session.close");
        h.app.flush().await.unwrap();
        // What the mode change and the close published after the turn (flushed, so
        // already queued on the feed: the short wait only ends the drain).
        while let Ok(Some(Ok(item))) =
            tokio::time::timeout(Duration::from_millis(500), h.feed.next()).await
        {
            if let Some(snowpea_proto::rpc::v1::outbound::Item::Notification(n)) = item.item {
                items.push(Item::Note(
                    n.method,
                    serde_json::from_str(&n.params_json).unwrap(),
                ));
            }
        }
    }

    let mut seen = std::collections::BTreeSet::new();
    for item in &items {
        match item {
            Item::Note(method, params) if method == "session.event" => {
                check_against(
                    "snowpea.session.v1.SessionEventNotification",
                    params,
                    "session.event",
                );
                let kind = params["kind"].as_str().unwrap();
                let ctor = EVENT_KINDS
                    .iter()
                    .find(|c| c.name == kind)
                    .unwrap_or_else(|| panic!("{kind} is a declared event kind"));
                check_against(ctor.message, &params["payload"], kind);
                seen.insert(kind.to_owned());
            }
            Item::Note(method, params) => {
                let ctor = NOTIFICATIONS
                    .iter()
                    .find(|c| c.name == method)
                    .unwrap_or_else(|| panic!("{method} is a declared notification"));
                check_against(ctor.message, params, method);
                seen.insert(method.clone());
            }
            Item::Request(r) => {
                let m = snowpea_proto::schema::schema()
                    .method(&r.method)
                    .unwrap_or_else(|| panic!("{} is a declared method", r.method));
                let params: Value = serde_json::from_str(&r.params_json).unwrap();
                check_against(m.input().full_name(), &params, &r.method);
                // Free-form fields travel verbatim (no f64 round trip).
                assert_eq!(params["args"]["big"], json!(9007199254740993_u64));
                seen.insert(r.method.clone());
            }
        }
    }
    for want in [
        "turn.started",
        "message.user",
        "message.reasoning",
        "message.delta",
        "usage",
        "tool.call",
        "tool.progress",
        "tool.result",
        "diff",
        "error",
        "message.done",
        "context",
        "turn.done",
        "mode.changed",
        "sessions.changed",
        "approval.pending",
        "approval.resolved",
        "approval.request",
    ] {
        assert!(
            seen.contains(want),
            "the scenario covers {want} (saw {seen:?})"
        );
    }
}

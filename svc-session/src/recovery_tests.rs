use serde_json::json;
use snowpea_common::bus::BusHub;
use snowpea_proto::session::v1 as pb;

use crate::app::App;
use crate::store;
use crate::testkit::{config, Harness};

#[tokio::test]
async fn a_turn_left_open_by_a_crash_gets_a_synthetic_turn_done() {
    let h = Harness::new(json!({"default": {"text": "after the crash"}})).await;
    let sid = h.create("accept").await;
    // What a crash mid-turn leaves behind: a started turn, a queued one, a pending approval.
    let log = &h.app.events;
    log.event(
        &sid,
        None,
        &pb::TurnQueuedEvent {
            turn_id: "t_q".into(),
            position: 1,
            queued: 1,
            ..Default::default()
        },
        &[],
    );
    log.event(
        &sid,
        None,
        &pb::TurnStartedEvent {
            turn_id: "t_1".into(),
            prompt: Some("x".into()),
            queued: false,
            ..Default::default()
        },
        &[],
    );
    log.event(
        &sid,
        None,
        &pb::MessageUserEvent {
            turn_id: "t_1".into(),
            text: "x".into(),
            ..Default::default()
        },
        &[],
    );
    log.event(
        &sid,
        None,
        &pb::ToolCallEvent {
            turn_id: "t_1".into(),
            call_id: "c1".into(),
            name: "shell".into(),
            ..Default::default()
        },
        &[("/args", json!({"command": "sleep 30"}))],
    );
    let s2 = sid.clone();
    log.write(move |c| store::approvals::insert(c, "ap_1", &s2, "t_1", "{}", "now"))
        .await
        .unwrap();
    h.app.flush().await.unwrap();

    let app2 = App::open(config(&h.home, &h.script), BusHub::new())
        .await
        .unwrap();
    let r = app2
        .sessions
        .resume(pb::SessionResumeParams {
            session_id: sid.clone(),
            after_seq: Some(4),
            locale: None,
        })
        .await
        .unwrap();
    let tail: Vec<_> = r
        .events
        .iter()
        .map(|e| {
            (
                e.kind.clone(),
                serde_json::from_str::<serde_json::Value>(&e.payload).unwrap(),
            )
        })
        .collect();
    assert!(tail.contains(&(
        "turn.done".into(),
        json!({"turnId": "t_1", "reason": "interrupted", "synthetic": true})
    )));
    assert!(tail.contains(&(
        "turn.dequeued".into(),
        json!({"turnId": "t_q", "reason": "dropped", "queued": 0})
    )));
    assert!(tail.contains(&(
        "turn.done".into(),
        json!({"turnId": "t_q", "reason": "interrupted", "synthetic": true})
    )));
    assert!(crate::testkit::read(&h.home, store::turns::open).is_empty());
    assert!(crate::testkit::read(&h.home, store::approvals::pending).is_empty());

    // A third start finds nothing left to repair.
    let app3 = App::open(config(&h.home, &h.script), BusHub::new())
        .await
        .unwrap();
    let again = app3
        .sessions
        .resume(pb::SessionResumeParams {
            session_id: sid.clone(),
            after_seq: None,
            locale: None,
        })
        .await
        .unwrap();
    let r_all = app2
        .sessions
        .resume(pb::SessionResumeParams {
            session_id: sid.clone(),
            after_seq: None,
            locale: None,
        })
        .await
        .unwrap();
    assert_eq!(again.events.len(), r_all.events.len());

    // The session is usable: the dangling call is answered in the rebuilt history.
    let tid = app3
        .turns
        .prompt(
            &Harness::ctx("c1", None),
            pb::SessionPromptParams {
                session_id: sid.clone(),
                text: "go on".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    snowpea_testkit::assert_eventually!(
        {
            app3.flush().await.unwrap();
            let open = crate::testkit::read(&h.home, store::turns::open);
            open.iter().all(|t| t.turn_id != tid)
        },
        "turn {tid} finished"
    );
}

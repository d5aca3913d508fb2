//! The end of a turn as clients see it: once `turn.done` is on the bus the session is idle
//! for every busy check (or already running the prompt that was queued behind the turn).

use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;

use crate::testkit::{done_reason, of_kind, Harness, Item};

/// Turns in a row; the race between publishing `turn.done` and clearing the running slot
/// is narrow, so it is given many chances to show.
const ROUNDS: usize = 60;

/// `(running, status)` of `sid` in `session.list`.
async fn listed(h: &Harness, sid: &str) -> (bool, String) {
    let list = h
        .app
        .sessions
        .list(pb::SessionListParams::default())
        .await
        .unwrap();
    let s = list
        .sessions
        .into_iter()
        .find(|s| s.session_id == sid)
        .expect("the session is listed");
    (s.running, s.status)
}

/// The `turn.started` of `turn_id` among `events`.
fn started<'a>(events: &'a [Value], turn_id: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["kind"] == "turn.started" && e["payload"]["turnId"] == turn_id)
        .unwrap_or_else(|| panic!("turn.started of {turn_id} in {events:?}"))
}

/// On seeing `turn.done` a client at once calls (in turn) `checkpoint.restore`,
/// `session.list` or `session.prompt`: the restore is not `session_busy`, the list says
/// idle, and the prompt starts its turn instead of queueing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_turn_done_is_published_the_session_is_idle_for_every_busy_check() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "write", "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "1"}}]}
        ],
        "default": {"text": "ok"}
    }))
    .await;
    let sid = h.create("accept").await;
    let checkpoint = h.prompt(&sid, "write a file").await;
    let ev = h.until_done(&checkpoint, |_| None).await;
    assert_eq!(done_reason(&ev), "complete");
    for round in 0..ROUNDS {
        // The last bus item was the previous turn's `turn.done`; react to it at once.
        match round % 3 {
            0 => {
                let mut p = pb::CheckpointRestoreParams {
                    session_id: sid.clone(),
                    id: checkpoint.clone(),
                    ..Default::default()
                };
                p.dry_run = true;
                let r = h.app.checkpoints.restore(p).await;
                assert!(r.is_ok(), "round {round}: checkpoint.restore: {r:?}");
            }
            1 => {
                let (running, status) = listed(&h, &sid).await;
                assert_eq!(
                    (running, status.as_str()),
                    (false, "idle"),
                    "round {round}: session.list"
                );
            }
            _ => {}
        }
        let tid = h.prompt(&sid, &format!("again {round}")).await;
        let ev = h.until_done(&tid, |_| None).await;
        assert!(
            of_kind(&ev, "turn.queued").is_empty(),
            "round {round}: the prompt was queued: {ev:?}"
        );
        assert_eq!(
            started(&ev, &tid)["payload"]["queued"],
            false,
            "round {round}"
        );
        assert_eq!(done_reason(&ev), "complete", "round {round}");
    }
}

/// A prompt queued behind a turn starts when that turn ends: when its `turn.done` is seen
/// the session is already running the queued turn, so an interrupt sent at once ends that
/// turn (never the one that just ended, never leaving two), and every turn id gets exactly
/// one `turn.done`. The first turn waits on an approval until the second prompt is queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_turn_done_a_queued_prompt_is_already_the_running_turn() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "gated", "tool_calls": [{"name": "shell", "arguments": {"command": "true"}}], "repeat": true},
            {"match": "slow", "delaySec": 60, "text": "late", "repeat": true}
        ],
        "default": {"text": "ok"}
    }))
    .await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    for round in 0..ROUNDS / 3 {
        let first = h.prompt(&sid, "gated first").await;
        let request = loop {
            if let Item::Request(r) = h.next().await {
                break r;
            }
        };
        let queued = h.prompt_with(&sid, "slow queued", "queue").await;
        h.reply(
            &request.request_id,
            json!({"decision": "allow", "scope": "once"}),
        )
        .await;
        let ev = h.until_done(&first, |_| None).await;
        assert_eq!(done_reason(&ev), "complete", "round {round}");
        let (running, status) = listed(&h, &sid).await;
        assert_eq!(
            (running, status.as_str()),
            (true, "running"),
            "round {round}: the queued turn runs"
        );
        h.app.turns.interrupt(&sid).unwrap();
        let ev = h.until_done(&queued, |_| None).await;
        assert_eq!(
            started(&ev, &queued)["payload"]["queued"],
            true,
            "round {round}"
        );
        assert_eq!(done_reason(&ev), "interrupted", "round {round}");
        let dones: Vec<_> = of_kind(&ev, "turn.done")
            .into_iter()
            .map(|e| e["payload"]["turnId"].clone())
            .collect();
        assert_eq!(dones, [json!(queued)], "round {round}: one turn.done each");
        let (running, status) = listed(&h, &sid).await;
        assert_eq!(
            (running, status.as_str()),
            (false, "idle"),
            "round {round}: idle after the queued turn"
        );
    }
}

use futures::StreamExt;
use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::session_internal_service_server::SessionInternalService;
use tonic::Request;

use super::InternalRpc;
use crate::runs::{last_turn, outcome};
use crate::testkit::{Harness, WAIT};

fn request(h: &Harness, task: &str, approval_timeout_sec: i64) -> pb::RunUnattendedRequest {
    pb::RunUnattendedRequest {
        workdir: h.workdir.to_string_lossy().into_owned(),
        mode: "accept".into(),
        task: task.into(),
        kind: "scheduled".into(),
        job_id: "job_1".into(),
        approval_timeout_sec,
        ..Default::default()
    }
}

/// The two updates of a RunUnattended/WatchRun stream: (session id of the first, which
/// comes at once, the final reply).
async fn both_updates(
    mut stream: impl futures::Stream<Item = Result<pb::RunUnattendedUpdate, tonic::Status>> + Unpin,
) -> (String, pb::RunUnattendedReply) {
    let first = tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("first update in time")
        .expect("stream open")
        .expect("first update");
    assert!(first.done.is_none(), "the session id comes first");
    let last = tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("final update in time")
        .expect("stream open")
        .expect("final update");
    (first.session_id, last.done.expect("final update has done"))
}

/// Runs `req` to its end: (session id of the first update, the final reply).
async fn run(h: &Harness, req: pb::RunUnattendedRequest) -> (String, pb::RunUnattendedReply) {
    let rpc = InternalRpc::new(h.app.clone());
    let stream = rpc
        .run_unattended(Request::new(req))
        .await
        .expect("run starts")
        .into_inner();
    both_updates(stream).await
}

async fn list(h: &Harness, kinds: &[&str]) -> Vec<pb::SessionSummary> {
    h.app
        .sessions
        .list(pb::SessionListParams {
            kinds: kinds.iter().map(|k| k.to_string()).collect(),
            ..Default::default()
        })
        .await
        .unwrap()
        .sessions
}

#[tokio::test]
async fn a_run_is_a_scheduled_session_listed_by_kind() {
    let h = Harness::new(json!({"steps": [{"match": "report", "text": "all quiet"}]})).await;
    let chat = h.create("accept").await;
    let (sid, done) = run(&h, request(&h, "report the weather", 0)).await;
    assert_eq!(done.status, "finished");
    assert_eq!(done.text, "all quiet");
    assert_eq!(done.session_id, sid);

    let scheduled = list(&h, &["scheduled"]).await;
    assert_eq!(scheduled.len(), 1);
    assert_eq!(scheduled[0].session_id, sid);
    assert_eq!(scheduled[0].kind, "scheduled");
    assert_eq!(scheduled[0].job_id.as_deref(), Some("job_1"));
    assert_eq!(scheduled[0].origin_surface.as_deref(), Some("scheduler"));

    let chats = list(&h, &["chat"]).await;
    assert_eq!(
        chats
            .iter()
            .map(|s| s.session_id.clone())
            .collect::<Vec<_>>(),
        vec![chat.clone()]
    );
    assert_eq!(chats[0].kind, "chat");
    assert_eq!(list(&h, &[]).await.len(), 2, "no kinds = every kind");
    assert_eq!(list(&h, &["chat", "scheduled"]).await.len(), 2);
    assert!(list(&h, &["subagent"]).await.is_empty());
}

#[tokio::test]
async fn the_kind_survives_a_restart() {
    let h = Harness::new(json!({"steps": [{"match": "x", "text": "ok"}]})).await;
    let (sid, _) = run(&h, request(&h, "x", 0)).await;
    h.app.flush().await.unwrap();
    let row = crate::testkit::read(&h.home, |c| crate::store::sessions::get(c, &sid)).unwrap();
    assert_eq!(row.kind(), "scheduled");
    assert_eq!(row.job_id.as_deref(), Some("job_1"));
    let reopened = crate::store::Store::open(&h.home.state_dir().join("session.db")).unwrap();
    let sid2 = sid.clone();
    let again = reopened
        .read("test", move |c| crate::store::sessions::get(c, &sid2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again, row);
}

#[tokio::test]
async fn an_unanswered_approval_ends_the_run_denied_by_timeout() {
    // Accept mode asks before a shell; nobody answers. The model would call the shell
    // again after a denial: a scheduled run must end at the first timeout instead.
    let script = json!({"steps": [
        {"match": "clean", "tool_calls": [{"name": "shell", "arguments": {"command": "echo one"}}]},
        {"after_tool": "shell", "tool_calls": [{"name": "shell", "arguments": {"command": "echo two"}}]},
        {"after_tool": "shell", "text": "finished anyway"}
    ]});
    let h = Harness::new(script).await;
    let (sid, done) = run(&h, request(&h, "clean up", 1)).await;
    assert_eq!(done.status, "denied_by_timeout", "{done:?}");
    assert!(done.error.contains("approval_timeout"), "{done:?}");
    let events = crate::testkit::read(&h.home, |c| crate::store::events::after(c, &sid, 0));
    let calls = events.iter().filter(|e| e.kind == "tool.call").count();
    assert_eq!(calls, 1, "the run stops at the first timed-out approval");
    let request: Value = events
        .iter()
        .find(|e| e.kind == "tool.result")
        .map(|e| serde_json::from_str(&e.payload).unwrap())
        .unwrap();
    assert_eq!(request["ok"], false);
}

#[tokio::test]
async fn the_run_uses_its_own_approval_timeout() {
    // The settings say an hour; the job says one second: the run must not wait an hour.
    let script = json!({"steps": [
        {"match": "go", "tool_calls": [{"name": "shell", "arguments": {"command": "echo hi"}}]},
        {"after_tool": "shell", "text": "done"}
    ]});
    let h = Harness::with_settings(script, json!({"approvals": {"timeoutSec": 3600}})).await;
    let (_, done) = run(&h, request(&h, "go", 1)).await;
    assert_eq!(done.status, "denied_by_timeout");
}

#[tokio::test]
async fn a_chat_session_keeps_going_after_an_approval_timeout() {
    let script = json!({"steps": [
        {"match": "go", "tool_calls": [{"name": "shell", "arguments": {"command": "echo hi"}}]},
        {"after_tool": "shell", "text": "went on"}
    ]});
    let mut h = Harness::with_settings(script, json!({"approvals": {"timeoutSec": 1}})).await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "go").await;
    let events = h.until_done(&tid, |_| None).await;
    assert_eq!(crate::testkit::done_reason(&events), "complete");
}

#[tokio::test]
async fn a_named_agent_is_refused_not_substituted() {
    let h = Harness::new(json!({"steps": []})).await;
    let mut req = request(&h, "x", 0);
    req.agent = Some("reviewer".into());
    let rpc = InternalRpc::new(h.app.clone());
    let err = match rpc.run_unattended(Request::new(req)).await {
        Ok(_) => panic!("an undefined agent must be refused"),
        Err(e) => e,
    };
    assert_eq!(err.code(), tonic::Code::NotFound);
    assert!(err.message().contains("reviewer"), "{}", err.message());
    assert!(
        list(&h, &["scheduled"]).await.is_empty(),
        "no session was opened"
    );
}

fn ev(kind: &str, payload: Value) -> (String, Value) {
    (kind.to_owned(), payload)
}

#[test]
fn outcome_reads_only_the_runs_turn() {
    let events = vec![
        ev(
            "error",
            json!({"turnId": "t_old", "code": "approval_timeout", "message": "old"}),
        ),
        ev("turn.done", json!({"turnId": "t_old", "reason": "denied"})),
        ev("message.done", json!({"turnId": "t_1", "text": "hello"})),
        ev(
            "error",
            json!({"turnId": "t_1", "code": "approval_denied", "message": "no"}),
        ),
        ev("turn.done", json!({"turnId": "t_1", "reason": "denied"})),
    ];
    let o = outcome(&events, "t_1");
    assert_eq!(o.status, "denied", "an older turn's timeout does not count");
    assert_eq!(o.text, "hello");
    assert_eq!(o.error, "no");

    let o = outcome(&events, "t_old");
    assert_eq!(o.status, "denied_by_timeout");

    let o = outcome(&events[..3], "t_1");
    assert_eq!(o.status, "failed");
    assert!(o.error.contains("without turn.done"));

    let budget = vec![ev("turn.done", json!({"turnId": "t", "reason": "budget"}))];
    let o = outcome(&budget, "t");
    assert_eq!(o.status, "failed");
    assert!(o.error.contains("budget"));

    let ok = vec![ev(
        "turn.done",
        json!({"turnId": "t", "reason": "complete"}),
    )];
    assert_eq!(outcome(&ok, "t").status, "finished");
}

/// Both updates of a WatchRun stream: (session id of the first, the final reply).
async fn watch(h: &Harness, sid: &str) -> (String, pb::RunUnattendedReply) {
    let rpc = InternalRpc::new(h.app.clone());
    let stream = rpc
        .watch_run(Request::new(pb::WatchRunRequest {
            session_id: sid.into(),
        }))
        .await
        .expect("watch starts")
        .into_inner();
    both_updates(stream).await
}

#[tokio::test]
async fn watch_run_of_an_ended_run_answers_its_outcome_at_once() {
    let h = Harness::new(json!({"steps": [{"match": "report", "text": "all quiet"}]})).await;
    let (sid, done) = run(&h, request(&h, "report", 0)).await;
    let (wsid, watched) = watch(&h, &sid).await;
    assert_eq!(wsid, sid);
    assert_eq!(watched, done);
    assert_eq!(watched.status, "finished");
    assert_eq!(watched.text, "all quiet");
}

#[tokio::test]
async fn watch_run_waits_for_the_running_turn_and_reports_its_real_end() {
    // The turn's shell sleeps: the watch starts while it runs and ends with it.
    let script = json!({"steps": [
        {"match": "nap", "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 2; echo rested"}}]},
        {"after_tool": "shell", "text": "napped"}
    ]});
    let h = Harness::new(script).await;
    let mut req = request(&h, "nap", 0);
    req.mode = "auto".into();
    let rpc = InternalRpc::new(h.app.clone());
    let mut stream = rpc
        .run_unattended(Request::new(req))
        .await
        .expect("run starts")
        .into_inner();
    let first = tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("first update in time")
        .expect("stream open")
        .expect("first update");
    let sid = first.session_id;
    assert!(
        h.app.sessions.get(&sid).unwrap().turns().running.is_some(),
        "the turn is still running when the watch starts"
    );
    let (_, watched) = watch(&h, &sid).await;
    assert_eq!(watched.status, "finished", "{watched:?}");
    assert_eq!(watched.text, "napped");
    let done = tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("run's final update in time")
        .expect("stream open")
        .expect("final update")
        .done
        .expect("done");
    assert_eq!(watched, done, "the watch reports what the run reports");
}

#[tokio::test]
async fn watch_run_of_an_unknown_session_is_not_found() {
    let h = Harness::new(json!({"steps": []})).await;
    let rpc = InternalRpc::new(h.app.clone());
    let err = match rpc
        .watch_run(Request::new(pb::WatchRunRequest {
            session_id: "s_nope".into(),
        }))
        .await
    {
        Ok(_) => panic!("an unknown session must be not_found"),
        Err(e) => e,
    };
    assert_eq!(err.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn watch_run_of_a_session_without_a_turn_fails_with_a_reason() {
    let h = Harness::new(json!({"steps": []})).await;
    let sid = h.create("accept").await;
    let (_, watched) = watch(&h, &sid).await;
    assert_eq!(watched.status, "failed");
    assert!(
        watched.error.contains("never started a turn"),
        "{watched:?}"
    );
}

#[test]
fn last_turn_is_the_turn_named_last() {
    let events = vec![
        ev("turn.started", json!({"turnId": "t_1"})),
        ev("turn.done", json!({"turnId": "t_1", "reason": "complete"})),
        ev("turn.started", json!({"turnId": "t_2"})),
        ev("message.done", json!({"turnId": "t_2", "text": "x"})),
        ev("job.done", json!({"jobId": "j"})),
    ];
    assert_eq!(last_turn(&events).as_deref(), Some("t_2"));
    assert_eq!(last_turn(&[]), None);
}

#[tokio::test]
async fn a_run_past_its_run_timeout_is_interrupted_and_reported_failed() {
    let script = json!({"steps": [
        {"match": "long", "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 30"}}]},
        {"after_tool": "shell", "text": "woke up"}
    ]});
    let h = Harness::new(script).await;
    let mut req = request(&h, "long task", 0);
    req.mode = "auto".into();
    req.run_timeout_sec = 1;
    let (sid, done) = run(&h, req).await;
    assert_eq!(done.status, "failed", "{done:?}");
    assert!(done.error.contains("run timeout (1 s)"), "{done:?}");
    assert!(
        h.app.sessions.get(&sid).unwrap().turns().running.is_none(),
        "the turn was stopped, not left running beside the job's next run"
    );
}

#[tokio::test]
async fn a_person_refusing_a_scheduled_runs_approval_ends_the_run_denied() {
    // After a refusal the model would try again: a scheduled run ends at the first one.
    let script = json!({"steps": [
        {"match": "clean", "tool_calls": [{"name": "shell", "arguments": {"command": "echo one"}}]},
        {"after_tool": "shell", "tool_calls": [{"name": "shell", "arguments": {"command": "echo two"}}]},
        {"after_tool": "shell", "text": "finished anyway"}
    ]});
    let mut h = Harness::new(script).await;
    h.connect("c9", Some("tui")).await;
    let rpc = InternalRpc::new(h.app.clone());
    let stream = rpc
        .run_unattended(Request::new(request(&h, "clean up", 60)))
        .await
        .expect("run starts")
        .into_inner();
    let outcome = tokio::spawn(both_updates(stream));
    let request_id = loop {
        if let crate::testkit::Item::Note(m, p) = h.next().await {
            if m == "approval.pending" {
                break p["request"]["requestId"].as_str().unwrap().to_owned();
            }
        }
    };
    h.app
        .approvals
        .respond(
            &Harness::ctx("c9", Some("tui")),
            pb::ApprovalRespondParams {
                decision: "deny".into(),
                request_id,
                scope: "once".into(),
                reason: "not now".into(),
            },
        )
        .unwrap();
    let (sid, done) = tokio::time::timeout(WAIT, outcome).await.unwrap().unwrap();
    assert_eq!(done.status, "denied", "{done:?}");
    assert!(done.error.contains("not now"), "{done:?}");
    let calls = crate::testkit::read(&h.home, |c| crate::store::events::after(c, &sid, 0))
        .iter()
        .filter(|e| e.kind == "tool.call")
        .count();
    assert_eq!(calls, 1);
}

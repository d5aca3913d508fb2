//! Issue 17 "Done means", questions: a scripted `ask_user` answered by a second client,
//! declined, timed out, interrupted, refused by an origin that cannot ask, and answered after
//! a kill -9 of svc-session; a `secret` answer absent from `session.resume` events and from
//! every log file. One suite; the phases run one after the other.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::{Client, Notification};
use snowpea_testkit::{eventually, within};
use tokio::sync::broadcast;

const WAIT: Duration = Duration::from_secs(30);
const SECRET: &str = "s3cr3t-e2e-7f3a";
const LATE_SECRET: &str = "late-s3cr3t-91c2";

fn script() -> Value {
    json!({"steps": [
        {"match": "quiz", "repeat": true, "tool_calls": [{"name": "ask_user", "arguments": {"questions": [
            {"header": "DB", "question": "Which database?", "options": [{"label": "sqlite"}, {"label": "pg"}]},
            {"question": "Deploy token?", "secret": true}
        ]}}]},
        {"after_tool": "ask_user", "repeat": true, "text": "noted"}
    ], "default": {"text": "ok"}})
}

/// The next notification `method` whose params satisfy `pred`.
async fn note(
    rx: &mut broadcast::Receiver<Notification>,
    method: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    within(WAIT, method, async {
        loop {
            match rx.recv().await {
                Ok(n) if n.method == method && pred(&n.params) => return n.params,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("notifications closed: {e}"),
            }
        }
    })
    .await
}

async fn pending_for(rx: &mut broadcast::Receiver<Notification>, sid: &str) -> String {
    let p = note(rx, "question.pending", |p| p["request"]["sessionId"] == sid).await;
    p["request"]["requestId"].as_str().unwrap().to_owned()
}

fn tool_output(events: &[snowpea_sdk::SessionEvent]) -> (bool, String) {
    let r = events
        .iter()
        .rev()
        .find(|e| e.kind == "tool.result")
        .expect("a tool.result");
    (
        r.payload["ok"].as_bool().unwrap(),
        r.payload["output"].as_str().unwrap().to_owned(),
    )
}

async fn respond(
    client: &Client,
    request_id: &str,
    answers: Value,
) -> Result<Value, snowpea_sdk::Error> {
    client
        .call(
            "question.respond",
            json!({"requestId": request_id, "answers": answers}),
        )
        .await
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[tokio::test]
async fn questions_are_answered_declined_timed_out_interrupted_and_survive_a_kill9() {
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script()),
        ..Default::default()
    })
    .await;
    // The origin shows questions but its person never answers them there.
    let origin = suite.client().await;
    origin.on_request("question.request", |_p: Value| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(json!({"answers": []}))
    });
    let other = suite.client_with(|o| o.with_client_id("phone")).await;
    let mut other_notes = other.subscribe();
    let mut origin_notes = origin.subscribe();
    let sid = origin
        .create_session(suite.workdir.path(), Some("accept"))
        .await
        .unwrap();

    // 1. Answered by a second client, with edges of question.respond.
    let mut events = origin.events(&sid);
    let turn = origin.prompt(&sid, "quiz me").await.unwrap();
    let rid = pending_for(&mut other_notes, &sid).await;
    assert!(rid.starts_with("qu-"), "{rid}");
    let listed = other
        .call("question.list", json!({"sessionId": sid}))
        .await
        .unwrap();
    assert_eq!(listed["requests"][0]["requestId"], rid.as_str());
    assert_eq!(listed["requests"][0]["questions"][1]["secret"], true);
    let sessions = other.call("session.list", json!({})).await.unwrap();
    let row = &sessions["sessions"][0];
    assert_eq!(row["status"], "awaiting_question", "{row}");
    assert_eq!(row["pendingQuestions"], 1);
    let e = respond(&other, &rid, json!([{"selected": ["pg"]}]))
        .await
        .unwrap_err();
    assert_eq!(e.code_str(), Some("invalid_params"));
    assert!(e.to_string().contains("params.answers"), "{e}");
    let e = respond(
        &other,
        &rid,
        json!([{"selected": ["mysql"]}, {"text": "x"}]),
    )
    .await
    .unwrap_err();
    assert!(
        e.to_string().contains("params.answers[0].selected[0]"),
        "{e}"
    );
    let e = respond(&other, "qu-000000000000", json!([]))
        .await
        .unwrap_err();
    assert_eq!(e.code_str(), Some("not_found"));
    respond(
        &other,
        &rid,
        json!([{"selected": ["pg"]}, {"text": SECRET}]),
    )
    .await
    .unwrap();
    let out = events.wait_for_turn_done(&turn, WAIT).await.unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
    let (ok, output) = tool_output(&out.events);
    assert!(
        ok && output.contains("\"pg\"") && !output.contains(SECRET),
        "{output}"
    );
    let resolved = note(&mut other_notes, "question.resolved", |p| {
        p["requestId"] == rid.as_str()
    })
    .await;
    assert_eq!(resolved["by"], "user");
    // The origin got the request, not the pending card.
    while let Ok(n) = origin_notes.try_recv() {
        assert!(
            !(n.method == "question.pending" && n.params["request"]["requestId"] == rid.as_str()),
            "question.pending reached the origin"
        );
    }
    // Answering a resolved batch again: ok, no effect.
    respond(
        &other,
        &rid,
        json!([{"selected": ["sqlite"]}, {"text": "y"}]),
    )
    .await
    .unwrap();

    // 2. Declined (an empty list).
    let mut events = origin.events(&sid);
    let turn = origin.prompt(&sid, "quiz again").await.unwrap();
    let rid = pending_for(&mut other_notes, &sid).await;
    respond(&other, &rid, json!([])).await.unwrap();
    let out = events.wait_for_turn_done(&turn, WAIT).await.unwrap();
    let (ok, output) = tool_output(&out.events);
    assert!(!ok && output.contains("declined"), "{output}");

    // 3. Timed out (`questions.timeoutSec` from the project's settings).
    let slow = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(slow.path().join(".snowpea")).unwrap();
    std::fs::write(
        slow.path().join(".snowpea/settings.json"),
        json!({"questions": {"timeoutSec": 1}}).to_string(),
    )
    .unwrap();
    let sid_slow = origin
        .create_session(slow.path(), Some("accept"))
        .await
        .unwrap();
    let out = origin
        .prompt_and_collect(&sid_slow, "quiz with a short fuse", WAIT)
        .await
        .unwrap();
    let (ok, output) = tool_output(&out.events);
    assert!(!ok && output.contains("did not answer"), "{output}");
    let r = note(&mut other_notes, "question.resolved", |p| {
        p["by"] == "timeout"
    })
    .await;
    assert!(r["requestId"].as_str().unwrap().starts_with("qu-"));

    // 4. Interrupted.
    let mut events = origin.events(&sid);
    let turn = origin.prompt(&sid, "quiz once more").await.unwrap();
    let rid = pending_for(&mut other_notes, &sid).await;
    origin.interrupt(&sid).await.unwrap();
    let out = events.wait_for_turn_done(&turn, WAIT).await.unwrap();
    assert_eq!(out.reason.as_deref(), Some("interrupted"));
    let r = note(&mut other_notes, "question.resolved", |p| {
        p["requestId"] == rid.as_str()
    })
    .await;
    assert_eq!(r["by"], "interrupted");

    // 5. An origin that cannot show questions (no handler: method_not_found) declines them.
    let bare = suite.client_with(|o| o.with_client_id("bare")).await;
    let sid_bare = bare
        .create_session(suite.workdir.path(), Some("accept"))
        .await
        .unwrap();
    let out = bare
        .prompt_and_collect(&sid_bare, "quiz the bare client", WAIT)
        .await
        .unwrap();
    let (ok, output) = tool_output(&out.events);
    assert!(!ok && output.contains("could not show"), "{output}");
    let r = note(&mut other_notes, "question.resolved", |p| {
        p["by"] == "origin-unreachable"
    })
    .await;
    assert!(r["requestId"].as_str().is_some());

    // 6. kill -9 of svc-session with a question pending: still listed and answerable after
    // the restart; the answers reach the model as a new turn.
    let turn = origin.prompt(&sid, "quiz before the crash").await.unwrap();
    let rid = pending_for(&mut other_notes, &sid).await;
    let old = suite.kill9("session");
    suite.wait_restarted("session", old).await;
    let listed = eventually(WAIT, "the question listed after the restart", || {
        let other = &other;
        let rid = rid.clone();
        async move {
            let l = other.call("question.list", json!({})).await.ok()?;
            let found = l["requests"]
                .as_array()?
                .iter()
                .any(|r| r["requestId"] == rid.as_str());
            found.then_some(l)
        }
    })
    .await;
    assert_eq!(listed["requests"][0]["sessionId"], sid.as_str());
    let evs = origin.resume(&sid, 0).await.unwrap();
    let done = evs
        .iter()
        .find(|e| e.kind == "turn.done" && e.payload["turnId"] == turn.as_str())
        .expect("the crashed turn is closed");
    assert_eq!(done.payload["synthetic"], true);
    let last_seq = evs.last().unwrap().seq;
    respond(
        &other,
        &rid,
        json!([{"selected": ["sqlite"]}, {"text": LATE_SECRET}]),
    )
    .await
    .unwrap();
    let r = note(&mut other_notes, "question.resolved", |p| {
        p["requestId"] == rid.as_str()
    })
    .await;
    assert_eq!(r["by"], "user");
    let late = eventually(WAIT, "the late answers' turn to finish", || {
        let origin = &origin;
        let sid = sid.clone();
        async move {
            let evs = origin.resume(&sid, last_seq).await.ok()?;
            let user = evs.iter().find(|e| e.kind == "message.user")?.clone();
            evs.iter().any(|e| e.kind == "turn.done").then_some(user)
        }
    })
    .await;
    let text = late.payload["text"].as_str().unwrap();
    assert!(text.contains("\"sqlite\"") && text.contains(&rid), "{text}");
    assert!(!text.contains(LATE_SECRET), "{text}");
    assert!(
        other.call("question.list", json!({})).await.unwrap()["requests"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // 7. The secrets are in no stored event and no log file.
    for s in [&sid, &sid_slow, &sid_bare] {
        let evs = origin.resume(s, 0).await.unwrap();
        for e in &evs {
            let text = e.payload.to_string();
            assert!(
                !text.contains(SECRET) && !text.contains(LATE_SECRET),
                "{}: {text}",
                e.kind
            );
        }
    }
    let mut logs = Vec::new();
    files_under(&suite.home().join("logs"), &mut logs);
    assert!(!logs.is_empty(), "the suite writes log files");
    for f in logs {
        let bytes = std::fs::read(&f).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(SECRET) && !text.contains(LATE_SECRET),
            "a secret answer is in {}",
            f.display()
        );
    }
}

use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;

use crate::testkit::{done_reason, of_kind, Harness, Item};
use snowpea_session_error::Error;

/// Two shell calls in a row, then a final text.
fn two_shells() -> Value {
    json!({
        "steps": [
            {"match": "twice", "tool_calls": [{"name": "shell", "arguments": {"command": "echo first"}}]},
            {"after_tool": "shell", "tool_calls": [{"name": "shell", "arguments": {"command": "echo first again"}}]},
            {"after_tool": "shell", "text": "all done"}
        ]
    })
}

fn answer(decision: &str, scope: &str) -> impl FnMut(&Item) -> Option<(String, Value)> {
    let (decision, scope) = (decision.to_owned(), scope.to_owned());
    move |item| match item {
        Item::Request(r) if r.method == "approval.request" => Some((
            r.request_id.clone(),
            json!({"decision": decision, "scope": scope}),
        )),
        _ => None,
    }
}

/// Runs the turn to its end, answering approvals with `decision`/`scope`; returns the
/// session events, the approval.request params and the bus notifications.
async fn run(
    h: &mut Harness,
    tid: &str,
    decision: &str,
    scope: &str,
) -> (Vec<Value>, Vec<Value>, Vec<(String, Value)>) {
    let mut requests = Vec::new();
    let mut notes = Vec::new();
    let mut respond = answer(decision, scope);
    let ev = h
        .until_done(tid, |item| {
            match item {
                Item::Request(r) => requests.push(serde_json::from_str(&r.params_json).unwrap()),
                Item::Note(m, p) if m != "session.event" => notes.push((m.clone(), p.clone())),
                _ => {}
            }
            respond(item)
        })
        .await;
    (ev, requests, notes)
}

#[tokio::test]
async fn allow_once_asks_for_every_call() {
    let mut h = Harness::new(two_shells()).await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "run it twice").await;
    let (ev, requests, notes) = run(&mut h, &tid, "allow", "once").await;
    assert_eq!(requests.len(), 2);
    let r = &requests[0];
    assert_eq!(r["sessionId"], sid.as_str());
    assert_eq!(r["tool"], "shell");
    assert_eq!(r["args"]["command"], "echo first");
    assert!(r["requestId"].as_str().unwrap().starts_with("ap_"));
    assert_eq!(r["risk"], "high");
    assert_eq!(r["scopeHint"], "once");
    assert_eq!(r["timeoutSec"], 300);
    assert!(r["note"].as_str().unwrap().contains("echo first"));
    let pending: Vec<_> = notes
        .iter()
        .filter(|(m, _)| m == "approval.pending")
        .collect();
    assert_eq!(pending.len(), 2);
    assert_eq!(pending[0].1["request"]["requestId"], r["requestId"]);
    assert_eq!(pending[0].1["hostToolsFrom"], "cli");
    let resolved: Vec<_> = notes
        .iter()
        .filter(|(m, _)| m == "approval.resolved")
        .collect();
    assert_eq!(
        resolved[0].1,
        json!({"requestId": r["requestId"], "decision": "allow", "by": "user"})
    );
    let results = of_kind(&ev, "tool.result");
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|r| r["payload"]["ok"] == true));
    assert!(results[0]["payload"]["output"]
        .as_str()
        .unwrap()
        .contains("first"));
    assert_eq!(done_reason(&ev), "complete");
}

/// Issue 17: "allow for the session" stores a `session` allowlist entry for the command
/// (`echo first`, a prefix), so a call it covers is not asked again, and the entry is listed.
#[tokio::test]
async fn allow_for_the_session_is_remembered() {
    let mut h = Harness::new(two_shells()).await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "run it twice").await;
    let (ev, requests, _) = run(&mut h, &tid, "allow", "session").await;
    assert_eq!(requests.len(), 1, "the second shell call is not asked");
    assert_eq!(of_kind(&ev, "tool.result").len(), 2);
    assert_eq!(done_reason(&ev), "complete");
    let listed = h
        .app
        .allowlist
        .list(
            &Harness::ctx("c1", Some("cli")),
            pb::PermissionAllowlistListParams {
                scope: Some("session".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(listed.patterns.len(), 1, "{listed:?}");
    assert_eq!(listed.patterns[0].pattern, "echo first");
    assert_eq!(listed.patterns[0].scope, "session");
}

/// Spec approval.respond: "allow runs the tool, deny ends the turn", the person's reason
/// quoted back to the model as the tool's refusal so the next turn can answer it (this
/// replaces the earlier deny-continues behaviour, issue 25 item 7).
#[tokio::test]
async fn a_persons_deny_ends_the_turn_and_the_reason_reaches_the_next_model_call() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "run", "tool_calls": [{"name": "shell", "arguments": {"command": "touch ran"}}]},
            {"after_tool": "shell", "text": "going on after the refusal"},
            {"match": "why", "text": "because you said not today"}
        ]
    }))
    .await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "run it").await;
    let mut requests = 0;
    let mut notes = Vec::new();
    let ev = h
        .until_done(&tid, |item| match item {
            Item::Request(r) if r.method == "approval.request" => {
                requests += 1;
                Some((
                    r.request_id.clone(),
                    json!({"decision": "deny", "reason": "not today"}),
                ))
            }
            Item::Note(m, p) if m != "session.event" => {
                notes.push((m.clone(), p.clone()));
                None
            }
            _ => None,
        })
        .await;
    assert_eq!(requests, 1);
    assert!(!h.workdir.join("ran").exists(), "a denied tool never runs");
    let result = of_kind(&ev, "tool.result")[0];
    assert_eq!(result["payload"]["ok"], false);
    let output = result["payload"]["output"].as_str().unwrap();
    assert!(output.contains("denied by user"), "{output}");
    assert!(output.contains("not today"), "{output}");
    let err = of_kind(&ev, "error")[0];
    assert_eq!(err["payload"]["code"], "approval_denied");
    assert!(
        of_kind(&ev, "message.delta")
            .iter()
            .all(|d| !d["payload"]["text"].as_str().unwrap().contains("going on")),
        "the model is not called again in the denied turn"
    );
    assert_eq!(done_reason(&ev), "denied");
    assert!(notes
        .iter()
        .any(|(m, p)| m == "approval.resolved" && p["decision"] == "deny" && p["by"] == "user"));

    // The next turn's model call gets the refusal, with the reason, as the tool's result.
    let tid = h.prompt(&sid, "why not?").await;
    let ev = h.until_done(&tid, |_| None).await;
    assert_eq!(done_reason(&ev), "complete");
    let seen = snowpea_session_llm::provider::fake_provider(&h.script)
        .unwrap()
        .received();
    let last = seen.last().expect("a model call");
    let refusal = last
        .messages
        .iter()
        .find(|m| m.role == snowpea_session_llm::provider::Role::Tool)
        .expect("the refused call's result is in the history");
    assert!(refusal.is_error);
    assert!(refusal.content.contains("not today"), "{}", refusal.content);
}

#[tokio::test]
async fn the_third_automatic_denial_ends_the_turn_as_denied() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "write", "tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]},
            {"after_tool": "write_file", "tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}], "repeat": true}
        ]
    }))
    .await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("plan").await;
    let tid = h.prompt(&sid, "write it").await;
    let (ev, requests, _) = run(&mut h, &tid, "allow", "once").await;
    assert!(requests.is_empty(), "the mode matrix never asks");
    assert_eq!(of_kind(&ev, "tool.result").len(), 3);
    let errors = of_kind(&ev, "error");
    assert_eq!(errors.len(), 3);
    assert!(errors.iter().all(|e| e["payload"]["code"] == "mode_denied"));
    assert_eq!(done_reason(&ev), "denied");
}

#[tokio::test]
async fn no_answer_within_the_timeout_denies_with_approval_timeout() {
    let mut h = Harness::with_settings(
        json!({
            "steps": [
                {"match": "run", "tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]},
                {"after_tool": "shell", "text": "gave up"}
            ]
        }),
        json!({"approvals": {"timeoutSec": 1}}),
    )
    .await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "run it").await;
    let mut notes = Vec::new();
    let ev = h
        .until_done(&tid, |item| {
            if let Item::Note(m, p) = item {
                notes.push((m.clone(), p.clone()));
            }
            None
        })
        .await;
    let err = of_kind(&ev, "error")[0];
    assert_eq!(err["payload"]["code"], "approval_timeout");
    let result = of_kind(&ev, "tool.result")[0];
    assert!(result["payload"]["output"]
        .as_str()
        .unwrap()
        .contains("approval_timeout"));
    assert!(notes
        .iter()
        .any(|(m, p)| m == "approval.resolved" && p["by"] == "timeout" && p["decision"] == "deny"));
    assert_eq!(done_reason(&ev), "complete");
    assert!(h
        .app
        .approvals
        .list(None)
        .await
        .unwrap()
        .requests
        .is_empty());
}

#[tokio::test]
async fn any_surface_may_respond_from_the_shared_queue_and_pending_requests_are_listed() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "run", "tool_calls": [{"name": "shell", "arguments": {"command": "echo yes"}}]},
            {"after_tool": "shell", "text": "done"}
        ]
    }))
    .await;
    h.connect("c1", Some("cli")).await;
    h.connect("c9", Some("other")).await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "run it").await;
    let request_id = loop {
        if let Item::Request(r) = h.next().await {
            break serde_json::from_str::<Value>(&r.params_json).unwrap()["requestId"]
                .as_str()
                .unwrap()
                .to_owned();
        }
    };
    let listed = h.app.approvals.list(Some(&sid)).await.unwrap().requests;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].request_id, request_id);
    assert_eq!(listed[0].tool, "shell");
    let respond = |rid: &str| pb::ApprovalRespondParams {
        decision: "allow".into(),
        request_id: rid.into(),
        scope: "once".into(),
        reason: String::new(),
    };
    let err = h
        .app
        .approvals
        .respond(&Harness::ctx("c1", Some("cli")), respond("ap_unknown"))
        .unwrap_err();
    assert!(matches!(err, Error::NotFound(_)));
    // A session without a host: any connected surface answers (the spec's shared queue,
    // the rule question.respond follows too; issue 32 item 10).
    h.app
        .approvals
        .respond(&Harness::ctx("c9", Some("other")), respond(&request_id))
        .unwrap();
    let ev = h.until_done(&tid, |_| None).await;
    assert_eq!(of_kind(&ev, "tool.result")[0]["payload"]["ok"], true);
    assert_eq!(done_reason(&ev), "complete");
    let err = h
        .app
        .approvals
        .respond(&Harness::ctx("c1", Some("cli")), respond(&request_id))
        .unwrap_err();
    assert!(
        matches!(err, Error::NotFound(_)),
        "a resolved request is gone"
    );
}

#[tokio::test]
async fn a_request_is_resent_when_the_origin_reconnects_with_the_same_client_id() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "run", "tool_calls": [{"name": "shell", "arguments": {"command": "echo yes"}}]},
            {"after_tool": "shell", "text": "done"}
        ]
    }))
    .await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    h.disconnect("c1").await; // the origin is gone: the request stays pending
    let tid = h.prompt(&sid, "run it").await;
    loop {
        if let Item::Note(m, _) = h.next().await {
            if m == "approval.pending" {
                break;
            }
        }
    }
    assert_eq!(h.app.approvals.list(None).await.unwrap().requests.len(), 1);
    h.connect("c2", Some("cli")).await;
    let ev = h
        .until_done(&tid, |item| match item {
            Item::Request(r) => {
                assert_eq!(r.connection_id, "c2");
                Some((r.request_id.clone(), json!({"decision": "allow"})))
            }
            _ => None,
        })
        .await;
    assert_eq!(of_kind(&ev, "tool.result")[0]["payload"]["ok"], true);
    assert_eq!(
        h.app.sessions.get(&sid).unwrap().origin().as_deref(),
        Some("c2")
    );
}

#[tokio::test]
async fn the_mode_matrix_and_deny_exec_refuse_without_asking() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "write", "tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]},
            {"match": "exec", "tool_calls": [{"name": "shell", "arguments": {"command": "touch ran"}}]},
            {"after_tool": "write_file", "text": "cannot write", "repeat": true},
            {"after_tool": "shell", "text": "cannot exec", "repeat": true}
        ]
    }))
    .await;
    h.connect("c1", Some("cli")).await;
    let plan = h.create("plan").await;
    let tid = h.prompt(&plan, "write please").await;
    let (ev, requests, _) = run(&mut h, &tid, "allow", "once").await;
    assert!(requests.is_empty());
    assert_eq!(of_kind(&ev, "error")[0]["payload"]["code"], "mode_denied");
    assert!(!h.workdir.join("x.txt").exists());

    let auto = h.create_with("auto", true).await;
    let tid = h.prompt(&auto, "exec please").await;
    let (ev, requests, _) = run(&mut h, &tid, "allow", "once").await;
    assert!(requests.is_empty());
    assert_eq!(of_kind(&ev, "error")[0]["payload"]["code"], "mode_denied");
    assert!(!h.workdir.join("ran").exists());
    assert_eq!(done_reason(&ev), "complete");
}

/// Opens a scheduled session (as svc-scheduler's RunUnattended does) with `host` as its
/// hostToolsFrom, prompts it and returns (session id, turn id, the pending request id).
async fn scheduled_run(h: &mut Harness, host: Option<&str>) -> (String, String, String) {
    let sid = h
        .app
        .sessions
        .create_with(
            &snowpea_common::context::CallContext::default(),
            pb::SessionCreateParams {
                workdir: h.workdir.to_string_lossy().into_owned(),
                mode: Some("accept".into()),
                host_tools_from: host.map(str::to_owned),
                ..Default::default()
            },
            crate::session::SessionSetup {
                kind: crate::store::sessions::KIND_SCHEDULED,
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .session_id;
    let tid = h.prompt(&sid, "run it").await;
    let request_id = loop {
        if let Item::Note(m, p) = h.next().await {
            if m == "approval.pending" {
                break p["request"]["requestId"].as_str().unwrap().to_owned();
            }
        }
    };
    (sid, tid, request_id)
}

fn allow(rid: &str) -> pb::ApprovalRespondParams {
    pb::ApprovalRespondParams {
        decision: "allow".into(),
        request_id: rid.into(),
        scope: "once".into(),
        reason: String::new(),
    }
}

#[tokio::test]
async fn any_client_answers_a_scheduled_runs_approval_from_the_queue() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "run", "tool_calls": [{"name": "shell", "arguments": {"command": "echo yes"}}]},
            {"after_tool": "shell", "text": "done"}
        ]
    }))
    .await;
    h.connect("c9", Some("tui")).await;
    let (_, tid, rid) = scheduled_run(&mut h, None).await;
    h.app
        .approvals
        .respond(&Harness::ctx("c9", Some("tui")), allow(&rid))
        .unwrap();
    let ev = h.until_done(&tid, |_| None).await;
    assert_eq!(of_kind(&ev, "tool.result")[0]["payload"]["ok"], true);
    assert_eq!(done_reason(&ev), "complete");
}

#[tokio::test]
async fn a_browser_owned_runs_approval_is_answered_only_by_its_host() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "run", "tool_calls": [{"name": "shell", "arguments": {"command": "echo yes"}}]},
            {"after_tool": "shell", "text": "done"}
        ]
    }))
    .await;
    h.connect("c8", Some("browser-1")).await;
    h.connect("c9", Some("tui")).await;
    let (_, tid, rid) = scheduled_run(&mut h, Some("browser-1")).await;
    let err = h
        .app
        .approvals
        .respond(&Harness::ctx("c9", Some("tui")), allow(&rid))
        .unwrap_err();
    assert!(matches!(err, Error::Unauthorized(_)), "{err:?}");
    h.app
        .approvals
        .respond(&Harness::ctx("c8", Some("browser-1")), allow(&rid))
        .unwrap();
    let ev = h.until_done(&tid, |_| None).await;
    assert_eq!(done_reason(&ev), "complete");
}

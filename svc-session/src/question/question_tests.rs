use serde_json::{json, Value};
use snowpea_proto::rpc::v1::service_bus_server::ServiceBus;
use snowpea_proto::rpc::v1::{client_reply, ClientReply};
use snowpea_proto::session::v1 as pb;
use tonic::Request;

use crate::testkit::{done_reason, of_kind, read, Harness, Item};
use snowpea_session_error::Error;

fn script() -> Value {
    json!({"steps": [
        {"match": "ask", "tool_calls": [{"name": "ask_user", "arguments": {"questions": [
            {"header": "DB", "question": "Which database?", "options": [{"label": "sqlite"}, {"label": "pg"}]},
            {"question": "Deploy token?", "secret": true}
        ]}}], "repeat": true},
        {"after_tool": "ask_user", "text": "thanks", "repeat": true}
    ]})
}

fn note<'a>(notes: &'a [(String, Value)], method: &str) -> Vec<&'a Value> {
    notes
        .iter()
        .filter(|(m, _)| m == method)
        .map(|(_, p)| p)
        .collect()
}

/// Runs the turn to its end; `answer` gets each `question.request` (params) and returns the
/// reply to send, if any; also returns the bus notifications.
async fn run(
    h: &mut Harness,
    tid: &str,
    mut answer: impl FnMut(&Value) -> Option<Value>,
) -> (Vec<Value>, Vec<Value>, Vec<(String, Value)>) {
    let mut requests = Vec::new();
    let mut notes = Vec::new();
    let ev = h
        .until_done(tid, |item| match item {
            Item::Request(r) if r.method == "question.request" => {
                let p: Value = serde_json::from_str(&r.params_json).unwrap();
                requests.push(p.clone());
                answer(&p).map(|a| (r.request_id.clone(), a))
            }
            Item::Note(m, p) => {
                if m != "session.event" {
                    notes.push((m.clone(), p.clone()));
                }
                None
            }
            _ => None,
        })
        .await;
    (ev, requests, notes)
}

#[tokio::test]
async fn the_origin_answers_and_the_model_gets_the_secret_that_events_mask() {
    let mut h = Harness::new(script()).await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "ask me").await;
    let (ev, requests, notes) = run(&mut h, &tid, |_| {
        Some(json!({"answers": [{"selected": ["pg"]}, {"text": "s3cr3t-token"}]}))
    })
    .await;
    assert_eq!(done_reason(&ev), "complete");
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    let rid = r["requestId"].as_str().unwrap();
    assert!(rid.starts_with("qu-") && rid.len() == 15, "{rid}");
    assert_eq!(r["sessionId"], sid.as_str());
    assert_eq!(r["timeoutSec"], 600);
    assert_eq!(r["questions"][0]["options"][1]["label"], "pg");
    assert_eq!(r["questions"][1]["secret"], true);
    let result = of_kind(&ev, "tool.result")[0];
    let output = result["payload"]["output"].as_str().unwrap();
    assert_eq!(result["payload"]["ok"], true);
    assert!(output.contains("\"pg\""), "{output}");
    assert!(
        !output.contains("s3cr3t"),
        "the stored result masks the secret: {output}"
    );
    assert!(result["payload"]["meta"].get("redactedOutput").is_none());
    // The model got it in clear.
    let seen = snowpea_session_llm::provider::fake_provider(&h.script)
        .unwrap()
        .received();
    let tool_msg = seen
        .last()
        .unwrap()
        .messages
        .iter()
        .find(|m| m.role == snowpea_session_llm::provider::Role::Tool)
        .unwrap();
    assert!(
        tool_msg.content.contains("s3cr3t-token"),
        "{}",
        tool_msg.content
    );
    let resolved = note(&notes, "question.resolved");
    assert_eq!(resolved, [&json!({"requestId": rid, "by": "user"})]);
    // Nothing in the database holds the secret.
    h.app.flush().await.unwrap();
    let stored: Vec<String> = read(&h.home, |c| {
        let mut s =
            c.prepare("SELECT payload FROM events UNION ALL SELECT questions FROM questions")?;
        let rows = s.query_map([], |r| r.get(0))?;
        rows.collect()
    });
    assert!(stored.iter().all(|p| !p.contains("s3cr3t")));
    let status: String = read(&h.home, |c| {
        c.query_row("SELECT outcome FROM questions", [], |r| r.get(0))
    });
    assert_eq!(status, "answered");
}

#[tokio::test]
async fn respond_from_any_client_but_a_foreign_host_with_edges_and_the_awaiting_question_status() {
    let mut h = Harness::new(script()).await;
    h.connect("c1", Some("cli")).await;
    h.connect("c2", Some("phone")).await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "ask me").await;
    // Wait for the request (the origin never answers it).
    let rid = loop {
        match h.next().await {
            Item::Request(r) if r.method == "question.request" => {
                let p: Value = serde_json::from_str(&r.params_json).unwrap();
                assert_eq!(r.connection_id, "c1");
                break p["requestId"].as_str().unwrap().to_owned();
            }
            _ => {}
        }
    };
    let listed = h.app.questions.list(Some(&sid)).await.unwrap();
    assert_eq!(listed.requests.len(), 1);
    assert_eq!(listed.requests[0].request_id, rid);
    let sessions = h.app.sessions.list(Default::default()).await.unwrap();
    assert_eq!(sessions.sessions[0].status, "awaiting_question");
    assert_eq!(sessions.sessions[0].pending_questions, 1);
    let respond = |answers: Vec<pb::QuestionAnswer>, id: &str| pb::QuestionRespondParams {
        answers,
        request_id: id.to_owned(),
    };
    let ans = |sel: &[&str], text: Option<&str>| pb::QuestionAnswer {
        selected: sel.iter().map(|s| s.to_string()).collect(),
        text: text.map(str::to_owned),
    };
    // Any surface answers (the shared queue): the edges below come from a second client.
    let phone = Harness::ctx("c2", Some("phone"));
    match h
        .app
        .questions
        .respond(&phone, respond(vec![ans(&["pg"], None)], &rid))
        .await
    {
        Err(Error::InvalidParams { field, .. }) => assert_eq!(field, "params.answers"),
        other => panic!("{other:?}"),
    }
    match h
        .app
        .questions
        .respond(
            &phone,
            respond(vec![ans(&["mysql"], None), ans(&[], Some("t"))], &rid),
        )
        .await
    {
        Err(Error::InvalidParams { field, .. }) => {
            assert_eq!(field, "params.answers[0].selected[0]")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        h.app
            .questions
            .respond(&phone, respond(vec![], "qu-000000000000"))
            .await,
        Err(Error::NotFound(_))
    ));
    // An empty list declines the batch.
    h.app
        .questions
        .respond(&phone, respond(vec![], &rid))
        .await
        .unwrap();
    let (ev, _, notes) = run(&mut h, &tid, |_| None).await;
    let output = of_kind(&ev, "tool.result")[0]["payload"]["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(output.contains("declined"), "{output}");
    assert_eq!(note(&notes, "question.resolved")[0]["by"], "user");
    // Answering a resolved batch: ok, no effect.
    h.app
        .questions
        .respond(
            &phone,
            respond(vec![ans(&["pg"], None), ans(&[], None)], &rid),
        )
        .await
        .unwrap();
    assert!(h
        .app
        .questions
        .list(None)
        .await
        .unwrap()
        .requests
        .is_empty());
    let sessions = h.app.sessions.list(Default::default()).await.unwrap();
    assert_eq!(sessions.sessions[0].pending_questions, 0);
}

#[tokio::test]
async fn a_batch_times_out_after_questions_timeout_sec() {
    let mut h = Harness::with_settings(script(), json!({"questions": {"timeoutSec": 0.3}})).await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "ask me").await;
    let (ev, requests, notes) = run(&mut h, &tid, |_| None).await;
    assert_eq!(requests[0]["timeoutSec"], 1);
    let result = of_kind(&ev, "tool.result")[0];
    assert_eq!(result["payload"]["ok"], false);
    assert!(result["payload"]["output"]
        .as_str()
        .unwrap()
        .contains("did not answer"));
    assert_eq!(note(&notes, "question.resolved")[0]["by"], "timeout");
    assert_eq!(done_reason(&ev), "complete");
}

#[tokio::test]
async fn an_origin_that_cannot_ask_declines_and_an_interrupt_withdraws() {
    let mut h = Harness::new(script()).await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    // The origin answers question.request with an error: declined, origin-unreachable.
    h.prompt(&sid, "ask me").await;
    let mut notes = Vec::new();
    let mut events = Vec::new();
    loop {
        match h.next().await {
            Item::Request(r) if r.method == "question.request" => {
                h.bus
                    .reply(Request::new(ClientReply {
                        request_id: r.request_id.clone(),
                        outcome: Some(client_reply::Outcome::ErrorJson(
                            json!({"code": -32601, "message": "method not found"}).to_string(),
                        )),
                    }))
                    .await
                    .unwrap();
            }
            Item::Note(m, p) if m == "session.event" => {
                let done = p["kind"] == "turn.done";
                events.push(p);
                if done {
                    break;
                }
            }
            Item::Note(m, p) => notes.push((m, p)),
            _ => {}
        }
    }
    assert_eq!(
        note(&notes, "question.resolved")[0]["by"],
        "origin-unreachable"
    );
    let out = of_kind(&events, "tool.result")[0]["payload"]["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(out.contains("could not show"), "{out}");

    // An interrupt withdraws a pending batch and ends the turn interrupted.
    h.prompt(&sid, "ask me again").await;
    loop {
        if let Item::Request(r) = h.next().await {
            if r.method == "question.request" {
                break;
            }
        }
    }
    h.app.turns.interrupt(&sid).unwrap();
    let mut resolved_by = None;
    loop {
        match h.next().await {
            Item::Note(m, p) if m == "question.resolved" => resolved_by = Some(p["by"].clone()),
            Item::Note(m, p) if m == "session.event" && p["kind"] == "turn.done" => {
                assert_eq!(p["payload"]["reason"], "interrupted");
                break;
            }
            _ => {}
        }
    }
    assert_eq!(resolved_by, Some(json!("interrupted")));
    assert!(h
        .app
        .questions
        .list(None)
        .await
        .unwrap()
        .requests
        .is_empty());
}

#[tokio::test]
async fn ask_user_is_a_read_tool_and_bad_arguments_are_tool_errors() {
    let mut h = Harness::new(json!({"steps": [
        {"match": "ask", "tool_calls": [{"name": "ask_user", "arguments": {"question": "x", "choices": ["only one"]}}]},
        {"after_tool": "ask_user", "text": "ok"}
    ]}))
    .await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("plan").await;
    let tid = h.prompt(&sid, "ask").await;
    let (ev, requests, _) = run(&mut h, &tid, |_| None).await;
    assert!(requests.is_empty());
    let result = of_kind(&ev, "tool.result")[0];
    assert_eq!(result["payload"]["ok"], false);
    assert!(result["payload"]["output"]
        .as_str()
        .unwrap()
        .contains("at least 2"));
    let tools = h.app.tools.list(Default::default()).await.unwrap();
    let ask = tools.tools.iter().find(|t| t.name == "ask_user").unwrap();
    assert_eq!(ask.permission_tag, "read");
}

#[tokio::test]
async fn a_client_that_attaches_gets_the_pending_request_again() {
    let mut h = Harness::new(script()).await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "ask me").await;
    let first = loop {
        if let Item::Request(r) = h.next().await {
            if r.method == "question.request" {
                assert_eq!(r.connection_id, "c1");
                break serde_json::from_str::<Value>(&r.params_json).unwrap();
            }
        }
    };
    h.connect("c2", Some("desktop")).await;
    h.app
        .sessions
        .attach(
            &Harness::ctx("c2", Some("desktop")),
            pb::SessionAttachParams {
                session_id: sid.clone(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let (ev, requests, _) = run(&mut h, &tid, |p| {
        Some(json!({"answers": [{"selected": ["sqlite"]}, {"text": null}], "seen": p["requestId"]}))
    })
    .await;
    assert_eq!(requests.len(), 1, "re-sent once, to the new origin");
    assert_eq!(requests[0]["requestId"], first["requestId"]);
    let output = of_kind(&ev, "tool.result")[0]["payload"]["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        output.contains("\"sqlite\"") && output.contains("declined"),
        "{output}"
    );
}

/// Regression (issue 32 item 10): `question.respond` was accepted from any connection while
/// `approval.respond` kept a browser session's requests to its host; one rule now
/// (`callers::may_answer`): a browser session is answered by its origin or its host.
#[tokio::test]
async fn a_browser_sessions_question_is_answered_only_by_its_origin_or_host() {
    let mut h = Harness::new(script()).await;
    h.connect("c2", Some("phone")).await;
    for conn in ["c7", "c8"] {
        h.bus
            .sync_connections(Request::new(snowpea_proto::rpc::v1::ConnectionSet {
                full: false,
                connections: vec![snowpea_proto::rpc::v1::ConnectionInfo {
                    connection_id: conn.into(),
                    client_id: Some("browser-1".into()),
                    client_kind: Some("browser".into()),
                    client_version: "test".into(),
                    ..Default::default()
                }],
                closed: vec![],
            }))
            .await
            .unwrap();
    }
    let browser = |conn: &str| snowpea_common::context::CallContext {
        connection_id: Some(conn.into()),
        client_id: Some("browser-1".into()),
        client_kind: Some("browser".into()),
        ..Default::default()
    };
    let sid = h
        .app
        .sessions
        .create(
            &browser("c8"),
            pb::SessionCreateParams {
                workdir: h.workdir.to_string_lossy().into_owned(),
                mode: Some("accept".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .session_id;
    let tid = h
        .app
        .turns
        .prompt(
            &browser("c8"),
            pb::SessionPromptParams {
                session_id: sid.clone(),
                text: "ask me".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let rid = loop {
        if let Item::Note(m, p) = h.next().await {
            if m == "question.pending" {
                break p["request"]["requestId"].as_str().unwrap().to_owned();
            }
        }
    };
    let answers = || pb::QuestionRespondParams {
        answers: vec![
            pb::QuestionAnswer {
                selected: vec!["pg".into()],
                text: None,
            },
            Default::default(),
        ],
        request_id: rid.clone(),
    };
    match h
        .app
        .questions
        .respond(&Harness::ctx("c2", Some("phone")), answers())
        .await
    {
        Err(Error::Unauthorized(_)) => {}
        other => panic!("expected unauthorized, got {other:?}"),
    }
    assert_eq!(
        h.app
            .questions
            .list(Some(&sid))
            .await
            .unwrap()
            .requests
            .len(),
        1
    );
    h.app
        .questions
        .respond(&browser("c7"), answers())
        .await
        .unwrap();
    let (ev, _, _) = run(&mut h, &tid, |_| None).await;
    let output = of_kind(&ev, "tool.result")[0]["payload"]["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(output.contains("\"pg\""), "{output}");
}

#[tokio::test]
async fn a_bad_answer_from_the_origin_keeps_the_batch_pending_for_question_respond() {
    let mut h = Harness::new(script()).await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "ask me").await;
    let rid = loop {
        if let Item::Request(r) = h.next().await {
            if r.method == "question.request" {
                h.reply(
                    &r.request_id,
                    json!({"answers": [{"selected": ["nope"]}, {}]}),
                )
                .await;
                let p: Value = serde_json::from_str(&r.params_json).unwrap();
                break p["requestId"].as_str().unwrap().to_owned();
            }
        }
    };
    // Still pending (listed) until someone answers properly.
    let questions = h.app.questions.clone();
    snowpea_testkit::eventually(crate::testkit::WAIT, "the batch still listed", || {
        let (questions, rid) = (questions.clone(), rid.clone());
        async move {
            let l = questions.list(None).await.ok()?;
            // Listed, and the origin's bad answer has been handled (the request is no longer in flight).
            (l.requests.iter().any(|r| r.request_id == rid)).then_some(())
        }
    })
    .await;
    h.app
        .questions
        .respond(
            &Harness::ctx("c1", Some("cli")),
            pb::QuestionRespondParams {
                answers: vec![
                    pb::QuestionAnswer {
                        selected: vec!["pg".into()],
                        text: None,
                    },
                    Default::default(),
                ],
                request_id: rid.clone(),
            },
        )
        .await
        .unwrap();
    let (ev, requests, _) = run(&mut h, &tid, |_| None).await;
    assert!(requests.is_empty(), "the origin is not asked again");
    let output = of_kind(&ev, "tool.result")[0]["payload"]["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(output.contains("\"pg\""), "{output}");
}

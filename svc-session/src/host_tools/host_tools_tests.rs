//! Service-level tests of host tools (issue 21): registration edges, `tool.invoke` with its
//! context, the silence deadline (progress, pauses, timeout → `tool.cancel`), interrupt,
//! host gone, sensitive and image results, parallel batches, `approval.ask`.

use std::time::Duration;

use serde_json::{json, Value};
use snowpea_proto::rpc::v1::BusClientRequest;
use snowpea_proto::session::v1 as pb;

use crate::testkit::{of_kind, Harness, Item};
use snowpea_session_error::Error;

fn tool(name: &str, permission: &str) -> pb::tool_register_params::Tool {
    pb::tool_register_params::Tool {
        name: name.into(),
        description: format!("The host's {name}."),
        permission: permission.into(),
        ..Default::default()
    }
}

fn register(
    h: &Harness,
    tools: Vec<pb::tool_register_params::Tool>,
) -> snowpea_session_error::Result<Vec<String>> {
    h.app
        .host_tools
        .register(
            &Harness::ctx("c1", Some("cli")),
            pb::ToolRegisterParams { tools },
        )
        .map(|r| r.registered)
}

fn field_of(e: Error) -> String {
    match e {
        Error::InvalidParams { field, .. } => field,
        other => panic!("expected invalid_params, got {other:?}"),
    }
}

/// What the feed showed until a `tool.invoke` (or `until` said stop).
struct Seen {
    requests: Vec<BusClientRequest>,
    events: Vec<Value>,
    notes: Vec<(String, Value)>,
}

/// Reads the feed until `stop` is true of what was seen.
async fn read_until(h: &mut Harness, mut stop: impl FnMut(&Seen) -> bool) -> Seen {
    let mut seen = Seen {
        requests: vec![],
        events: vec![],
        notes: vec![],
    };
    while !stop(&seen) {
        match h.next().await {
            Item::Request(r) => seen.requests.push(r),
            Item::Note(m, p) if m == "session.event" => seen.events.push(p),
            Item::Note(m, p) => seen.notes.push((m, p)),
        }
    }
    seen
}

fn invokes(seen: &Seen) -> Vec<&BusClientRequest> {
    seen.requests
        .iter()
        .filter(|r| r.method == "tool.invoke")
        .collect()
}

fn params(r: &BusClientRequest) -> Value {
    serde_json::from_str(&r.params_json).unwrap()
}

fn done(turn_id: &str) -> impl FnMut(&Seen) -> bool + '_ {
    move |s: &Seen| {
        s.events
            .iter()
            .any(|e| e["kind"] == "turn.done" && e["payload"]["turnId"] == turn_id)
    }
}

fn result_of(events: &[Value]) -> Value {
    of_kind(events, "tool.result")
        .last()
        .map(|e| e["payload"].clone())
        .expect("a tool.result")
}

fn answer_text(events: &[Value]) -> String {
    of_kind(events, "message.done")
        .last()
        .map(|e| e["payload"]["text"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

fn script() -> Value {
    json!({"steps": [
        {"match": "use page", "repeat": true, "tool_calls": [{"name": "page_read", "arguments": {"tab": 1}}]},
        {"after_tool": "page_read", "echoToolResults": true, "describeImages": true, "repeat": true},
        {"match": "two safe", "tool_calls": [{"name": "safe_a", "arguments": {}}, {"name": "safe_b", "arguments": {}}]},
        {"after_tool": "safe_b", "text": "both safe done"},
        {"match": "two never", "tool_calls": [{"name": "never_a", "arguments": {}}, {"name": "never_b", "arguments": {}}]},
        {"after_tool": "never_b", "text": "both never done"},
        {"match": "deferred", "echoTools": true, "tool_calls": [{"name": "tool_search", "arguments": {"query": "zebra"}}]},
        {"after_tool": "tool_search", "echoTools": true, "text": "loaded"}
    ]})
}

async fn harness() -> (Harness, String) {
    let h = Harness::new(script()).await;
    h.connect("c1", Some("cli")).await;
    let sid = h.create("auto").await;
    (h, sid)
}

#[tokio::test]
async fn registration_is_all_or_nothing_and_names_the_bad_field() {
    let (h, sid) = harness().await;
    let mut bad = vec![
        tool("a", "read"),
        tool("b", "write"),
        tool("c", "send"),
        tool("9x", "read"),
    ];
    assert_eq!(
        field_of(register(&h, bad.clone()).unwrap_err()),
        "params.tools[3].name"
    );
    bad[3] = tool("a", "read");
    assert_eq!(
        field_of(register(&h, bad.clone()).unwrap_err()),
        "params.tools[3].name",
        "duplicate"
    );
    bad[3] = tool("shell", "exec");
    assert_eq!(
        field_of(register(&h, bad.clone()).unwrap_err()),
        "params.tools[3].name",
        "daemon tool"
    );
    bad[3] = tool("d", "root");
    assert_eq!(
        field_of(register(&h, bad.clone()).unwrap_err()),
        "params.tools[3].permission"
    );
    bad[3] = pb::tool_register_params::Tool {
        timeout_ms: Some(0),
        ..tool("d", "read")
    };
    assert_eq!(
        field_of(register(&h, bad.clone()).unwrap_err()),
        "params.tools[3].timeoutMs"
    );
    bad[3] = pb::tool_register_params::Tool {
        parallel: "sometimes".into(),
        ..tool("d", "read")
    };
    assert_eq!(
        field_of(register(&h, bad.clone()).unwrap_err()),
        "params.tools[3].parallel"
    );
    assert!(
        h.app.host_tools.hosts().all().is_empty(),
        "nothing registered by a refused call"
    );

    // browser_* may be taken by a host; the whole call is registered.
    bad[3] = pb::tool_register_params::Tool {
        deferred: true,
        ..tool("browser_navigate", "network")
    };
    let names = register(&h, bad).unwrap();
    assert_eq!(names, ["a", "b", "c", "browser_navigate"]);
    let listed = h
        .app
        .tools
        .list(pb::ToolListParams {
            session_id: Some(sid.clone()),
        })
        .await
        .unwrap()
        .tools;
    let host: Vec<_> = listed.iter().filter(|t| t.source == "host").collect();
    assert_eq!(host.len(), 4);
    let nav = host.iter().find(|t| t.name == "browser_navigate").unwrap();
    assert!(nav.deferred);
    assert_eq!(nav.state, "active");
    assert_eq!(nav.permission_tag, "network");
    assert_eq!(nav.provider, "cli");
    assert!(listed
        .iter()
        .any(|t| t.name == "shell" && t.source == "builtin"));

    // Registering again replaces; unregister says what it removed.
    register(&h, vec![tool("a", "exec")]).unwrap();
    let a = h.app.host_tools.hosts().of("c1").unwrap().tools["a"].clone();
    assert_eq!(a.permission.as_str(), "exec");
    assert_eq!(a.timeout, super::registry::DEFAULT_TIMEOUT);
    let r = h
        .app
        .host_tools
        .unregister(
            &Harness::ctx("c1", Some("cli")),
            pb::ToolUnregisterParams {
                names: vec!["a".into(), "zzz".into()],
            },
        )
        .unwrap();
    assert_eq!(r.removed, ["a"]);

    // A closed connection's tools are gone at once.
    h.disconnect("c1").await;
    snowpea_testkit::assert_eventually!(h.app.host_tools.hosts().of("c1").is_none());
}

/// Regression (issue 32 item 10): an invalid tool name was echoed whole in the error; it is
/// clipped to 64 characters, as slash commands clip their arguments.
#[tokio::test]
async fn an_invalid_tool_name_is_clipped_in_the_error() {
    let (h, _sid) = harness().await;
    let long = format!("9{}", "x".repeat(10_000));
    for name in [long.clone(), format!("mcp__{long}")] {
        match register(&h, vec![tool(&name, "read")]).unwrap_err() {
            Error::InvalidParams { field, message } => {
                assert_eq!(field, "params.tools[0].name");
                let expected = format!("{:?}", crate::commands::args::clip(&name));
                assert!(message.starts_with(&expected), "{message}");
                assert!(message.chars().count() < 200, "{message}");
            }
            other => panic!("expected invalid_params, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn invoke_carries_the_context_and_the_answer_reaches_the_model() {
    let (mut h, sid) = harness().await;
    register(&h, vec![tool("page_read", "read")]).unwrap();
    let turn = h.prompt(&sid, "use page one").await;
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let inv = invokes(&seen)[0].clone();
    assert_eq!(inv.connection_id, "c1");
    let p = params(&inv);
    assert_eq!(p["name"], "page_read");
    assert_eq!(p["sessionId"], sid.as_str());
    assert_eq!(p["turnId"], turn.as_str());
    assert_eq!(p["args"], json!({"tab": 1}));
    assert_eq!(p["mode"], "auto");
    assert_eq!(p["workdir"], h.workdir.display().to_string());
    assert!(p["workspaceDir"].as_str().is_some_and(|w| !w.is_empty()));
    assert_eq!(p["origin"], "human");
    assert_eq!(p["userTurn"]["text"], "use page one");
    assert_eq!(p["userTurn"]["current"], true);
    assert!(p.get("guard").is_none_or(Value::is_null), "not guarded");
    let call_id = p["callId"].as_str().unwrap().to_owned();
    h.app.host_tools.progress(
        &Harness::ctx("c1", Some("cli")),
        pb::ToolProgressParams {
            call_id: call_id.clone(),
            message: "reading…".into(),
        },
    );
    h.reply(
        &inv.request_id,
        json!({"ok": true, "output": "the page says hi", "meta": {"pages": [1]},
               "content": [{"type": "text", "text": "more text"}]}),
    )
    .await;
    let seen = read_until(&mut h, done(&turn)).await;
    let progress = of_kind(&seen.events, "tool.progress");
    assert_eq!(progress[0]["payload"]["chunk"], "reading…");
    let r = result_of(&seen.events);
    assert_eq!(r["ok"], true);
    assert_eq!(r["meta"], json!({"pages": [1]}));
    assert_eq!(r["content"][0]["text"], "more text");
    assert!(answer_text(&seen.events).contains("[tool page_read ok] the page says hi / more text"));
}

/// `tool.invoke.guard` comes from the agents component (`Agents::is_guarded`): set by
/// `session.setAgent{guardTurn}` in the middle of a turn, it covers the rest of that turn
/// and ends when the person's next prompt starts a turn.
#[tokio::test]
async fn a_guarded_turn_says_agent_switch_on_later_invokes_only() {
    let (mut h, sid) = harness().await;
    register(
        &h,
        vec![
            tool("never_a", "read"),
            tool("never_b", "read"),
            tool("page_read", "read"),
        ],
    )
    .unwrap();
    let turn = h.prompt(&sid, "two never").await;
    let seen = read_until(&mut h, |s| invokes(s).len() == 1).await;
    let first = invokes(&seen)[0].clone();
    assert_eq!(params(&first)["name"], "never_a");
    assert!(params(&first)["guard"].is_null(), "not guarded yet");
    let set = h
        .app
        .agents
        .set_agent(
            &Harness::ctx("c1", Some("cli")),
            pb::SessionSetAgentParams {
                session_id: sid.clone(),
                agent: None,
                guard_turn: true,
            },
        )
        .await
        .unwrap();
    assert!(set.guarded);
    h.reply(&first.request_id, json!({"ok": true, "output": "x"}))
        .await;
    let seen = read_until(&mut h, |s| invokes(s).len() == 1).await;
    let second = invokes(&seen)[0].clone();
    assert_eq!(params(&second)["name"], "never_b");
    assert_eq!(params(&second)["guard"], "agent-switch");
    h.reply(&second.request_id, json!({"ok": true, "output": "x"}))
        .await;
    read_until(&mut h, done(&turn)).await;

    // The person's own next prompt ends the guard.
    let turn = h.prompt(&sid, "use page").await;
    let seen = read_until(&mut h, |s| invokes(s).len() == 1).await;
    let inv = invokes(&seen)[0].clone();
    assert!(params(&inv)["guard"].is_null(), "the guard ended");
    h.reply(&inv.request_id, json!({"ok": true, "output": "x"}))
        .await;
    read_until(&mut h, done(&turn)).await;
}

#[tokio::test]
async fn progress_keeps_a_call_alive_and_silence_cancels_it() {
    let (mut h, sid) = harness().await;
    register(
        &h,
        vec![pb::tool_register_params::Tool {
            timeout_ms: Some(600),
            ..tool("page_read", "read")
        }],
    )
    .unwrap();
    // Kept alive by keepalives for four times its timeout.
    let turn = h.prompt(&sid, "use page").await;
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let inv = invokes(&seen)[0].clone();
    let call_id = params(&inv)["callId"].as_str().unwrap().to_owned();
    for _ in 0..16 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        h.app.host_tools.progress(
            &Harness::ctx("c1", Some("cli")),
            pb::ToolProgressParams {
                call_id: call_id.clone(),
                message: String::new(),
            },
        );
    }
    h.reply(
        &inv.request_id,
        json!({"ok": true, "output": "late but fine"}),
    )
    .await;
    let seen = read_until(&mut h, done(&turn)).await;
    assert_eq!(result_of(&seen.events)["ok"], true);
    assert!(
        of_kind(&seen.events, "tool.progress").is_empty(),
        "keepalives are not events"
    );
    assert!(!seen.notes.iter().any(|(m, _)| m == "tool.cancel"));

    // Silence: the call fails and the host is told tool.cancel.
    let turn = h.prompt(&sid, "use page").await;
    let seen = read_until(&mut h, done(&turn)).await;
    let r = result_of(&seen.events);
    assert_eq!(r["ok"], false);
    assert!(r["output"].as_str().unwrap().starts_with("timeout"), "{r}");
    let cancel = seen
        .notes
        .iter()
        .find(|(m, _)| m == "tool.cancel")
        .expect("tool.cancel");
    assert_eq!(cancel.1["sessionId"], sid.as_str());
    assert_eq!(cancel.1["callId"], r["callId"]);
}

#[tokio::test]
async fn the_clock_stops_while_the_host_asks_for_approval() {
    let (mut h, sid) = harness().await;
    register(
        &h,
        vec![pb::tool_register_params::Tool {
            timeout_ms: Some(300),
            ..tool("page_read", "read")
        }],
    )
    .unwrap();
    let turn = h.prompt(&sid, "use page").await;
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let inv = invokes(&seen)[0].clone();
    let call_id = params(&inv)["callId"].as_str().unwrap().to_owned();
    let app = h.app.clone();
    let sid2 = sid.clone();
    let ask = tokio::spawn(async move {
        app.approvals
            .ask(
                &Harness::ctx("c1", Some("cli")),
                pb::ApprovalAskParams {
                    session_id: sid2,
                    tool: "page_click".into(),
                    permission: "send".into(),
                    reason: "Click Buy".into(),
                    call_id: Some(call_id),
                    force_ask: true,
                    ..Default::default()
                },
            )
            .await
    });
    let seen = read_until(&mut h, |s| {
        s.requests.iter().any(|r| r.method == "approval.request")
    })
    .await;
    let req = seen
        .requests
        .iter()
        .find(|r| r.method == "approval.request")
        .unwrap()
        .clone();
    // Far longer than the 300 ms timeout passes while the person decides.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    h.reply(
        &req.request_id,
        json!({"decision": "allow", "scope": "once"}),
    )
    .await;
    let asked = snowpea_testkit::within(crate::testkit::WAIT, "approval.ask", ask)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (asked.decision.as_str(), asked.by.as_str()),
        ("allow", "user")
    );
    h.reply(&inv.request_id, json!({"ok": true, "output": "clicked"}))
        .await;
    let seen = read_until(&mut h, done(&turn)).await;
    assert_eq!(
        result_of(&seen.events)["ok"],
        true,
        "not timed out while the approval was pending"
    );
}

#[tokio::test]
async fn interrupt_cancels_and_a_closed_host_fails_fast() {
    let (mut h, sid) = harness().await;
    register(&h, vec![tool("page_read", "read")]).unwrap();
    let turn = h.prompt(&sid, "use page").await;
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let call_id = params(invokes(&seen)[0])["callId"]
        .as_str()
        .unwrap()
        .to_owned();
    h.app.turns.interrupt(&sid).unwrap();
    let seen = read_until(&mut h, done(&turn)).await;
    let cancel = seen
        .notes
        .iter()
        .find(|(m, _)| m == "tool.cancel")
        .expect("tool.cancel");
    assert_eq!(cancel.1["callId"], call_id.as_str());
    assert_eq!(crate::testkit::done_reason(&seen.events), "interrupted");

    // The host leaves mid-call: the call fails "host gone" (its default timeout is 120 s).
    let turn = h.prompt(&sid, "use page").await;
    read_until(&mut h, |s| !invokes(s).is_empty()).await;
    h.disconnect("c1").await;
    let seen = read_until(&mut h, done(&turn)).await;
    let r = result_of(&seen.events);
    assert_eq!(r["ok"], false);
    assert!(
        r["output"].as_str().unwrap().starts_with("host gone"),
        "{r}"
    );
    assert!(h.app.host_tools.hosts().of("c1").is_none());
}

#[tokio::test]
async fn sensitive_results_are_redacted_and_images_are_kept_for_tool_content() {
    let (mut h, sid) = harness().await;
    register(&h, vec![tool("page_read", "read")]).unwrap();
    let turn = h.prompt(&sid, "use page").await;
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    h.reply(
        &invokes(&seen)[0].request_id,
        json!({"ok": true, "output": "password hunter2", "meta": {"sensitive": true},
               "content": [{"type": "image", "data": "iVBORw0KGgo=", "mediaType": "image/png"}]}),
    )
    .await;
    let seen = read_until(&mut h, done(&turn)).await;
    let r = result_of(&seen.events);
    assert_eq!(r["output"], "[redacted]");
    assert!(r.get("content").is_none(), "{r}");
    assert_eq!(r["meta"], json!({"sensitive": true}));
    assert!(
        answer_text(&seen.events).contains("hunter2"),
        "the model reads it"
    );
    h.app.flush().await.unwrap();
    let stored: Vec<String> = crate::testkit::read(&h.home, |c| {
        let mut s =
            c.prepare("SELECT payload FROM events WHERE session_id = ?1 AND kind = 'tool.result'")?;
        let rows = s.query_map([&sid], |r| r.get::<_, String>(0))?;
        rows.collect()
    });
    assert!(!stored.iter().any(|p| p.contains("hunter2")));
    let call = r["callId"].as_str().unwrap().to_owned();
    let err = h
        .app
        .turns
        .tool_content(pb::SessionToolContentParams {
            call_id: call,
            session_id: sid.clone(),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::NotFound(_)),
        "sensitive content is not kept"
    );

    let turn = h.prompt(&sid, "use page").await;
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    h.reply(
        &invokes(&seen)[0].request_id,
        json!({"ok": true, "output": "a shot",
               "content": [{"type": "text", "text": "caption"}, {"type": "image", "data": "iVBORw0KGgo=", "mediaType": "image/png"}]}),
    )
    .await;
    let seen = read_until(&mut h, done(&turn)).await;
    let r = result_of(&seen.events);
    let call = r["callId"].as_str().unwrap().to_owned();
    assert_eq!(r["content"][1]["contentRef"], format!("{call}:1"));
    assert!(r["content"][1].get("data").is_none());
    assert!(answer_text(&seen.events)
        .contains("[image image/png, 12 base64 characters, from page_read]"));
    let c = h
        .app
        .turns
        .tool_content(pb::SessionToolContentParams {
            call_id: call.clone(),
            session_id: sid.clone(),
        })
        .await
        .unwrap();
    assert_eq!(c.call_id, call);
    assert_eq!(c.content[0].text.as_deref(), Some("caption"));
    assert_eq!(c.content[1].data.as_deref(), Some("iVBORw0KGgo="));
    assert_eq!(c.content[1].media_type.as_deref(), Some("image/png"));
}

#[tokio::test]
async fn safe_calls_overlap_and_never_calls_run_one_at_a_time() {
    let (mut h, sid) = harness().await;
    let safe = |n: &str| pb::tool_register_params::Tool {
        parallel: "safe".into(),
        ..tool(n, "read")
    };
    register(
        &h,
        vec![
            safe("safe_a"),
            safe("safe_b"),
            tool("never_a", "read"),
            tool("never_b", "read"),
        ],
    )
    .unwrap();
    let turn = h.prompt(&sid, "two safe").await;
    // Both invokes arrive before either is answered.
    let seen = read_until(&mut h, |s| invokes(s).len() == 2).await;
    for r in invokes(&seen) {
        h.reply(&r.request_id, json!({"ok": true, "output": "x"}))
            .await;
    }
    let seen2 = read_until(&mut h, done(&turn)).await;
    assert_eq!(answer_text(&seen2.events), "both safe done");
    let all: Vec<Value> = [seen.events, seen2.events].concat();
    let at = |kind: &str, name: &str| {
        all.iter()
            .position(|e| e["kind"] == kind && e["payload"]["name"] == name)
            .unwrap()
    };
    assert!(
        at("tool.call", "safe_b") < at("tool.result", "safe_a"),
        "overlapped"
    );

    let turn = h.prompt(&sid, "two never").await;
    let seen = read_until(&mut h, |s| invokes(s).len() == 1).await;
    let first = invokes(&seen)[0].clone();
    assert_eq!(params(&first)["name"], "never_a");
    h.reply(&first.request_id, json!({"ok": true, "output": "x"}))
        .await;
    let seen2 = read_until(&mut h, |s| invokes(s).len() == 1).await;
    let second = invokes(&seen2)[0].clone();
    assert_eq!(params(&second)["name"], "never_b");
    h.reply(&second.request_id, json!({"ok": true, "output": "x"}))
        .await;
    let seen3 = read_until(&mut h, done(&turn)).await;
    assert_eq!(answer_text(&seen3.events), "both never done");
    // Event order is emission order: never_a's result came before never_b was called.
    let all: Vec<Value> = [seen.events, seen2.events, seen3.events].concat();
    let at = |kind: &str, name: &str| {
        all.iter()
            .position(|e| e["kind"] == kind && e["payload"]["name"] == name)
            .unwrap()
    };
    assert!(at("tool.result", "never_a") < at("tool.call", "never_b"));
}

#[tokio::test]
async fn deferred_tools_are_offered_once_tool_search_loads_them() {
    let (mut h, sid) = harness().await;
    register(
        &h,
        vec![
            pb::tool_register_params::Tool {
                deferred: true,
                ..tool("zebra_scan", "read")
            },
            tool("page_read", "read"),
        ],
    )
    .unwrap();
    let turn = h.prompt(&sid, "deferred").await;
    let seen = read_until(&mut h, done(&turn)).await;
    let text = answer_text(&seen.events);
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("[tools]")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].contains("tool_search") && lines[0].contains("page_read"));
    assert!(
        !lines[0].contains("zebra_scan"),
        "deferred: not offered before it is loaded"
    );
    assert!(
        lines[1].contains("zebra_scan"),
        "loaded by tool_search: {text}"
    );
    assert_eq!(result_of(&seen.events)["ok"], true);
}

/// Asks `p` through `approval.ask` from `c1`, answers the person's request with `answer`
/// and returns the result.
async fn ask_answered(
    h: &mut Harness,
    p: pb::ApprovalAskParams,
    answer: Value,
) -> pb::ApprovalAskResult {
    let app = h.app.clone();
    let asked =
        tokio::spawn(async move { app.approvals.ask(&Harness::ctx("c1", Some("cli")), p).await });
    let seen = read_until(h, |s| {
        s.requests.iter().any(|r| r.method == "approval.request")
    })
    .await;
    let req = seen
        .requests
        .iter()
        .find(|r| r.method == "approval.request")
        .unwrap()
        .clone();
    h.reply(&req.request_id, answer).await;
    snowpea_testkit::within(crate::testkit::WAIT, "approval.ask", asked)
        .await
        .unwrap()
        .unwrap()
}

/// The capabilities `pageActionAlways`, `tabReadAlways` and `onceOnlyScope` (issue 32 item
/// 8): `always` on a page action only for repl.tabs / repl.clipboard / repl.read /
/// repl.attach; `args.onceOnly` asks every time — no stored rule answers it (this failed
/// before: a site rule allowed it) — returns the picked scope and stores nothing.
#[tokio::test]
async fn page_action_scopes_and_once_only_asks() {
    let (mut h, sid) = harness().await;
    h.app.sessions.set_mode(&sid, "accept").await.unwrap();
    let ask = |tool: &str, args: Value| pb::ApprovalAskParams {
        session_id: sid.clone(),
        tool: tool.into(),
        permission: "send".into(),
        reason: "Do it".into(),
        args: Some(snowpea_proto::wkt::to_struct(&args)),
        site: Some("https://shop.example".into()),
        ..Default::default()
    };
    let always = json!({"decision": "allow", "scope": "always"});
    for (tool, kept) in [
        ("repl.click", "once"),
        ("repl.tabs", "always"),
        ("repl.clipboard", "always"),
        ("repl.read", "always"),
        ("repl.attach", "always"),
    ] {
        let r = ask_answered(&mut h, ask(tool, json!({})), always.clone()).await;
        assert_eq!(
            (r.decision.as_str(), r.scope.as_str()),
            ("allow", kept),
            "{tool}"
        );
    }
    // A site rule for repl.fill on the origin…
    let r = ask_answered(
        &mut h,
        ask("repl.fill", json!({})),
        json!({"decision": "allow", "scope": "site"}),
    )
    .await;
    assert_eq!(r.scope, "site");
    let ctx = Harness::ctx("c1", Some("cli"));
    let stored = |h: &Harness| {
        let app = h.app.clone();
        let ctx = ctx.clone();
        async move {
            app.allowlist
                .list(&ctx, pb::PermissionAllowlistListParams::default())
                .await
                .unwrap()
                .patterns
                .len()
        }
    };
    let before = stored(&h).await;
    // …does not answer a onceOnly ask: a person is asked, the picked scope comes back, and
    // nothing more is stored.
    let r = ask_answered(
        &mut h,
        ask("repl.fill", json!({"onceOnly": true})),
        json!({"decision": "allow", "scope": "session"}),
    )
    .await;
    assert_eq!(
        (r.decision.as_str(), r.scope.as_str(), r.by.as_str()),
        ("allow", "session", "user")
    );
    assert_eq!(stored(&h).await, before);
}

#[tokio::test]
async fn approval_ask_site_rules_and_the_local_dev_server_rule() {
    let (mut h, sid) = harness().await;
    let ask = |tool: &str, args: Value, site: Option<&str>| pb::ApprovalAskParams {
        session_id: sid.clone(),
        tool: tool.into(),
        permission: "send".into(),
        reason: "Do it".into(),
        args: Some(snowpea_proto::wkt::to_struct(&args)),
        site: site.map(str::to_owned),
        ..Default::default()
    };
    let ctx = Harness::ctx("c1", Some("cli"));
    h.app.sessions.set_mode(&sid, "accept").await.unwrap();
    // accept-mode matrix asks for `send`; a "site" answer is stored for the tool + origin.
    let app = h.app.clone();
    let (c1, a1) = (
        ctx.clone(),
        ask(
            "repl.click",
            json!({"url": "https://shop.example/cart"}),
            None,
        ),
    );
    let first = tokio::spawn(async move { app.approvals.ask(&c1, a1).await });
    let seen = read_until(&mut h, |s| {
        s.requests.iter().any(|r| r.method == "approval.request")
    })
    .await;
    let req = seen
        .requests
        .iter()
        .find(|r| r.method == "approval.request")
        .unwrap()
        .clone();
    let p = params(&req);
    assert_eq!(p["site"], "https://shop.example");
    assert_eq!(p["scopeHint"], "site");
    assert_eq!(p["note"], "Do it");
    assert_eq!(p["args"]["site"], "https://shop.example");
    h.reply(
        &req.request_id,
        json!({"decision": "allow", "scope": "site"}),
    )
    .await;
    let r = first.await.unwrap().unwrap();
    assert_eq!(
        (r.decision.as_str(), r.scope.as_str(), r.by.as_str()),
        ("allow", "site", "user")
    );
    // The same tool on the same origin is allowed by the rule; another origin is asked.
    let r = h
        .app
        .approvals
        .ask(
            &ctx,
            ask("repl.click", json!({}), Some("https://shop.example")),
        )
        .await
        .unwrap();
    assert_eq!((r.decision.as_str(), r.by.as_str()), ("allow", "allowlist"));
    let listed = h
        .app
        .allowlist
        .list(&ctx, pb::PermissionAllowlistListParams::default())
        .await
        .unwrap()
        .patterns;
    assert!(listed
        .iter()
        .any(|e| e.origin.as_deref() == Some("https://shop.example")
            && e.tool.as_deref() == Some("repl.click")));
    // Payment: never allowlisted, kept to once.
    let app = h.app.clone();
    let (c2, mut a2) = (
        ctx.clone(),
        ask("repl.click", json!({}), Some("https://shop.example")),
    );
    a2.risk = Some("payment".into());
    let pay = tokio::spawn(async move { app.approvals.ask(&c2, a2).await });
    let seen = read_until(&mut h, |s| {
        s.requests.iter().any(|r| r.method == "approval.request")
    })
    .await;
    let req = seen
        .requests
        .iter()
        .find(|r| r.method == "approval.request")
        .unwrap()
        .clone();
    h.reply(
        &req.request_id,
        json!({"decision": "allow", "scope": "always"}),
    )
    .await;
    let r = pay.await.unwrap().unwrap();
    assert_eq!((r.decision.as_str(), r.scope.as_str()), ("allow", "once"));

    // localDevServer: scopeHint project; a project answer stores a rule only such asks match.
    let dev = json!({"reasonCode": "localDevServer", "url": "http://localhost:5173/app", "project": "web"});
    let app = h.app.clone();
    let (c3, a3) = (ctx.clone(), ask("repl.navigate", dev.clone(), None));
    let nav = tokio::spawn(async move { app.approvals.ask(&c3, a3).await });
    let seen = read_until(&mut h, |s| {
        s.requests.iter().any(|r| r.method == "approval.request")
    })
    .await;
    let req = seen
        .requests
        .iter()
        .find(|r| r.method == "approval.request")
        .unwrap()
        .clone();
    assert_eq!(params(&req)["scopeHint"], "project");
    h.reply(
        &req.request_id,
        json!({"decision": "allow", "scope": "project"}),
    )
    .await;
    let r = nav.await.unwrap().unwrap();
    assert_eq!(r.scope, "project");
    let project = std::fs::read_to_string(h.workdir.join(".snowpea/settings.json")).unwrap();
    let project: Value = serde_json::from_str(&project).unwrap();
    let rule = &project["allowlist"][0];
    assert_eq!(rule["reasonCode"], "localDevServer");
    assert_eq!(rule["origin"], "http://localhost:5173");
    let r = h
        .app
        .approvals
        .ask(&ctx, ask("repl.navigate", dev, None))
        .await
        .unwrap();
    assert_eq!(r.by, "allowlist");
    // A plain navigation to that origin does not match the dev-server rule: it is asked.
    let app = h.app.clone();
    let (c4, a4) = (
        ctx.clone(),
        ask(
            "repl.navigate",
            json!({"url": "http://localhost:5173/"}),
            None,
        ),
    );
    let plain = tokio::spawn(async move { app.approvals.ask(&c4, a4).await });
    let seen = read_until(&mut h, |s| {
        s.requests.iter().any(|r| r.method == "approval.request")
    })
    .await;
    let req = seen
        .requests
        .iter()
        .find(|r| r.method == "approval.request")
        .unwrap()
        .clone();
    h.reply(&req.request_id, json!({"decision": "deny"})).await;
    assert_eq!(plain.await.unwrap().unwrap().decision, "deny");

    // Bad input names the field; plan mode denies `send` without asking.
    let mut bad = ask("repl.click", json!({}), None);
    bad.permission = "root".into();
    assert_eq!(
        field_of(h.app.approvals.ask(&ctx, bad).await.unwrap_err()),
        "params.permission"
    );
    h.app.sessions.set_mode(&sid, "plan").await.unwrap();
    let r = h
        .app
        .approvals
        .ask(&ctx, ask("repl.type", json!({}), None))
        .await
        .unwrap();
    assert_eq!((r.decision.as_str(), r.by.as_str()), ("deny", "mode"));
    // Someone else's connection may not ask for the session.
    h.connect("c9", Some("other")).await;
    let err = h
        .app
        .approvals
        .ask(
            &Harness::ctx("c9", Some("other")),
            ask("repl.type", json!({}), None),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unauthorized(_)));
}

#[tokio::test]
async fn a_session_waits_for_its_host_then_runs_without_it() {
    let (h, _) = harness().await;
    let created = h
        .app
        .sessions
        .create(
            &Harness::ctx("c1", Some("cli")),
            pb::SessionCreateParams {
                workdir: h.workdir.to_string_lossy().into_owned(),
                host_tools_from: Some("ghost".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let session = h.app.sessions.get(&created.session_id).unwrap();
    let token = tokio_util::sync::CancellationToken::new();
    // No wait set (a chat session): the note at once.
    let note = h
        .app
        .host_tools
        .wait_for_host(&session, &token)
        .await
        .unwrap();
    assert!(
        note.contains("ghost") && note.contains("not available"),
        "{note}"
    );
    // A scheduled run's wait ends when the host connects and registers.
    h.app
        .host_tools
        .set_host_wait(&session.id, Duration::from_secs(600));
    let waiting = {
        let (hosts, session, token) = (h.app.host_tools.clone(), session.clone(), token.clone());
        tokio::spawn(async move { hosts.wait_for_host(&session, &token).await })
    };
    h.connect("c7", Some("ghost")).await;
    h.app
        .host_tools
        .register(
            &Harness::ctx("c7", Some("ghost")),
            pb::ToolRegisterParams {
                tools: vec![tool("page_read", "read")],
            },
        )
        .unwrap();
    let got = snowpea_testkit::within(crate::testkit::WAIT, "the host wait", waiting)
        .await
        .unwrap();
    assert_eq!(got, None);
    let listed: Vec<String> = h
        .app
        .host_tools
        .turn_tools(&session)
        .iter()
        .map(|t| t.def.name.clone())
        .collect();
    assert_eq!(listed, ["page_read"]);
    // session.attach reports the host tools the session now sees.
    let attached = h
        .app
        .sessions
        .attach(
            &Harness::ctx("c1", Some("cli")),
            pb::SessionAttachParams {
                session_id: session.id.clone(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(attached.host_tools, ["page_read"]);
    // The host leaves; a short wait runs out and the turn goes on without its tools.
    h.disconnect("c7").await;
    h.app
        .host_tools
        .set_host_wait(&session.id, Duration::from_millis(200));
    let note = snowpea_testkit::within(
        crate::testkit::WAIT,
        "the host wait",
        h.app.host_tools.wait_for_host(&session, &token),
    )
    .await;
    assert!(note.is_some());
}

#[tokio::test]
async fn a_scheduled_run_hands_its_host_the_job() {
    let (mut h, _) = harness().await;
    register(&h, vec![tool("page_read", "read")]).unwrap();
    let rpc = crate::rpc::internal::InternalRpc::new(h.app.clone());
    use snowpea_proto::session::v1::session_internal_service_server::SessionInternalService;
    let req = pb::RunUnattendedRequest {
        workdir: h.workdir.to_string_lossy().into_owned(),
        mode: "auto".into(),
        task: "use page".into(),
        kind: "scheduled".into(),
        job_id: "job_1".into(),
        host_tools_from: Some("cli".into()),
        host_wait_sec: 30,
        job: Some(pb::ScheduledJobInfo {
            job_id: "job_1".into(),
            run_id: "run_1".into(),
            scheduled_at: "2026-12-02T08:00:00Z".into(),
            trigger: "schedule".into(),
            created_via: "rpc".into(),
            fingerprint: Some("fp1".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let _stream = rpc.run_unattended(tonic::Request::new(req)).await.unwrap();
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let p = params(invokes(&seen)[0]);
    assert_eq!(p["origin"], "schedule");
    assert_eq!(p["job"]["id"], "job_1");
    assert_eq!(p["job"]["runId"], "run_1");
    assert_eq!(p["job"]["fingerprint"], "fp1");
    assert_eq!(p["job"]["trigger"], "schedule");
    assert!(
        p.get("userTurn").is_none_or(Value::is_null),
        "a schedule's turn has no user turn"
    );
}

#[test]
fn content_keeps_the_newest_results_per_session() {
    let tmp = tempfile::tempdir().unwrap();
    let store = super::content::ContentStore::new(tmp.path());
    let block = |i: usize| pb::ContentBlock {
        r#type: "image".into(),
        data: Some(format!("d{i}")),
        media_type: Some("image/png".into()),
        ..Default::default()
    };
    let n = super::content::KEPT_RESULTS + 3;
    for i in 0..n {
        store.put("s1", &format!("call/{i}"), &[block(i)]).unwrap();
    }
    assert!(store.get("s1", "call/0").is_none(), "pushed out");
    assert!(store.get("s1", "call/2").is_none());
    assert_eq!(
        store.get("s1", "call/3").unwrap()[0].data.as_deref(),
        Some("d3")
    );
    let last = format!("call/{}", n - 1);
    assert_eq!(
        store.get("s1", &last).unwrap()[0].data.as_deref(),
        Some(format!("d{}", n - 1).as_str())
    );
    assert!(store.get("s2", &last).is_none(), "per session");
    use std::os::unix::fs::PermissionsExt;
    let dir = std::fs::read_dir(tmp.path().join("tool-content"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    store.remove_session("s1");
    assert!(store.get("s1", &last).is_none());
}

/// `approval.ask` while `session.setAgent{guardTurn}` guards the session: asked of a person
/// whatever the mode says, `guard: "agent-switch"`, and the answer comes back `once`,
/// never stored.
#[tokio::test]
async fn a_guarded_session_asks_with_the_guard_and_keeps_the_answer_once() {
    let (mut h, sid) = harness().await;
    register(&h, vec![tool("page_read", "read")]).unwrap();
    let ctx = Harness::ctx("c1", Some("cli"));
    let turn = h.prompt(&sid, "use page").await;
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let inv = invokes(&seen)[0].clone();
    let set = h
        .app
        .agents
        .set_agent(
            &ctx,
            pb::SessionSetAgentParams {
                session_id: sid.clone(),
                agent: None,
                guard_turn: true,
            },
        )
        .await
        .unwrap();
    assert!(set.guarded);
    let app = h.app.clone();
    let p = pb::ApprovalAskParams {
        session_id: sid.clone(),
        tool: "repl.click".into(),
        permission: "send".into(),
        reason: "Click Buy".into(),
        site: Some("https://shop.example".into()),
        ..Default::default()
    };
    let c = ctx.clone();
    // `auto` mode would allow a `send` at once; the guard makes it ask.
    let ask = tokio::spawn(async move { app.approvals.ask(&c, p).await });
    let seen = read_until(&mut h, |s| {
        s.requests.iter().any(|r| r.method == "approval.request")
    })
    .await;
    let req = seen
        .requests
        .iter()
        .find(|r| r.method == "approval.request")
        .unwrap()
        .clone();
    assert_eq!(params(&req)["guard"], "agent-switch");
    assert_eq!(params(&req)["scopeHint"], "once");
    h.reply(
        &req.request_id,
        json!({"decision": "allow", "scope": "site"}),
    )
    .await;
    let r = snowpea_testkit::within(crate::testkit::WAIT, "approval.ask", ask)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (r.decision.as_str(), r.scope.as_str(), r.by.as_str()),
        ("allow", "once", "user")
    );
    let listed = h
        .app
        .allowlist
        .list(&ctx, pb::PermissionAllowlistListParams::default())
        .await
        .unwrap()
        .patterns;
    assert!(
        !listed
            .iter()
            .any(|e| e.origin.as_deref() == Some("https://shop.example")),
        "a guarded answer is never stored: {listed:?}"
    );
    h.reply(&inv.request_id, json!({"ok": true, "output": "x"}))
        .await;
    read_until(&mut h, done(&turn)).await;
}

/// A subagent runs its parent's host tools (`HostTools::host_session`): `tool.invoke` goes
/// to the parent's host with the child's `sessionId` and `parentSessionId`; when the
/// parent's origin moves to another connection, the child's tools follow it.
#[tokio::test]
async fn a_subagent_uses_its_parents_host_and_says_parent_session_id() {
    let (mut h, parent) = harness().await;
    register(&h, vec![tool("page_read", "read")]).unwrap();
    let mut child = h
        .app
        .agents
        .spawn_child(crate::agents::ChildSpec {
            parent_session_id: parent.clone(),
            task: "use page".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let inv = invokes(&seen)[0].clone();
    assert_eq!(inv.connection_id, "c1", "the parent's host");
    let p = params(&inv);
    let child_sid = p["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(child_sid, parent);
    assert_eq!(p["parentSessionId"], parent.as_str());

    // The parent is re-hosted by another client (what `session.attach{hostToolsFrom}`
    // does): the child's host moves with it.
    let child_session = h.app.sessions.get(&child_sid).unwrap();
    let parent_session = h.app.sessions.get(&parent).unwrap();
    assert_eq!(
        h.app.host_tools.host_session(&child_session).id,
        parent,
        "the child's host is its parent's"
    );
    h.connect("c2", Some("web")).await;
    h.app
        .host_tools
        .register(
            &Harness::ctx("c2", Some("web")),
            pb::ToolRegisterParams {
                tools: vec![tool("page_read", "read"), tool("page_type", "send")],
            },
        )
        .unwrap();
    parent_session.update(|r| r.host_tools_from = Some("web".into()));
    let tools = h.app.host_tools.turn_tools(&child_session);
    assert_eq!(tools.len(), 2, "the new host's tools: {tools:?}");
    assert!(tools.iter().all(|t| t.connection_id == "c2"));

    h.reply(
        &inv.request_id,
        json!({"ok": true, "output": "the page says hi"}),
    )
    .await;
    let r = child
        .wait(std::time::Duration::from_secs(20))
        .await
        .unwrap();
    assert!(r.ok, "{r:?}");
    assert!(r.result.contains("the page says hi"), "{r:?}");
}

/// A host answering `tool.invoke` with a wrong-typed result (QA): the call is a tool error
/// naming the field (`result.content[0].text: expected a string, got number`), which the
/// model reads.
#[tokio::test]
async fn a_wrong_typed_host_result_names_the_field() {
    let (mut h, sid) = harness().await;
    register(&h, vec![tool("page_read", "read")]).unwrap();
    let turn = h.prompt(&sid, "use page").await;
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let inv = invokes(&seen)[0].clone();
    h.reply(
        &inv.request_id,
        json!({"ok": true, "output": "x", "content": [{"type": "text", "text": 5}]}),
    )
    .await;
    let seen = read_until(&mut h, done(&turn)).await;
    let r = result_of(&seen.events);
    assert_eq!(r["ok"], false, "{r}");
    let text = r.to_string();
    assert!(
        text.contains("result.content[0].text: expected a string, got number"),
        "{r}"
    );
    assert!(answer_text(&seen.events).contains("result.content[0].text"));
}

#[tokio::test]
async fn user_turn_lists_the_prompts_steered_into_the_running_turn() {
    let (mut h, sid) = harness().await;
    register(&h, vec![tool("page_read", "read")]).unwrap();
    let turn = h.prompt(&sid, "use page one").await;
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let first = invokes(&seen)[0].clone();
    let p = params(&first);
    assert_eq!(p["userTurn"]["steers"], json!([]), "nothing steered yet");
    // The person types twice while the host holds the call: both fold into this turn.
    for text in ["use page two as well", "and use page three"] {
        h.app
            .turns
            .steer(
                &Harness::ctx("c1", Some("cli")),
                pb::SessionSteerParams {
                    session_id: sid.clone(),
                    text: text.into(),
                },
            )
            .await
            .unwrap();
    }
    h.reply(&first.request_id, json!({"ok": true, "output": "page one"}))
        .await;
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let second = invokes(&seen)[0].clone();
    let p = params(&second);
    assert_eq!(p["turnId"], turn.as_str());
    assert_eq!(p["userTurn"]["text"], "use page one");
    assert_eq!(p["userTurn"]["current"], true);
    assert_eq!(
        p["userTurn"]["steers"],
        json!(["use page two as well", "and use page three"])
    );
    h.reply(&second.request_id, json!({"ok": true, "output": "pages"}))
        .await;
    read_until(&mut h, done(&turn)).await;
    // The person's next prompt starts afresh.
    let next = h.prompt(&sid, "use page four").await;
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let third = invokes(&seen)[0].clone();
    let p = params(&third);
    assert_eq!(p["turnId"], next.as_str());
    assert_eq!(p["userTurn"]["text"], "use page four");
    assert_eq!(p["userTurn"]["steers"], json!([]));
    h.reply(&third.request_id, json!({"ok": true, "output": "four"}))
        .await;
    read_until(&mut h, done(&next)).await;
}

#[tokio::test]
async fn progress_arriving_after_the_answer_reaches_the_turn_until_its_result_is_out() {
    let (mut h, sid) = harness().await;
    register(&h, vec![tool("page_read", "read")]).unwrap();
    let def = h.app.host_tools.hosts().of("c1").unwrap().tools["page_read"].clone();
    let (sink, mut chunks) = tokio::sync::mpsc::unbounded_channel();
    let ctx = crate::tools::ToolContext {
        workdir: h.workdir.clone(),
        progress: sink,
        cancel: Default::default(),
        output_cap: 64 * 1024,
        session_id: sid.clone(),
        mode: "auto".into(),
        turn_id: "t-late".into(),
        call_id: "call-late".into(),
        named_agent: None,
        turn: None,
        backend: crate::backend::local(),
    };
    let owner = h.app.host_tools.clone();
    let call = tokio::spawn(async move { owner.invoke(&def, "c1", json!({}), ctx).await });
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let inv = invokes(&seen)[0].clone();
    h.reply(&inv.request_id, json!({"ok": true, "output": "done"}))
        .await;
    let out = tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("the call ends")
        .unwrap();
    assert!(out.ok, "{}", out.content);
    let progress = |conn: &str, message: &str| {
        h.app.host_tools.progress(
            &Harness::ctx(conn, Some("cli")),
            pb::ToolProgressParams {
                call_id: "call-late".into(),
                message: message.into(),
            },
        )
    };
    // The host's last progress, overtaken by its answer, still reaches the turn (which
    // reports it before the result); another connection's is ignored.
    progress("c1", "almost there");
    progress("c2", "spoofed");
    assert_eq!(chunks.try_recv().ok().as_deref(), Some("almost there"));
    assert!(chunks.try_recv().is_err());
    // Once the turn has reported the result (its sink closed), later progress is accepted
    // and dropped, and the call is forgotten.
    drop(chunks);
    progress("c1", "too late");
    let answered = h.app.host_tools.answered.lock().unwrap();
    assert!(!answered.calls.iter().any(|(c, _, _)| c == "call-late"));
}

#[tokio::test]
async fn a_delegated_childs_user_turn_is_its_roots_never_the_task() {
    let (mut h, root) = harness().await;
    register(&h, vec![tool("page_read", "read")]).unwrap();
    // No person has typed in the root yet: the child's calls carry no userTurn (the
    // delegating agent's task is not the person's words).
    let mut child = h
        .app
        .agents
        .spawn_child(crate::agents::ChildSpec {
            parent_session_id: root.clone(),
            task: "use page for the agent".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let inv = invokes(&seen)[0].clone();
    let p = params(&inv);
    assert_ne!(p["sessionId"], root.as_str());
    assert!(
        p.get("userTurn").is_none_or(Value::is_null),
        "the task is not a user turn: {p}"
    );
    h.reply(&inv.request_id, json!({"ok": true, "output": "x"}))
        .await;
    assert!(child.wait(Duration::from_secs(20)).await.unwrap().ok);

    // The person prompts the root; while its call is held, a child it delegates reports
    // the root's userTurn, current (the root's running turn is the person's).
    let turn = h.prompt(&root, "use page one").await;
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let root_call = invokes(&seen)[0].clone();
    let mut child = h
        .app
        .agents
        .spawn_child(crate::agents::ChildSpec {
            parent_session_id: root.clone(),
            task: "use page two for the lead".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let seen = read_until(&mut h, |s| !invokes(s).is_empty()).await;
    let inv = invokes(&seen)[0].clone();
    let p = params(&inv);
    assert_eq!(p["parentSessionId"], root.as_str());
    assert_eq!(p["userTurn"]["text"], "use page one");
    assert_eq!(p["userTurn"]["messageId"], turn.as_str());
    assert_eq!(p["userTurn"]["current"], true);
    h.reply(&inv.request_id, json!({"ok": true, "output": "two"}))
        .await;
    assert!(child.wait(Duration::from_secs(20)).await.unwrap().ok);
    h.reply(&root_call.request_id, json!({"ok": true, "output": "one"}))
        .await;
    read_until(&mut h, done(&turn)).await;
}

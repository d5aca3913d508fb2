use std::time::{Duration, Instant};

use serde_json::{json, Value};
use snowpea_proto::session::v1 as pb;
use snowpea_proto::session::v1::tool_service_server::ToolService;

use crate::clients::mcp::fake::{self, FakeMcp, Script};

use crate::testkit::{done_reason, kinds, of_kind, Harness, Item};

#[tokio::test]
async fn a_turn_streams_deltas_calls_tools_and_ends_complete() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "make a file", "text": "Writing it.", "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi\n"}}]},
            {"after_tool": "write_file", "text": "Done, the file exists."}
        ]
    }))
    .await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "please make a file").await;
    let ev = h.until_done(&tid, |_| None).await;
    let k = kinds(&ev);
    assert_eq!(&k[..2], ["turn.started", "message.user"]);
    assert_eq!(
        ev[0]["payload"],
        json!({"turnId": tid, "prompt": "please make a file", "queued": false, "initiator": "user"})
    );
    assert_eq!(ev[1]["payload"]["text"], "please make a file");
    assert_eq!(ev[1]["payload"]["steered"], false);
    assert!(k.iter().filter(|k| *k == "message.delta").count() >= 2);
    assert_eq!(of_kind(&ev, "usage").len(), 2, "one usage per model call");
    let call = of_kind(&ev, "tool.call")[0];
    assert_eq!(call["payload"]["name"], "write_file");
    assert_eq!(call["payload"]["args"]["path"], "a.txt");
    let result = of_kind(&ev, "tool.result")[0];
    assert_eq!(result["payload"]["ok"], true);
    assert_eq!(result["payload"]["callId"], call["payload"]["callId"]);
    let diff = of_kind(&ev, "diff")[0];
    assert_eq!(diff["payload"]["path"], "a.txt");
    assert!(diff["payload"]["patch"].as_str().unwrap().contains("+hi"));
    assert_eq!(
        std::fs::read_to_string(h.workdir.join("a.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(&k[k.len() - 3..], ["message.done", "context", "turn.done"]);
    let done_text = of_kind(&ev, "message.done")[0]["payload"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(done_text, "Writing it.Done, the file exists.");
    let ctx = of_kind(&ev, "context")[0];
    assert_eq!(ctx["payload"]["estimated"], false);
    assert!(ctx["payload"]["used"].as_u64().unwrap() > 0);
    assert_eq!(done_reason(&ev), "complete");
}

#[tokio::test]
async fn history_is_rebuilt_from_stored_events_for_the_next_turn() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "list", "tool_calls": [{"name": "list_dir", "arguments": {}}]},
            {"after_tool": "list_dir", "text": "Listed."},
            {"match": "first", "text": "one"},
        ],
        "default": {"text": "fallback"}
    }))
    .await;
    let sid = h.create("accept").await;
    let t1 = h.prompt(&sid, "list things").await;
    h.until_done(&t1, |_| None).await;
    let session = h.app.sessions.get(&sid).unwrap();
    let t2 = h.prompt(&sid, "first").await;
    h.until_done(&t2, |_| None).await;
    h.app.flush().await.unwrap();
    let rows = crate::testkit::read(&h.home, |c| {
        crate::store::events::of_kinds(c, &session.id, super::history::KINDS)
    });
    let msgs = super::history::rebuild(
        rows.into_iter()
            .map(|(k, p, _)| (k, serde_json::from_str(&p).unwrap())),
    );
    let roles: Vec<_> = msgs.iter().map(|m| m.role).collect();
    use snowpea_session_llm::provider::Role::*;
    assert_eq!(roles, [User, Assistant, Tool, Assistant, User, Assistant]);
    assert_eq!(msgs[3].content, "Listed.");
    assert_eq!(msgs[5].content, "one");
}

#[tokio::test]
async fn prompts_while_a_turn_runs_are_queued_and_run_in_order() {
    let mut h = Harness::new(json!({
        "steps": [{"match": "slow", "delaySec": 0.5, "text": "slow done"}],
        "default": {"text": "quick"}
    }))
    .await;
    let sid = h.create("accept").await;
    let t1 = h.prompt(&sid, "slow one").await;
    let t2 = h.prompt_with(&sid, "second", "queue").await;
    let t3 = h.prompt_with(&sid, "third", "queue").await;
    let ev = h.until_done(&t3, |_| None).await;
    let seq_of = |kind: &str, tid: &str| {
        ev.iter()
            .find(|e| e["kind"] == kind && e["payload"]["turnId"] == tid)
            .unwrap_or_else(|| panic!("{kind} of {tid}"))["seq"]
            .as_i64()
            .unwrap()
    };
    let q2 = of_kind(&ev, "turn.queued")
        .into_iter()
        .find(|e| e["payload"]["turnId"] == t2.as_str())
        .unwrap();
    assert_eq!(q2["payload"]["position"], 1);
    let q3 = of_kind(&ev, "turn.queued")
        .into_iter()
        .find(|e| e["payload"]["turnId"] == t3.as_str())
        .unwrap();
    assert_eq!(q3["payload"]["position"], 2);
    assert!(seq_of("turn.done", &t1) < seq_of("turn.dequeued", &t2));
    assert!(seq_of("turn.dequeued", &t2) < seq_of("turn.started", &t2));
    assert!(seq_of("turn.done", &t2) < seq_of("turn.dequeued", &t3));
    let started2 = ev
        .iter()
        .find(|e| e["kind"] == "turn.started" && e["payload"]["turnId"] == t2.as_str())
        .unwrap();
    assert_eq!(started2["payload"]["queued"], true);
    let dq2 = ev
        .iter()
        .find(|e| e["kind"] == "turn.dequeued" && e["payload"]["turnId"] == t2.as_str())
        .unwrap();
    assert_eq!(dq2["payload"]["reason"], "started");
    assert_eq!(dq2["payload"]["queued"], 1);
    for t in [&t1, &t2, &t3] {
        let d = ev
            .iter()
            .find(|e| e["kind"] == "turn.done" && e["payload"]["turnId"] == t.as_str())
            .unwrap();
        assert_eq!(d["payload"]["reason"], "complete");
    }
}

#[tokio::test]
async fn interrupt_kills_a_long_shell_promptly() {
    let mut h = Harness::new(json!({
        "steps": [{"match": "sleep", "tool_calls": [{"name": "shell", "arguments": {"command": "echo started; sleep 30"}}]}]
    }))
    .await;
    let sid = h.create("auto").await;
    let tid = h.prompt(&sid, "sleep please").await;
    // Wait until the shell is running (its first output arrived).
    loop {
        if let Item::Note(m, p) = h.next().await {
            if m == "session.event" && p["kind"] == "tool.progress" {
                assert!(p["payload"]["chunk"].as_str().unwrap().contains("started"));
                break;
            }
        }
    }
    let t0 = Instant::now();
    h.app.turns.interrupt(&sid).unwrap();
    let ev = h.until_done(&tid, |_| None).await;
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "ended in {:?}",
        t0.elapsed()
    );
    assert_eq!(done_reason(&ev), "interrupted");
    let result = of_kind(&ev, "tool.result")[0];
    assert_eq!(result["payload"]["ok"], false);
    // The session takes prompts again.
    let t2 = h.prompt(&sid, "anything").await;
    let ev2 = h.until_done(&t2, |_| None).await;
    assert_eq!(done_reason(&ev2), "complete");
}

#[tokio::test]
async fn a_provider_error_ends_the_turn_with_error() {
    let mut h = Harness::new(
        json!({"steps": [{"match": "fail", "error": {"status": 500, "message": "boom"}}]}),
    )
    .await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "fail now").await;
    let ev = h.until_done(&tid, |_| None).await;
    let err = of_kind(&ev, "error")[0];
    assert!(err["payload"]["message"].as_str().unwrap().contains("boom"));
    assert_eq!(err["payload"]["code"], "unavailable");
    assert_eq!(done_reason(&ev), "error");
}

#[tokio::test]
async fn an_unconfigured_provider_still_returns_a_turn_that_ends_with_error() {
    let mut h = Harness::new(json!({})).await;
    // No SNOWPEA_PROVIDER, no keys: selection fails.
    let mut cfg = crate::testkit::config(&h.home, &h.script);
    cfg.env = std::sync::Arc::new(|_| None);
    let app = crate::App::open(cfg, h.hub.clone()).await.unwrap();
    let p = pb::SessionCreateParams {
        workdir: h.workdir.to_string_lossy().into(),
        ..Default::default()
    };
    let sid = app
        .sessions
        .create(&Harness::ctx("c1", None), p)
        .await
        .unwrap()
        .session_id;
    let tid = app
        .turns
        .prompt(
            &Harness::ctx("c1", None),
            pb::SessionPromptParams {
                session_id: sid,
                text: "hi".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let ev = h.until_done(&tid, |_| None).await;
    let err = of_kind(&ev, "error")[0];
    assert!(
        err["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("ANTHROPIC_API_KEY"),
        "{err}"
    );
    assert_eq!(done_reason(&ev), "error");
}

#[tokio::test]
async fn close_ends_the_running_turn_and_drops_the_queue() {
    let mut h = Harness::new(json!({"steps": [{"match": "slow", "delaySec": 30, "text": "never"}], "default": {"text": "x"}})).await;
    let sid = h.create("accept").await;
    let t1 = h.prompt(&sid, "slow").await;
    let t2 = h.prompt_with(&sid, "queued", "queue").await;
    tokio::time::timeout(Duration::from_secs(15), h.app.sessions.close(&sid))
        .await
        .unwrap()
        .unwrap();
    let ev = h.until_done(&t1, |_| None).await;
    assert_eq!(done_reason(&ev), "interrupted");
    let dropped = ev
        .iter()
        .find(|e| e["kind"] == "turn.dequeued" && e["payload"]["turnId"] == t2.as_str())
        .unwrap();
    assert_eq!(dropped["payload"]["reason"], "dropped");
    assert!(ev
        .iter()
        .any(|e| e["kind"] == "turn.done" && e["payload"]["turnId"] == t2.as_str()));
    assert!(h.app.sessions.get(&sid).is_err(), "no longer live");
    let listed = h
        .app
        .sessions
        .list(pb::SessionListParams {
            include_closed: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(listed.sessions.iter().any(|s| s.session_id == sid));
    let live = h
        .app
        .sessions
        .list(pb::SessionListParams::default())
        .await
        .unwrap();
    assert!(!live.sessions.iter().any(|s| s.session_id == sid));
    let p = pb::SessionPromptParams {
        session_id: sid.clone(),
        text: "hi".into(),
        ..Default::default()
    };
    assert!(matches!(
        h.app.turns.prompt(&Harness::ctx("c1", None), p).await,
        Err(snowpea_session_error::Error::NotFound(_))
    ));
}

#[tokio::test]
async fn an_mcp_tool_call_while_svc_mcp_is_down_fails_unavailable_and_the_turn_goes_on() {
    // No svc-mcp socket in the harness home: the turn lists no MCP tools, and a call of one
    // is answered as `unavailable` (not `unknown tool`).
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "use mcp", "tool_calls": [{"name": "mcp__x__y", "arguments": {}}]},
            {"after_tool": "mcp__x__y", "text": "MCP is down."}
        ]
    }))
    .await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "please use mcp").await;
    let ev = h.until_done(&tid, |_| None).await;
    let result = of_kind(&ev, "tool.result")[0];
    assert_eq!(result["payload"]["ok"], false);
    let text = result["payload"].to_string();
    assert!(
        text.contains(
            "unavailable: svc-mcp is not running; MCP tool `mcp__x__y` cannot be called right now"
        ),
        "{text}"
    );
    assert!(!text.contains("unknown tool"), "{text}");
    assert_eq!(done_reason(&ev), "complete");
}

/// The approval requests a turn asks, answering each with `decision`.
async fn run_answering(h: &mut Harness, tid: &str, decision: &str) -> (Vec<Value>, Vec<Value>) {
    let mut asked = Vec::new();
    let ev = h
        .until_done(tid, |item| match item {
            Item::Request(r) if r.method == "approval.request" => {
                asked.push(serde_json::from_str(&r.params_json).unwrap());
                Some((
                    r.request_id.clone(),
                    json!({"decision": decision, "scope": "once"}),
                ))
            }
            _ => None,
        })
        .await;
    (ev, asked)
}

#[tokio::test]
async fn a_project_cannot_lower_the_permission_of_a_global_mcp_server() {
    // The project's settings say `read` (no approval in accept mode) and svc-mcp reports the
    // merged tag `read`; the session still asks, because only the global settings count.
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "use mcp", "tool_calls": [{"name": "mcp__f__echo", "arguments": {"x": 1}}]},
            {"after_tool": "mcp__f__echo", "text": "Echoed."}
        ]
    }))
    .await;
    std::fs::create_dir_all(h.workdir.join(".snowpea")).unwrap();
    std::fs::write(
        h.workdir.join(".snowpea/settings.json"),
        json!({"mcp": {"permissions": {"f": "read"}}}).to_string(),
    )
    .unwrap();
    let mcp = FakeMcp::serve(
        &h.home.socket("mcp"),
        Script {
            tools: vec![fake::tool("f", "echo", "read")],
            servers: vec![fake::server("f", "ready")],
            ..Default::default()
        },
    );
    h.connect("c1", Some("cli")).await;
    let sid = h.create("accept").await;
    let tid = h.prompt(&sid, "please use mcp").await;
    let (ev, asked) = run_answering(&mut h, &tid, "deny").await;
    assert_eq!(asked.len(), 1, "the call needs approval: {asked:?}");
    assert_eq!(asked[0]["tool"], "mcp__f__echo");
    assert!(
        mcp.calls().is_empty(),
        "a denied call never reaches svc-mcp"
    );
    let result = of_kind(&ev, "tool.result")[0];
    assert_eq!(result["payload"]["ok"], false);
    assert_eq!(done_reason(&ev), "denied");

    let listed = crate::rpc::tool::ToolRpc::new(h.app.clone())
        .list(tonic::Request::new(pb::ToolListParams {
            session_id: Some(sid),
        }))
        .await
        .unwrap()
        .into_inner();
    let f = listed
        .tools
        .iter()
        .find(|t| t.name == "mcp__f__echo")
        .unwrap();
    assert_eq!(f.permission_tag, "network");
}

#[tokio::test]
async fn mcp_tools_with_long_or_colliding_names_are_listed_and_called_by_their_own_server() {
    let long = "L".repeat(58);
    let pairs = [
        (long.as_str(), "a"),
        (long.as_str(), "b"),
        ("x", "y__z"),
        ("x__y", "z"),
    ];
    let names = crate::clients::mcp::tool_names(&pairs);
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "use mcp", "tool_calls": [
                {"name": names[1], "arguments": {}},
                {"name": names[3], "arguments": {}}
            ]},
            {"after_tool": names[3], "text": "Called."}
        ]
    }))
    .await;
    let mcp = FakeMcp::serve(
        &h.home.socket("mcp"),
        Script {
            tools: pairs
                .iter()
                .map(|(s, t)| fake::tool(s, t, "read"))
                .collect(),
            ..Default::default()
        },
    );
    std::fs::write(
        h.home.settings_path(),
        json!({"mcp": {"permissions": {long.as_str(): "read", "x": "read", "x__y": "read"}}})
            .to_string(),
    )
    .unwrap();
    let sid = h.create("accept").await;
    let listed = crate::rpc::tool::ToolRpc::new(h.app.clone())
        .list(tonic::Request::new(pb::ToolListParams {
            session_id: Some(sid.clone()),
        }))
        .await
        .unwrap()
        .into_inner();
    let mcp_rows: Vec<_> = listed
        .tools
        .iter()
        .filter(|t| t.source == "mcp")
        .map(|t| (t.name.clone(), t.server.clone()))
        .collect();
    let want: Vec<_> = names
        .iter()
        .zip(&pairs)
        .map(|(n, (s, _))| (n.clone(), s.to_string()))
        .collect();
    assert_eq!(mcp_rows, want);

    let tid = h.prompt(&sid, "please use mcp").await;
    let ev = h.until_done(&tid, |_| None).await;
    let results = of_kind(&ev, "tool.result");
    assert_eq!(results.len(), 2);
    assert!(
        results.iter().all(|r| r["payload"]["ok"] == true),
        "{results:?}"
    );
    let called: Vec<_> = mcp
        .calls()
        .into_iter()
        .map(|c| (c.server, c.tool))
        .collect();
    assert_eq!(
        called,
        [
            (long.clone(), "b".to_owned()),
            ("x__y".to_owned(), "z".to_owned())
        ]
    );
    assert_eq!(done_reason(&ev), "complete");
}

/// A harness whose model calls `mcp__f__echo` once, with a fake svc-mcp offering it.
async fn mcp_echo_turn(script: Script) -> (Harness, FakeMcp) {
    let h = Harness::new(json!({
        "steps": [
            {"match": "use mcp", "tool_calls": [{"name": "mcp__f__echo", "arguments": {}}]},
            {"after_tool": "mcp__f__echo", "text": "Went on."}
        ]
    }))
    .await;
    let mcp = FakeMcp::serve(&h.home.socket("mcp"), script);
    (h, mcp)
}

#[tokio::test]
async fn a_frozen_svc_mcp_fails_the_call_after_its_deadline_and_the_turn_goes_on() {
    let (mut h, mcp) = mcp_echo_turn(Script {
        tools: vec![fake::tool("f", "echo", "")],
        servers: vec![fake::server("f", "ready")],
        hang_call: true,
        ..Default::default()
    })
    .await;
    fake::set_timeouts(
        &h.home,
        fake::short(Duration::from_secs(5), Duration::from_millis(300)),
    );
    let sid = h.create("auto").await;
    let tid = h.prompt(&sid, "please use mcp").await;
    let ev = h.until_done(&tid, |_| None).await;
    assert_eq!(mcp.calls().len(), 1);
    let result = of_kind(&ev, "tool.result")[0];
    assert_eq!(result["payload"]["ok"], false);
    let text = result["payload"]["output"].as_str().unwrap();
    assert!(
        text.contains("svc-mcp did not answer within 300 ms"),
        "{text}"
    );
    assert_eq!(done_reason(&ev), "complete");
    let done = of_kind(&ev, "message.done")[0];
    assert_eq!(done["payload"]["text"], "Went on.");
}

#[tokio::test]
async fn a_frozen_svc_mcp_at_turn_start_costs_only_the_list_deadline() {
    let (mut h, mcp) = mcp_echo_turn(Script {
        tools: vec![fake::tool("f", "echo", "")],
        servers: vec![fake::server("f", "ready")],
        hang_list: true,
        ..Default::default()
    })
    .await;
    let short = Duration::from_millis(300);
    fake::set_timeouts(&h.home, fake::short(short, short));
    let sid = h.create("auto").await;
    let tid = h.prompt(&sid, "please use mcp").await;
    let ev = h.until_done(&tid, |_| None).await;
    assert!(mcp.calls().is_empty());
    let result = of_kind(&ev, "tool.result")[0];
    assert_eq!(result["payload"]["ok"], false);
    assert_eq!(
        result["payload"]["output"],
        "unavailable: svc-mcp did not answer within 300 ms; MCP tool `mcp__f__echo` cannot be called right now"
    );
    assert_eq!(done_reason(&ev), "complete");
}

#[tokio::test]
async fn an_mcp_call_while_its_server_is_still_starting_says_not_ready_not_unknown_tool() {
    // Right after svc-mcp restarted: `f` is starting, so the turn has none of its tools, and
    // the model calls one it knows from before.
    let (mut h, mcp) = mcp_echo_turn(Script {
        servers: vec![fake::server("f", "starting")],
        ..Default::default()
    })
    .await;
    let sid = h.create("auto").await;
    let tid = h.prompt(&sid, "please use mcp").await;
    let ev = h.until_done(&tid, |_| None).await;
    assert!(mcp.calls().is_empty());
    let result = of_kind(&ev, "tool.result")[0];
    assert_eq!(result["payload"]["ok"], false);
    assert_eq!(
        result["payload"]["output"],
        "not_ready: MCP server `f` is not ready (state: starting); MCP tool `mcp__f__echo` cannot be called right now; try again shortly"
    );
    assert_eq!(result["payload"]["meta"]["errorKind"], "not_ready");
    assert_eq!(done_reason(&ev), "complete");
}

/// Capability `llmTimings` (issue 32 item 8): the timings a server sends with a call reach
/// the turn's `usage` event (`timings`), and a call without them has none.
#[tokio::test]
async fn a_turns_usage_event_carries_the_servers_timings() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "timed", "text": "ok", "timings": {"prompt_n": 12, "prompt_ms": 48.25, "cache_n": 19, "predicted_n": 3, "predicted_ms": 61.5, "extra_ms": 1}}
        ],
        "default": {"text": "plain"}
    }))
    .await;
    let sid = h.create("accept").await;
    for (prompt, expected) in [
        (
            "timed",
            json!({"prompt_n": 12.0, "prompt_ms": 48.25, "cache_n": 19.0, "predicted_n": 3.0, "predicted_ms": 61.5}),
        ),
        ("untimed", serde_json::Value::Null),
    ] {
        let tid = h.prompt(&sid, prompt).await;
        let events = h.until_done(&tid, |_| None).await;
        let usage = of_kind(&events, "usage");
        assert_eq!(usage.len(), 1, "{events:?}");
        let timings = usage[0]["payload"]
            .get("timings")
            .cloned()
            .unwrap_or_default();
        assert_eq!(timings, expected, "{prompt}");
    }
}

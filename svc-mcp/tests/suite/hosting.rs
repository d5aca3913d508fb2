//! Hosting: states and `mcp.changed`, concurrency, timeouts, restarts, tool calls through the
//! internal RPC, and reaping of every child process.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use snowpea_proto::mcp::v1::{CallToolRequest, ListToolsRequest};

use super::*;

async fn call(
    svc: &Svc,
    server: &str,
    tool: &str,
    args: Value,
) -> snowpea_proto::mcp::v1::CallToolReply {
    within(
        Duration::from_secs(60),
        "CallTool",
        svc.internal().call_tool(CallToolRequest {
            server: server.into(),
            tool: tool.into(),
            arguments_json: args.to_string(),
            call_id: "t1".into(),
            ..Default::default()
        }),
    )
    .await
    .unwrap()
    .into_inner()
}

#[tokio::test]
async fn states_are_announced_and_tools_are_listed_and_called() {
    let Some(faulty) = faulty() else { return };
    let svc = Svc::start_with(json!({"f": faulty_entry(&faulty, "ok", None)})).await;
    svc.wait_state("f", "ready", Duration::from_secs(20)).await;
    // mcp.list may see `ready` a moment before its notification reaches the subscriber.
    eventually(Duration::from_secs(10), "ready announced", || async {
        let states = svc.states_of("f");
        (states.last().map(String::as_str) == Some("ready")).then_some(())
    })
    .await;
    let ready = svc
        .changes
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|c| c["name"] == "f")
        .cloned()
        .unwrap();
    assert_eq!(ready["toolCount"], 4);
    assert_eq!(ready["scope"], "global");

    let tools = within(
        CALL,
        "ListTools",
        svc.internal().list_tools(ListToolsRequest {
            workdir: svc.workdir.display().to_string(),
            wait_ms: 0,
        }),
    )
    .await
    .unwrap()
    .into_inner();
    let echo = tools
        .tools
        .iter()
        .find(|t| t.name == "echo")
        .expect("echo listed");
    assert_eq!(echo.server, "f");
    assert_eq!(echo.permission, "network");
    assert_eq!(
        echo.tool_timeout_sec, 300,
        "the default toolTimeoutSec is reported"
    );
    let schema: Value = serde_json::from_str(&echo.input_schema_json).unwrap();
    assert_eq!(schema["type"], "object");

    let r = call(&svc, "f", "echo", json!({"text": "hello"})).await;
    assert!(r.ok, "{r:?}");
    assert_eq!(r.content, "hello");
    let err = within(
        CALL,
        "unknown server",
        svc.internal().call_tool(CallToolRequest {
            server: "nope".into(),
            tool: "echo".into(),
            ..Default::default()
        }),
    )
    .await
    .unwrap_err();
    assert_eq!(code(&err), "mcp_not_found");
}

#[tokio::test]
async fn a_slow_server_does_not_delay_the_others_and_a_hanging_one_times_out() {
    let Some(faulty) = faulty() else { return };
    let mut slow = faulty_entry(&faulty, "slow-start", Some("8"));
    slow["timeoutSec"] = json!(30);
    let mut hang = faulty_entry(&faulty, "hang-init", None);
    hang["timeoutSec"] = json!(2);
    let started = Instant::now();
    let svc = Svc::start_with(
        json!({"fast": faulty_entry(&faulty, "ok", None), "slow": slow, "hang": hang}),
    )
    .await;
    svc.wait_state("fast", "ready", Duration::from_secs(20))
        .await;
    let fast_ready = started.elapsed();
    assert!(
        fast_ready < Duration::from_secs(7),
        "fast waited for slow: {fast_ready:?}"
    );
    let slow_row = svc
        .list()
        .await
        .into_iter()
        .find(|s| s.name == "slow")
        .unwrap();
    assert_eq!(slow_row.state, "starting");
    let hang_row = svc
        .wait_state("hang", "error", Duration::from_secs(15))
        .await;
    assert!(
        hang_row.error.unwrap().contains("timeoutSec"),
        "start timeout named"
    );
    svc.wait_state("slow", "ready", Duration::from_secs(30))
        .await;
}

#[tokio::test]
async fn a_crashing_server_fails_the_call_clearly_and_is_restarted() {
    let Some(faulty) = faulty() else { return };
    let svc = Svc::start_with(json!({"f": faulty_entry(&faulty, "ok", None)})).await;
    svc.wait_state("f", "ready", Duration::from_secs(20)).await;
    let r = call(&svc, "f", "crash", json!({})).await;
    assert!(!r.ok);
    let meta: Value = serde_json::from_str(&r.meta_json).unwrap();
    assert_eq!(meta["errorKind"], "server_exited", "{r:?}");
    assert!(
        r.content.contains("stopped during the call"),
        "{}",
        r.content
    );
    eventually(
        Duration::from_secs(20),
        "error then ready again",
        || async {
            let s = svc.states_of("f");
            let err = s.iter().position(|x| x == "error")?;
            s[err..].iter().any(|x| x == "ready").then_some(())
        },
    )
    .await;
    let err = svc
        .changes
        .lock()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "f" && c["state"] == "error")
        .cloned()
        .unwrap();
    assert_eq!(
        err["error"], "server exited with code 9: faulty: crashing on purpose",
        "the server's exit status and its stderr verbatim"
    );
    let r = call(&svc, "f", "echo", json!({"text": "again"})).await;
    assert_eq!(r.content, "again");
}

#[tokio::test]
async fn kill_9_of_the_mcp_child_mid_call_then_the_next_call_works() {
    let Some(faulty) = faulty() else { return };
    let svc = Svc::start_with(json!({"f": faulty_entry(&faulty, "ok", None)})).await;
    svc.wait_state("f", "ready", Duration::from_secs(20)).await;
    let pids = svc.mcp_processes();
    assert_eq!(pids.len(), 2, "guard + server: {pids:?}");
    let svc_ref = &svc;
    let pending = async move { call(svc_ref, "f", "sleep", json!({"seconds": 30})).await };
    let killer = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        // The server is the one that is not a group leader (the guard leads the group).
        for pid in svc.mcp_processes() {
            let pgid = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid as i32))).unwrap();
            if pgid.as_raw() != pid as i32 {
                nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .unwrap();
            }
        }
    };
    let (r, ()) = tokio::join!(pending, killer);
    assert!(!r.ok);
    assert!(
        r.content.contains("killed by signal") || r.content.contains("stopped during the call"),
        "{}",
        r.content
    );
    svc.wait_state("f", "ready", Duration::from_secs(20)).await;
    let r = call(&svc, "f", "echo", json!({"text": "after"})).await;
    assert_eq!(r.content, "after");
}

#[tokio::test]
async fn tool_timeout_fails_the_call() {
    let Some(faulty) = faulty() else { return };
    let mut e = faulty_entry(&faulty, "ok", None);
    e["toolTimeoutSec"] = json!(1);
    let svc = Svc::start_with(json!({"f": e})).await;
    svc.wait_state("f", "ready", Duration::from_secs(20)).await;
    let started = Instant::now();
    let r = call(&svc, "f", "sleep", json!({"seconds": 20})).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!r.ok);
    let meta: Value = serde_json::from_str(&r.meta_json).unwrap();
    assert_eq!(meta["errorKind"], "timeout");
    assert!(r.content.contains("toolTimeoutSec"));
}

#[tokio::test]
async fn a_flooding_server_still_works() {
    let Some(faulty) = faulty() else { return };
    let svc = Svc::start_with(json!({"flood": faulty_entry(&faulty, "flood", None)})).await;
    let row = svc
        .wait_state("flood", "ready", Duration::from_secs(30))
        .await;
    assert_eq!(row.tool_count, 4);
    assert_eq!(
        call(&svc, "flood", "echo", json!({"text": "ok"}))
            .await
            .content,
        "ok"
    );
}

#[tokio::test]
async fn a_server_that_exits_at_start_is_in_error_with_its_words() {
    let Some(faulty) = faulty() else { return };
    let svc = Svc::start_with(json!({"dead": faulty_entry(&faulty, "exit-start", None)})).await;
    let row = svc
        .wait_state("dead", "error", Duration::from_secs(20))
        .await;
    let e = row.error.unwrap();
    assert!(
        e.contains("exited with code 3") && e.contains("cannot open database"),
        "{e}"
    );
    let r = call(&svc, "dead", "echo", json!({})).await;
    assert!(!r.ok && r.content.contains("in error"), "{r:?}");
}

#[tokio::test]
async fn no_process_outlives_svc_mcp_sigterm_or_sigkill() {
    let Some(faulty) = faulty() else { return };
    let servers =
        json!({"a": faulty_entry(&faulty, "ok", None), "b": faulty_entry(&faulty, "ok", None)});
    // SIGTERM: a clean shutdown stops every child, grandchildren included.
    let mut svc = Svc::start_with(servers.clone()).await;
    svc.wait_state("a", "ready", Duration::from_secs(20)).await;
    svc.wait_state("b", "ready", Duration::from_secs(20)).await;
    let r = call(&svc, "a", "spawn", json!({})).await;
    assert!(r.ok);
    assert_eq!(
        svc.mcp_processes().len(),
        5,
        "2 guards, 2 servers, 1 grandchild"
    );
    let status = svc.terminate().await;
    assert!(status.success(), "{status:?}");
    eventually(
        Duration::from_secs(10),
        "all reaped after SIGTERM",
        || async { svc.mcp_processes().is_empty().then_some(()) },
    )
    .await;

    // SIGKILL: PDEATHSIG wakes the guards, which take their groups down.
    svc.spawn().await;
    svc.wait_state("a", "ready", Duration::from_secs(20)).await;
    svc.wait_state("b", "ready", Duration::from_secs(20)).await;
    assert!(call(&svc, "b", "spawn", json!({})).await.ok);
    assert_eq!(svc.mcp_processes().len(), 5);
    let pid = svc.pid();
    let mut client = svc.internal();
    let in_flight = client.call_tool(CallToolRequest {
        server: "a".into(),
        tool: "sleep".into(),
        arguments_json: "{\"seconds\":30}".into(),
        ..Default::default()
    });
    let killer = async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    };
    let (r, ()) = tokio::join!(
        tokio::time::timeout(Duration::from_secs(20), in_flight),
        killer
    );
    assert!(
        r.expect("the call ends when svc-mcp dies").is_err(),
        "the caller sees an error, not a hang"
    );
    eventually(
        Duration::from_secs(10),
        "all reaped after SIGKILL",
        || async { svc.mcp_processes().is_empty().then_some(()) },
    )
    .await;
    svc.kill9();
}

/// svc-mcp environment with a fast hang check (ping every `interval_ms`, answer within
/// `timeout_ms`).
fn fast_ping(
    interval_ms: &'static str,
    timeout_ms: &'static str,
) -> [(&'static str, &'static str); 2] {
    [
        ("SNOWPEA_MCP_PING_INTERVAL_MS", interval_ms),
        ("SNOWPEA_MCP_PING_TIMEOUT_MS", timeout_ms),
    ]
}

/// Waits until `name` went through `error` (after its first `ready`) and is `ready` again;
/// returns the `mcp.changed` params of that error.
async fn error_then_ready_again(svc: &Svc, name: &str) -> Value {
    eventually(
        Duration::from_secs(30),
        "error, then ready again",
        || async {
            let changes: Vec<Value> = svc
                .changes
                .lock()
                .unwrap()
                .iter()
                .filter(|c| c["name"] == name)
                .cloned()
                .collect();
            let first_ready = changes.iter().position(|c| c["state"] == "ready")?;
            let err = first_ready
                + changes[first_ready..]
                    .iter()
                    .position(|c| c["state"] == "error")?;
            changes[err..]
                .iter()
                .any(|c| c["state"] == "ready")
                .then(|| changes[err].clone())
        },
    )
    .await
}

#[tokio::test]
async fn a_server_that_hangs_mid_call_is_marked_error_killed_and_restarted() {
    let Some(faulty) = faulty() else { return };
    let mut e = faulty_entry(&faulty, "ok", None);
    e["toolTimeoutSec"] = json!(4);
    let svc = Svc::start_with_env(json!({"f": e}), &fast_ping("300", "500")).await;
    svc.wait_state("f", "ready", Duration::from_secs(20)).await;
    let before = svc.mcp_processes();
    assert_eq!(before.len(), 2, "guard + server: {before:?}");

    // The first call hangs the server (no answer, nothing read any more). No periodic ping
    // runs while calls are in flight: the hang is found when that call reaches its
    // toolTimeoutSec and the server then leaves a ping unanswered. The second call, queued
    // behind the first, is still in flight then (its own toolTimeoutSec is further away)
    // and fails with the server's state.
    let hanging = call(&svc, "f", "sleep", json!({"seconds": 0, "hang": "now"}));
    let queued = async {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        call(&svc, "f", "echo", json!({"text": "queued"})).await
    };
    let (hung, other) = tokio::join!(hanging, queued);

    assert!(!hung.ok, "{hung:?}");
    let meta: Value = serde_json::from_str(&hung.meta_json).unwrap();
    assert_eq!(meta["errorKind"], "timeout", "{hung:?}");
    assert!(hung.content.contains("toolTimeoutSec"), "{}", hung.content);
    assert!(!other.ok, "{other:?}");
    let meta: Value = serde_json::from_str(&other.meta_json).unwrap();
    assert_eq!(meta["errorKind"], "not_responding", "{other:?}");
    assert!(
        other.content.contains("MCP server f") && other.content.contains("not responding"),
        "the in-flight call names the server and why: {}",
        other.content
    );

    let err = error_then_ready_again(&svc, "f").await;
    let text = err["error"].as_str().unwrap_or_default();
    assert!(
        text.contains("not responding") && text.contains("ping"),
        "mcp.changed error says why: {err}"
    );
    let row = svc.wait_state("f", "ready", Duration::from_secs(20)).await;
    assert_eq!(row.tool_count, 4);
    let r = call(&svc, "f", "echo", json!({"text": "after"})).await;
    assert!(r.ok, "{r:?}");
    assert_eq!(r.content, "after");

    // The hung processes were killed and reaped; only the new guard + server remain.
    let now = svc.mcp_processes();
    assert!(
        before.iter().all(|p| !now.contains(p)),
        "old processes gone: before {before:?}, now {now:?}"
    );
    assert_eq!(now.len(), 2, "guard + server: {now:?}");
}

#[tokio::test]
async fn an_idle_server_that_stops_answering_fails_its_ping_and_is_restarted() {
    let Some(faulty) = faulty() else { return };
    let svc = Svc::start_with_env(
        json!({"f": faulty_entry(&faulty, "ok", None)}),
        &fast_ping("300", "700"),
    )
    .await;
    svc.wait_state("f", "ready", Duration::from_secs(20)).await;
    let before = svc.mcp_processes();
    assert_eq!(before.len(), 2, "guard + server: {before:?}");
    // Answers, then stops answering anything while the process lives on.
    let r = call(&svc, "f", "echo", json!({"text": "bye", "hang": "after"})).await;
    assert!(r.ok && r.content == "bye", "{r:?}");

    let err = error_then_ready_again(&svc, "f").await;
    let text = err["error"].as_str().unwrap_or_default();
    assert!(
        text.contains("not responding: no answer to ping within 700ms"),
        "{err}"
    );
    svc.wait_state("f", "ready", Duration::from_secs(20)).await;
    let r = call(&svc, "f", "echo", json!({"text": "again"})).await;
    assert!(r.ok && r.content == "again", "{r:?}");
    let now = svc.mcp_processes();
    assert!(
        before.iter().all(|p| !now.contains(p)),
        "old processes gone: before {before:?}, now {now:?}"
    );
    assert_eq!(now.len(), 2, "guard + server: {now:?}");
}

#[tokio::test]
async fn a_long_call_on_a_one_at_a_time_server_is_not_taken_for_a_hang() {
    let Some(faulty) = faulty() else { return };
    // faulty.py answers one request at a time: pings wait behind the sleeping call.
    let svc = Svc::start_with_env(
        json!({"f": faulty_entry(&faulty, "ok", None)}),
        &fast_ping("200", "500"),
    )
    .await;
    svc.wait_state("f", "ready", Duration::from_secs(20)).await;
    let r = call(&svc, "f", "sleep", json!({"seconds": 2, "text": "slept"})).await;
    assert!(r.ok, "{r:?}");
    assert_eq!(r.content, "slept");
    assert!(
        !svc.states_of("f").iter().any(|s| s == "error"),
        "{:?}",
        svc.states_of("f")
    );
    assert_eq!(
        call(&svc, "f", "echo", json!({"text": "still"}))
            .await
            .content,
        "still"
    );
}

#[tokio::test]
async fn disabling_a_server_announces_stopped_once() {
    let Some(faulty) = faulty() else { return };
    let svc = Svc::start_with(json!({"f": faulty_entry(&faulty, "ok", None)})).await;
    svc.wait_state("f", "ready", Duration::from_secs(20)).await;
    within(
        CALL,
        "disable",
        svc.mcp().update(snowpea_proto::mcp::v1::McpUpdateParams {
            name: "f".into(),
            patch: Some(snowpea_proto::mcp::v1::McpServerDraft {
                disabled: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    // A later notification of another server: every one about `f` before it has arrived.
    let mut p = add_params("later", &json!({"command": "node", "args": ["s.js"]}));
    p.disabled = Some(true);
    within(CALL, "add later", svc.mcp().add(p)).await.unwrap();
    eventually(Duration::from_secs(10), "later announced", || async {
        (!svc.states_of("later").is_empty()).then_some(())
    })
    .await;
    let states = svc.states_of("f");
    let ready = states.iter().rposition(|s| s == "ready").unwrap();
    assert_eq!(
        &states[ready + 1..],
        ["stopped"],
        "one stopped after disabling: {states:?}"
    );
}

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
    let states = svc.states_of("f");
    assert_eq!(
        states.last().map(String::as_str),
        Some("ready"),
        "{states:?}"
    );
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
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("crashing on purpose"),
        "{err}"
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

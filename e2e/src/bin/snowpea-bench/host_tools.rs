//! `--host-tools N` (issue 21, docs/PERFORMANCE.md "Host tools"): the overhead of a host tool
//! call through the whole suite, by the turn-difference method of `--mcp`.
//!
//! A second SDK client (clientId `bench-host`) registers `echo_host` (tag `read`, so no
//! approval; `parallel` unset, so calls run one at a time like the MCP bench's) with
//! `register_tools`, answering at once. A session created with `hostToolsFrom: "bench-host"`
//! then runs rounds of four scripted turns — one `echo_host` call, N of them in one model
//! step, one built-in `list_dir`, N of those — each timed on the user's client from
//! `session.prompt` to `turn.done`. A call's cost is `(turn with N calls − turn with 1) /
//! (N − 1)`: what stays is `tool.call` event → permission check → `tool.invoke` over the bus
//! → gateway → the host's WebSocket → the handler → back → `tool.result` event.

use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::{HostTool, ToolResult};

use super::{loadavg, mcp_report, timed_turn};

/// Warm-up and measured rounds (each: 4 turns).
const WARMUP: usize = 3;
const ROUNDS: usize = 30;

pub async fn bench_host_tools(calls: usize) {
    let calls = calls.max(2);
    println!("load average at start: {}", loadavg());
    let many = |n: usize, name: &str, args: Value| -> Value {
        (0..n)
            .map(|_| json!({"name": name, "arguments": args}))
            .collect()
    };
    let script = json!({"steps": [
        {"match": "host echo once", "repeat": true, "tool_calls": many(1, "echo_host", json!({"m": "hi"}))},
        {"match": "host echo many", "repeat": true, "tool_calls": many(calls, "echo_host", json!({"m": "hi"}))},
        {"match": "builtin list once", "repeat": true, "tool_calls": many(1, "list_dir", json!({}))},
        {"match": "builtin list many", "repeat": true, "tool_calls": many(calls, "list_dir", json!({}))},
        {"after_tool": "echo_host", "repeat": true, "text": "echoed"},
        {"after_tool": "list_dir", "repeat": true, "text": "listed"}
    ], "default": {"text": "ok"}});
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let host = suite.client_with(|o| o.with_client_id("bench-host")).await;
    host.register_tools(
        vec![HostTool::new("echo_host", "Echoes its arguments.", "read")],
        |call| async move { ToolResult::ok(call.args.to_string()) },
    )
    .await
    .expect("tool.register");
    let client = suite.client().await;
    let sid = client
        .create_session_with(json!({
            "workdir": suite.workdir.path().to_string_lossy(),
            "mode": "accept",
            "hostToolsFrom": "bench-host",
        }))
        .await
        .unwrap();
    let prompts = [
        "host echo once",
        "host echo many",
        "builtin list once",
        "builtin list many",
    ];
    let mut turns: [Vec<Duration>; 4] = Default::default();
    for round in 0..WARMUP + ROUNDS {
        for (k, prompt) in prompts.iter().enumerate() {
            let t = timed_turn(&client, &sid, prompt, if k % 2 == 1 { calls } else { 1 }).await;
            if round >= WARMUP {
                turns[k].push(t.turn);
            }
        }
    }
    let [h1, hn, b1, bn] = turns;
    let h1 = mcp_report("turn, 1 host tool call (prompt → turn.done)", h1);
    let hn = mcp_report(
        &format!("turn, {calls} host tool calls (prompt → turn.done)"),
        hn,
    );
    let b1 = mcp_report("turn, 1 list_dir call (prompt → turn.done)", b1);
    let bn = mcp_report(
        &format!("turn, {calls} list_dir calls (prompt → turn.done)"),
        bn,
    );
    let per = |many: (f64, f64), one: (f64, f64)| {
        let n = (calls - 1) as f64;
        ((many.0 - one.0) / n, (many.1 - one.1) / n)
    };
    let (host_mean, host_p50) = per(hn, h1);
    let (builtin_mean, builtin_p50) = per(bn, b1);
    println!("host tool call through the suite, per call (turn difference): {host_mean:.3} ms (means), {host_p50:.3} ms (p50s)");
    println!("list_dir through the suite, per call (turn difference): {builtin_mean:.3} ms (means), {builtin_p50:.3} ms (p50s)");
    println!(
        "host round trip beyond a built-in call: {:.3} ms (means), {:.3} ms (p50s)",
        host_mean - builtin_mean,
        host_p50 - builtin_p50
    );
    println!("load average at end: {}", loadavg());
}

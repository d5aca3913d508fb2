//! `snowpea-bench`: the suite-level benchmarks behind docs/PERFORMANCE.md (DESIGN.md §7a).
//!
//! Starts the real suite (release binaries next to this one, or `SNOWPEA_BIN_DIR`) on a temp
//! home with the scripted provider and reports:
//! * cold start: `snowpea supervisor start` until the first answered `system.health`;
//! * round trip p50/p99 of `system.health` (answered by the gateway) and `session.list`
//!   (crosses gateway → svc-session), and their ratio (the cost of the hop);
//! * one turn streaming N content chunks (default 5,000) from the scripted provider to the
//!   client with every event durable: wall time and events/s;
//! * RSS of every process idle and after six such turns;
//! * kill -9 of svc-session until it is SERVING again.
//!
//! `--mcp N` instead measures an MCP tool call through the whole suite vs calling the same
//! server directly (issue 6, docs/PERFORMANCE.md "svc-mcp"), see [`bench_mcp`].
//!
//! `--host-tools N` instead measures a host tool call through the whole suite (issue 21,
//! docs/PERFORMANCE.md "Host tools"), see `host_tools::bench_host_tools`.
//!
//! `--fairness N` instead measures one well-behaved connection's `session.list` latency
//! (N calls, one every 100 ms) idle and while three other connections flood the gateway
//! (issue 24 §1, docs/PERFORMANCE.md "Fairness"), see [`bench_fairness`].
//!
//! `--spawn N` instead measures `agent.spawn` → the parent's first `subagent.update` over N
//! sequential spawns (docs/PERFORMANCE.md "Subagents"), see `spawn::bench_spawn`.
//!
//! `--preauth-flood N` instead measures an authenticated client's `session.list` while N
//! half-open sockets and N upgrades without hello are held (issue 37 §3), see
//! `preauth::bench_preauth_flood`.
//!
//! `--compare` instead runs the suite side by side with a peer command and a Rust
//! WebSocket echo floor (issue 14: cold start both ways, the hop with 1 and 8 clients,
//! idle RSS and PSS per process), see [`compare`].
//!
//! `fuzz` instead drives seeded random and malformed calls of every method at the suite
//! while sampling every process's memory (issue 40 §4, docs/PERFORMANCE.md "Fuzz with
//! memory"), see `fuzz::run`.
//!
//! Usage: `cargo build --release --workspace && target/release/snowpea-bench [--calls N] [--chunks N]`
//! (or `… snowpea-bench --mcp 200`, `… snowpea-bench --fairness 100`,
//! `… snowpea-bench --compare [--rounds 5] [--peer CMD]`)

#[path = "snowpea-bench/compare.rs"]
mod compare;
#[path = "snowpea-bench/echo.rs"]
mod echo;
#[path = "snowpea-bench/fuzz/mod.rs"]
mod fuzz;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[path = "snowpea-bench/host_tools.rs"]
mod host_tools;
#[path = "snowpea-bench/preauth.rs"]
mod preauth;
#[path = "snowpea-bench/spawn.rs"]
mod spawn;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn arg_str(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// Every value given after `name` (a repeatable option).
fn args_all(name: &str) -> Vec<String> {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2)
        .filter(|w| w[0] == name)
        .map(|w| w[1].clone())
        .collect()
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn rss_kb(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn total_rss_mb(suite: &Suite) -> f64 {
    suite.all_pids().iter().map(|p| rss_kb(*p)).sum::<u64>() as f64 / 1024.0
}

/// `snowpea-bench --help`.
const HELP: &str = "\
snowpea-bench: the suite-level benchmarks behind docs/PERFORMANCE.md

Starts the real suite (the binaries next to this one, or $SNOWPEA_BIN_DIR) on a temp home
with the scripted provider and prints cold start, round trips, streaming, RSS and crash
recovery figures.

Usage: snowpea-bench [--calls N] [--chunks N] [--memories N]
       snowpea-bench fuzz [--seconds S] [--seed N] [--connections N] (see fuzz --help)
       snowpea-bench --mcp N
       snowpea-bench --fairness N
       snowpea-bench --host-tools N
       snowpea-bench --spawn N
       snowpea-bench --preauth-flood N [--calls N]

  --calls N     round trips per measured method (default 2000)
  --chunks N    content chunks of the streamed turn (default 5000)
  --memories N  also measure recall over N stored memories (default 0: skipped)
  --mcp N       instead: N MCP tool calls through the suite vs the server directly
  --host-tools N instead: N host tool calls (a second SDK client's tool) through the suite
  --spawn N     instead: N sequential agent.spawn calls, each timed to the parent's
                first subagent.update for the child
  --preauth-flood N instead: session.list (--calls, default 2000, one every 100 ms)
                idle and while N half-open sockets and N upgrades without hello are held
  --fairness N  instead: N session.list calls of a well-behaved connection, idle and
                while three connections flood (200 requests in flight each)
  --compare     instead: the suite side by side with --peer (if given and installed)
                and a Rust WebSocket echo floor, interleaved: cold start (one prober;
                a client knocking every 2 ms), the hop p50/p99/p999 and calls/s with
                1 and 8 clients (--calls, default 2000), idle RSS/PSS per process
    --rounds N        rounds (default 5); medians are printed
    --peer CMD        peer command with {port}, e.g.
                      'codex app-server --listen ws://127.0.0.1:{port}'
    --peer-method M   the peer's trivial method (default thread/loaded/list)
    --peer-params J   its params as JSON (default {})
    --peer-init J     a request sent first on each connection, {\"method\",\"params\"}
    --suite-env K=V   extra environment of the suite's processes (repeatable)
    --baseline DIR    also measure the suite built in DIR (e.g. a copy of the previous
                      release build's binaries) in the same rounds: before/after
  --echo-server PORT  serve the echo floor on 127.0.0.1:PORT (used by --compare)
  -h, --help    print this help

Build first: cargo build --release --workspace (about 12 minutes on 2 cores).";

#[tokio::main]
async fn main() {
    let fuzz_mode = std::env::args().nth(1).as_deref() == Some("fuzz");
    if std::env::args().skip(1).any(|a| a == "--help" || a == "-h") {
        println!("{}", if fuzz_mode { fuzz::HELP } else { HELP });
        return;
    }
    if let Some(port) = arg_str("--echo-server") {
        let port: u16 = port.parse().expect("--echo-server PORT");
        echo::serve(port).await;
        return;
    }
    let calls = arg("--calls", 2000);
    let chunks = arg("--chunks", 5000);
    let memories = arg("--memories", 0);
    let mcp = arg("--mcp", 0);
    let fairness = arg("--fairness", 0);
    let host = arg("--host-tools", 0);
    let spawns = arg("--spawn", 0);
    let preauth_flood = arg("--preauth-flood", 0);
    if std::env::var_os("SNOWPEA_BIN_DIR").is_none() {
        let exe = std::env::current_exe().unwrap();
        std::env::set_var("SNOWPEA_BIN_DIR", exe.parent().unwrap());
    }
    if fuzz_mode {
        let code = fuzz::run(fuzz::Opts {
            seconds: arg("--seconds", 600) as u64,
            seed: arg("--seed", 1) as u64,
            connections: arg("--connections", 4).max(1),
            in_flight: arg("--in-flight", 32).max(1),
            drain: Duration::from_secs(arg("--drain", 60) as u64),
            settle: Duration::from_secs(arg("--settle", 10) as u64),
            abort_mb: arg("--abort-mb", 4096) as u64,
            only: args_all("--only"),
            trigger: !std::env::args().any(|a| a == "--no-trigger"),
            known_over: args_all("--known-over"),
        })
        .await;
        std::process::exit(code);
    }
    if std::env::args().any(|a| a == "--compare") {
        let json_arg = |name: &str| {
            arg_str(name).map(|v| {
                serde_json::from_str::<Value>(&v)
                    .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {v}"))
            })
        };
        compare::run(compare::Opts {
            rounds: arg("--rounds", 5).max(1),
            calls: calls.max(8),
            peer: arg_str("--peer"),
            peer_method: arg_str("--peer-method").unwrap_or_else(|| "thread/loaded/list".into()),
            peer_params: json_arg("--peer-params").unwrap_or_else(|| json!({})),
            peer_init: json_arg("--peer-init"),
            baseline: arg_str("--baseline").map(std::path::PathBuf::from),
            suite_env: args_all("--suite-env")
                .into_iter()
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) => (k.to_owned(), v.to_owned()),
                    None => panic!("--suite-env {kv:?}: expected K=V"),
                })
                .collect(),
        })
        .await;
        return;
    }
    if mcp > 0 {
        bench_mcp(mcp).await;
        return;
    }
    if fairness > 0 {
        bench_fairness(fairness).await;
        return;
    }
    if host > 0 {
        host_tools::bench_host_tools(host).await;
        return;
    }
    if preauth_flood > 0 {
        preauth::bench_preauth_flood(preauth_flood, calls.max(20)).await;
        return;
    }
    if spawns > 0 {
        spawn::bench_spawn(spawns.max(2)).await;
        return;
    }
    let text: String = (0..chunks).map(|i| format!("w{i} ")).collect();
    let script = json!({"steps": [{"match": "stream", "repeat": true, "text": text}], "default": {"text": "ok"}});

    let t0 = Instant::now();
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let mut ws = suite.raw_hello().await;
    let r = ws.call("system.health", json!({})).await;
    assert_eq!(r["result"]["status"], "ok");
    let cold = t0.elapsed();
    println!(
        "cold start to first answered call: {:.0} ms",
        cold.as_secs_f64() * 1000.0
    );
    println!("idle RSS, all processes: {:.1} MB", total_rss_mb(&suite));

    for (method, params) in [("system.health", json!({})), ("session.list", json!({}))] {
        for _ in 0..100 {
            ws.call(method, params.clone()).await;
        }
        let mut lat = Vec::with_capacity(calls);
        for _ in 0..calls {
            let t = Instant::now();
            let r = ws.call(method, params.clone()).await;
            lat.push(t.elapsed());
            assert!(r.get("result").is_some(), "{r}");
        }
        lat.sort();
        println!(
            "{method}: p50 {:.3} ms, p99 {:.3} ms ({calls} calls)",
            pct(&lat, 0.5),
            pct(&lat, 0.99)
        );
    }

    if memories > 0 {
        bench_memory(&mut ws, memories, calls).await;
        return;
    }

    let client = suite.client().await;
    let sid = client
        .create_session(suite.workdir.path(), Some("plan"))
        .await
        .unwrap();
    let mut best = f64::MAX;
    for round in 0..6 {
        let t = Instant::now();
        let out = client
            .prompt_and_collect(&sid, "stream please", Duration::from_secs(120))
            .await
            .unwrap();
        let el = t.elapsed().as_secs_f64();
        let deltas = out
            .events
            .iter()
            .filter(|e| e.kind == "message.delta")
            .count();
        println!(
            "turn {round}: {deltas} message.delta, {} events in {:.3} s ({:.0} events/s)",
            out.events.len(),
            el,
            out.events.len() as f64 / el
        );
        best = best.min(el);
    }
    println!("best {chunks}-chunk turn: {best:.3} s");
    println!(
        "RSS after six turns, all processes: {:.1} MB",
        total_rss_mb(&suite)
    );

    let old = suite.kill9("session");
    let t = Instant::now();
    suite.wait_restarted("session", old).await;
    println!(
        "svc-session kill -9 → SERVING again: {:.0} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
}

/// `--memories N`: memory.write throughput and memory.search p50/p99 through the gateway
/// (WebSocket → gateway → svc-memory), the other half of svc-memory's socket benchmark.
async fn bench_memory(ws: &mut snowpea_e2e::raw::RawWs, n: usize, calls: usize) {
    const WORDS: &[&str] = &[
        "tokio",
        "runtime",
        "gateway",
        "session",
        "memory",
        "sqlite",
        "ranking",
        "search",
        "scheduler",
        "approval",
        "protocol",
        "socket",
        "restart",
        "benchmark",
        "한국어",
        "문서",
    ];
    let t = Instant::now();
    for i in 0..n {
        let text = format!(
            "note {i}: {} {} {} about {}",
            WORDS[i % WORDS.len()],
            WORDS[(i / 3) % WORDS.len()],
            WORDS[(i / 7) % WORDS.len()],
            i % 97
        );
        let r = ws
            .call("memory.write", json!({"text": text, "tags": ["bench"]}))
            .await;
        assert!(r.get("result").is_some(), "{r}");
    }
    let el = t.elapsed().as_secs_f64();
    println!(
        "memory.write through the gateway: {n} in {el:.2} s ({:.0} writes/s)",
        n as f64 / el
    );
    for (label, query) in [("2-word", "tokio ranking"), ("short", "k8")] {
        let mut lat = Vec::with_capacity(calls);
        for _ in 0..calls {
            let t = Instant::now();
            let r = ws
                .call("memory.search", json!({"query": query, "limit": 8}))
                .await;
            lat.push(t.elapsed());
            assert!(r.get("result").is_some(), "{r}");
        }
        lat.sort();
        println!(
            "memory.search ({label}) through the gateway with {n} memories: p50 {:.3} ms, p99 {:.3} ms",
            pct(&lat, 0.5),
            pct(&lat, 0.99)
        );
    }
}

/// Warm-up calls (direct) and warm-up rounds (suite) before `--mcp` measures.
const MCP_WARMUP: usize = 10;
/// Measured rounds of `--mcp` through the suite (each: 4 turns, see [`bench_mcp`]).
const MCP_ROUNDS: usize = 30;

/// The load average line of `/proc/loadavg` (1, 5, 15 min), to note with the figures.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// `n`, mean, p50, p95 and p99 of `d` in ms; returns (mean, p50).
fn mcp_report(what: &str, mut d: Vec<Duration>) -> (f64, f64) {
    d.sort();
    let mean = d.iter().sum::<Duration>().as_secs_f64() * 1000.0 / d.len() as f64;
    println!(
        "{what:<62} n={:<4} mean={mean:.3} ms p50={:.3} ms p95={:.3} ms p99={:.3} ms",
        d.len(),
        pct(&d, 0.5),
        pct(&d, 0.95),
        pct(&d, 0.99)
    );
    (mean, pct(&d, 0.5))
}

/// `--mcp N`: the `echo` tool of `@modelcontextprotocol/server-everything` (node, stdio; from
/// `svc-mcp/tests/mcp-servers`, `npm ci --prefix svc-mcp/tests/mcp-servers`):
/// * directly: N `tools/call` over a fresh server's stdio from this process (newline-delimited
///   JSON-RPC, the MCP stdio transport), each timed from writing the request to reading the
///   answer;
/// * through the suite: `mcp.add` of the same server (permission `read`: no approval), then
///   rounds of four scripted-provider turns in one session — one `mcp__ev__echo` call, N of
///   them in one model step, one built-in `list_dir`, N of those — each timed on this client
///   from `session.prompt` to the `turn.done` event. A call's cost through the suite is
///   `(turn with N calls − turn with 1) / (N − 1)`: the per-turn costs (two model calls, the
///   WebSocket delivery) cancel, what stays is `tool.call` event → permission check →
///   svc-session → svc-mcp `CallTool` → server → back → `tool.result` event, every event
///   committed before it is published. The client-side `tool.call` → `tool.result` interval
///   of the one-call turns is printed too, and per call in the N-call turns (first
///   `tool.call` → last `tool.result`, / N).
///
/// The client-side intervals are not the call's latency: svc-session commits events in
/// groups and the gateway's WebSocket delivers a short turn's events in one burst, so
/// `tool.call` and `tool.result` usually arrive together (≈ 0 ms apart).
async fn bench_mcp(calls: usize) {
    let calls = calls.max(2);
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../svc-mcp/tests/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    let Ok(server) = std::fs::canonicalize(&server) else {
        eprintln!("SKIP: run `npm ci --prefix svc-mcp/tests/mcp-servers` first");
        return;
    };
    println!("load average at start: {}", loadavg());
    let direct = mcp_report(
        "echo direct over stdio (same process), per call",
        mcp_direct(&server, calls).await,
    );

    let many = |n: usize, name: &str, args: Value| -> Value {
        (0..n)
            .map(|_| json!({"name": name, "arguments": args}))
            .collect()
    };
    let echo = json!({"message": "hi"});
    let script = json!({"steps": [
        {"match": "mcp echo once", "repeat": true, "tool_calls": many(1, "mcp__ev__echo", echo.clone())},
        {"match": "mcp echo many", "repeat": true, "tool_calls": many(calls, "mcp__ev__echo", echo.clone())},
        {"match": "builtin list once", "repeat": true, "tool_calls": many(1, "list_dir", json!({}))},
        {"match": "builtin list many", "repeat": true, "tool_calls": many(calls, "list_dir", json!({}))},
        {"after_tool": "mcp__ev__echo", "repeat": true, "text": "echoed"},
        {"after_tool": "list_dir", "repeat": true, "text": "listed"}
    ], "default": {"text": "ok"}});
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let added = client
        .call(
            "mcp.add",
            json!({"name": "ev", "command": "node", "args": [server.display().to_string()], "permission": "read"}),
        )
        .await
        .expect("mcp.add");
    assert_eq!(added["ok"], true, "{added}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "MCP server ev not ready in 60 s");
        let list = client.call("mcp.list", json!({})).await.expect("mcp.list");
        let ready = list["servers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["name"] == "ev" && s["state"] == "ready");
        if ready {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sid = client
        .create_session(suite.workdir.path(), Some("accept"))
        .await
        .unwrap();
    // [mcp once, mcp many, builtin once, builtin many]
    let prompts = [
        "mcp echo once",
        "mcp echo many",
        "builtin list once",
        "builtin list many",
    ];
    let mut turns: [Vec<Duration>; 4] = Default::default();
    let (mut mcp_one, mut mcp_many_per_call) = (Vec::new(), Vec::new());
    for round in 0..MCP_WARMUP.min(3) + MCP_ROUNDS {
        for (k, prompt) in prompts.iter().enumerate() {
            let t = timed_turn(&client, &sid, prompt, if k % 2 == 1 { calls } else { 1 }).await;
            if round >= MCP_WARMUP.min(3) {
                turns[k].push(t.turn);
                match k {
                    0 => mcp_one.push(t.calls),
                    1 => mcp_many_per_call.push(t.calls / calls as u32),
                    _ => {}
                }
            }
        }
    }
    mcp_report("client: tool.call → tool.result, 1-call MCP turns", mcp_one);
    mcp_report(
        &format!("client: first tool.call → last tool.result / {calls}, MCP"),
        mcp_many_per_call,
    );
    let [m1, mn, b1, bn] = turns;
    let m1 = mcp_report("turn, 1 MCP call (prompt → turn.done)", m1);
    let mn = mcp_report(&format!("turn, {calls} MCP calls (prompt → turn.done)"), mn);
    let b1 = mcp_report("turn, 1 list_dir call (prompt → turn.done)", b1);
    let bn = mcp_report(
        &format!("turn, {calls} list_dir calls (prompt → turn.done)"),
        bn,
    );
    // Per call from the turn difference, from the means and from the p50s.
    let per = |many: (f64, f64), one: (f64, f64)| {
        let n = (calls - 1) as f64;
        ((many.0 - one.0) / n, (many.1 - one.1) / n)
    };
    let (mcp_mean, mcp_p50) = per(mn, m1);
    let (builtin_mean, builtin_p50) = per(bn, b1);
    println!(
        "MCP call through the suite, per call (turn difference): {mcp_mean:.3} ms (means), {mcp_p50:.3} ms (p50s)"
    );
    println!(
        "list_dir through the suite, per call (turn difference): {builtin_mean:.3} ms (means), {builtin_p50:.3} ms (p50s)"
    );
    println!(
        "suite overhead of an MCP call vs calling the server directly: {:.3} ms (means), {:.3} ms (p50s)",
        mcp_mean - direct.0,
        mcp_p50 - direct.1
    );
    println!("load average at end: {}", loadavg());
}

/// What [`timed_turn`] measured.
struct TurnTimes {
    /// Prompt sent → `turn.done` received.
    turn: Duration,
    /// First `tool.call` received → last `tool.result` received.
    calls: Duration,
}

/// One turn of `prompt` in `sid` that makes `expected` tool calls (each must succeed).
async fn timed_turn(
    client: &snowpea_sdk::Client,
    sid: &str,
    prompt: &str,
    expected: usize,
) -> TurnTimes {
    let mut events = client.events(sid);
    let t0 = Instant::now();
    let tid = client.prompt(sid, prompt).await.unwrap();
    let (mut first_call, mut last_result, mut results) = (None, None, 0);
    loop {
        let e = events
            .next(Duration::from_secs(120))
            .await
            .expect("session event");
        match e.kind.as_str() {
            "tool.call" => {
                first_call.get_or_insert_with(Instant::now);
            }
            "tool.result" => {
                last_result = Some(Instant::now());
                results += 1;
                assert_eq!(e.payload["ok"], true, "{}", e.payload);
            }
            "turn.done" if e.turn_id() == Some(tid.as_str()) => break,
            _ => {}
        }
    }
    let turn = t0.elapsed();
    assert_eq!(results, expected, "tool results of {prompt:?}");
    TurnTimes {
        turn,
        calls: last_result.expect("tool.result") - first_call.expect("tool.call"),
    }
}

/// N `tools/call` of `echo` made directly on a fresh server-everything's stdio.
async fn mcp_direct(server: &Path, calls: usize) -> Vec<Duration> {
    let mut child = tokio::process::Command::new("node")
        .arg(server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start node");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = async |msg: Value| {
        let mut text = msg.to_string();
        text.push('\n');
        stdin.write_all(text.as_bytes()).await.expect("write");
        stdin.flush().await.expect("flush");
    };
    // Reads lines until the response with `id` (skipping the server's notifications).
    async fn answer(
        lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
        id: u64,
    ) -> Value {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .expect("MCP server answers")
                .expect("read")
                .expect("MCP server open");
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v["id"] == json!(id) {
                return v;
            }
        }
    }
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "snowpea-bench", "version": "0"}
        }}),
    )
    .await;
    let init = answer(&mut lines, 0).await;
    assert!(init.get("result").is_some(), "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let mut times = Vec::with_capacity(calls);
    for i in 0..MCP_WARMUP + calls {
        let id = i as u64 + 1;
        let t = Instant::now();
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "hi"}}}))
        .await;
        let r = answer(&mut lines, id).await;
        let el = t.elapsed();
        assert!(
            r["result"]["isError"] != json!(true) && r.get("result").is_some(),
            "{r}"
        );
        if i >= MCP_WARMUP {
            times.push(el);
        }
    }
    times
}

/// Requests each flooding connection keeps in flight.
const FLOOD_IN_FLIGHT: usize = 200;
/// Flooding connections.
const FLOODERS: usize = 3;

/// Counts of one flood.
#[derive(Default)]
struct FloodCounts {
    answered: std::sync::atomic::AtomicU64,
    busy: std::sync::atomic::AtomicU64,
}

/// One flooding connection: keeps [`FLOOD_IN_FLIGHT`] requests in flight — a third
/// `session.list`, a third malformed JSON, a third `invalid_params` — until `stop`.
async fn flood(
    mut ws: snowpea_e2e::raw::RawWs,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    counts: std::sync::Arc<FloodCounts>,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut in_flight = 0usize;
    let mut id = 1_000_000u64;
    while !stop.load(Relaxed) {
        while in_flight < FLOOD_IN_FLIGHT {
            id += 1;
            let text = match id % 3 {
                0 => json!({"jsonrpc": "2.0", "id": id, "method": "session.list", "params": {}})
                    .to_string(),
                1 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"session.list\",\"params\":["),
                _ => json!({"jsonrpc": "2.0", "id": id, "method": "session.create", "params": {"mode": "yolo"}})
                    .to_string(),
            };
            ws.send_text(&text).await;
            in_flight += 1;
        }
        match ws.recv_response(Duration::from_secs(30)).await {
            Some(r) => {
                in_flight -= 1;
                counts.answered.fetch_add(1, Relaxed);
                if r["error"]["data"]["details"]["reason"] == "busy" {
                    counts.busy.fetch_add(1, Relaxed);
                }
            }
            None => break,
        }
    }
}

/// `n` `session.list` round trips of `ws`, one every 100 ms.
async fn probe(ws: &mut snowpea_e2e::raw::RawWs, n: usize) -> Vec<Duration> {
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = ws.call("session.list", json!({})).await;
        lat.push(t.elapsed());
        assert!(r.get("result").is_some(), "{r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    lat.sort();
    lat
}

/// `--fairness N` (issue 24 §1): a well-behaved connection's `session.list` p50/p99/max,
/// idle and while [`FLOODERS`] connections each keep [`FLOOD_IN_FLIGHT`] malformed and
/// valid requests in flight; target: loaded p99 within 3× idle p99.
async fn bench_fairness(n: usize) {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    let suite = Suite::start_with(SuiteOptions::default()).await;
    let mut ws = suite.raw_hello().await;
    for _ in 0..20 {
        let r = ws
            .call(
                "session.create",
                json!({"workdir": suite.workdir.path(), "mode": "plan"}),
            )
            .await;
        assert!(r.get("result").is_some(), "{r}");
    }
    for _ in 0..20 {
        ws.call("session.list", json!({})).await;
    }
    let idle = probe(&mut ws, n).await;
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(FloodCounts::default());
    let mut flooders = Vec::new();
    for _ in 0..FLOODERS {
        let f = suite.raw_hello().await;
        flooders.push(tokio::spawn(flood(f, stop.clone(), counts.clone())));
    }
    // Let the flood reach its steady state.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = counts.answered.load(Relaxed);
    let t = Instant::now();
    let loaded = probe(&mut ws, n).await;
    let flood_rate = (counts.answered.load(Relaxed) - before) as f64 / t.elapsed().as_secs_f64();
    stop.store(true, Relaxed);
    for f in flooders {
        let _ = tokio::time::timeout(Duration::from_secs(30), f).await;
    }
    let row = |name: &str, lat: &[Duration]| {
        println!(
            "{name}: session.list p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} calls)",
            pct(lat, 0.5),
            pct(lat, 0.99),
            lat.last().unwrap().as_secs_f64() * 1000.0,
            lat.len()
        );
    };
    row("idle", &idle);
    row(
        &format!("{FLOODERS} flooding connections ({FLOOD_IN_FLIGHT} in flight each)"),
        &loaded,
    );
    println!(
        "loaded p99 / idle p99: {:.1}x (target ≤ 3x); flood answered {flood_rate:.0} requests/s, {} busy",
        pct(&loaded, 0.99) / pct(&idle, 0.99),
        counts.busy.load(Relaxed)
    );
}

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
//! Usage: `cargo build --release --workspace && target/release/snowpea-bench [--calls N] [--chunks N]`

use std::time::{Duration, Instant};

use serde_json::json;
use snowpea_e2e::{Suite, SuiteOptions};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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

#[tokio::main]
async fn main() {
    let calls = arg("--calls", 2000);
    let chunks = arg("--chunks", 5000);
    let memories = arg("--memories", 0);
    if std::env::var_os("SNOWPEA_BIN_DIR").is_none() {
        let exe = std::env::current_exe().unwrap();
        std::env::set_var("SNOWPEA_BIN_DIR", exe.parent().unwrap());
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

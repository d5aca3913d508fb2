//! `--preauth-flood N` (issue 37 §3, docs/PERFORMANCE.md "Before authentication"): an
//! authenticated client's `session.list` p50/p99 idle and while N half-open sockets (TCP
//! connected, nothing sent) and N WebSocket upgrades that never say hello are held open,
//! with the gateway's open descriptors before, during and after, and how the upgrades
//! fared (upgraded and then closed at the hello deadline, or refused 503 at the cap).
//! Target: loaded p99 within 3× idle p99, descriptors back to their idle count.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use snowpea_e2e::{Suite, SuiteOptions};

use super::{pct, probe};

/// Open descriptors of `pid` (0 when it cannot be read).
fn fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Runs the flood with `n` sockets of each kind and `calls` probes per phase.
pub async fn bench_preauth_flood(n: usize, calls: usize) {
    // It holds 2 × n sockets.
    snowpea_common::descriptors::raise_to_hard_limit();
    println!("load average at start: {}", super::loadavg());
    let suite = Suite::start_with(SuiteOptions::default()).await;
    let gateway = suite.status()["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "gateway")
        .and_then(|p| p["pid"].as_i64())
        .expect("gateway pid") as i32;
    let mut ws = suite.raw_hello().await;
    for _ in 0..20 {
        ws.call("session.list", json!({})).await;
    }
    let fds_idle = fds(gateway);
    let idle = probe(&mut ws, calls).await;

    // The flood: two openers, each keeping its newest `n` sockets (the gateway drops the
    // older ones at the deadline anyway): half-open TCP sockets, and upgrades that never
    // say hello.
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    // On a runtime of their own, so the probe's client is not queued behind them.
    let flood = {
        let (port, stop, counts) = (suite.port, stop.clone(), counts.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("flood runtime");
            rt.block_on(async move {
                let half = tokio::spawn(open_half(port, n, stop.clone(), counts.clone()));
                let up = tokio::spawn(open_upgrades(port, n, stop, counts));
                let _ = tokio::join!(half, up);
            });
        })
    };
    // Until both hold their n (or 20 s).
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20)
        && (counts.tcp.load(Relaxed) < n || counts.ws_tried.load(Relaxed) < n)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let fds_flood = fds(gateway);
    let loaded = probe(&mut ws, calls).await;
    let fds_during = fds(gateway);
    stop.store(true, Relaxed);
    let _ = tokio::task::spawn_blocking(move || flood.join()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let fds_after = fds(gateway);
    let (tried, upgraded, refused) = (
        counts.ws_tried.load(Relaxed),
        counts.ws_upgraded.load(Relaxed),
        counts.ws_refused.load(Relaxed),
    );

    let row = |name: &str, lat: &[Duration]| {
        println!(
            "{name}: session.list p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} calls)",
            pct(lat, 0.5),
            pct(lat, 0.99),
            lat.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
            lat.len()
        );
    };
    row("idle", &idle);
    row(
        &format!("{n} half-open sockets + {n} upgrades without hello"),
        &loaded,
    );
    println!(
        "loaded p99 / idle p99: {:.1}x (target ≤ 3x); {} half-open sockets opened; {tried} upgrades tried: {upgraded} upgraded (closed at the hello deadline), {refused} refused 503, {} failed otherwise",
        pct(&loaded, 0.99) / pct(&idle, 0.99),
        counts.tcp.load(Relaxed),
        tried - upgraded - refused,
    );
    println!(
        "gateway open descriptors: idle {fds_idle}, flood held {fds_flood}, after the probe {fds_during}, 2 s after the flood left {fds_after}"
    );
}

/// What the openers did.
#[derive(Debug, Default)]
struct Counts {
    tcp: AtomicUsize,
    ws_tried: AtomicUsize,
    ws_upgraded: AtomicUsize,
    ws_refused: AtomicUsize,
}

/// Once an opener holds its `n`, it replaces them at this pace: as many per hello deadline
/// (10 s) as it holds, so the flood stays a few thousand open sockets, not a connect storm.
fn pace(n: usize) -> Duration {
    Duration::from_secs(10) / n.max(1) as u32
}

/// Opens TCP connections that send nothing, keeping the newest `n`, until `stop`.
async fn open_half(port: u16, n: usize, stop: Arc<AtomicBool>, counts: Arc<Counts>) {
    let mut held = VecDeque::with_capacity(n);
    while !stop.load(Relaxed) {
        match tokio::time::timeout(
            Duration::from_secs(2),
            tokio::net::TcpStream::connect(("127.0.0.1", port)),
        )
        .await
        {
            Ok(Ok(s)) => {
                counts.tcp.fetch_add(1, Relaxed);
                if held.len() == n {
                    held.pop_front();
                    tokio::time::sleep(pace(n)).await;
                }
                held.push_back(s);
            }
            // The gateway's accept waits at its cap: the kernel backlog fills.
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Opens WebSockets that never say hello, keeping the newest `n`, until `stop`.
async fn open_upgrades(port: u16, n: usize, stop: Arc<AtomicBool>, counts: Arc<Counts>) {
    let url = format!("ws://127.0.0.1:{port}/ws");
    let mut held = VecDeque::with_capacity(n);
    while !stop.load(Relaxed) {
        counts.ws_tried.fetch_add(1, Relaxed);
        match tokio::time::timeout(
            Duration::from_secs(5),
            tokio_tungstenite::connect_async(&url),
        )
        .await
        {
            Ok(Ok((s, _))) => {
                counts.ws_upgraded.fetch_add(1, Relaxed);
                if held.len() == n {
                    held.pop_front();
                }
                held.push_back(s);
                if counts.ws_tried.load(Relaxed) >= n {
                    tokio::time::sleep(pace(n)).await;
                }
            }
            Ok(Err(tokio_tungstenite::tungstenite::Error::Http(r))) if r.status() == 503 => {
                counts.ws_refused.fetch_add(1, Relaxed);
                if counts.ws_tried.load(Relaxed) >= n {
                    tokio::time::sleep(pace(n)).await;
                }
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

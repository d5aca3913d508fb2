//! Round-trip latency through the real gateway, printed, not asserted (DESIGN.md §7:
//! speed targets are benchmarks). Run with
//! `cargo test -p snowpea-gateway --release --test all latency -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use serde_json::json;

use super::client::Client;
use super::fake::FakeService;
use super::harness::{GatewayProc, Opts, TestHome};

async fn measure(c: &mut Client, method: &str, n: usize) -> (Duration, Duration) {
    for _ in 0..200 {
        c.ok(method, json!({})).await;
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        c.ok(method, json!({})).await;
        samples.push(t.elapsed());
    }
    samples.sort();
    (samples[n / 2], samples[n * 99 / 100])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark; run explicitly"]
async fn latency() {
    let home = TestHome::new();
    let _fake = FakeService::start(&home.home);
    let gw = GatewayProc::start(
        &home,
        Opts {
            env: vec![("SNOWPEA_LOG", "warn".into())],
            ..Default::default()
        },
    );
    let mut c = gw.authed().await;
    let (p50, p99) = measure(&mut c, "system.health", 5000).await;
    println!("system.health (gateway only):     p50 {p50:?}  p99 {p99:?}");
    let (p50, p99) = measure(&mut c, "session.list", 5000).await;
    println!("session.list (gateway → service): p50 {p50:?}  p99 {p99:?}");

    // The hop alone: the same call straight to the service's socket.
    use snowpea_proto::session::v1::session_service_client::SessionServiceClient;
    let mut direct = SessionServiceClient::new(snowpea_common::client::unix_channel(
        home.home.socket("session"),
    ));
    let mut samples = Vec::new();
    for i in 0..5200 {
        let t = Instant::now();
        direct
            .list(snowpea_proto::session::v1::SessionListParams::default())
            .await
            .unwrap();
        if i >= 200 {
            samples.push(t.elapsed());
        }
    }
    samples.sort();
    println!(
        "session.list direct gRPC:         p50 {:?}  p99 {:?}",
        samples[2500], samples[4950]
    );
}

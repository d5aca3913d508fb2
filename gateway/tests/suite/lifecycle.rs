//! Limits and lifecycle: oversized messages, system.info, system.shutdown without a
//! supervisor, SIGTERM.

use std::time::Duration;

use serde_json::json;

use super::harness::{GatewayProc, Opts, TestHome};

#[tokio::test]
async fn an_oversized_message_closes_with_a_reason_and_the_gateway_lives_on() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"{}\"}}",
        "a".repeat(17 << 20)
    );
    // The gateway may close before the whole message is written; that is fine.
    let _ = c.send_raw_lenient(&big).await;
    let frame = c.expect_close().await.expect("close frame");
    assert_eq!(u16::from(frame.code), 1009);
    assert!(frame.reason.contains("too big"), "{}", frame.reason);
    let mut again = gw.authed().await;
    again.ok("system.health", json!({})).await;
}

#[tokio::test]
async fn system_info_describes_the_daemon() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    c.ok("system.health", json!({})).await;
    let info = c.ok("system.info", json!({})).await;
    assert_eq!(
        info["pid"],
        gw.pid(),
        "no daemon.json: the gateway's own pid"
    );
    assert_eq!(info["port"], gw.port);
    assert_eq!(info["platform"], "linux");
    assert_eq!(info["protocolVersion"], snowpea_proto::PROTOCOL_VERSION);
    assert_eq!(info["home"], home.home.root().display().to_string());
    assert!(info["startedAt"].as_str().unwrap().ends_with('Z'));
    assert!(info["counters"]["requests"].as_u64() >= Some(3));
    assert_eq!(info["counters"]["connections"], 1);
}

#[tokio::test]
async fn system_shutdown_without_a_supervisor_stops_the_gateway() {
    let home = TestHome::new();
    let mut gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    assert_eq!(
        c.ok("system.shutdown", json!({})).await,
        json!({"ok": true})
    );
    let frame = c.expect_close().await.expect("close frame");
    assert_eq!(u16::from(frame.code), 1001);
    assert_eq!(frame.reason.as_str(), "daemon shutting down");
    assert_eq!(gw.wait_exit(Duration::from_secs(8)).await, Some(0));
}

#[tokio::test]
async fn sigterm_closes_sockets_with_1001_and_exits_zero() {
    let home = TestHome::new();
    let mut gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    gw.signal(nix::sys::signal::Signal::SIGTERM);
    let frame = c.expect_close().await.expect("close frame");
    assert_eq!(u16::from(frame.code), 1001);
    assert_eq!(frame.reason.as_str(), "daemon shutting down");
    assert_eq!(gw.wait_exit(Duration::from_secs(8)).await, Some(0));
}

//! Limits and lifecycle: oversized messages, system.info, system.shutdown and
//! system.restart with and without a supervisor, SIGTERM.

use std::time::Duration;

use serde_json::json;
use snowpea_common::home::DaemonJson;
use snowpea_proto::supervisor::v1::supervisor_server::{Supervisor, SupervisorServer};
use snowpea_proto::supervisor::v1::{RestartReply, RestartRequest, StopReply, StopRequest};

use super::harness::{GatewayProc, Opts, TestHome, T};

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

/// A supervisor control socket that records what it is asked.
struct FakeSupervisor {
    asked: tokio::sync::mpsc::UnboundedSender<String>,
}

#[tonic::async_trait]
impl Supervisor for FakeSupervisor {
    async fn restart(
        &self,
        req: tonic::Request<RestartRequest>,
    ) -> Result<tonic::Response<RestartReply>, tonic::Status> {
        let _ = self
            .asked
            .send(format!("restart {}", req.into_inner().name));
        Ok(tonic::Response::new(RestartReply { ok: true }))
    }
    async fn stop(
        &self,
        req: tonic::Request<StopRequest>,
    ) -> Result<tonic::Response<StopReply>, tonic::Status> {
        let _ = self.asked.send(format!("stop {}", req.into_inner().reason));
        Ok(tonic::Response::new(StopReply { ok: true }))
    }
}

#[tokio::test]
async fn shutdown_and_restart_go_to_the_supervisor_after_the_answer() {
    let home = TestHome::new();
    let listener = tokio::net::UnixListener::bind(home.home.supervisor_socket()).unwrap();
    let (tx, mut asked) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(SupervisorServer::new(FakeSupervisor { asked: tx }))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener)),
    );
    let mut gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    assert_eq!(c.ok("system.restart", json!({})).await, json!({"ok": true}));
    assert_eq!(next(&mut asked).await.as_deref(), Some("restart all"));
    assert_eq!(
        c.ok("system.shutdown", json!({})).await,
        json!({"ok": true})
    );
    assert_eq!(
        next(&mut asked).await.as_deref(),
        Some("stop system.shutdown")
    );
    // The supervisor owns the stop: the gateway keeps serving until it is signalled.
    c.ok("system.health", json!({})).await;
    gw.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(gw.wait_exit(Duration::from_secs(8)).await, Some(0));
}

#[tokio::test]
async fn system_info_reports_the_supervisor_from_daemon_json() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    home.home
        .write_daemon_json(&DaemonJson {
            port: gw.port,
            pid: 4242,
            token: home.token.clone(),
            started_at: "2026-01-02T03:04:05Z".into(),
            protocol_version: snowpea_proto::PROTOCOL_VERSION.into(),
        })
        .unwrap();
    let mut c = gw.authed().await;
    let info = c.ok("system.info", json!({})).await;
    assert_eq!(info["pid"], 4242);
    assert_eq!(info["startedAt"], "2026-01-02T03:04:05Z");
}

async fn next(asked: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> Option<String> {
    tokio::time::timeout(T, asked.recv())
        .await
        .expect("supervisor asked in time")
}

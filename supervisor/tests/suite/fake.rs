//! Fake `snowpea-svc-*` and `snowpea-gateway` processes.
//!
//! Why this shape: fake binaries must not ship with `snowpea` (no extra `[[bin]]`), must
//! be built by every `cargo test` invocation (examples are not built by
//! `cargo test --test all`), and must speak the real readiness protocols
//! (`grpc.health.v1` on a unix socket, `GET /health` on the inherited fd 3). So the fake
//! *is this test binary*: the harness writes tiny `/bin/sh` scripts named like the real
//! binaries into a temp `SNOWPEA_BIN_DIR`; each `exec`s this test executable (keeping the
//! pid the supervisor sees) filtered to [`fake_process_entry`], with the role and the
//! original argv in environment variables. Run as an ordinary test (no role set) the
//! entry returns at once.
//!
//! Fault injection: when `$SNOWPEA_HOME/fake-<role>-crash` exists, the fake exits 1
//! before serving; when `$SNOWPEA_HOME/fake-gateway-ignore-term` exists, the fake gateway
//! ignores SIGTERM (so only the SIGKILL after the grace period stops it).

use std::os::fd::FromRawFd;
use std::path::PathBuf;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Environment variable carrying the role (`session`, `gateway`, …).
pub const ROLE_ENV: &str = "SNOWPEA_FAKE_ROLE";
/// Environment variable carrying the argv the supervisor passed.
pub const ARGV_ENV: &str = "SNOWPEA_FAKE_ARGV";
/// The libtest name of the entry point.
pub const ENTRY: &str = "suite::fake::fake_process_entry";

#[test]
fn fake_process_entry() {
    let Ok(role) = std::env::var(ROLE_ENV) else {
        return;
    };
    let argv = std::env::var(ARGV_ENV).unwrap_or_default();
    let home = PathBuf::from(std::env::var("SNOWPEA_HOME").expect("SNOWPEA_HOME is set"));
    eprintln!("fake {role} pid {} argv: {argv}", std::process::id());
    if home.join(format!("fake-{role}-crash")).exists() {
        eprintln!("fake {role}: crash flag set, exiting 1");
        std::process::exit(1);
    }
    let args: Vec<&str> = argv.split_whitespace().collect();
    let value_of = |flag: &str| {
        args.iter()
            .position(|a| *a == flag)
            .and_then(|i| args.get(i + 1))
            .map(|s| (*s).to_owned())
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        if role == "gateway" {
            assert_eq!(value_of("--listen-fd").as_deref(), Some("3"), "{argv}");
            serve_gateway(home.join("fake-gateway-ignore-term").exists()).await;
        } else {
            let socket = PathBuf::from(value_of("--socket").expect("--socket"));
            snowpea_common::service::serve(
                &role,
                &socket,
                snowpea_common::service::Services::new(),
                std::future::pending(),
            )
            .await
            .expect("fake service serves");
        }
    });
    eprintln!("fake {role}: stopped");
    std::process::exit(0);
}

/// Answers `GET /health` with 200 on the inherited fd 3 until SIGTERM (forever when
/// `ignore_term`).
async fn serve_gateway(ignore_term: bool) {
    // SAFETY: the supervisor hands the listener over as fd 3 and nothing else owns it.
    let std_listener = unsafe { std::net::TcpListener::from_raw_fd(3) };
    std_listener.set_nonblocking(true).unwrap();
    let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
    eprintln!(
        "fake gateway listening on {}",
        listener.local_addr().unwrap()
    );
    let accept = async {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]);
                let reply: &[u8] = if req.starts_with("GET /health ") {
                    b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                } else {
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                };
                let _ = s.write_all(reply).await;
            });
        }
    };
    tokio::select! {
        _ = accept => {}
        _ = async {
            loop {
                snowpea_common::service::termination_signal().await;
                if !ignore_term {
                    break;
                }
                eprintln!("fake gateway: ignoring the termination signal");
            }
        } => {}
    }
}

//! svc-mcp benchmark (issue 6, docs/PERFORMANCE.md "svc-mcp"): the overhead of an MCP tool
//! call through svc-mcp's internal `CallTool` rpc vs the same call made directly with an
//! in-process rmcp client, and the start-up time of 10 servers started concurrently.
//! Uses `@modelcontextprotocol/server-everything` from `tests/mcp-servers/` (`npm ci
//! --prefix svc-mcp/tests/mcp-servers`). Run: `cargo bench -p snowpea-svc-mcp --bench mcp`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use serde_json::json;
use snowpea_proto::mcp::v1::mcp_internal_service_client::McpInternalServiceClient;
use snowpea_proto::mcp::v1::mcp_service_client::McpServiceClient;
use snowpea_proto::mcp::v1::{CallToolRequest, McpListParams};

const CALLS: usize = 200;
const WARMUP: usize = 10;
const SERVERS: usize = 10;

struct Svc {
    _dir: tempfile::TempDir,
    child: Child,
    socket: PathBuf,
}

impl Drop for Svc {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

/// Starts svc-mcp with `n` everything servers `ev0..` and waits until all are ready;
/// returns it and the time from spawn to all ready.
async fn start(script: &Path, n: usize) -> (Svc, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let workdir = dir.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&workdir).unwrap();
    let servers: serde_json::Map<_, _> = (0..n)
        .map(|i| {
            (
                format!("ev{i}"),
                json!({"command": "node", "args": [script.display().to_string()]}),
            )
        })
        .collect();
    std::fs::write(
        home.join(".mcp.json"),
        json!({ "mcpServers": servers }).to_string(),
    )
    .unwrap();
    let t0 = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_snowpea-svc-mcp"))
        .arg("--home")
        .arg(&home)
        .current_dir(&workdir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start snowpea-svc-mcp");
    let svc = Svc {
        socket: home.join("run/mcp.sock"),
        _dir: dir,
        child,
    };
    let mut mcp = McpServiceClient::new(snowpea_common::client::unix_channel(svc.socket.clone()));
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < deadline, "servers not ready in time");
        if let Ok(r) = mcp.list(McpListParams::default()).await {
            let s = r.into_inner().servers;
            if s.len() == n && s.iter().all(|s| s.state == "ready") {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (svc, t0.elapsed())
}

fn report(what: &str, mut d: Vec<Duration>) -> Duration {
    d.sort();
    let mean = d.iter().sum::<Duration>() / d.len() as u32;
    let p = |q: f64| d[((d.len() - 1) as f64 * q) as usize];
    println!(
        "{what:<32} n={} mean={:.3}ms p50={:.3}ms p95={:.3}ms",
        d.len(),
        mean.as_secs_f64() * 1e3,
        p(0.5).as_secs_f64() * 1e3,
        p(0.95).as_secs_f64() * 1e3
    );
    p(0.5)
}

async fn via_svc_mcp(script: &Path) -> Duration {
    let (svc, _) = start(script, 1).await;
    let mut c =
        McpInternalServiceClient::new(snowpea_common::client::unix_channel(svc.socket.clone()));
    let mut times = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let t = Instant::now();
        let r = c
            .call_tool(CallToolRequest {
                server: "ev0".into(),
                tool: "echo".into(),
                arguments_json: json!({"message": "hi"}).to_string(),
                call_id: format!("c{i}"),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(r.ok, "{r:?}");
        if i >= WARMUP {
            times.push(t.elapsed());
        }
    }
    report("call via svc-mcp (CallTool rpc)", times)
}

async fn direct(script: &Path) -> Duration {
    let mut child = tokio::process::Command::new("node")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start node");
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let peer = ().serve((stdout, stdin)).await.expect("initialize");
    let mut times = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let args = json!({"message": "hi"}).as_object().cloned().unwrap();
        let t = Instant::now();
        let r = peer
            .call_tool(rmcp::model::CallToolRequestParams::new("echo").with_arguments(args))
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true));
        if i >= WARMUP {
            times.push(t.elapsed());
        }
    }
    let _ = peer.cancel().await;
    report("call direct (rmcp in-process)", times)
}

#[tokio::main]
async fn main() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "tests/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    if !script.exists() {
        eprintln!("SKIP: run `npm ci --prefix svc-mcp/tests/mcp-servers` first");
        return;
    }
    let direct = direct(&script).await;
    let via = via_svc_mcp(&script).await;
    println!(
        "overhead of svc-mcp (p50)           {:.3}ms",
        (via.as_secs_f64() - direct.as_secs_f64()) * 1e3
    );
    let mut startups = Vec::new();
    for _ in 0..3 {
        let (_svc, d) = start(&script, SERVERS).await;
        startups.push(d);
    }
    report("start-up, 10 servers → all ready", startups);
}

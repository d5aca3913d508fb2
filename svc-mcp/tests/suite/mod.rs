//! Shared harness: [`Svc`] starts `snowpea-svc-mcp` on a temp home (killed on drop), hands
//! out gRPC clients and collects `mcp.changed` notifications from its ServiceBus.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_proto::mcp::v1::mcp_internal_service_client::McpInternalServiceClient;
use snowpea_proto::mcp::v1::mcp_service_client::McpServiceClient;
use snowpea_proto::rpc::v1::service_bus_client::ServiceBusClient;
use snowpea_proto::rpc::v1::{outbound, SubscribeRequest};
use snowpea_testkit::{CheckedTask, ServiceProcess};
use tonic::transport::Channel;

mod hosting;
mod methods;
mod transports;
mod trust;

/// Deadline for one call to svc-mcp.
pub const CALL: Duration = Duration::from_secs(30);

/// The kit's bounded waits (issue 13 §6).
pub use snowpea_testkit::{eventually, within};

/// `tests/mcp-servers/`.
pub fn servers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-servers")
}

/// The entry script of `@modelcontextprotocol/server-everything`, or `None` (with a skip
/// message) when it is not installed.
pub fn everything() -> Option<PathBuf> {
    let p =
        servers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if p.exists() && which("node") {
        Some(p)
    } else {
        snowpea_common::test_deps::missing(
            "@modelcontextprotocol/server-everything",
            "run `npm ci --prefix svc-mcp/tests/mcp-servers`; .ci/run does",
        );
        None
    }
}

/// `faulty.py` (needs python3).
pub fn faulty() -> Option<PathBuf> {
    if which("python3") {
        Some(servers_dir().join("faulty.py"))
    } else {
        snowpea_common::test_deps::missing("python3", "install Python 3");
        None
    }
}

/// `py_server.py` when the `mcp` PyPI package is importable.
pub fn py_server() -> Option<PathBuf> {
    let ok = Command::new("python3")
        .args(["-c", "import mcp.server"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Some(servers_dir().join("py_server.py"))
    } else {
        snowpea_common::test_deps::missing(
            "the `mcp` PyPI package",
            "run `python3 -m pip install mcp`; .ci/run does",
        );
        None
    }
}

fn which(bin: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
}

/// A stdio entry running the everything server.
pub fn everything_entry(script: &Path) -> Value {
    json!({"command": "node", "args": [script.display().to_string()]})
}

/// A stdio entry running `faulty.py MODE [ARG]`.
pub fn faulty_entry(script: &Path, mode: &str, arg: Option<&str>) -> Value {
    let mut args = vec![script.display().to_string(), mode.to_owned()];
    args.extend(arg.map(str::to_owned));
    json!({"command": "python3", "args": args})
}

/// A running svc-mcp on a temp home (the kit's [`ServiceProcess`]).
pub struct Svc {
    process: ServiceProcess,
    /// Reads the bus feed into [`Svc::changes`]; its panic fails the test.
    feed: Option<CheckedTask<()>>,
    /// Every `mcp.changed` params seen so far.
    pub changes: Arc<Mutex<Vec<Value>>>,
    /// The Snowpea home.
    pub home: PathBuf,
    /// The daemon's working directory (its default project).
    pub workdir: PathBuf,
    /// The temp dir holding home and workdir (dropped after the process).
    pub dir: tempfile::TempDir,
}

impl Svc {
    /// Writes `$HOME/.mcp.json` with `servers` (an `mcpServers` object) and starts svc-mcp.
    pub async fn start_with(servers: Value) -> Svc {
        Svc::start_with_env(servers, &[]).await
    }

    /// [`Svc::start_with`], with extra environment for svc-mcp (e.g. short ping settings).
    pub async fn start_with_env(servers: Value, env: &[(&str, &str)]) -> Svc {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let workdir = dir.path().join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&workdir).unwrap();
        let workdir = std::fs::canonicalize(&workdir).unwrap();
        if servers.as_object().is_some_and(|m| !m.is_empty()) {
            std::fs::write(
                home.join(".mcp.json"),
                serde_json::to_vec_pretty(&json!({"mcpServers": servers})).unwrap(),
            )
            .unwrap();
        }
        let process = ServiceProcess::new("mcp", env!("CARGO_BIN_EXE_snowpea-svc-mcp"), &home)
            .current_dir(&workdir)
            .log_to(dir.path().join("svc-mcp.log"))
            .envs(env.iter().copied());
        let mut svc = Svc {
            process,
            feed: None,
            changes: Arc::new(Mutex::new(Vec::new())),
            home,
            workdir,
            dir,
        };
        svc.spawn().await;
        svc
    }

    /// Starts svc-mcp with no servers.
    pub async fn start() -> Svc {
        Svc::start_with(json!({})).await
    }

    /// (Re)starts the process and subscribes to its bus.
    pub async fn spawn(&mut self) {
        self.process.spawn().await;
        let mut bus = ServiceBusClient::new(self.channel());
        let mut stream = within(
            CALL,
            "subscribe",
            bus.subscribe(SubscribeRequest {
                gateway_id: "test".into(),
            }),
        )
        .await
        .unwrap()
        .into_inner();
        let changes = self.changes.clone();
        // The previous feed ended with its process; a panic in it fails the test here.
        self.feed = Some(CheckedTask::spawn("mcp.changed feed", async move {
            while let Ok(Some(item)) = stream.message().await {
                if let Some(outbound::Item::Notification(n)) = item.item {
                    if n.method == "mcp.changed" {
                        changes
                            .lock()
                            .unwrap()
                            .push(serde_json::from_str(&n.params_json).unwrap());
                    }
                }
            }
        }));
    }

    /// The svc-mcp pid.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// SIGKILLs svc-mcp.
    pub fn kill9(&mut self) {
        self.process.kill9();
    }

    /// SIGTERMs svc-mcp and waits for it to exit.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        self.process.terminate().await
    }

    /// A channel to the socket.
    pub fn channel(&self) -> Channel {
        self.process.channel()
    }

    /// The McpService client.
    pub fn mcp(&self) -> McpServiceClient<Channel> {
        McpServiceClient::new(self.channel())
    }

    /// The McpInternalService client.
    pub fn internal(&self) -> McpInternalServiceClient<Channel> {
        McpInternalServiceClient::new(self.channel())
    }

    /// `mcp.list` rows of the daemon's project, as JSON-ish tuples (name → row).
    pub async fn list(&self) -> Vec<snowpea_proto::mcp::v1::McpServer> {
        within(
            CALL,
            "mcp.list",
            self.mcp()
                .list(snowpea_proto::mcp::v1::McpListParams::default()),
        )
        .await
        .unwrap()
        .into_inner()
        .servers
    }

    /// Waits until server `name` is in `state`; returns its row.
    pub async fn wait_state(
        &self,
        name: &str,
        state: &str,
        d: Duration,
    ) -> snowpea_proto::mcp::v1::McpServer {
        eventually(d, &format!("{name} {state}"), || async {
            self.list()
                .await
                .into_iter()
                .find(|s| s.name == name && s.state == state)
        })
        .await
    }

    /// The `mcp.changed` states seen for `name`, in order.
    pub fn states_of(&self, name: &str) -> Vec<String> {
        self.changes
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c["name"] == name)
            .map(|c| c["state"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Live processes carrying this home's owner marker (guards, MCP servers, their children).
    pub fn mcp_processes(&self) -> Vec<u32> {
        processes_marked(&format!("SNOWPEA_MCP_OWNER={}", self.home.display()))
    }
}

/// Pids whose environment contains `marker` (zombies excluded).
pub fn processes_marked(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'));
        if !zombie && env.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// `McpAddParams` from a JSON-ish entry.
pub fn add_params(name: &str, entry: &Value) -> snowpea_proto::mcp::v1::McpAddParams {
    let strs = |k: &str| -> Vec<String> {
        entry[k]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    };
    let map = |k: &str| -> std::collections::HashMap<String, String> {
        entry[k]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    };
    snowpea_proto::mcp::v1::McpAddParams {
        name: name.into(),
        command: entry["command"].as_str().map(str::to_owned),
        args: strs("args"),
        url: entry["url"].as_str().map(str::to_owned),
        env: map("env"),
        headers: map("headers"),
        r#type: entry["type"].as_str().map(str::to_owned),
        timeout_sec: entry["timeoutSec"].as_i64(),
        tool_timeout_sec: entry["toolTimeoutSec"].as_i64(),
        ..Default::default()
    }
}

/// The protocol code of a failed call.
pub fn code(s: &tonic::Status) -> String {
    snowpea_proto::error::RpcError::from_status(s)
        .code
        .wire()
        .to_owned()
}

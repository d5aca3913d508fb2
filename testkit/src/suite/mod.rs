//! The suite harness (DESIGN.md §7, STYLE.md "Tests"; used by `snowpea-e2e`): starts the real
//! `snowpea supervisor` on a temp home with the scripted provider, hands back connected
//! clients (the Rust SDK, or a raw WebSocket for JSON-RPC error paths), can kill any
//! process with SIGKILL, and stops everything on drop. Every wait is bounded.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use snowpea_sdk::{Client, ConnectOptions};
use tokio_tungstenite::tungstenite::Message;

pub mod raw;

/// Default bound for waits in tests.
pub const WAIT: Duration = Duration::from_secs(20);

/// The directory holding the workspace binaries (`SNOWPEA_BIN_DIR`, else `target/debug`
/// next to the test executable's `deps/`). Tests never build them: `scripts/test.sh` runs
/// `cargo build --workspace --bins` first; a missing binary fails with that command.
pub fn bin_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(d) = std::env::var_os("SNOWPEA_BIN_DIR") {
            return PathBuf::from(d);
        }
        let exe = std::env::current_exe().expect("current exe");
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target dir")
            .to_path_buf();
        let needed = ["snowpea", "snowpea-gateway", "snowpea-svc-session"];
        for b in needed {
            assert!(
                dir.join(b).exists(),
                "{b} is not built in {}; run `cargo build --workspace --bins` first (scripts/test.sh does)",
                dir.display()
            );
        }
        dir
    })
    .clone()
}

/// Options for [`Suite::start_with`].
#[derive(Debug, Clone, Default)]
pub struct SuiteOptions {
    /// Scripted provider script (`SNOWPEA_PROVIDER=fake:<file>`); `None` = a default
    /// script that answers "ok".
    pub script: Option<Value>,
    /// `$SNOWPEA_HOME/settings.json`.
    pub settings: Option<Value>,
    /// Extra environment for the suite's processes.
    pub env: Vec<(String, String)>,
}

/// A running suite on a temp home.
pub struct Suite {
    home: tempfile::TempDir,
    /// A temp project folder for sessions.
    pub workdir: tempfile::TempDir,
    /// Gateway port.
    pub port: u16,
    /// Connection token.
    pub token: String,
    env: Vec<(String, String)>,
    stopped: bool,
}

impl Suite {
    /// Starts a suite with the default options.
    pub async fn start() -> Suite {
        Suite::start_with(SuiteOptions::default()).await
    }

    /// Starts a suite (`snowpea supervisor start --home <tmp>`), waiting for it to be ready.
    pub async fn start_with(opts: SuiteOptions) -> Suite {
        let home = tempfile::tempdir().expect("temp home");
        let workdir = tempfile::tempdir().expect("temp workdir");
        let script = opts
            .script
            .unwrap_or_else(|| json!({"steps": [], "default": {"text": "ok"}}));
        let script_path = home.path().join("script.json");
        std::fs::write(&script_path, serde_json::to_vec_pretty(&script).unwrap()).unwrap();
        if let Some(s) = &opts.settings {
            std::fs::write(
                home.path().join("settings.json"),
                serde_json::to_vec_pretty(s).unwrap(),
            )
            .unwrap();
        }
        let mut env = vec![
            (
                "SNOWPEA_PROVIDER".to_owned(),
                format!("fake:{}", script_path.display()),
            ),
            (
                "SNOWPEA_BIN_DIR".to_owned(),
                bin_dir().display().to_string(),
            ),
            ("SNOWPEA_STOP_GRACE_MS".to_owned(), "2000".to_owned()),
            // system.checkUpdate never asks the real registry from a test (a closed port:
            // the check answers offline at once); a test's settings may point it elsewhere.
            (
                "SNOWPEA_UPDATE_INDEX_URL".to_owned(),
                "http://127.0.0.1:9/snowpea".to_owned(),
            ),
        ];
        env.extend(opts.env);
        let mut suite = Suite {
            home,
            workdir,
            port: 0,
            token: String::new(),
            env,
            stopped: false,
        };
        let out = suite.snowpea(&["supervisor", "start"]);
        assert!(
            out.status.success(),
            "supervisor start failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let daemon: Value = serde_json::from_slice(
            &std::fs::read(suite.home().join("daemon.json")).expect("daemon.json"),
        )
        .unwrap();
        suite.port = daemon["port"].as_u64().expect("port") as u16;
        suite.token = daemon["token"].as_str().expect("token").to_owned();
        suite
    }

    /// The home directory.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// Runs `snowpea <args> --home <home>` with the suite's environment.
    pub fn snowpea(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(bin_dir().join("snowpea"));
        cmd.args(args).arg("--home").arg(self.home());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.output().expect("run snowpea")
    }

    /// `snowpea supervisor status --json`.
    pub fn status(&self) -> Value {
        let out = self.snowpea(&["supervisor", "status", "--json"]);
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// Pid and state of one supervised process.
    pub fn process(&self, name: &str) -> (i32, String, i64) {
        let st = self.status();
        let p = st["processes"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == name))
            .cloned()
            .unwrap_or(Value::Null);
        (
            p["pid"].as_i64().unwrap_or(0) as i32,
            p["state"].as_str().unwrap_or("").to_owned(),
            p["restarts"].as_i64().unwrap_or(0),
        )
    }

    /// SIGKILLs one supervised process and returns its old pid.
    pub fn kill9(&self, name: &str) -> i32 {
        let (pid, _, _) = self.process(name);
        assert!(pid > 0, "{name} has no pid");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill -9");
        pid
    }

    /// Waits until `name` runs again under a new pid (after a kill) and is `running`.
    pub async fn wait_restarted(&self, name: &str, old_pid: i32) -> i32 {
        let what = format!("{name} restarted under a new pid and running");
        crate::eventually(WAIT, &what, || async {
            let (pid, state, _) = self.process(name);
            (pid > 0 && pid != old_pid && state == "running").then_some(pid)
        })
        .await
    }

    /// A connected SDK client (hello done), with a fresh clientId.
    pub async fn client(&self) -> Client {
        self.client_with(|o| o).await
    }

    /// A connected SDK client with adjusted options.
    pub async fn client_with(&self, f: impl FnOnce(ConnectOptions) -> ConnectOptions) -> Client {
        let opts = ConnectOptions::new(self.port, self.token.clone())
            .with_client_id(format!("e2e-{}", std::process::id()))
            .with_client_kind("test");
        tokio::time::timeout(WAIT, Client::connect(f(opts)))
            .await
            .expect("connect timed out")
            .expect("connect")
    }

    /// A raw WebSocket (no hello) for JSON-RPC framing tests.
    pub async fn raw(&self) -> raw::RawWs {
        raw::RawWs::connect(self.port).await
    }

    /// A raw WebSocket that already said hello.
    pub async fn raw_hello(&self) -> raw::RawWs {
        let mut ws = self.raw().await;
        let r = ws
            .call(
                "system.hello",
                json!({"token": self.token, "clientVersion": "e2e", "protocolVersion": "1.25.0"}),
            )
            .await;
        assert!(r.get("result").is_some(), "hello failed: {r}");
        ws
    }

    /// Pids of every supervised process and the supervisor.
    pub fn all_pids(&self) -> Vec<i32> {
        let st = self.status();
        let mut pids: Vec<i32> = st["processes"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .filter_map(|p| p["pid"].as_i64())
                    .filter(|p| *p > 0)
                    .map(|p| p as i32)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(p) = st["pid"].as_i64() {
            pids.push(p as i32);
        }
        pids
    }

    /// `snowpea supervisor stop`, asserting it succeeded.
    pub fn stop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            let out = self.snowpea(&["supervisor", "stop"]);
            assert!(
                out.status.success(),
                "stop failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

impl Drop for Suite {
    fn drop(&mut self) {
        if !self.stopped {
            let pids = self.all_pids();
            let _ = self.snowpea(&["supervisor", "stop"]);
            for p in pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// True when a process with this pid exists (and is not a zombie).
pub fn pid_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// Sends one text frame and returns the next JSON frame (helper for raw tests).
pub async fn send_recv(
    ws: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    text: &str,
) -> Option<Value> {
    ws.send(Message::text(text)).await.ok()?;
    loop {
        match tokio::time::timeout(WAIT, ws.next()).await.ok()?? {
            Ok(Message::Text(t)) => return serde_json::from_str(&t).ok(),
            Ok(Message::Close(_)) | Err(_) => return None,
            _ => {}
        }
    }
}

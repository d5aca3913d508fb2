//! Starts the real gateway binary on a temp home. The test binds the listening socket
//! itself and hands it over as fd 3 (`--listen-fd 3`, as the supervisor does), so it
//! knows the port and can connect at once — no sleeping for readiness.

use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use snowpea_common::home::Home;
use tempfile::TempDir;

use super::client::Client;

/// Deadline of every await on another process in these tests.
pub const T: Duration = Duration::from_secs(10);

/// A temp Snowpea home with a run dir and a token.
pub struct TestHome {
    dir: TempDir,
    /// The home.
    pub home: Home,
    /// The daemon token.
    pub token: String,
}

impl TestHome {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::new(dir.path().join("home"));
        home.ensure_dirs().expect("home dirs");
        let token = home.ensure_token().expect("token");
        TestHome { dir, home, token }
    }

    /// Writes `settings.json`.
    pub fn write_settings(&self, v: &Value) {
        std::fs::write(self.home.settings_path(), v.to_string()).expect("settings");
    }

    fn gateway_log(&self) -> std::path::PathBuf {
        self.dir.path().join("gateway.log")
    }
}

/// Options of a gateway start.
pub struct Opts<'a> {
    /// `--services`.
    pub services: &'a str,
    /// Extra environment for the child.
    pub env: Vec<(&'a str, String)>,
}

impl Default for Opts<'_> {
    fn default() -> Self {
        Opts {
            services: "session",
            env: vec![],
        }
    }
}

/// A running gateway process; killed on drop (its log is printed if the test failed).
pub struct GatewayProc {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    log: std::path::PathBuf,
    token: String,
}

impl GatewayProc {
    pub fn start(home: &TestHome, opts: Opts<'_>) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().unwrap().port();
        let fd = listener.as_raw_fd();
        let log = std::fs::File::create(home.gateway_log()).expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_snowpea-gateway"));
        cmd.arg("--home")
            .arg(home.home.root())
            .args(["--listen-fd", "3", "--services", opts.services])
            .env("SNOWPEA_LOG", "info,snowpea_gateway=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        for (k, v) in opts.env {
            cmd.env(k, v);
        }
        // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                use nix::libc;
                if fd == 3 {
                    if libc::fcntl(3, libc::F_SETFD, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if libc::dup2(fd, 3) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn snowpea-gateway");
        drop(listener);
        GatewayProc {
            child,
            port,
            log: home.gateway_log(),
            token: home.token.clone(),
        }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `ws://127.0.0.1:<port>/ws`.
    pub fn ws_url(&self) -> String {
        format!("ws://127.0.0.1:{}/ws", self.port)
    }

    /// A connected client that has not said hello.
    pub async fn connect(&self) -> Client {
        Client::connect(&self.ws_url()).await
    }

    /// A connected client after a successful `system.hello`.
    pub async fn authed(&self) -> Client {
        let mut c = self.connect().await;
        c.hello(&self.token).await;
        c
    }

    /// Waits for the process to exit (bounded) and returns its exit code.
    pub async fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "gateway did not exit within {within:?}"
            );
            // Polling a child's exit has no readiness event to await in std.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends a signal to the gateway.
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), sig)
            .expect("kill");
    }
}

impl Drop for GatewayProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            if let Ok(log) = std::fs::read_to_string(&self.log) {
                eprintln!("---- gateway log ----\n{log}---- end of gateway log ----");
            }
        }
    }
}

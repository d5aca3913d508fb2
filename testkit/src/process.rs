//! [`ServiceProcess`]: one real service binary on a temp home, for the service crates' tests.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use tonic::transport::Channel;

use crate::WAIT;

/// A service binary (`snowpea-svc-<name> --home H --socket H/run/<name>.sock`) started by a
/// test. Its stderr goes to a log file ([`ServiceProcess::log`]), printed when the test
/// fails; the process is SIGKILLed on drop. The home is the caller's (a `TempDir` it keeps),
/// so a test can restart the service on the same state.
#[derive(Debug)]
pub struct ServiceProcess {
    name: String,
    bin: PathBuf,
    home: PathBuf,
    socket: PathBuf,
    log: PathBuf,
    env: Vec<(String, String)>,
    env_removed: Vec<String>,
    current_dir: Option<PathBuf>,
    child: Option<Child>,
}

impl ServiceProcess {
    /// The service `name` (`memory`, `mcp`, …) from binary `bin` (use
    /// `env!("CARGO_BIN_EXE_snowpea-svc-<name>")`) on `home`; not started yet. Its log is
    /// `<home>/<name>.log`; `SNOWPEA_LOG` defaults to `info`.
    pub fn new(name: &str, bin: impl Into<PathBuf>, home: impl Into<PathBuf>) -> Self {
        let home = home.into();
        ServiceProcess {
            name: name.to_owned(),
            bin: bin.into(),
            socket: home.join("run").join(format!("{name}.sock")),
            log: home.join(format!("{name}.log")),
            home,
            env: vec![("SNOWPEA_LOG".into(), "info".into())],
            env_removed: Vec::new(),
            current_dir: None,
            child: None,
        }
    }

    /// Sets an environment variable of the child (never of the test process).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let key = key.into();
        self.env.retain(|(k, _)| *k != key);
        self.env_removed.retain(|k| *k != key);
        self.env.push((key, value.into()));
        self
    }

    /// Removes an inherited environment variable from the child (e.g. a developer's real
    /// API key, so a test never reaches a real provider).
    pub fn env_remove(mut self, key: impl Into<String>) -> Self {
        let key = key.into();
        self.env.retain(|(k, _)| *k != key);
        self.env_removed.push(key);
        self
    }

    /// Sets several environment variables of the child.
    pub fn envs<K: Into<String>, V: Into<String>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        for (k, v) in vars {
            self = self.env(k, v);
        }
        self
    }

    /// The child's working directory.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Where the child's stderr goes (default `<home>/<name>.log`).
    pub fn log_to(mut self, path: impl Into<PathBuf>) -> Self {
        self.log = path.into();
        self
    }

    /// Starts the process and waits (at most [`WAIT`]) until it reports SERVING.
    pub async fn start(mut self) -> Self {
        self.spawn().await;
        self
    }

    /// (Re)starts the process (killing a running one first) and waits until SERVING.
    pub async fn spawn(&mut self) {
        self.kill9();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap_or_else(|e| panic!("open {}: {e}", self.log.display()));
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--home")
            .arg(&self.home)
            .arg("--socket")
            .arg(&self.socket)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for k in &self.env_removed {
            cmd.env_remove(k);
        }
        if let Some(d) = &self.current_dir {
            cmd.current_dir(d);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.bin.display()));
        self.child = Some(child);
        // Bounded retry: the child binds its own socket.
        let deadline = tokio::time::Instant::now() + WAIT;
        while !snowpea_common::client::is_serving(&self.socket, "", Duration::from_millis(500))
            .await
        {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "svc-{} exited before SERVING ({status}); log:\n{}",
                    self.name,
                    self.log()
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "svc-{} not SERVING within {WAIT:?}; log:\n{}",
                self.name,
                self.log()
            );
            crate::pause().await;
        }
    }

    /// SIGKILLs the process (kill -9) and reaps it; no-op when it is not running.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the process and starts it again on the same home.
    pub async fn restart(&mut self) {
        self.spawn().await;
    }

    /// SIGTERMs the process and waits (at most [`WAIT`]) for it to exit.
    pub async fn terminate(&mut self) -> ExitStatus {
        let mut c = self.child.take().expect("service running");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("SIGTERM");
        let name = format!("svc-{} exit after SIGTERM", self.name);
        crate::within(WAIT, &name, async move {
            loop {
                // std has no readiness event for a child's exit.
                if let Some(s) = c.try_wait().expect("try_wait") {
                    return s;
                }
                crate::pause().await;
            }
        })
        .await
    }

    /// The pid of the running process.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("service running").id()
    }

    /// The home the service runs on.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Its unix socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// A fresh lazily connecting channel (a new connection, so a restart is not hidden by an
    /// old one).
    pub fn channel(&self) -> Channel {
        snowpea_common::client::unix_channel(self.socket.clone())
    }

    /// The log (stderr of every start) so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            eprintln!(
                "---- svc-{} log ----\n{}---- end of svc-{} log ----",
                self.name,
                self.log(),
                self.name
            );
        }
    }
}

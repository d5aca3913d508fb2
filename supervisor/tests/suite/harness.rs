//! The shared harness: a temp home and a temp bin dir of fakes, a bounded way to run
//! `snowpea`, bounded retries instead of sleeps, and cleanup on drop (every process the
//! test saw is SIGKILLed).

use std::cell::RefCell;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use snowpea_common::home::{DaemonJson, Home};

/// Upper bound of any wait on another process.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// Upper bound of an [`eventually`] retry loop.
pub const EVENTUALLY: Duration = Duration::from_secs(10);

/// Retries `check` every 20 ms until it returns `Some`, for at most `within`.
#[track_caller]
pub fn eventually_within<T>(
    within: Duration,
    what: &str,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// [`eventually_within`] with the default 10 s bound.
#[track_caller]
pub fn eventually<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    eventually_within(EVENTUALLY, what, check)
}

/// Whether `pid` is alive (zombies count as gone).
pub fn alive(pid: u32) -> bool {
    snowpea::spawn::pid_alive(pid)
}

/// Mode bits of `p`.
pub fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// One test's suite: its own home and fake binaries.
pub struct Suite {
    /// Keeps the temp home alive.
    _home_dir: tempfile::TempDir,
    bin_dir: tempfile::TempDir,
    /// Home wrapper of `home_dir`.
    pub home: Home,
    /// Every pid seen, killed on drop.
    seen: RefCell<Vec<u32>>,
}

impl Suite {
    /// A fresh temp home and a bin dir with fakes for every service and the gateway.
    pub fn new() -> Suite {
        let home_dir = tempfile::tempdir().unwrap();
        let bin_dir = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let specs = snowpea::services::SERVICES
            .iter()
            .chain(std::iter::once(&snowpea::services::GATEWAY));
        for spec in specs {
            let script = format!(
                "#!/bin/sh\n{}={} {}=\"$*\" exec '{}' --exact {} --nocapture --test-threads=1\n",
                super::fake::ROLE_ENV,
                spec.name,
                super::fake::ARGV_ENV,
                exe.display(),
                super::fake::ENTRY,
            );
            let path = bin_dir.path().join(spec.binary);
            std::fs::write(&path, script).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let home = Home::new(home_dir.path().join("home"));
        Suite {
            _home_dir: home_dir,
            bin_dir,
            home,
            seen: RefCell::new(Vec::new()),
        }
    }

    /// `snowpea <args> --home <home>` with the fakes and a short stop grace.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_snowpea"));
        c.args(args)
            .arg("--home")
            .arg(self.home.root())
            .env("SNOWPEA_BIN_DIR", self.bin_dir.path())
            .env("SNOWPEA_STOP_GRACE_MS", "2000")
            .env_remove("SNOWPEA_HOME")
            .stdin(Stdio::null());
        c
    }

    /// Runs `snowpea <args>` to completion (bounded by [`TIMEOUT`]).
    pub fn run(&self, args: &[&str]) -> Output {
        let mut child = self
            .cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let out_t = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = out.read_to_end(&mut v);
            v
        });
        let err_t = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = err.read_to_end(&mut v);
            v
        });
        let deadline = Instant::now() + TIMEOUT;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("snowpea {args:?} did not finish within {TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Output {
            status,
            stdout: out_t.join().unwrap(),
            stderr: err_t.join().unwrap(),
        }
    }

    /// `supervisor start`, asserting success; returns `daemon.json`.
    pub fn start(&self) -> DaemonJson {
        let out = self.run(&["supervisor", "start"]);
        assert!(out.status.success(), "start failed: {}", text(&out));
        let d = self.home.read_daemon_json().unwrap();
        self.seen.borrow_mut().push(d.pid);
        for p in self.processes() {
            self.seen.borrow_mut().push(pid_of(&p));
        }
        d
    }

    /// `supervisor status --json` (panics when not running; exit 4, a process `failed`, is
    /// a status too).
    pub fn status(&self) -> Value {
        let out = self.run(&["supervisor", "status", "--json"]);
        assert!(
            matches!(out.status.code(), Some(0 | 4)),
            "status failed: {}",
            text(&out)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        for p in v["processes"].as_array().unwrap() {
            self.seen.borrow_mut().push(pid_of(p));
        }
        v
    }

    /// The `processes` of [`Suite::status`].
    pub fn processes(&self) -> Vec<Value> {
        self.status()["processes"].as_array().unwrap().clone()
    }

    /// The status row of `name`.
    pub fn process(&self, name: &str) -> Value {
        self.processes()
            .into_iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no process {name}"))
    }

    /// Sets (true) or clears the fake's crash flag for `role`.
    pub fn crash_flag(&self, role: &str, on: bool) {
        let p = self.home.root().join(format!("fake-{role}-crash"));
        if on {
            std::fs::create_dir_all(self.home.root()).unwrap();
            std::fs::write(p, b"").unwrap();
        } else {
            let _ = std::fs::remove_file(p);
        }
    }

    /// Remembers `pid` for the cleanup.
    pub fn track(&self, pid: u32) {
        self.seen.borrow_mut().push(pid);
    }
}

impl Drop for Suite {
    fn drop(&mut self) {
        let mut pids = self.seen.borrow().clone();
        if let Ok(d) = self.home.read_daemon_json() {
            pids.push(d.pid);
        }
        for pid in pids.into_iter().filter(|p| *p > 0) {
            if alive(pid) {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
        }
    }
}

/// The pid of a status row.
pub fn pid_of(p: &Value) -> u32 {
    p["pid"].as_u64().unwrap_or(0) as u32
}

/// stdout and stderr of `out`, for assertion messages.
pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// One `GET /health` against the gateway port; true on 200.
pub fn health(port: u16) -> bool {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(snowpea::ready::gateway_healthy(port))
}

/// Whether the service socket answers SERVING.
pub fn serving(socket: &Path) -> bool {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(snowpea::ready::service_serving(socket))
}

/// SIGKILLs `pid`.
pub fn kill9(pid: u32) {
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
}

/// A path under the temp home as `PathBuf`.
pub fn socket_of(p: &Value) -> PathBuf {
    PathBuf::from(p["socket"].as_str().unwrap())
}

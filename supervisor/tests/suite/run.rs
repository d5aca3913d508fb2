//! `snowpea run` end to end: the real `snowpea`, `snowpea-gateway` and every
//! `snowpea-svc-*` of [`snowpea::services::SERVICES`] on a temp home, with the scripted
//! provider (`SNOWPEA_PROVIDER=fake:<script>`, set on the child only). `run` starts the suite itself; every test stops it again on drop.
//!
//! The real service binaries must be built next to `snowpea` (`cargo build --workspace
//! --bins`, as `scripts/test.sh` does). Each child runs in its own session (`setsid`), so it
//! has no controlling terminal: approvals cannot be asked and are denied unless `--yes`.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use snowpea_common::home::Home;

use super::harness::{alive, text};

/// Bound of one `snowpea run` (it may cold-start the suite first).
const RUN_TIMEOUT: Duration = Duration::from_secs(90);
/// Bound of `snowpea supervisor stop`.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The script the tests share; each test uses the steps its prompt matches.
fn script() -> Value {
    json!({
        "steps": [
            {"match": "hello", "text": "Hi there"},
            {"match": "run it", "tool_calls": [
                {"name": "shell", "arguments": {"command": "echo hi > out.txt"}}
            ]},
            {"after_tool": "shell", "text": "done"},
            {"match": "slow", "delaySec": 60, "text": "too late"}
        ],
        "default": {"text": "ok"}
    })
}

/// One test's suite: a temp home, a temp project folder and the provider script.
pub(super) struct RunSuite {
    _dir: tempfile::TempDir,
    pub(super) home: Home,
    pub(super) project: PathBuf,
    script: PathBuf,
}

impl RunSuite {
    pub(super) fn new() -> RunSuite {
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_snowpea")).parent().unwrap();
        let specs = snowpea::services::SERVICES
            .iter()
            .chain(std::iter::once(&snowpea::services::GATEWAY));
        for binary in specs.map(|s| s.binary) {
            assert!(
                bin_dir.join(binary).exists(),
                "{binary} is not built in {}; run `cargo build --workspace --bins` first",
                bin_dir.display()
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let script = dir.path().join("script.json");
        std::fs::write(&script, script_text()).unwrap();
        RunSuite {
            home: Home::new(dir.path().join("home")),
            project: std::fs::canonicalize(project).unwrap(),
            script,
            _dir: dir,
        }
    }

    /// `snowpea <args>` with this home, the scripted provider, no terminal, stdin closed and
    /// the project folder as the current directory.
    pub(super) fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_snowpea"));
        // Only the model settings a test gives: none of the runner's API keys.
        for var in snowpea::model_env::MODEL_VARS {
            c.env_remove(var);
        }
        c.args(args)
            .arg("--home")
            .arg(self.home.root())
            .current_dir(&self.project)
            .env(
                "SNOWPEA_PROVIDER",
                format!("fake:{}", self.script.display()),
            )
            .env("SNOWPEA_STOP_GRACE_MS", "2000")
            .env_remove("SNOWPEA_HOME")
            .env_remove("SNOWPEA_BIN_DIR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: setsid is async-signal-safe and the closure does not allocate.
        unsafe {
            c.pre_exec(|| {
                nix::unistd::setsid()?;
                Ok(())
            });
        }
        c
    }

    /// `snowpea run <args>` to completion.
    pub(super) fn run(&self, args: &[&str]) -> Output {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        output(self.cmd(&all).spawn().unwrap(), RUN_TIMEOUT)
    }

    /// `c` to completion.
    pub(super) fn output(&self, c: Command) -> Output {
        let mut c = c;
        output(c.spawn().unwrap(), RUN_TIMEOUT)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.project.join(name)
    }
}

impl Drop for RunSuite {
    fn drop(&mut self) {
        let daemon = self.home.read_daemon_json().ok();
        let mut stop = self.cmd(&["supervisor", "stop"]);
        stop.env_remove("SNOWPEA_PROVIDER");
        if let Ok(child) = stop.spawn() {
            let out = output(child, STOP_TIMEOUT);
            if !out.status.success() {
                eprintln!("supervisor stop failed: {}", text(&out));
            }
        }
        // Whatever stop could not end: the supervisor's children die with it (PDEATHSIG).
        if let Some(d) = daemon.filter(|d| d.pid > 0 && alive(d.pid)) {
            let _ = kill(Pid::from_raw(d.pid as i32), Signal::SIGKILL);
        }
    }
}

fn script_text() -> String {
    serde_json::to_string_pretty(&script()).unwrap()
}

/// Collects a child's output, killing it after `timeout`.
fn output(mut child: Child, timeout: Duration) -> Output {
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let status = wait(&mut child, timeout);
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

/// Waits for the child's exit, at most `timeout` (then kills it and fails).
fn wait(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("snowpea did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(super) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(super) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every stdout line parsed as JSON (fails on a line that is not).
fn json_lines(out: &Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}\n{}", text(out)))
        })
        .collect()
}

#[test]
fn plain_run_streams_the_answer_to_stdout_and_exits_0() {
    let s = RunSuite::new();
    // No --workdir: the current directory (the project) is the session's.
    let out = s.run(&["hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(stdout(&out), "Hi there\n", "{}", text(&out));
    assert!(stderr(&out).contains("snowpea started"), "{}", text(&out));

    // A second run finds the suite running (the `hello` step is used up: the default reply).
    let out = s.run(&["hello again"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(stdout(&out), "ok\n", "{}", text(&out));
    assert!(!stderr(&out).contains("snowpea started"), "{}", text(&out));
}

#[test]
fn json_run_prints_one_event_per_line_ending_with_turn_done() {
    let s = RunSuite::new();
    let workdir = s.project.to_str().unwrap().to_owned();
    let out = s.run(&["--json", "--workdir", &workdir, "hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let events = json_lines(&out);
    assert!(!events.is_empty(), "{}", text(&out));
    let session = events[0]["sessionId"].as_str().unwrap().to_owned();
    let mut last_seq = 0;
    for e in &events {
        assert_eq!(e["sessionId"], session.as_str(), "{e}");
        let seq = e["seq"].as_u64().unwrap();
        assert!(seq > last_seq, "seq not increasing: {e}");
        last_seq = seq;
        assert!(
            e["kind"].is_string() && e["payload"].is_object() && e["ts"].is_string(),
            "{e}"
        );
    }
    let answer: String = events
        .iter()
        .filter(|e| e["kind"] == "message.delta")
        .filter_map(|e| e["payload"]["text"].as_str())
        .collect();
    assert_eq!(answer, "Hi there");
    let last = events.last().unwrap();
    assert_eq!(last["kind"], "turn.done", "{}", text(&out));
    assert_eq!(last["payload"]["reason"], "complete");
}

#[test]
fn yes_approves_a_shell_call_in_accept_mode() {
    let s = RunSuite::new();
    let workdir = s.project.to_str().unwrap().to_owned();
    let out = s.run(&[
        "--mode",
        "accept",
        "--yes",
        "--workdir",
        &workdir,
        "please run it",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let written = std::fs::read_to_string(s.file("out.txt")).unwrap_or_default();
    assert_eq!(written.trim(), "hi", "{}", text(&out));
    assert_eq!(stdout(&out), "done\n", "{}", text(&out));
    let err = stderr(&out);
    assert!(err.contains("▸ shell: echo hi > out.txt"), "{}", text(&out));
    assert!(err.contains("✓ shell"), "{}", text(&out));
}

#[test]
fn without_yes_and_without_a_terminal_the_shell_call_is_denied() {
    let s = RunSuite::new();
    let workdir = s.project.to_str().unwrap().to_owned();
    let out = s.run(&["--mode", "accept", "--workdir", &workdir, "please run it"]);
    // The refusal ends the turn `denied`: exit 4 (issue 25 items 7 and 8).
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(!s.file("out.txt").exists(), "{}", text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("denied (no terminal to ask; use --yes or --mode)"),
        "{}",
        text(&out)
    );
    assert!(!err.contains("denied automatically"), "{}", text(&out));
}

/// `snowpea <args>` to completion with `env` set and `SNOWPEA_PROVIDER` removed unless
/// `env` sets it.
pub(super) fn with_env(s: &RunSuite, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = s.cmd(args);
    c.env_remove("SNOWPEA_PROVIDER");
    for (k, v) in env {
        c.env(k, v);
    }
    output(c.spawn().unwrap(), RUN_TIMEOUT)
}

#[test]
fn a_provider_set_only_on_the_client_names_the_restart() {
    let s = RunSuite::new();
    // The suite starts without a provider ...
    let out = with_env(&s, &["supervisor", "start"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // ... and `run` has SNOWPEA_PROVIDER set (RunSuite::cmd sets it): it says at once that
    // the suite has no model, with the restart that gives it this shell's (issue 39 item 1).
    let out = s.run(&["hello"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = stderr(&out);
    assert!(err.contains("the suite has no model"), "{}", text(&out));
    let home = s.home.root().display().to_string();
    assert!(
        err.contains(&format!(
            "snowpea supervisor stop --home {home} && SNOWPEA_PROVIDER=fake:"
        )),
        "{}",
        text(&out)
    );
    assert!(!err.contains("provider.configure"), "{}", text(&out));
}

#[test]
fn run_that_starts_a_suite_without_a_model_says_so_at_once_with_the_fix() {
    let s = RunSuite::new();
    let out = with_env(&s, &["run", "hello"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = stderr(&out);
    assert!(err.contains("snowpea started"), "{}", text(&out));
    assert!(
        err.contains(
            "the suite has no model: it was started without an API key or SNOWPEA_PROVIDER"
        ),
        "{}",
        text(&out)
    );
    assert!(
        err.contains("ANTHROPIC_API_KEY=… snowpea supervisor start"),
        "{}",
        text(&out)
    );
    assert!(
        err.contains("SNOWPEA_PROVIDER=fake:$PWD/examples/demo.json"),
        "{}",
        text(&out)
    );
    // Said before any turn: no session was opened for the prompt.
    assert!(!err.contains("session.create failed"), "{}", text(&out));
}

#[test]
fn start_on_a_live_suite_with_other_model_settings_names_the_restart_and_exits_1() {
    let s = RunSuite::new();
    let out = with_env(&s, &["supervisor", "start"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let home = s.home.root().display().to_string();

    // The README's own line, on a suite started without it.
    let out = s.output(s.cmd(&["supervisor", "start"]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("snowpea is already running on port"),
        "{}",
        text(&out)
    );
    let script = std::fs::canonicalize(&s.script).unwrap();
    assert!(
        err.contains(&format!(
            "SNOWPEA_PROVIDER=fake:{} here; the suite runs without it",
            script.display()
        )),
        "{}",
        text(&out)
    );
    assert!(
        err.contains(&format!(
            "snowpea supervisor stop --home {home} && SNOWPEA_PROVIDER=fake:{} snowpea supervisor start --home {home}",
            script.display()
        )),
        "{}",
        text(&out)
    );

    // An API key the suite did not start with gets the same answer, without the key.
    let out = with_env(
        &s,
        &["supervisor", "start"],
        &[("ANTHROPIC_API_KEY", "sk-test-secret")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("ANTHROPIC_API_KEY is set here; the suite runs without it"),
        "{}",
        text(&out)
    );
    assert!(
        err.contains("ANTHROPIC_API_KEY=… snowpea supervisor start"),
        "{}",
        text(&out)
    );
    assert!(!err.contains("sk-test-secret"), "{}", text(&out));

    // A shell without model settings keeps the suite as it runs.
    let out = with_env(&s, &["supervisor", "start"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn run_with_a_key_the_running_suite_lacks_names_the_restart() {
    let s = RunSuite::new();
    let out = s.output(s.cmd(&["supervisor", "start"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let mut run = s.cmd(&["run", "hello"]);
    run.env("OPENAI_API_KEY", "sk-other");
    let out = s.output(run);
    // The suite's own model answers; the note says the key is not used and how to use it.
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(stdout(&out), "Hi there\n", "{}", text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("OPENAI_API_KEY is set here; the suite runs without it"),
        "{}",
        text(&out)
    );
    assert!(
        err.contains("OPENAI_API_KEY=… SNOWPEA_PROVIDER=fake:"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_fake_script_that_cannot_be_used_is_refused_at_start() {
    let s = RunSuite::new();
    let out = with_env(
        &s,
        &["supervisor", "start"],
        &[("SNOWPEA_PROVIDER", "fake:/missing/file.json")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("cannot read /missing/file.json"),
        "{}",
        text(&out)
    );
    assert!(
        err.contains("fake:$PWD/examples/demo.json"),
        "{}",
        text(&out)
    );
    assert!(!stdout(&out).contains("snowpea started"), "{}", text(&out));
    assert!(!s.home.daemon_json_path().exists(), "the suite was started");

    std::fs::write(s.project.join("typo.json"), r#"{"stepz": []}"#).unwrap();
    let out = with_env(
        &s,
        &["supervisor", "start"],
        &[("SNOWPEA_PROVIDER", "fake:typo.json")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        stderr(&out).contains("`stepz` is not a field of a script"),
        "{}",
        text(&out)
    );
    assert!(!s.home.daemon_json_path().exists(), "the suite was started");
}

#[test]
fn an_unknown_mode_is_a_usage_error() {
    let s = RunSuite::new();
    let out = s.run(&["--mode", "yolo", "hello"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!s.home.daemon_json_path().exists(), "the suite was started");
}

#[test]
fn a_missing_workdir_is_a_usage_error() {
    let s = RunSuite::new();
    let missing = s.project.join("nope");
    let out = s.run(&["--workdir", missing.to_str().unwrap(), "hello"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(stderr(&out).contains("nope"), "{}", text(&out));
    assert!(!s.home.daemon_json_path().exists(), "the suite was started");
}

#[test]
fn ctrl_c_interrupts_the_turn_and_exits_5() {
    let s = RunSuite::new();
    let mut child = s.cmd(&["run", "--json", "a slow one"]).spawn().unwrap();
    let (tx, lines) = mpsc::channel();
    let reader = BufReader::new(child.stdout.take().unwrap());
    let out_t = std::thread::spawn(move || {
        for line in reader.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let err_t = drain(child.stderr.take().unwrap());
    // Interrupt once the turn is running.
    let deadline = Instant::now() + RUN_TIMEOUT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines.recv_timeout(left).unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("no turn.started within {RUN_TIMEOUT:?}; saw {seen:?}");
        });
        let event: Value = serde_json::from_str(&line).unwrap();
        seen.push(event.clone());
        if event["kind"] == "turn.started" {
            break;
        }
    }
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let status = wait(&mut child, Duration::from_secs(30));
    out_t.join().unwrap();
    seen.extend(
        lines
            .try_iter()
            .map(|l| serde_json::from_str::<Value>(&l).unwrap()),
    );
    let err = String::from_utf8_lossy(&err_t.join().unwrap()).into_owned();
    assert_eq!(status.code(), Some(5), "stderr: {err}\nevents: {seen:?}");
    let last = seen.last().unwrap();
    assert_eq!(last["kind"], "turn.done", "events: {seen:?}");
    assert_eq!(last["payload"]["reason"], "interrupted", "events: {seen:?}");
    assert!(err.contains("interrupting"), "stderr: {err}");
}

#[test]
fn a_turn_past_the_timeout_is_interrupted_and_exits_5() {
    let s = RunSuite::new();
    let out = s.run(&["--timeout", "2", "a slow one"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    assert!(
        stderr(&out).contains("did not end within 2s"),
        "{}",
        text(&out)
    );
    assert!(!stdout(&out).contains("too late"), "{}", text(&out));
}

#[test]
fn a_suite_that_cannot_start_exits_3() {
    let s = RunSuite::new();
    let empty_bin_dir = tempfile::tempdir().unwrap();
    let mut cmd = s.cmd(&["run", "hello"]);
    cmd.env("SNOWPEA_BIN_DIR", empty_bin_dir.path());
    let out = output(cmd.spawn().unwrap(), RUN_TIMEOUT);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(stderr(&out).contains("unavailable"), "{}", text(&out));
    assert_eq!(stdout(&out), "", "{}", text(&out));
}

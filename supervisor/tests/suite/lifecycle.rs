//! Start, status, logs and stop of the whole suite.

use std::process::Stdio;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::harness::*;

#[test]
fn start_creates_owner_only_home_and_daemon_json() {
    let suite = Suite::new();
    let out = suite.run(&["supervisor", "start"]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let d = suite.home.read_daemon_json().unwrap();
    suite.track(d.pid);
    assert_eq!(
        stdout.trim(),
        format!(
            "snowpea started: ws://127.0.0.1:{}/ws (home {}, pid {})",
            d.port,
            suite.home.root().display(),
            d.pid
        )
    );

    let home = &suite.home;
    for dir in [
        home.root().to_path_buf(),
        home.run_dir(),
        home.logs_dir(),
        home.state_dir(),
    ] {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
    assert_eq!(mode(&home.token_path()), 0o600);
    assert_eq!(mode(&home.daemon_json_path()), 0o600);
    assert_eq!(mode(&home.supervisor_socket()), 0o600);
    assert_eq!(d.token, home.read_token().unwrap());
    assert_eq!(d.protocol_version, snowpea_proto::PROTOCOL_VERSION);
    assert!(d.started_at.ends_with('Z'), "{}", d.started_at);
    assert!(alive(d.pid));
    assert!(
        health(d.port),
        "gateway answers /health on the daemon.json port"
    );

    // status --json lists every process, running, in start order.
    let st = suite.status();
    assert_eq!(st["pid"], d.pid);
    assert_eq!(st["port"], d.port);
    let procs = st["processes"].as_array().unwrap();
    let names: Vec<&str> = procs.iter().map(|p| p["name"].as_str().unwrap()).collect();
    let expected: Vec<&str> = snowpea::services::all()
        .iter()
        .map(|(s, _)| s.name)
        .collect();
    assert_eq!(names, expected);
    for p in procs {
        assert_eq!(p["state"], "running", "{p}");
        assert_eq!(p["restarts"], 0, "{p}");
        assert!(alive(pid_of(p)), "{p}");
    }
    assert_eq!(
        procs[0]["socket"],
        home.socket("session").display().to_string()
    );
    assert!(serving(&socket_of(&procs[0])));

    // One log per process, owner-only; the children got the documented argv.
    let logs = std::iter::once("supervisor")
        .chain(snowpea::services::all().into_iter().map(|(s, _)| s.name));
    for name in logs {
        assert_eq!(mode(&home.log_file(name)), 0o600, "{name}.log");
    }
    let gateway_log = std::fs::read_to_string(home.log_file("gateway")).unwrap();
    assert!(
        gateway_log.contains(&format!(
            "argv: --home {} --listen-fd 3 --services session",
            home.root().display()
        )),
        "{gateway_log}"
    );
    let session_log = std::fs::read_to_string(home.log_file("session")).unwrap();
    assert!(
        session_log.contains(&format!(
            "argv: --home {} --socket {}",
            home.root().display(),
            home.socket("session").display()
        )),
        "{session_log}"
    );

    // A second start finds it running and exits 0.
    let again = suite.run(&["supervisor", "start"]);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(
        String::from_utf8_lossy(&again.stdout).trim(),
        format!(
            "snowpea is already running on port {} (pid {})",
            d.port, d.pid
        )
    );
    // So does a second foreground start.
    let again = suite.run(&["supervisor", "start", "--foreground"]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stdout).contains("already running"));
}

#[test]
fn start_honours_port() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let suite = Suite::new();
    let out = suite.run(&["supervisor", "start", "--port", &port.to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let d = suite.home.read_daemon_json().unwrap();
    suite.track(d.pid);
    assert_eq!(d.port, port);
    assert!(health(port));
}

#[test]
fn stop_leaves_no_process_behind() {
    let suite = Suite::new();
    let d = suite.start();
    let pids: Vec<u32> = suite.processes().iter().map(pid_of).collect();
    assert_eq!(pids.len(), snowpea::services::all().len());

    let out = suite.run(&["supervisor", "stop"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("snowpea stopped (pid {})", d.pid)
    );
    assert!(!alive(d.pid), "stop returns once the supervisor is gone");
    eventually("children gone", || {
        pids.iter().all(|p| !alive(*p)).then_some(())
    });
    assert!(!suite.home.daemon_json_path().exists());
    assert!(!suite.home.supervisor_socket().exists());
    assert!(!suite.home.socket("session").exists());

    let st = suite.run(&["supervisor", "status"]);
    assert_eq!(st.status.code(), Some(3), "{}", text(&st));
    let again = suite.run(&["supervisor", "stop"]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stdout).contains("not running"));
}

#[test]
fn status_when_not_running_exits_3() {
    let suite = Suite::new();
    let out = suite.run(&["supervisor", "status"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not running"));
    let out = suite.run(&["supervisor", "status", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["running"], false);
}

#[test]
fn status_table_shows_every_process() {
    let suite = Suite::new();
    suite.start();
    let out = suite.run(&["supervisor", "status"]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("PROCESS"), "{table}");
    for (spec, _) in snowpea::services::all() {
        let name = spec.name;
        let row = table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{table}"));
        assert!(row.contains("running"), "{row}");
    }
}

#[test]
fn service_failing_at_start_fails_the_start() {
    let suite = Suite::new();
    suite.crash_flag("session", true);
    let out = suite.run(&["supervisor", "start"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("failed to start"), "{stderr}");
    assert!(
        !stderr.contains("snowpea: snowpea"),
        "no doubled prefix: {stderr}"
    );
    assert!(
        stderr.contains("crash flag set"),
        "the log tail names the cause: {stderr}"
    );
    assert!(!suite.home.daemon_json_path().exists());
    eventually("the failed supervisor is gone", || {
        (suite.run(&["supervisor", "status"]).status.code() == Some(3)).then_some(())
    });
}

#[test]
fn foreground_supervisor_stops_on_sigterm() {
    let suite = Suite::new();
    let mut child = suite
        .cmd(&["supervisor", "start", "--foreground"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    suite.track(child.id());
    let d = eventually("daemon.json written", || suite.home.read_daemon_json().ok());
    assert_eq!(d.pid, child.id());
    let pids: Vec<u32> = suite.processes().iter().map(pid_of).collect();

    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = eventually("the supervisor exits", || child.try_wait().unwrap());
    assert!(status.success(), "{status:?}");
    assert!(pids.iter().all(|p| !alive(*p)));
    assert!(!suite.home.daemon_json_path().exists());
}

#[test]
fn logs_prints_the_tail_of_a_process_log() {
    let suite = Suite::new();
    suite.start();
    let out = suite.run(&["supervisor", "logs", "session", "-n", "1"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);

    let out = suite.run(&["supervisor", "logs"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("suite ready"));

    let out = suite.run(&["supervisor", "logs", "all"]);
    let all = String::from_utf8_lossy(&out.stdout);
    for name in ["gateway", "session", "supervisor"] {
        assert!(
            all.lines()
                .any(|l| l.starts_with(&format!("{name:<10} | "))),
            "{all}"
        );
    }

    let out = suite.run(&["supervisor", "logs", "nosuch"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn usage_errors_exit_2() {
    let suite = Suite::new();
    let out = suite.run(&["supervisor", "frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    let help = suite.run(&["supervisor", "status", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("3  not running"));
}

#[test]
fn stop_kills_a_process_that_ignores_sigterm_after_the_grace() {
    let suite = Suite::new();
    std::fs::create_dir_all(suite.home.root()).unwrap();
    std::fs::write(suite.home.root().join("fake-gateway-ignore-term"), b"").unwrap();
    let d = suite.start();
    let pids: Vec<u32> = suite.processes().iter().map(pid_of).collect();

    let out = suite.run(&["supervisor", "stop"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!alive(d.pid));
    assert!(pids.iter().all(|p| !alive(*p)));
    let log = std::fs::read_to_string(suite.home.log_file("supervisor")).unwrap();
    assert!(log.contains("grace period over, SIGKILL"), "{log}");
    let gateway_log = std::fs::read_to_string(suite.home.log_file("gateway")).unwrap();
    assert!(
        gateway_log.contains("ignoring the termination signal"),
        "{gateway_log}"
    );
}

#[test]
fn foreground_also_writes_supervisor_log_and_start_never_echoes_tracing() {
    // A detached start with SNOWPEA_LOG=debug: the terminal gets only the start line
    // (issue 25 item 9); the debug lines go to logs/supervisor.log, once each.
    let suite = Suite::new();
    let out = suite
        .cmd(&["supervisor", "start"])
        .env("SNOWPEA_LOG", "debug")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let d = suite.home.read_daemon_json().unwrap();
    suite.track(d.pid);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("DEBUG"),
        "{}",
        text(&out)
    );
    let log = std::fs::read_to_string(suite.home.log_file("supervisor")).unwrap();
    let spawned = log.lines().filter(|l| l.contains("spawned")).count();
    assert_eq!(
        spawned,
        suite.processes().len(),
        "one line per spawn: {log}"
    );
    assert!(suite.run(&["supervisor", "stop"]).status.success());

    // --foreground: the lines go to the terminal and to logs/supervisor.log.
    let suite = Suite::new();
    let mut child = suite
        .cmd(&["supervisor", "start", "--foreground"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    suite.track(child.id());
    eventually("daemon.json written", || suite.home.read_daemon_json().ok());
    let log = std::fs::read_to_string(suite.home.log_file("supervisor")).unwrap_or_default();
    assert!(log.contains("spawned"), "{log}");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    eventually("the supervisor exits", || child.try_wait().unwrap());
}

//! Crashes: a killed child is restarted (same port for the gateway), too many crashes
//! mark one process failed while the rest keeps running, and killing the supervisor
//! leaves no orphan.

use std::time::Duration;

use super::harness::*;

#[test]
fn killed_service_is_restarted_and_serving_again() {
    let suite = Suite::new();
    suite.start();
    let before = suite.process("session");
    let gateway_pid = pid_of(&suite.process("gateway"));
    kill9(pid_of(&before));

    let after = eventually("session restarted", || {
        let p = suite.process("session");
        (p["state"] == "running" && p["restarts"] == 1).then_some(p)
    });
    assert_ne!(pid_of(&after), pid_of(&before));
    assert_eq!(after["lastExit"], "signal 9");
    assert!(serving(&socket_of(&after)));
    assert_eq!(
        pid_of(&suite.process("gateway")),
        gateway_pid,
        "the gateway is untouched"
    );
}

#[test]
fn killed_gateway_comes_back_on_the_same_port() {
    let suite = Suite::new();
    let d = suite.start();
    let before = suite.process("gateway");
    kill9(pid_of(&before));
    let after = eventually("gateway restarted", || {
        let p = suite.process("gateway");
        (p["state"] == "running" && p["restarts"] == 1).then_some(p)
    });
    assert_ne!(pid_of(&after), pid_of(&before));
    assert!(health(d.port));
    assert_eq!(
        suite.home.read_daemon_json().unwrap(),
        d,
        "daemon.json unchanged"
    );
}

#[test]
fn restart_intensity_marks_only_that_process_failed() {
    let suite = Suite::new();
    let d = suite.start();
    let gateway_pid = pid_of(&suite.process("gateway"));
    suite.crash_flag("session", true);
    kill9(pid_of(&suite.process("session")));

    // Backoff 100+200+400+800+1600 ms, then the sixth crash within 60 s gives up.
    let failed = eventually_within(Duration::from_secs(20), "session failed", || {
        let p = suite.process("session");
        (p["state"] == "failed").then_some(p)
    });
    assert_eq!(failed["restarts"], 5);
    assert_eq!(failed["pid"], 0);
    assert_eq!(failed["lastExit"], "exit status 1");
    let gateway = suite.process("gateway");
    assert_eq!(gateway["state"], "running");
    assert_eq!(pid_of(&gateway), gateway_pid);
    assert!(health(d.port));
    // `status` says so in its exit code (issue 25 item 9) and names the process.
    let out = suite.run(&["supervisor", "status"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("session failed"),
        "{}",
        text(&out)
    );

    // An operator fixes the cause and restarts it by hand.
    suite.crash_flag("session", false);
    let out = suite.run(&["supervisor", "restart", "session"]);
    assert!(out.status.success(), "{}", text(&out));
    let p = suite.process("session");
    assert_eq!(p["state"], "running");
    assert!(serving(&socket_of(&p)));
    let out = suite.run(&["supervisor", "status"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn killing_the_supervisor_kills_every_child() {
    let suite = Suite::new();
    let d = suite.start();
    let pids: Vec<u32> = suite.processes().iter().map(pid_of).collect();
    assert!(pids.iter().all(|p| alive(*p)));
    kill9(d.pid);
    eventually("every child gone after kill -9 of the supervisor", || {
        pids.iter().all(|p| !alive(*p)).then_some(())
    });

    // The next start cleans up the stale socket and daemon.json.
    let d2 = suite.start();
    assert_ne!(d2.pid, d.pid);
    assert!(health(d2.port));
}

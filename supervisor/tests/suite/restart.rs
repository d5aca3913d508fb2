//! `snowpea supervisor restart`.

use super::harness::*;

#[test]
fn restart_one_process_by_name() {
    let suite = Suite::new();
    suite.start();
    let session = suite.process("session");
    let gateway = suite.process("gateway");

    let out = suite.run(&["supervisor", "restart", "session"]);
    assert!(out.status.success(), "{}", text(&out));
    let after = suite.process("session");
    assert_eq!(after["state"], "running");
    assert_eq!(after["restarts"], 1);
    assert_ne!(pid_of(&after), pid_of(&session));
    assert!(!alive(pid_of(&session)));
    assert_eq!(pid_of(&suite.process("gateway")), pid_of(&gateway));
    assert!(serving(&socket_of(&after)));
}

#[test]
fn restart_all_restarts_services_then_gateway() {
    let suite = Suite::new();
    let d = suite.start();
    let before: Vec<u32> = suite.processes().iter().map(pid_of).collect();
    let out = suite.run(&["supervisor", "restart", "all"]);
    assert!(out.status.success(), "{}", text(&out));
    let after = suite.processes();
    for (p, old) in after.iter().zip(&before) {
        assert_eq!(p["state"], "running", "{p}");
        assert_eq!(p["restarts"], 1, "{p}");
        assert_ne!(pid_of(p), *old);
    }
    assert!(health(d.port));
}

#[test]
fn restart_of_an_unknown_process_fails() {
    let suite = Suite::new();
    suite.start();
    let out = suite.run(&["supervisor", "restart", "nosuch"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nosuch"));
}

#[test]
fn restart_when_not_running_exits_3() {
    let suite = Suite::new();
    let out = suite.run(&["supervisor", "restart", "session"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
}

#[test]
fn an_unknown_process_name_lists_the_valid_ones() {
    let suite = Suite::new();
    // logs needs no running suite.
    let out = suite.run(&["supervisor", "logs", "sesion"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no process named \"sesion\""), "{err}");
    assert!(
        err.contains("session") && err.contains("gateway") && err.contains("supervisor"),
        "{err}"
    );

    suite.start();
    let out = suite.run(&["supervisor", "restart", "sesion"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("valid names: session, memory"), "{err}");
    assert!(err.contains("gateway, all"), "{err}");
}

//! Start/stop of the whole suite: stop leaves nothing behind; kill -9 of the supervisor
//! leaves no orphans; a second start says it is running.
use std::time::Duration;

use snowpea_e2e::{pid_alive, Suite};
use snowpea_testkit::assert_eventually;

#[tokio::test]
async fn stop_leaves_no_process_behind() {
    let mut suite = Suite::start().await;
    let pids = suite.all_pids();
    assert!(pids.len() >= 3, "supervisor, session, gateway: {pids:?}");
    let again = suite.snowpea(&["supervisor", "start"]);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("already running"));
    suite.stop();
    assert_eventually!(
        within = Duration::from_secs(15),
        pids.iter().all(|p| !pid_alive(*p)),
        "left behind: {:?}",
        pids.iter().filter(|p| pid_alive(**p)).collect::<Vec<_>>()
    );
    assert!(!suite.home().join("daemon.json").exists());
}

#[tokio::test]
async fn kill9_of_the_supervisor_leaves_no_orphans() {
    let suite = Suite::start().await;
    let st = suite.status();
    let sup = st["pid"].as_i64().unwrap() as i32;
    let children: Vec<i32> = suite.all_pids().into_iter().filter(|p| *p != sup).collect();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(sup),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert_eventually!(
        within = Duration::from_secs(15),
        children.iter().all(|p| !pid_alive(*p)),
        "orphans: {:?}",
        children
            .iter()
            .filter(|p| pid_alive(**p))
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn home_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let suite = Suite::start().await;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(suite.home()), 0o700);
    assert_eq!(mode(&suite.home().join("token")), 0o600);
    assert_eq!(mode(&suite.home().join("daemon.json")), 0o600);
    assert_eq!(mode(&suite.home().join("run")), 0o700);
    assert_eq!(mode(&suite.home().join("run/session.sock")), 0o600);
    // Nothing the suite wrote (databases with their -wal/-shm, logs, locks, sockets) is
    // readable by anyone else. The test's own script.json is not the suite's.
    let c = suite.client().await;
    let sid = c
        .create_session(suite.workdir.path(), Some("plan"))
        .await
        .unwrap();
    c.prompt_and_collect(&sid, "hi", std::time::Duration::from_secs(30))
        .await
        .unwrap();
    let mut open_to_others = Vec::new();
    let mut stack = vec![suite.home().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p.clone());
            }
            if m.permissions().mode() & 0o077 != 0 && !p.ends_with("script.json") {
                open_to_others.push(format!(
                    "{:o} {}",
                    m.permissions().mode() & 0o777,
                    p.display()
                ));
            }
        }
    }
    assert!(open_to_others.is_empty(), "{open_to_others:#?}");
}

//! Execution backends through the real suite (issue 23): a real OpenSSH server on loopback
//! (`snowpea_testkit::sshd`, temp host and user keys, its own port); the scripted provider
//! calls every built-in file and command tool, which run over ssh; an unknown host key is
//! refused; killing sshd mid-command fails that call and the next reconnects; bad input
//! names the field; the password never shows in replies, events or logs. One suite for the
//! file: the scenarios use their own sessions and run one after another.
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::raw::RawWs;
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::Client;
use snowpea_testkit::sshd::Sshd;

const LONG: Duration = Duration::from_secs(90);
const SECRET: &str = "pw-never-shown-7f3a";

fn user() -> String {
    let out = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn ssh_config(sshd: &Sshd, cwd: &Path, known: Value) -> Value {
    json!({
        "host": "127.0.0.1",
        "port": sshd.port,
        "user": user(),
        "key": sshd.user_key(),
        "cwd": cwd,
        "knownHosts": known,
    })
}

/// The `tool.result` events of a turn, as (name, ok, output).
async fn results(client: &Client, sid: &str, text: &str) -> Vec<(String, bool, String)> {
    let out = client.prompt_and_collect(sid, text, LONG).await.unwrap();
    out.events
        .iter()
        .filter(|e| e.kind == "tool.result")
        .map(|e| {
            (
                e.payload["name"].as_str().unwrap_or("").to_owned(),
                e.payload["ok"].as_bool().unwrap_or(false),
                e.payload["output"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[tokio::test]
async fn ssh_backend_runs_every_tool_refuses_unknown_keys_and_reconnects() {
    let Some(mut sshd) = Sshd::start() else {
        return;
    };
    let script = json!({
        "steps": [
            {"match": "every tool", "tool_calls": [
                {"name": "read_file", "arguments": {"path": "a.txt"}},
                {"name": "write_file", "arguments": {"path": "sub/new.txt", "content": "written\n"}},
                {"name": "edit_file", "arguments": {"path": "a.txt", "old": "alpha", "new": "ALPHA"}},
                {"name": "list_dir", "arguments": {"path": "."}},
                {"name": "glob", "arguments": {"pattern": "*.txt"}},
                {"name": "grep", "arguments": {"pattern": "needle"}},
                {"name": "shell", "arguments": {"command": "echo \"via:$SSH_CONNECTION\"; pwd"}}
            ]},
            {"match": "slow", "tool_calls": [{"name": "shell", "arguments": {"command": "touch started.flag; sleep 60"}}]},
            {"match": "again", "tool_calls": [{"name": "shell", "arguments": {"command": "echo again"}}]}
        ],
        "default": {"text": "ok"}
    });
    let mut suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let local = suite.workdir.path().join("local");
    std::fs::create_dir_all(&local).unwrap();
    let remote = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(remote.path()).unwrap();
    std::fs::write(cwd.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(cwd.join("b.txt"), "needle\n").unwrap();
    let sid = client.create_session(&local, Some("auto")).await.unwrap();

    // backend.set answers ok and emits backend.changed{backend: ssh}.
    let mut cfg = ssh_config(&sshd, &cwd, json!(sshd.known_hosts()));
    let r = client
        .call(
            "backend.set",
            json!({"sessionId": sid, "kind": "ssh", "config": cfg}),
        )
        .await
        .unwrap();
    assert_eq!(r["ok"], json!(true), "{r}");
    let events = client
        .call("session.resume", json!({"sessionId": sid}))
        .await
        .unwrap();
    assert!(
        events.to_string().contains("\"backend.changed\"")
            && events.to_string().contains("\"ssh\""),
        "{events}"
    );

    // Every built-in tool runs over ssh, in the remote cwd.
    let got = results(&client, &sid, "every tool").await;
    // Read-only file tools of one step run side by side (batchedFileTools), so their
    // results come in the order they finish: compare by name.
    let mut names: Vec<&str> = got.iter().map(|r| r.0.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "edit_file",
            "glob",
            "grep",
            "list_dir",
            "read_file",
            "shell",
            "write_file"
        ]
    );
    for (name, ok, output) in &got {
        assert!(ok, "{name}: {output}");
    }
    let output = |name: &str| {
        got.iter()
            .find(|r| r.0 == name)
            .map(|r| r.2.clone())
            .unwrap()
    };
    assert!(output("read_file").contains("alpha"), "{got:?}");
    assert!(output("list_dir").contains("b.txt"), "{got:?}");
    assert!(output("grep").contains("b.txt:1:needle"), "{got:?}");
    assert!(output("shell").contains("via:127.0.0.1"), "{got:?}");
    assert!(
        output("shell").contains(&cwd.display().to_string()),
        "{got:?}"
    );
    assert_eq!(
        std::fs::read_to_string(cwd.join("sub/new.txt")).unwrap(),
        "written\n"
    );
    assert_eq!(
        std::fs::read_to_string(cwd.join("a.txt")).unwrap(),
        "ALPHA\n"
    );
    assert!(
        !local.join("sub").exists(),
        "nothing was written to the local workdir"
    );

    // Killing sshd mid-command fails that call cleanly; the next call reconnects.
    let slow = {
        let client = suite.client().await;
        let sid = sid.clone();
        tokio::spawn(async move { results(&client, &sid, "slow").await })
    };
    let flag = cwd.join("started.flag");
    snowpea_testkit::assert_eventually!(within = LONG, flag.exists(), "the slow command started");
    sshd.kill();
    let got = snowpea_testkit::within(LONG, "the broken call", slow)
        .await
        .unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(!got[0].1, "{got:?}");
    assert!(got[0].2.contains("lost"), "{got:?}");
    sshd.restart();
    let got = results(&client, &sid, "again").await;
    let last = got.last().expect("a tool.result");
    assert!(last.1 && last.2.contains("again"), "{got:?}");

    // A host key that is not in knownHosts is refused.
    let other = client.create_session(&local, Some("auto")).await.unwrap();
    // backend.set probes the host, so the refusal is its answer (QA) and the session keeps
    // its local backend.
    let wrong = ssh_config(&sshd, &cwd, json!(sshd.wrong_known_hosts()));
    let e = client
        .call(
            "backend.set",
            json!({"sessionId": other, "kind": "ssh", "config": wrong}),
        )
        .await
        .expect_err("unknown host key");
    assert_eq!(e.code_str(), Some("invalid_params"), "{e}");
    assert!(e.to_string().contains("params.config.host"), "{e}");
    assert!(e.to_string().contains("knownHosts"), "{e}");

    // Bad input names the field; an unknown session is not_found.
    let mut raw = suite.raw_hello().await;
    let resp = raw
        .call(
            "backend.set",
            json!({"sessionId": "s_nope", "kind": "local"}),
        )
        .await;
    assert_eq!(RawWs::code(&resp), "not_found", "{resp}");
    let resp = raw
        .call("backend.set", json!({"sessionId": sid, "kind": "ftp"}))
        .await;
    assert_eq!(RawWs::code(&resp), "invalid_params", "{resp}");
    assert!(resp["error"].to_string().contains("params.kind"), "{resp}");
    for (bad, field) in [
        (
            json!({"host": "127.0.0.1", "port": 70000}),
            "params.config.port",
        ),
        (json!({"port": 22}), "params.config.host"),
        (
            json!({"host": "127.0.0.1", "cwd": "rel/dir"}),
            "params.config.cwd",
        ),
    ] {
        let resp = raw
            .call(
                "backend.set",
                json!({"sessionId": sid, "kind": "ssh", "config": bad}),
            )
            .await;
        assert_eq!(RawWs::code(&resp), "invalid_params", "{resp}");
        assert!(resp["error"].to_string().contains(field), "{field}: {resp}");
    }

    // A password never shows in replies, events or logs (this server refuses passwords,
    // so the call fails — and its message does not carry it either).
    cfg["password"] = json!(SECRET);
    cfg["key"] = Value::Null;
    let e = client
        .call(
            "backend.set",
            json!({"sessionId": other, "kind": "ssh", "config": cfg}),
        )
        .await
        .expect_err("the login is refused");
    assert_eq!(e.code_str(), Some("invalid_params"), "{e}");
    assert!(!e.to_string().contains(SECRET), "{e}");
    let events = client
        .call("session.resume", json!({"sessionId": other}))
        .await
        .unwrap();
    assert!(!events.to_string().contains(SECRET));
    suite.stop();
    let mut files = Vec::new();
    files_under(suite.home(), &mut files);
    for f in files {
        if let Ok(bytes) = std::fs::read(&f) {
            assert!(
                !String::from_utf8_lossy(&bytes).contains(SECRET),
                "the password is in {}",
                f.display()
            );
        }
    }
}

/// The test image (`.ci/run` imports it from a busybox root file system) when a Docker
/// Engine answers (`DOCKER_HOST` or the local socket); `None` after a `SKIP:` line.
fn docker_image() -> Option<String> {
    let image = std::env::var("SNOWPEA_TEST_DOCKER_IMAGE")
        .unwrap_or_else(|_| "snowpea-test:busybox".into());
    let ok = std::process::Command::new("docker")
        .args(["image", "inspect", &image])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        snowpea_common::test_deps::missing_docker(
            "apt-get install docker.io; dockerd; docker import of a busybox rootfs (.ci/run does it)",
        );
        return None;
    }
    Some(image)
}

fn container_exists(name: &str) -> bool {
    std::process::Command::new("docker")
        .args(["container", "inspect", name])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test]
async fn docker_backend_runs_tools_in_the_session_container_removed_on_close() {
    let Some(image) = docker_image() else {
        return;
    };
    let script = json!({
        "steps": [
            {"match": "in the container", "tool_calls": [
                {"name": "write_file", "arguments": {"path": "made.txt", "content": "from the container\n"}},
                {"name": "read_file", "arguments": {"path": "made.txt"}},
                {"name": "shell", "arguments": {"command": "cat /proc/1/cmdline | tr '\\0' ' '; pwd"}},
                {"name": "grep", "arguments": {"pattern": "container"}}
            ]}
        ],
        "default": {"text": "ok"}
    });
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let work = std::fs::canonicalize(suite.workdir.path())
        .unwrap()
        .join("dock");
    std::fs::create_dir_all(&work).unwrap();
    let sid = client.create_session(&work, Some("auto")).await.unwrap();
    let r = client
        .call(
            "backend.set",
            json!({"sessionId": sid, "kind": "docker", "config": {"image": image}}),
        )
        .await
        .unwrap();
    assert_eq!(r["ok"], json!(true));
    let got = results(&client, &sid, "in the container").await;
    for (name, ok, output) in &got {
        assert!(ok, "{name}: {output}");
    }
    assert!(got[2].2.contains("sleep infinity"), "{got:?}");
    assert!(
        got[2].2.contains(&work.display().to_string()),
        "the workdir at the same path: {got:?}"
    );
    // The workdir is bind-mounted: the file is on the host too.
    assert_eq!(
        std::fs::read_to_string(work.join("made.txt")).unwrap(),
        "from the container\n"
    );
    let id8: String = sid
        .trim_start_matches("s_")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(8)
        .collect();
    let name = format!("snowpea-{id8}");
    assert!(container_exists(&name), "{name}");
    client
        .call("session.close", json!({"sessionId": sid}))
        .await
        .unwrap();
    assert!(!container_exists(&name), "removed when the session closed");
}

//! Checkpoints through the real suite (issue 20): the scripted provider drives turns in temp
//! workdirs with and without git; `checkpoint.*` restores them, also after a kill -9 of
//! svc-session mid-turn. One suite for the file: the scenarios use their own sessions and
//! workdirs and run one after another.
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::raw::RawWs;
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::Client;

const LONG: Duration = Duration::from_secs(60);

fn put(path: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// `checkpoint.restore`, called as soon as the turn's `turn.done` was seen (the session is
/// idle by then).
async fn restore(client: &Client, params: Value) -> Value {
    match client.call("checkpoint.restore", params).await {
        Ok(v) => v,
        Err(e) => panic!("checkpoint.restore: {e}"),
    }
}

async fn turn(client: &Client, sid: &str, text: &str) -> String {
    let out = client.prompt_and_collect(sid, text, LONG).await.unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"), "{text}");
    let listed = client
        .call("checkpoint.list", json!({"sessionId": sid}))
        .await
        .unwrap();
    listed["checkpoints"][0]["id"]
        .as_str()
        .expect("a checkpoint of the turn")
        .to_owned()
}

#[tokio::test]
async fn turns_are_restored_exactly_with_and_without_git_and_after_a_kill9_mid_turn() {
    let script = json!({
        "steps": [
            {"match": "plain edits", "tool_calls": [
                {"name": "write_file", "arguments": {"path": "a.txt", "content": "agent\n"}},
                {"name": "edit_file", "arguments": {"path": "b.sh", "old": "echo b", "new": "echo B"}},
                {"name": "write_file", "arguments": {"path": "new/c.txt", "content": "new\n"}}
            ]},
            {"match": "sed in git", "tool_calls": [{"name": "shell", "arguments": {"command": "sed -i 's/clean/CLEAN/' t.txt"}}]},
            {"match": "then hang", "tool_calls": [{"name": "write_file", "arguments": {"path": "k.txt", "content": "half way\n"}}]},
            {"after_tool": "write_file", "match": "then hang", "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 120"}}]}
        ],
        "default": {"text": "ok"}
    });
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;

    // Without git: edit, create, and the restore of the restore.
    let plain = suite.workdir.path().join("plain");
    put(&plain.join("a.txt"), "one\n", 0o640);
    put(&plain.join("b.sh"), "echo b\n", 0o755);
    let sid = client.create_session(&plain, Some("auto")).await.unwrap();
    let id = turn(&client, &sid, "plain edits").await;
    let r = restore(&client, json!({"sessionId": sid, "id": id})).await;
    assert_eq!(r["restored"], json!(["a.txt", "b.sh", "new/c.txt"]), "{r}");
    assert_eq!(
        std::fs::read_to_string(plain.join("a.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(mode(&plain.join("a.txt")), 0o640);
    assert_eq!(
        std::fs::read_to_string(plain.join("b.sh")).unwrap(),
        "echo b\n"
    );
    assert_eq!(mode(&plain.join("b.sh")), 0o755);
    assert!(!plain.join("new/c.txt").exists());
    let undo = r["checkpointId"]
        .as_str()
        .expect("undo checkpoint")
        .to_owned();
    restore(&client, json!({"sessionId": sid, "id": undo})).await;
    assert_eq!(
        std::fs::read_to_string(plain.join("a.txt")).unwrap(),
        "agent\n"
    );
    assert_eq!(
        std::fs::read_to_string(plain.join("new/c.txt")).unwrap(),
        "new\n"
    );

    // Bad input names the field.
    let mut raw = suite.raw_hello().await;
    let resp = raw
        .call(
            "checkpoint.restore",
            json!({"sessionId": sid, "id": "../../x"}),
        )
        .await;
    assert_eq!(RawWs::code(&resp), "invalid_params", "{resp}");
    assert!(resp["error"].to_string().contains("params.id"), "{resp}");
    let resp = raw
        .call(
            "checkpoint.diff",
            json!({"sessionId": sid, "id": id, "paths": ["../../etc/passwd"]}),
        )
        .await;
    assert!(
        resp["error"].to_string().contains("params.paths[0]"),
        "{resp}"
    );

    // In git: a shell `sed -i` on a clean tracked file comes back from HEAD.
    let repo = suite.workdir.path().join("repo");
    put(&repo.join("t.txt"), "clean\n", 0o644);
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    let sid = client.create_session(&repo, Some("auto")).await.unwrap();
    let id = turn(&client, &sid, "sed in git").await;
    assert_eq!(
        std::fs::read_to_string(repo.join("t.txt")).unwrap(),
        "CLEAN\n"
    );
    let r = restore(&client, json!({"sessionId": sid, "id": id})).await;
    assert_eq!(r["restored"], json!(["t.txt"]), "{r}");
    assert_eq!(
        std::fs::read_to_string(repo.join("t.txt")).unwrap(),
        "clean\n"
    );

    // kill -9 of svc-session mid-turn: what the turn changed so far is restorable.
    let crash = suite.workdir.path().join("crash");
    put(&crash.join("k.txt"), "before\n", 0o600);
    let sid = client.create_session(&crash, Some("auto")).await.unwrap();
    let mut events = client.events(&sid);
    let turn_id = client.prompt(&sid, "then hang").await.unwrap();
    loop {
        let e = events.next(LONG).await.unwrap();
        if e.kind == "tool.call" && e.payload["name"] == "shell" {
            break;
        }
    }
    assert_eq!(
        std::fs::read_to_string(crash.join("k.txt")).unwrap(),
        "half way\n"
    );
    let old = suite.kill9("session");
    suite.wait_restarted("session", old).await;
    let r = restore(&client, json!({"sessionId": sid, "id": turn_id})).await;
    assert_eq!(r["restored"], json!(["k.txt"]), "{r}");
    assert_eq!(
        std::fs::read_to_string(crash.join("k.txt")).unwrap(),
        "before\n"
    );
    assert_eq!(mode(&crash.join("k.txt")), 0o600);
}

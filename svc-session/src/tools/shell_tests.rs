use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::tools::test_context;

fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let wd = std::fs::canonicalize(dir.path()).unwrap();
    (dir, wd)
}

fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> Vec<String> {
    let mut chunks = Vec::new();
    while let Ok(c) = rx.try_recv() {
        chunks.push(c);
    }
    chunks
}

/// True when the process is gone or a zombie (killed, waiting to be reaped by its reaper).
fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            // `pid (comm) S ...`: the state follows the last `)`.
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            state == Some('Z') || state == Some('X')
        }
    }
}

/// Whether `pid` is gone within the test kit's bound.
async fn wait_gone(pid: i32) -> bool {
    let deadline = std::time::Instant::now() + snowpea_testkit::WAIT;
    while !process_gone(pid) {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        snowpea_testkit::pause().await;
    }
    true
}

#[test]
fn plan_validates_and_summarises() {
    let (_d, wd) = setup();
    let p = Shell::default()
        .plan(&json!({"command": "cargo test"}), &wd)
        .unwrap();
    assert_eq!(p.permission, Permission::Exec);
    assert_eq!(p.summary, "shell: cargo test");
    assert!(p.outside_workdir.is_empty());

    let long = "x".repeat(500);
    let p = Shell::default()
        .plan(&json!({ "command": long }), &wd)
        .unwrap();
    assert!(p.summary.chars().count() <= 210, "{}", p.summary);
    assert!(p.summary.ends_with('…'));

    let p = Shell::default()
        .plan(&json!({"command": "echo a\necho b"}), &wd)
        .unwrap();
    assert!(!p.summary.contains('\n'));

    let p = Shell::default()
        .plan(&json!({"command": "ls", "cwd": ".."}), &wd)
        .unwrap();
    assert_eq!(p.outside_workdir, vec![wd.parent().unwrap().to_path_buf()]);

    assert_eq!(
        Shell::default().plan(&json!({}), &wd).unwrap_err(),
        "missing required argument `command`"
    );
    assert_eq!(
        Shell::default()
            .plan(&json!({"command": ["ls"]}), &wd)
            .unwrap_err(),
        "argument `command` must be a string"
    );
    assert_eq!(
        Shell::default()
            .plan(&json!({"command": "ls", "timeout": "soon"}), &wd)
            .unwrap_err(),
        "argument `timeout` must be a positive number"
    );
    assert!(Shell::default()
        .plan(&json!({"command": "ls", "timeout": -1}), &wd)
        .is_err());
    assert!(Shell::default()
        .plan(&json!({"command": "ls", "cwd": false}), &wd)
        .unwrap_err()
        .contains("`cwd`"));
    assert_eq!(
        Shell::default().spec().parameters["required"],
        json!(["command"])
    );
}

#[tokio::test]
async fn runs_and_streams_progress_in_order() {
    let (_d, wd) = setup();
    let (ctx, mut rx) = test_context(&wd, 10_000);
    let cmd = "for i in 1 2 3 4 5; do echo line$i; sleep 0.1; done; echo err >&2";
    let out = Shell::default().run(json!({ "command": cmd }), ctx).await;
    assert!(out.ok, "{out:?}");
    assert_eq!(out.content, "line1\nline2\nline3\nline4\nline5\nerr\n");
    assert_eq!(out.meta["exitCode"], 0);
    assert_eq!(out.meta["timedOut"], false);
    assert_eq!(out.meta["interrupted"], false);
    assert_eq!(out.meta["truncated"], false);
    assert!(out.meta["durationMs"].as_u64().is_some());
    let chunks = drain(&mut rx);
    assert!(
        chunks.len() >= 5,
        "expected separate chunks as output arrives: {chunks:?}"
    );
    assert_eq!(chunks.concat(), out.content);
    assert_eq!(chunks[0], "line1\n");
}

#[tokio::test]
async fn caps_output_keeping_head_and_tail() {
    let (_d, wd) = setup();
    let (ctx, mut rx) = test_context(&wd, 1000);
    let out = Shell::default()
        .run(json!({"command": "seq 1 20000"}), ctx)
        .await;
    assert!(out.ok);
    assert_eq!(out.meta["truncated"], true);
    assert!(
        out.content.starts_with("1\n2\n3\n"),
        "{}",
        &out.content[..50]
    );
    assert!(out.content.ends_with("19999\n20000\n"));
    assert!(out.content.contains("[... truncated: "));
    assert!(out.content.len() < 1100, "{}", out.content.len());
    // Progress carries everything.
    let streamed = drain(&mut rx).concat();
    let expected: String = (1..=20000).map(|i| format!("{i}\n")).collect();
    assert_eq!(streamed, expected);
}

#[tokio::test]
async fn nonzero_exit_is_not_ok() {
    let (_d, wd) = setup();
    let (ctx, _rx) = test_context(&wd, 10_000);
    let out = Shell::default()
        .run(json!({"command": "echo oops >&2; exit 3"}), ctx)
        .await;
    assert!(!out.ok);
    assert_eq!(out.meta["exitCode"], 3);
    assert!(out.content.contains("oops"));
    assert!(out.content.ends_with("[exit code: 3]"), "{}", out.content);
}

#[tokio::test]
async fn cwd_stdin_and_missing_cwd() {
    let (_d, wd) = setup();
    std::fs::create_dir(wd.join("sub")).unwrap();
    let (ctx, _rx) = test_context(&wd, 10_000);
    let out = Shell::default()
        .run(json!({"command": "pwd", "cwd": "sub"}), ctx)
        .await;
    assert!(out.ok);
    assert_eq!(out.content.trim(), wd.join("sub").to_str().unwrap());

    // stdin is /dev/null: `cat` ends at once.
    let (ctx, _rx) = test_context(&wd, 10_000);
    let out = Shell::default()
        .run(json!({"command": "cat; echo done", "timeout": 20}), ctx)
        .await;
    assert!(out.ok);
    assert_eq!(out.content, "done\n");

    let (ctx, _rx) = test_context(&wd, 10_000);
    let out = Shell::default()
        .run(json!({"command": "pwd", "cwd": "nope"}), ctx)
        .await;
    assert!(!out.ok);
    assert!(out.content.contains("does not exist"));

    let (ctx, _rx) = test_context(&wd, 10_000);
    let out = Shell::default().run(json!({"command": 5}), ctx).await;
    assert!(!out.ok);
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let (_d, wd) = setup();
    let (ctx, _rx) = test_context(&wd, 10_000);
    let started = Instant::now();
    // The shell and its background child both ignore SIGTERM: SIGKILL must follow.
    let cmd = "trap '' TERM; sleep 30 & echo $!; wait";
    let out = Shell::default()
        .run(json!({"command": cmd, "timeout": 1}), ctx)
        .await;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
    assert!(!out.ok);
    assert_eq!(out.meta["timedOut"], true);
    assert_eq!(out.meta["interrupted"], false);
    // A timeout reports exit code 124, as coreutils `timeout` (issue 23).
    assert_eq!(out.meta["exitCode"], 124);
    assert!(
        out.content.contains("[timed out after 1 s"),
        "{}",
        out.content
    );
    let grandchild: i32 = out.content.lines().next().unwrap().trim().parse().unwrap();
    assert!(
        wait_gone(grandchild).await,
        "grandchild {grandchild} survived the timeout"
    );
}

#[tokio::test]
async fn timeout_with_plain_sleep() {
    let (_d, wd) = setup();
    let (ctx, _rx) = test_context(&wd, 10_000);
    let started = Instant::now();
    let out = Shell::default()
        .run(
            json!({"command": "sh -c 'sleep 30 & echo $!; wait'; echo NEXT", "timeout": 0.5}),
            ctx,
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(out.meta["timedOut"], true);
    assert!(!out.content.contains("NEXT"), "{}", out.content);
    let grandchild: i32 = out.content.lines().next().unwrap().trim().parse().unwrap();
    assert!(
        wait_gone(grandchild).await,
        "grandchild {grandchild} survived the timeout"
    );
}

#[tokio::test]
async fn cancel_kills_promptly() {
    let (_d, wd) = setup();
    let (ctx, _rx) = test_context(&wd, 10_000);
    let cancel = ctx.cancel.clone();
    let marker = wd.join("marker");
    let started = Instant::now();
    let task = tokio::spawn(Shell::default().run(
        json!({"command": "echo started; sleep 3 && touch marker"}),
        ctx,
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    cancel.cancel();
    let out = task.await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "not prompt: {:?}",
        started.elapsed()
    );
    assert!(!out.ok);
    assert_eq!(out.meta["interrupted"], true);
    assert_eq!(out.meta["timedOut"], false);
    assert!(out.content.contains("started"));
    assert!(out.content.contains("interrupted"));
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(
        !marker.exists(),
        "the command kept running after the interrupt"
    );
}

#[tokio::test]
async fn already_cancelled_does_not_start() {
    let (_d, wd) = setup();
    let (ctx, _rx) = test_context(&wd, 10_000);
    ctx.cancel.cancel();
    let out = Shell::default()
        .run(json!({"command": "touch marker"}), ctx)
        .await;
    assert!(!out.ok);
    assert_eq!(out.meta["interrupted"], true);
    assert!(!wd.join("marker").exists());
}

#[tokio::test]
async fn background_jobs_do_not_hold_the_call_open() {
    let (_d, wd) = setup();
    let (ctx, _rx) = test_context(&wd, 10_000);
    let started = Instant::now();
    let out = Shell::default()
        .run(json!({"command": "sleep 30 & echo $!"}), ctx)
        .await;
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(out.ok, "{out:?}");
    let pid: i32 = out.content.trim().parse().unwrap();
    assert!(
        wait_gone(pid).await,
        "background job {pid} outlived the call"
    );
}

#[tokio::test]
async fn dropping_the_future_kills_the_group() {
    let (_d, wd) = setup();
    let pidfile = wd.join("pid");
    let (ctx, _rx) = test_context(&wd, 10_000);
    let mut fut =
        Box::pin(Shell::default().run(json!({"command": "echo $$ > pid; sleep 30"}), ctx));
    // Poll the call until the shell has written its pid (a loaded machine may take a
    // while), then drop it.
    let pid: i32 = tokio::select! {
        out = &mut fut => panic!("the call ended before it was dropped: {out:?}"),
        pid = snowpea_testkit::eventually(snowpea_testkit::WAIT, "the shell wrote its pid", || async {
            std::fs::read_to_string(&pidfile)
                .ok()
                .filter(|s| s.ends_with('\n'))
                .and_then(|s| s.trim().parse().ok())
        }) => pid,
    };
    drop(fut);
    assert!(
        wait_gone(pid).await,
        "shell {pid} outlived its dropped call"
    );
}

#[test]
fn utf8_stream_never_splits_characters() {
    let mut s = Utf8Stream::default();
    let bytes = "aé€😀b".as_bytes();
    let mut out = String::new();
    for b in bytes {
        out.push_str(&s.push(std::slice::from_ref(b)));
    }
    out.push_str(&s.finish());
    assert_eq!(out, "aé€😀b");
    assert!(!out.contains('\u{FFFD}'));
    // Invalid bytes become replacement characters, the rest survives.
    let mut s = Utf8Stream::default();
    assert_eq!(s.push(b"x\xffy"), "x\u{FFFD}y");
}

#[test]
fn capture_keeps_head_and_tail() {
    let mut c = Capture::new(10);
    c.push(b"0123");
    assert!(!c.truncated());
    assert_eq!(c.text(), "0123");
    c.push(b"456789abcdef");
    assert!(c.truncated());
    let text = c.text();
    assert!(
        text.starts_with("01234\n[... truncated: 6 bytes omitted ...]\n"),
        "{text}"
    );
    assert!(text.ends_with("bcdef"));
}

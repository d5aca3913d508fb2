//! Plugin hooks: loading `hooks/hooks.json`, running a hook safely (argv, clean env,
//! timeout, bounded output), and the hook points of a turn over the scripted provider.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::config::{self, HookDef};
use super::exec::{self, Ran, MAX_OUTPUT_BYTES};
use super::{verdict_of, HookEvent};
use crate::testkit::{done_reason, kinds, of_kind, Harness};

/// Writes an executable `#!/bin/sh` script.
fn script(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn plugin(plugins: &Path, name: &str, hooks: Value) -> PathBuf {
    let root = plugins.join(name);
    std::fs::create_dir_all(root.join("hooks")).unwrap();
    std::fs::write(root.join("hooks/hooks.json"), hooks.to_string()).unwrap();
    root
}

fn def(root: &Path, argv: &[&str], timeout: Duration) -> HookDef {
    HookDef {
        plugin: "p".into(),
        root: root.to_path_buf(),
        event: HookEvent::PreToolUse,
        matcher: None,
        argv: argv.iter().map(|s| s.to_string()).collect(),
        timeout,
    }
}

#[test]
fn hooks_json_is_read_with_errors_reported_not_fatal() {
    let t = tempfile::tempdir().unwrap();
    let root = plugin(
        t.path(),
        "p1",
        json!({"hooks": {
            "PreToolUse": [{"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/check.sh --strict 'a b'", "timeout": 999}]}],
            "Stop": [{"hooks": [{"command": "true"}]}],
            "Notification": [{"hooks": [{"command": "true"}]}],
            "PostToolUse": [{"matcher": "(", "hooks": [{"command": "true"}]},
                            {"hooks": [{"type": "prompt", "prompt": "x"}, {"command": ""}, {"command": "'open"}]}]
        }}),
    );
    // The `hooks` wrapper may be left out.
    plugin(
        t.path(),
        "p2",
        json!({"SessionStart": [{"hooks": [{"command": "echo hi"}]}]}),
    );
    std::fs::create_dir_all(t.path().join("p3/hooks")).unwrap();
    std::fs::write(t.path().join("p3/hooks/hooks.json"), "{not json").unwrap();
    let loaded = config::load(t.path());
    let events: Vec<(&str, HookEvent)> = loaded
        .hooks
        .iter()
        .map(|h| (h.plugin.as_str(), h.event))
        .collect();
    assert_eq!(
        events,
        vec![
            ("p1", HookEvent::PreToolUse),
            ("p1", HookEvent::Stop),
            ("p2", HookEvent::SessionStart)
        ]
    );
    let pre = &loaded.hooks[0];
    assert_eq!(
        pre.argv,
        vec![
            root.join("check.sh").to_string_lossy().into_owned(),
            "--strict".into(),
            "a b".into()
        ]
    );
    assert_eq!(pre.timeout, Duration::from_secs(config::MAX_TIMEOUT_SECS));
    assert!(pre.matcher.as_ref().unwrap().is_match("Edit"));
    assert!(!pre.matcher.as_ref().unwrap().is_match("EditMore"));
    assert_eq!(
        loaded.hooks[1].timeout,
        Duration::from_secs(config::DEFAULT_TIMEOUT_SECS)
    );
    // Bad regex, prompt-type hook, empty command, bad quoting, unparsable file.
    assert_eq!(loaded.errors.len(), 5, "{:?}", loaded.errors);
    assert!(loaded.errors.iter().any(|e| e.starts_with("p3:")));
}

#[tokio::test]
async fn a_hook_runs_as_argv_with_a_clean_env_and_its_input_on_stdin() {
    let t = tempfile::tempdir().unwrap();
    let sh = t.path().join("h.sh");
    // Prints its input, its argument, and whether a daemon secret leaked into its env.
    script(
        &sh,
        "cat; echo; echo \"arg=$1 key=${SNOWPEA_TEST_SECRET:-none} root=$CLAUDE_PLUGIN_ROOT pwd=$(pwd)\"",
    );
    std::env::set_var("SNOWPEA_TEST_SECRET", "sk-should-not-leak");
    let h = def(
        t.path(),
        &[sh.to_str().unwrap(), "$(touch pwned) ; x"],
        Duration::from_secs(10),
    );
    let ran = exec::run(&h, &json!({"a": 1}), t.path(), None).await;
    let Ran::Exited { code, stdout, .. } = ran else {
        panic!("{ran:?}")
    };
    assert_eq!(code, Some(0));
    let mut lines = stdout.lines();
    assert_eq!(lines.next().unwrap(), "{\"a\":1}");
    let wd = t.path().canonicalize().unwrap();
    assert_eq!(
        lines.next().unwrap(),
        format!(
            "arg=$(touch pwned) ; x key=none root={} pwd={}",
            t.path().display(),
            wd.display()
        )
    );
    assert!(
        !t.path().join("pwned").exists(),
        "no shell ran the argument"
    );
}

#[tokio::test]
async fn a_hook_is_killed_at_its_timeout_and_its_output_is_bounded() {
    let t = tempfile::tempdir().unwrap();
    let slow = t.path().join("slow.sh");
    // A grandchild in the same group keeps running unless the whole group is killed.
    script(
        &slow,
        &format!("(sleep 30; touch {}/late) & sleep 30", t.path().display()),
    );
    let h = def(
        t.path(),
        &[slow.to_str().unwrap()],
        Duration::from_millis(300),
    );
    assert_eq!(
        exec::run(&h, &json!({}), t.path(), None).await,
        Ran::TimedOut
    );

    let loud = t.path().join("loud.sh");
    script(
        &loud,
        "head -c 300000 /dev/zero | tr '\\0' x; head -c 300000 /dev/zero | tr '\\0' y >&2; exit 3",
    );
    let h = def(t.path(), &[loud.to_str().unwrap()], Duration::from_secs(20));
    let Ran::Exited {
        code,
        stdout,
        stderr,
    } = exec::run(&h, &json!({}), t.path(), None).await
    else {
        panic!()
    };
    assert_eq!(code, Some(3));
    assert_eq!(
        (stdout.len(), stderr.len()),
        (MAX_OUTPUT_BYTES, MAX_OUTPUT_BYTES)
    );

    let h = def(t.path(), &["/nonexistent/hook"], Duration::from_secs(5));
    assert!(matches!(
        exec::run(&h, &json!({}), t.path(), None).await,
        Ran::NotStarted(_)
    ));
}

#[test]
fn answers_are_read_the_claude_code_way() {
    let ok = |out: &str| Ran::Exited {
        code: Some(0),
        stdout: out.into(),
        stderr: String::new(),
    };
    assert_eq!(
        verdict_of(&ok("some context\n")),
        Some((None, Some("some context".into())))
    );
    assert_eq!(verdict_of(&ok("")), Some((None, None)));
    assert_eq!(
        verdict_of(&ok(r#"{"decision":"block","reason":"no"}"#)),
        Some((Some("no".into()), None))
    );
    assert_eq!(
        verdict_of(&ok(
            r#"{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"policy","additionalContext":"ctx"}}"#
        )),
        Some((Some("policy".into()), Some("ctx".into())))
    );
    // A hook can never allow: "allow" is just no block.
    assert_eq!(
        verdict_of(&ok(
            r#"{"hookSpecificOutput":{"permissionDecision":"allow"}}"#
        )),
        Some((None, None))
    );
    let exit = |code, stderr: &str| Ran::Exited {
        code,
        stdout: "ignored".into(),
        stderr: stderr.into(),
    };
    assert_eq!(
        verdict_of(&exit(Some(2), "stop that\n")),
        Some((Some("stop that".into()), None))
    );
    assert_eq!(verdict_of(&exit(Some(1), "oops")), None);
    assert_eq!(verdict_of(&exit(None, "")), None);
    assert_eq!(verdict_of(&Ran::TimedOut), None);
}

/// Installs the test plugin into the harness's home and waits until its hooks are loaded.
async fn install_plugin(h: &Harness, hooks: Value) -> PathBuf {
    let root = plugin(&h.home.root().join("plugins"), "guard", hooks);
    h.app.skills.reload().await.unwrap();
    let hooks = h.app.hooks.clone();
    snowpea_testkit::assert_eventually!(
        !hooks.matching(HookEvent::Stop, None).is_empty()
            || !hooks
                .matching(HookEvent::PreToolUse, Some("write_file"))
                .is_empty()
    );
    root
}

#[tokio::test]
async fn hooks_guard_tools_add_context_continue_a_stop_and_never_break_a_turn() {
    let mut h = Harness::new(json!({
        "steps": [
            {"match": "write it", "tool_calls": [{"name": "write_file", "arguments": {"path": "blocked.txt", "content": "x"}}]},
            {"after_tool": "write_file", "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
            {"after_tool": "list_dir", "text": "first answer"},
            {"match": "run the checks", "text": "checked", "echoRequest": true}
        ],
        "default": {"text": "ok", "echoRequest": true}
    }))
    .await;
    let dir = h.home.root().join("plugins/guard");
    let state = h.workdir.join(".stop-seen");
    script(
        &dir.join("deny-write.sh"),
        "echo 'writes are reviewed first' >&2; exit 2",
    );
    script(&dir.join("after.sh"), "echo 'lint: clean'");
    script(&dir.join("prompt.sh"), "echo 'PROMPT-CONTEXT from guard'");
    script(
        &dir.join("stop.sh"),
        &format!(
            "if [ -e {s} ]; then exit 0; fi; touch {s}; echo '{{\"decision\":\"block\",\"reason\":\"run the checks\"}}'",
            s = state.display()
        ),
    );
    script(&dir.join("broken.sh"), "exit 7");
    install_plugin(
        &h,
        json!({"hooks": {
            "PreToolUse": [{"matcher": "Write", "hooks": [{"command": "${CLAUDE_PLUGIN_ROOT}/deny-write.sh"}]},
                           {"hooks": [{"command": "${CLAUDE_PLUGIN_ROOT}/broken.sh"}, {"command": "/no/such/program"}]}],
            "PostToolUse": [{"matcher": "list_dir", "hooks": [{"command": "${CLAUDE_PLUGIN_ROOT}/after.sh"}]}],
            "UserPromptSubmit": [{"hooks": [{"command": "${CLAUDE_PLUGIN_ROOT}/prompt.sh"}]}],
            "Stop": [{"hooks": [{"command": "${CLAUDE_PLUGIN_ROOT}/stop.sh", "timeout": 10}]}]
        }}),
    )
    .await;
    let sid = h.create("auto").await;
    let t = h.prompt(&sid, "write it").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "complete", "{:?}", kinds(&ev));
    // PreToolUse refused the write (matcher `Write` = write_file); nothing was written.
    let results = of_kind(&ev, "tool.result");
    assert_eq!(results[0]["payload"]["ok"], false);
    assert!(results[0]["payload"]["output"]
        .as_str()
        .unwrap()
        .contains("writes are reviewed first"));
    assert!(!h.workdir.join("blocked.txt").exists());
    // The failing hooks were ignored: list_dir ran, with PostToolUse feedback.
    assert_eq!(results[1]["payload"]["ok"], true);
    assert!(results[1]["payload"]["output"]
        .as_str()
        .unwrap()
        .ends_with("[plugin hook] lint: clean"));
    // Stop continued the turn once with its reason; the model saw it (and the prompt context).
    let cont = of_kind(&ev, "hook.continue");
    assert_eq!(cont.len(), 1);
    assert_eq!(cont[0]["payload"]["count"], 1);
    assert_eq!(cont[0]["payload"]["reason"], "run the checks");
    assert_eq!(cont[0]["payload"]["turnId"], t);
    let text = of_kind(&ev, "message.done")[0]["payload"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.starts_with("first answer"), "{text}");
    assert!(text.contains("[user] [system] run the checks"), "{text}");
    assert!(
        text.contains("[user] write it /  / [system] PROMPT-CONTEXT from guard"),
        "{text}"
    );
}

#[tokio::test]
async fn a_prompt_hook_can_block_a_prompt_before_any_model_call() {
    let mut h = Harness::new(json!({"default": {"text": "the model answered"}})).await;
    let dir = h.home.root().join("plugins/guard");
    script(
        &dir.join("prompt.sh"),
        "if grep -q secret; then echo '{\"decision\":\"block\",\"reason\":\"no secrets in prompts\"}'; fi",
    );
    script(&dir.join("start.sh"), "echo \"START-NOTE $(cat)\"");
    install_plugin(
        &h,
        json!({
            "UserPromptSubmit": [{"hooks": [{"command": "${CLAUDE_PLUGIN_ROOT}/prompt.sh"}]}],
            "SessionStart": [{"hooks": [{"command": "${CLAUDE_PLUGIN_ROOT}/start.sh"}]}],
            "Stop": [{"hooks": [{"command": "true"}]}]
        }),
    )
    .await;
    let sid = h.create("auto").await;
    // SessionStart's output waits as a notice for the next model call.
    let s = h.app.sessions.get(&sid).unwrap();
    snowpea_testkit::assert_eventually!(!s.turns().notices.is_empty());
    let note = s.turns().notices[0].clone();
    assert!(note.starts_with("START-NOTE "), "{note}");
    let input: Value = serde_json::from_str(note.trim_start_matches("START-NOTE ")).unwrap();
    assert_eq!(input["hook_event_name"], "SessionStart");
    assert_eq!(input["source"], "startup");
    assert_eq!(input["session_id"], sid.as_str());

    let t = h.prompt(&sid, "here is my secret").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "denied");
    let err = of_kind(&ev, "error");
    assert!(err[0]["payload"]["message"]
        .as_str()
        .unwrap()
        .contains("no secrets in prompts"));
    assert!(
        of_kind(&ev, "usage").is_empty(),
        "no model call: {:?}",
        kinds(&ev)
    );
    let t = h.prompt(&sid, "a normal prompt").await;
    let ev = h.until_done(&t, |_| None).await;
    assert_eq!(done_reason(&ev), "complete");
}

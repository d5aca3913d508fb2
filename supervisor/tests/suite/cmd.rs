//! `snowpea cmd` and `snowpea run --continue` against the real suite on a temp home (issue
//! 39 items 3 and 6, issue 32 item 10): help and `session-command list` without a session,
//! `--help` from `command.list`, arguments checked before the confirmation, text replies of
//! `/schedule`, `/undo status` with nothing to undo, and the target rule.

use std::time::Duration;

use serde_json::{json, Value};
use snowpea_common::home::Home;
use snowpea_sdk::{Client, ConnectOptions};

use super::harness::text;
use super::run::{stderr, stdout, RunSuite};

/// Bound of one SDK call of a test.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// `method(params)` on the suite of `home`, from a fresh connection.
fn call(home: &Home, method: &str, params: Value) -> Value {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = Client::connect(ConnectOptions::from_home(home.root()).unwrap())
            .await
            .unwrap();
        let out = tokio::time::timeout(CALL_TIMEOUT, client.call(method, params))
            .await
            .expect("the call answers in time")
            .unwrap();
        client.close().await;
        out
    })
}

fn started(s: &RunSuite) {
    let out = s.output(s.cmd(&["supervisor", "start"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_str(stdout(out).trim()).unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

#[test]
fn help_and_session_command_list_need_no_session() {
    let s = RunSuite::new();
    started(&s);
    // The project folder has no session: both read command.list.
    let out = s.output(s.cmd(&["cmd", "help", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v = json_of(&out);
    assert_eq!(v["ok"], true, "{v}");
    let names: Vec<&str> = v["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(
        names.contains(&"mode") && names.contains(&"schedule"),
        "{names:?}"
    );
    let out = s.output(s.cmd(&["cmd", "help", "mode"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        stdout(&out).starts_with("/mode [plan|accept|auto|status|save"),
        "{}",
        text(&out)
    );
    let out = s.output(s.cmd(&["cmd", "session-command", "list", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(json_of(&out)["ok"], true);
}

#[test]
fn cmd_help_lists_the_running_suites_commands_from_their_declarations() {
    let s = RunSuite::new();
    // Not running: the options, and how to get the list.
    let out = s.output(s.cmd(&["cmd", "--help"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        stdout(&out).contains("The suite is not running"),
        "{}",
        text(&out)
    );
    started(&s);
    let out = s.output(s.cmd(&["cmd", "--help"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let help = stdout(&out);
    assert!(help.contains("Which session a command runs in"), "{help}");
    assert!(
        help.contains("Commands of the running suite (command.list)"),
        "{help}"
    );
    // The usage the daemon declares, and tiers per form — never a stale "not in this build".
    assert!(
        help.contains("  mode [plan|accept|auto|status|save [--scope=global|project]]"),
        "{help}"
    );
    assert!(help.contains("medium_write: mode accept"), "{help}");
    assert!(help.contains("\n  team"), "{help}");
    assert!(!help.contains("not in this build"), "{help}");
    let out = s.output(s.cmd(&["cmd", "undo", "--help"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        stdout(&out).starts_with("  undo [status] [--force]"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_bad_scope_is_invalid_args_before_the_confirmation() {
    let s = RunSuite::new();
    started(&s);
    let wd = s.project.to_str().unwrap().to_owned();
    let out = s.output(s.cmd(&[
        "cmd",
        "mode",
        "save",
        "--scope=bogus",
        "--workdir",
        &wd,
        "--json",
    ]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let v = json_of(&out);
    assert_eq!(v["code"], "INVALID_ARGS", "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("--scope must be global or project"),
        "{v}"
    );
}

#[test]
fn schedule_replies_in_text_and_undo_status_has_nothing_to_undo() {
    let s = RunSuite::new();
    started(&s);
    let wd = s.project.to_str().unwrap().to_owned();
    let out = s.output(s.cmd(&[
        "cmd",
        "schedule",
        "add",
        "in 2 hours",
        "water the plants",
        "--workdir",
        &wd,
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let added = stdout(&out);
    assert!(added.starts_with("scheduled job job_"), "{}", text(&out));
    assert!(
        added.contains("\"water the plants\" in 2 hours, next run 20"),
        "{added}"
    );
    let job = added
        .trim_start_matches("scheduled job ")
        .split(':')
        .next()
        .unwrap()
        .to_owned();
    let out = s.output(s.cmd(&["cmd", "schedule", "list", "--workdir", &wd]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        stdout(&out).starts_with("1 scheduled job(s):"),
        "{}",
        text(&out)
    );
    assert!(stdout(&out).contains(&job), "{}", text(&out));
    assert!(
        !stdout(&out).trim_start().starts_with('{'),
        "{}",
        text(&out)
    );
    // --json keeps the structured data.
    let out = s.output(s.cmd(&["cmd", "schedule", "list", "--workdir", &wd, "--json"]));
    assert_eq!(json_of(&out)["data"]["jobs"][0]["jobId"], job.as_str());
    let out = s.output(s.cmd(&["cmd", "schedule", "cancel", &job, "--yes", "--workdir", &wd]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(stdout(&out), format!("cancelled job {job}\n"));

    let out = s.output(s.cmd(&["cmd", "undo", "status", "--workdir", &wd]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        stdout(&out),
        "nothing to undo: no turn of this session changed files\n"
    );
    assert_eq!(stderr(&out), "", "{}", text(&out));
}

/// The `snowpea run` sessions of the project folder, open or saved.
fn run_sessions(s: &RunSuite) -> Vec<Value> {
    let list = call(
        &s.home,
        "session.list",
        json!({"workdir": s.project.to_string_lossy(), "includeClosed": true}),
    );
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["originSurface"] == "run")
        .cloned()
        .collect()
}

#[test]
fn run_continue_goes_on_in_the_directorys_last_run_session() {
    let s = RunSuite::new();
    let out = s.run(&["hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(run_sessions(&s).len(), 1);
    let out = s.run(&["--continue", "again"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let sessions = run_sessions(&s);
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["lastPrompt"], "again", "{sessions:?}");
    // Without --continue, a new session.
    let out = s.run(&["third"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(run_sessions(&s).len(), 2);
}

#[test]
fn a_command_targets_the_session_a_client_opened_before_run_sessions() {
    let s = RunSuite::new();
    let out = s.run(&["--mode", "accept", "hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // Only a run session here: a command runs in it (rule 3).
    let out = s.output(s.cmd(&["cmd", "plan", "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(run_sessions(&s)[0]["mode"], "plan");
    // A client's session (as `snowpea chat` opens it) wins over the newer run session.
    let tui = call(
        &s.home,
        "session.create",
        json!({"workdir": s.project.to_string_lossy(), "originSurface": "tui", "mode": "accept"}),
    )["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = s.run(&["--mode", "accept", "later"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = s.output(s.cmd(&["cmd", "auto", "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let list = call(
        &s.home,
        "session.list",
        json!({"workdir": s.project.to_string_lossy()}),
    );
    let mode_of = |id: &str| {
        list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["sessionId"] == id)
            .map(|x| x["mode"].clone())
    };
    assert_eq!(mode_of(&tui), Some(json!("auto")), "{list}");
    assert!(
        run_sessions(&s).iter().all(|r| r["mode"] != "auto"),
        "{list}"
    );
}

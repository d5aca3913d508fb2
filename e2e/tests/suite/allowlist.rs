//! Issue 17 "Done means", allowlist: each scope stored where it belongs and removed; a
//! `session` entry gone after `session.close`; prefix matching refuses each compound-command
//! bypass (table); an `always` entry written by `approval.respond` is used by a new session;
//! and the no-bypass property over modes × patterns × commands (seeded, reproducible with
//! `SNOWPEA_TEST_SEED`). One suite; the phases run one after the other.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::Client;
use snowpea_testkit::within;

const WAIT: Duration = Duration::from_secs(30);
const CASES: usize = 18;

/// The bypass table: each runs `echo allowed` and then something else that must be asked.
const BYPASSES: [&str; 10] = [
    "echo allowed; touch pwned",
    "echo allowed && touch pwned",
    "echo allowed || touch pwned; touch pwned",
    "echo allowed | touch pwned",
    "echo allowed & touch pwned",
    "echo allowed\ntouch pwned",
    "echo allowed > pwned",
    "echo allowed $(touch pwned)",
    "echo allowed `touch pwned`",
    "echo allowed \"$(touch pwned)\"",
];

/// One randomized case: a mode, the project patterns, a command and what it creates.
struct Case {
    mode: &'static str,
    patterns: Vec<&'static str>,
    command: String,
    /// Marker files the command's parts would create, with the argv of each part.
    parts: Vec<(String, Vec<String>)>,
}

const POOL: [&str; 5] = ["echo", "echo ok", "touch m-", "touch", "ls"];

fn gen_case(rng: &mut StdRng, i: usize) -> Case {
    let mode = ["plan", "accept", "auto"][rng.random_range(0..3)];
    let patterns: Vec<&str> = POOL
        .iter()
        .copied()
        .filter(|_| rng.random_bool(0.4))
        .collect();
    let mut parts = Vec::new();
    let mut command = String::new();
    for k in 0..rng.random_range(1..4) {
        let marker = format!("m-{i}-{k}");
        let argv: Vec<String> = match rng.random_range(0..3) {
            0 => vec!["echo".into(), "ok".into()],
            1 => vec!["echo".into(), marker.clone()],
            _ => vec!["touch".into(), marker.clone()],
        };
        let text = argv.join(" ");
        if k > 0 {
            command.push_str([" ; ", " && ", " | ", " & "][rng.random_range(0..4)]);
        }
        if k > 0 && rng.random_bool(0.2) {
            command.push_str(&format!("echo $({text})"));
            parts.push((marker.clone(), vec!["echo".into()]));
        } else {
            command.push_str(&text);
        }
        parts.push((marker, argv));
    }
    Case {
        mode,
        patterns,
        command,
        parts,
    }
}

/// The oracle: does a pattern cover this argv (word equality; `touch m-` is a literal word)?
fn covers(pattern: &str, argv: &[String]) -> bool {
    let words: Vec<&str> = pattern.split_whitespace().collect();
    words.len() <= argv.len() && words.iter().zip(argv).all(|(w, a)| w == a)
}

fn script(cases: &[Case]) -> Value {
    let mut steps = Vec::new();
    for (i, b) in BYPASSES.iter().enumerate() {
        steps.push(json!({"match": format!("bypass-{i:02}"), "tool_calls": [{"name": "shell", "arguments": {"command": b}}]}));
    }
    steps.push(json!({"match": "control", "repeat": true, "tool_calls": [{"name": "shell", "arguments": {"command": "echo allowed twice"}}]}));
    steps.push(json!({"match": "touch-always", "repeat": true, "tool_calls": [{"name": "shell", "arguments": {"command": "touch always-ok"}}]}));
    for (i, c) in cases.iter().enumerate() {
        steps.push(json!({"match": format!("case-{i:02}"), "tool_calls": [{"name": "shell", "arguments": {"command": c.command}}]}));
    }
    steps.push(json!({"after_tool": "shell", "repeat": true, "text": "done"}));
    json!({"steps": steps, "default": {"text": "ok"}})
}

/// A client whose `approval.request` handler records each request and answers `answer`.
async fn approver(suite: &Suite, id: &str, answer: Value) -> (Client, Arc<Mutex<Vec<Value>>>) {
    let client = suite.client_with(|o| o.with_client_id(id)).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    client.on_request("approval.request", move |p: Value| {
        let (s, answer) = (s.clone(), answer.clone());
        async move {
            s.lock().unwrap().push(p);
            Ok(answer)
        }
    });
    (client, seen)
}

async fn call(c: &Client, method: &str, params: Value) -> Value {
    c.call(method, params)
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"))
}

async fn list(c: &Client, params: Value) -> Vec<Value> {
    call(c, "permission.allowlist.list", params).await["patterns"]
        .as_array()
        .unwrap()
        .clone()
}

fn file_patterns(path: &Path) -> Vec<String> {
    let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    doc["allowlist"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|e| e["pattern"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_allowlist_is_stored_per_scope_and_never_lets_a_call_bypass_its_approval() {
    let seed = std::env::var("SNOWPEA_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(17u64);
    let mut rng = StdRng::seed_from_u64(seed);
    let cases: Vec<Case> = (0..CASES).map(|i| gen_case(&mut rng, i)).collect();
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script(&cases)),
        settings: Some(json!({"ui": {"theme": "dark"}})),
        ..Default::default()
    })
    .await;
    let wd = suite.workdir.path().to_path_buf();
    let wd_str = std::fs::canonicalize(&wd).unwrap().display().to_string();
    std::fs::create_dir_all(wd.join(".snowpea")).unwrap();
    std::fs::write(
        wd.join(".snowpea/settings.json"),
        r#"{"model": {"default": "keep-me"}}"#,
    )
    .unwrap();
    let (origin, asked) = approver(&suite, "origin", json!({"decision": "deny"})).await;

    // 1. Each scope stored where it belongs, duplicates keep their id, bad patterns refused.
    let sid = origin.create_session(&wd, Some("accept")).await.unwrap();
    let add =
        |pattern: &str, scope: &str| json!({"pattern": pattern, "scope": scope, "workdir": wd_str});
    let s_id = call(
        &origin,
        "permission.allowlist.add",
        add("make check", "session"),
    )
    .await["patternId"]
        .clone();
    let p_id = call(
        &origin,
        "permission.allowlist.add",
        add("cargo test", "project"),
    )
    .await["patternId"]
        .clone();
    let a_id = call(
        &origin,
        "permission.allowlist.add",
        add("tool:write_file", "always"),
    )
    .await["patternId"]
        .clone();
    let again = call(
        &origin,
        "permission.allowlist.add",
        add("cargo test", "project"),
    )
    .await;
    assert_eq!(again["patternId"], p_id);
    let project_file = wd.join(".snowpea/settings.json");
    let global_file = suite.home().join("settings.json");
    assert_eq!(file_patterns(&project_file), ["cargo test"]);
    assert_eq!(file_patterns(&global_file), ["tool:write_file"]);
    for f in [&project_file, &global_file] {
        assert_eq!(
            std::fs::metadata(f).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let project: Value = serde_json::from_slice(&std::fs::read(&project_file).unwrap()).unwrap();
    assert_eq!(project["model"]["default"], "keep-me");
    let global: Value = serde_json::from_slice(&std::fs::read(&global_file).unwrap()).unwrap();
    assert_eq!(global["ui"]["theme"], "dark");
    let all = list(&origin, json!({"workdir": wd_str})).await;
    let scope_of = |id: &Value| {
        all.iter()
            .find(|p| p["patternId"] == *id)
            .map(|p| p["scope"].clone())
    };
    assert_eq!(scope_of(&s_id), Some(json!("session")));
    assert_eq!(scope_of(&p_id), Some(json!("project")));
    assert_eq!(scope_of(&a_id), Some(json!("always")));
    assert_eq!(list(&origin, json!({"scope": "always"})).await.len(), 1);
    for bad in ["", "*", "cargo test; rm -rf ~", "tool:shell", "A=1 make"] {
        let e = origin
            .call("permission.allowlist.add", add(bad, "project"))
            .await
            .unwrap_err();
        assert_eq!(e.code_str(), Some("invalid_params"), "{bad:?}");
        assert!(e.to_string().contains("params.pattern"), "{e}");
    }
    for id in [&p_id, &a_id] {
        call(
            &origin,
            "permission.allowlist.remove",
            json!({"patternId": id, "workdir": wd_str}),
        )
        .await;
    }
    assert!(file_patterns(&project_file).is_empty());
    assert!(file_patterns(&global_file).is_empty());
    let e = origin
        .call("permission.allowlist.remove", json!({"patternId": p_id}))
        .await
        .unwrap_err();
    assert_eq!(e.code_str(), Some("not_found"));
    // A session entry dies with its session.
    call(&origin, "session.close", json!({"sessionId": sid})).await;
    let left = list(&origin, json!({"scope": "session"})).await;
    assert!(left.iter().all(|p| p["patternId"] != s_id), "{left:?}");

    // 2. Prefix matching refuses each compound-command bypass.
    call(
        &origin,
        "permission.allowlist.add",
        add("echo allowed", "project"),
    )
    .await;
    let sid = origin.create_session(&wd, Some("accept")).await.unwrap();
    let before = asked.lock().unwrap().len();
    let out = origin
        .prompt_and_collect(&sid, "control", WAIT)
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
    assert_eq!(
        asked.lock().unwrap().len(),
        before,
        "the allowed command is not asked"
    );
    for (i, b) in BYPASSES.iter().enumerate() {
        let before = asked.lock().unwrap().len();
        let out = origin
            .prompt_and_collect(&sid, &format!("bypass-{i:02}"), WAIT)
            .await
            .unwrap();
        let seen = asked.lock().unwrap().clone();
        assert_eq!(seen.len(), before + 1, "not asked: {b:?}");
        assert_eq!(seen.last().unwrap()["args"]["command"], *b);
        assert_eq!(out.reason.as_deref(), Some("denied"), "{b:?}");
        assert!(!wd.join("pwned").exists(), "{b:?} ran");
    }
    call(&origin, "session.close", json!({"sessionId": sid})).await;

    // 3. An `always` answer given with approval.respond is used by a new session, and is
    // listed and removable.
    // Its person answers with approval.respond, not in the request.
    let person = suite.client_with(|o| o.with_client_id("person")).await;
    person.on_request("approval.request", |_p: Value| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(json!({"decision": "deny"}))
    });
    let mut notes = person.subscribe();
    let sid = person.create_session(&wd, Some("accept")).await.unwrap();
    let mut events = person.events(&sid);
    let turn = person.prompt(&sid, "touch-always").await.unwrap();
    let request_id = within(WAIT, "approval.pending", async {
        loop {
            let n = notes.recv().await.unwrap();
            if n.method == "approval.pending" && n.params["request"]["sessionId"] == sid.as_str() {
                return n.params["request"]["requestId"]
                    .as_str()
                    .unwrap()
                    .to_owned();
            }
        }
    })
    .await;
    call(
        &person,
        "approval.respond",
        json!({"requestId": request_id, "decision": "allow", "scope": "always"}),
    )
    .await;
    let out = events.wait_for_turn_done(&turn, WAIT).await.unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
    assert!(wd.join("always-ok").exists());
    std::fs::remove_file(wd.join("always-ok")).unwrap();
    let always = list(&person, json!({"scope": "always"})).await;
    assert_eq!(always.len(), 1, "{always:?}");
    assert_eq!(always[0]["pattern"], "touch always-ok");
    assert_eq!(file_patterns(&global_file), ["touch always-ok"]);
    // A new session (of another client) runs it without asking.
    let sid2 = origin.create_session(&wd, Some("accept")).await.unwrap();
    let before = asked.lock().unwrap().len();
    let out = origin
        .prompt_and_collect(&sid2, "touch-always", WAIT)
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("complete"));
    assert_eq!(asked.lock().unwrap().len(), before);
    assert!(wd.join("always-ok").exists());
    std::fs::remove_file(wd.join("always-ok")).unwrap();
    // Removed, it is asked again.
    call(
        &origin,
        "permission.allowlist.remove",
        json!({"patternId": always[0]["patternId"]}),
    )
    .await;
    let out = origin
        .prompt_and_collect(&sid2, "touch-always", WAIT)
        .await
        .unwrap();
    assert_eq!(out.reason.as_deref(), Some("denied"));
    assert_eq!(asked.lock().unwrap().len(), before + 1);
    assert!(!wd.join("always-ok").exists());

    // 4. The no-bypass property over modes × patterns × commands (every approval denied).
    let echo_allowed = list(&origin, json!({"scope": "project", "workdir": wd_str})).await;
    for p in echo_allowed {
        call(
            &origin,
            "permission.allowlist.remove",
            json!({"patternId": p["patternId"], "workdir": wd_str}),
        )
        .await;
    }
    let (mut promoted_n, mut asked_n) = (0, 0);
    for (i, case) in cases.iter().enumerate() {
        let ids: Vec<Value> = {
            let mut v = Vec::new();
            for p in &case.patterns {
                v.push(
                    call(&origin, "permission.allowlist.add", add(p, "project")).await["patternId"]
                        .clone(),
                );
            }
            v
        };
        let sid = origin.create_session(&wd, Some(case.mode)).await.unwrap();
        let before = asked.lock().unwrap().len();
        let out = origin
            .prompt_and_collect(&sid, &format!("case-{i:02}"), WAIT)
            .await
            .unwrap();
        let was_asked = asked.lock().unwrap().len() > before;
        let covered = case
            .parts
            .iter()
            .all(|(_, argv)| case.patterns.iter().any(|p| covers(p, argv)));
        let ctx = format!(
            "seed {seed} case {i}: mode {} patterns {:?} command {:?} asked {was_asked} turn {:?}",
            case.mode, case.patterns, case.command, out.reason
        );
        let needs_approval = case.mode != "auto";
        if needs_approval {
            let promoted = case.mode == "accept" && covered;
            assert_eq!(was_asked, !promoted, "{ctx}");
            promoted_n += usize::from(promoted);
            asked_n += usize::from(was_asked);
            if !promoted {
                for (marker, argv) in &case.parts {
                    if argv[0] == "touch" {
                        assert!(
                            !wd.join(marker).exists(),
                            "{marker} exists without an approval: {ctx}"
                        );
                    }
                }
            }
        } else {
            assert!(!was_asked, "auto mode runs exec without asking: {ctx}");
        }
        for id in ids {
            call(
                &origin,
                "permission.allowlist.remove",
                json!({"patternId": id, "workdir": wd_str}),
            )
            .await;
        }
        call(&origin, "session.close", json!({"sessionId": sid})).await;
    }
    // The generator reaches both sides of the property.
    assert!(
        promoted_n > 0 && asked_n > 0,
        "seed {seed}: promoted {promoted_n}, asked {asked_n}"
    );
}

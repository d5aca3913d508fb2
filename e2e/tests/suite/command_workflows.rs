//! Issue 18, the remaining parts, through the real suite with the scripted provider (one
//! suite for the file; the scenarios use their own sessions and run one after another):
//! `/ralph` and `/ultrawork` with `command.progress`, `commands.changed` on `session.create`
//! and `session.resume`, `/memory forget` through svc-memory, and an installed plugin's hooks
//! and `.mcp.json` servers.
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use snowpea_e2e::{Suite, SuiteOptions};
use snowpea_sdk::{Client, SessionEvent};

const LONG: Duration = Duration::from_secs(60);

fn put(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Runs a command turn (`command.run`) and returns its events through `turn.done`.
async fn run(client: &Client, sid: &str, name: &str, args: &str) -> (Vec<SessionEvent>, String) {
    let mut events = client.events(sid);
    let r = client
        .call(
            "command.run",
            json!({"sessionId": sid, "name": name, "args": args}),
        )
        .await
        .unwrap();
    let turn_id = r["turnId"].as_str().expect("turnId").to_owned();
    let done = events.wait_for_turn_done(&turn_id, LONG).await.unwrap();
    (done.events, done.reason.unwrap_or_default())
}

fn kinds(events: &[SessionEvent]) -> Vec<&str> {
    events.iter().map(|e| e.kind.as_str()).collect()
}

fn of_kind<'a>(events: &'a [SessionEvent], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e.kind == kind)
        .map(|e| &e.payload)
        .collect()
}

/// Waits for the next `commands.changed` with `reason`.
async fn commands_changed(
    rx: &mut tokio::sync::broadcast::Receiver<snowpea_sdk::Notification>,
    reason: &str,
) -> Value {
    snowpea_testkit::within(LONG, "commands.changed", async {
        loop {
            let n = rx.recv().await.unwrap();
            if n.method == "commands.changed" && n.params["reason"] == reason {
                return n.params;
            }
        }
    })
    .await
}

#[tokio::test]
async fn workflows_command_tables_memory_forget_and_plugin_hooks() {
    let script = json!({
        "steps": [
            {"match": "[ralph plan]", "text": "{\"stories\": [{\"id\": \"S1\", \"title\": \"write notes\"}, {\"id\": \"S2\", \"title\": \"check notes\"}]}"},
            {"match": "[ralph story S1]", "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "peas\n"}}]},
            {"after_tool": "write_file", "match": "[ralph story S1]", "text": "wrote it\nSTATUS: pass"},
            {"match": "[ralph story S2]", "text": "not yet\nSTATUS: fail — needs a second look"},
            {"match": "[ralph story S2]", "text": "looked again\nSTATUS: pass"},
            {"match": "[ultrawork plan]", "text": "{\"stories\": [\"only task\"]}"},
            {"match": "[ultrawork task", "text": "STATUS: fail — blocked"},
            {"match": "HOOKED PROMPT", "tool_calls": [{"name": "write_file", "arguments": {"path": "guarded.txt", "content": "x"}}]},
            {"after_tool": "write_file", "match": "HOOKED PROMPT", "text": "gave up writing", "echoRequest": true}
        ],
        "default": {"text": "ok"}
    });
    let suite = Suite::start_with(SuiteOptions {
        script: Some(script),
        ..Default::default()
    })
    .await;
    let client = suite.client().await;
    let wd = suite.workdir.path().to_path_buf();

    // --- session.create / session.resume send the caller that workdir's command table.
    put(
        &wd.join(".snowpea/commands/pea-note.md"),
        "Note $ARGUMENTS\n",
    );
    let mut notes = client.subscribe();
    let sid = client.create_session(&wd, Some("auto")).await.unwrap();
    let table = commands_changed(&mut notes, "session.create").await;
    let names: Vec<&str> = table["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"pea-note") && names.contains(&"ralph"),
        "{names:?}"
    );
    client
        .call("session.resume", json!({"sessionId": sid}))
        .await
        .unwrap();
    let table = commands_changed(&mut notes, "session.resume").await;
    assert!(table["commands"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "pea-note" && c["source"] == "project"));

    // --- /ralph: plan, iterations, a retried story, the outcome on the last event.
    let (ev, reason) = run(&client, &sid, "ralph", "write and check notes").await;
    assert_eq!(reason, "complete", "{:?}", kinds(&ev));
    let progress = of_kind(&ev, "command.progress");
    let summary: Vec<(i64, Vec<String>, Value)> = progress
        .iter()
        .map(|p| {
            (
                p["iteration"].as_i64().unwrap_or(0),
                p["stories"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s["status"].as_str().unwrap().to_owned())
                    .collect(),
                p.get("outcome").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    let st = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        summary,
        vec![
            (0, st(&["pending", "pending"]), Value::Null),
            (1, st(&["pass", "pending"]), Value::Null),
            (2, st(&["pass", "fail"]), Value::Null),
            (3, st(&["pass", "pass"]), json!("complete")),
        ]
    );
    assert!(progress.iter().all(|p| p["command"] == "ralph"));
    assert_eq!(progress[2]["stories"][1]["note"], "needs a second look");
    assert_eq!(
        std::fs::read_to_string(wd.join("notes.txt")).unwrap(),
        "peas\n"
    );
    let done = of_kind(&ev, "message.done");
    assert_eq!(done.last().unwrap()["role"], "system");
    assert_eq!(done.last().unwrap()["data"]["outcome"], "complete");

    // --- /ultrawork: one pass, outcome partial; headless it is refused.
    let (ev, reason) = run(&client, &sid, "ultrawork", "one thing").await;
    assert_eq!(reason, "complete");
    let progress = of_kind(&ev, "command.progress");
    assert_eq!(progress.last().unwrap()["outcome"], "partial");
    assert_eq!(progress.last().unwrap()["command"], "ultrawork");

    // --- /memory forget: memory.delete in svc-memory; an unknown id is not_found.
    let id = client
        .call(
            "memory.write",
            json!({"text": "forget-me pea fact", "namespace": format!("project:{}", wd.display())}),
        )
        .await
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (ev, reason) = run(&client, &sid, "memory", &format!("forget {id}")).await;
    assert_eq!(reason, "complete", "{:?}", kinds(&ev));
    assert_eq!(of_kind(&ev, "message.done")[0]["data"]["forgotten"], true);
    let hits = client
        .call(
            "memory.search",
            json!({"query": "forget-me pea", "namespace": format!("project:{}", wd.display())}),
        )
        .await
        .unwrap();
    assert_eq!(hits["hits"].as_array().map_or(0, Vec::len), 0, "{hits}");
    let (ev, reason) = run(&client, &sid, "memory", &format!("forget {id}")).await;
    assert_eq!(reason, "error");
    assert_eq!(of_kind(&ev, "error")[0]["code"], "not_found");

    // --- A plugin installed from a local path: its hooks run, its MCP server is known.
    let src = tempfile::tempdir().unwrap();
    let p = src.path().join("guard");
    put(
        &p.join("plugin.json"),
        r#"{"name": "guard", "description": "guards writes"}"#,
    );
    // Installed files are owner-only 0600 (no exec bit): hooks name their interpreter.
    put(
        &p.join("hooks/deny.sh"),
        "echo 'guard: no writes today' >&2\nexit 2\n",
    );
    put(&p.join("hooks/prompt.sh"), "echo 'GUARD-CONTEXT'\n");
    put(
        &p.join("hooks/hooks.json"),
        &json!({"hooks": {
            "PreToolUse": [{"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "sh ${CLAUDE_PLUGIN_ROOT}/hooks/deny.sh"}]}],
            "UserPromptSubmit": [{"hooks": [{"command": "sh ${CLAUDE_PLUGIN_ROOT}/hooks/prompt.sh", "timeout": 10}]}],
            "PostToolUse": [{"hooks": [{"command": "/nonexistent/hook-program"}]}]
        }})
        .to_string(),
    );
    put(
        &p.join(".mcp.json"),
        &json!({"mcpServers": {"guard-srv": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/srv", "disabled": true}}}).to_string(),
    );
    client
        .call("skill.install", json!({"source": p.to_string_lossy()}))
        .await
        .unwrap();
    let root = suite.home().join("plugins/guard");
    let (c, s) = (&client, sid.as_str());
    let mcp = snowpea_testkit::eventually(
        LONG,
        "the plugin's MCP server in mcp.list",
        move || async move {
            let list = c.call("mcp.list", json!({"sessionId": s})).await.ok()?;
            list["servers"]
                .as_array()?
                .iter()
                .find(|s| s["name"] == "guard-srv")
                .cloned()
        },
    )
    .await;
    assert_eq!(mcp["scope"], "plugin");
    assert_eq!(mcp["plugin"], "guard");
    assert_eq!(
        mcp["command"],
        root.join("bin/srv").to_string_lossy().as_ref()
    );
    // The hooks are loaded with the reload that followed the install.
    let mut events = client.events(&sid);
    let turn = client
        .call(
            "session.prompt",
            json!({"sessionId": sid, "text": "HOOKED PROMPT"}),
        )
        .await
        .unwrap();
    let turn = turn["turnId"].as_str().unwrap().to_owned();
    let done = events.wait_for_turn_done(&turn, LONG).await.unwrap();
    assert_eq!(
        done.reason.as_deref(),
        Some("complete"),
        "{:?}",
        kinds(&done.events)
    );
    let result = of_kind(&done.events, "tool.result")[0];
    assert_eq!(result["ok"], false);
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("guard: no writes today"),
        "{result}"
    );
    assert!(!wd.join("guarded.txt").exists());
    // The prompt hook's context reached the model with the prompt.
    let text = of_kind(&done.events, "message.done")[0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.starts_with("gave up writing"), "{text}");
    assert!(text.contains("[system] GUARD-CONTEXT"), "{text}");

    // Removing the plugin takes its folder (hooks and MCP server with it).
    client
        .call("skill.remove", json!({"name": "guard"}))
        .await
        .unwrap();
    assert!(!root.exists());
}
